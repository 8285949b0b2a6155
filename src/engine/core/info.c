/*
 * info.c — build and platform facts for diagnostics (emily_info.h).
 */
#include "emily_info.h"
#include "internal.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

#ifndef __has_feature
#define __has_feature(x) 0
#endif

static char compiler[64];
static char features[64];

void em_get_build_info(em_build_info *out) {
    memset(out, 0, sizeof *out);
#if defined(__clang__)
    snprintf(compiler, sizeof compiler, "clang %d.%d.%d", __clang_major__,
             __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(compiler, sizeof compiler, "gcc %d.%d.%d", __GNUC__,
             __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
    snprintf(compiler, sizeof compiler, "unknown");
#endif
    out->compiler = compiler;

    /* OpenBLAS picks its kernels for the running CPU (DYNAMIC_ARCH); the
     * core name says which it chose. */
    const char *config = openblas_get_config();
    const char *core = openblas_get_corename();
    out->blas_config = config ? config : "";
    out->blas_core = core ? core : "";
    out->blas_threads = openblas_get_num_threads();
    out->engine_threads = em__num_threads();

    features[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        strcat(features, "avx512f ");
    if (__builtin_cpu_supports("avx2"))
        strcat(features, "avx2 ");
    if (__builtin_cpu_supports("fma"))
        strcat(features, "fma ");
    size_t len = strlen(features);
    if (len)
        features[len - 1] = '\0';
#endif
    out->cpu_features = features;

    /* The level GCC's target_clones resolvers pick (EM_TARGET_CLONES);
     * clang has no arch-level names here, so its check lists the features
     * the levels add. */
#if !defined(__x86_64__)
    out->simd = "baseline";
#elif defined(EM_SIMD_BASELINE)
    out->simd = "baseline (forced)";
#elif defined(__clang__)
    out->simd = __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512cd") &&
                        __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512vl")
                    ? "x86-64-v4"
                : __builtin_cpu_supports("avx2") &&
                        __builtin_cpu_supports("fma") &&
                        __builtin_cpu_supports("bmi2")
                    ? "x86-64-v3"
                    : "baseline";
#else
    out->simd = __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4"
                : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3"
                                                      : "baseline";
#endif

#ifdef EMILY_CUDA
    out->cuda = 1;
#endif
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
    out->sanitized = 1;
#endif
}
