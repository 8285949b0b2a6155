/*
 * emily_info.h — what this build of libemily is and what it runs on, for
 * diagnostics (`mix emily.doctor`). Nothing here affects computation.
 */
#ifndef EMILY_INFO_H
#define EMILY_INFO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_build_info {
    const char *compiler;    /* "gcc 12.2.0", "clang 14.0.6" */
    const char *blas_config; /* OpenBLAS's build string ("" when unknown) */
    const char *blas_core; /* the CPU kernel set OpenBLAS picked ("Haswell") */
    int blas_threads;      /* OpenBLAS's thread count */
    int engine_threads;    /* the engine's thread pool, the caller included */
    const char *cpu_features; /* "avx512f avx2 fma" (those the kernels use) */
    int cuda;                 /* 1 when a CUDA backend is compiled in */
    int sanitized;            /* 1 when built with AddressSanitizer */
    /* the clone of the hot loops this process runs: "x86-64-v4",
     * "x86-64-v3", "baseline", or "baseline (forced)" in a SIMD=baseline
     * build */
    const char *simd;
} em_build_info;

/* Fills `out`; the strings are static and valid for the process. */
void em_get_build_info(em_build_info *out);

#ifdef __cplusplus
}
#endif

#endif
