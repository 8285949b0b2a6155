/*
 * dot_cpu.h — what dot.c shares with its vectorised helpers (matvec.c):
 * the matrix-vector kernels and the half-precision widening used to feed
 * sgemm.
 */
#ifndef EMILY_DOT_CPU_H
#define EMILY_DOT_CPU_H

#include "internal.h"

/* Largest number of rows of a (M) that takes the matrix-vector kernels:
 * up to this many rows are multiplied while each weight is read once. */
#define EM_MATVEC_MAX_M 4

/* out[bi] = x[bi] (m x k) · W[bi] (k x n) for every batch bi, in a float
 * dtype (f16, bf16, f32, f64). Half types accumulate in float, f64 in
 * double. The weights are read in place in either layout:
 *   w_transposed false: element (p, j) at w + w_offset[bi] + p * ldw + j
 *                       (W stored (k, n) row-major: x @ W)
 *   w_transposed true:  element (p, j) at w + w_offset[bi] + j * ldw + p
 *                       (W stored (n, k), PyTorch's layout: x @ W^T)
 * (offsets and ldw in elements). Threaded over batches and columns. */
typedef struct em_matvec_job {
    em_dtype dtype;
    int64_t nbatch, m, k, n;
    const void *x; /* [nbatch][m][k], float (double for f64), contiguous */
    const char *w;
    const int64_t *w_offset; /* nbatch entries */
    bool w_transposed;
    int64_t ldw;
    void *out; /* [nbatch][m][n] in dtype, contiguous */
} em_matvec_job;

/* ---- gemm.c -------------------------------------------------------------- */

/* A row-major BLAS GEMM C = op(A) · op(B), or C += op(A) · op(B) when
 * accumulating (the cblas argument order). */
typedef void (*em_gemm_fn)(bool ta, bool tb, int m, int n, int k,
                           const void *a, int lda, const void *b, int ldb,
                           bool accumulate, void *c, int ldc);
void em__gemm_f32(bool ta, bool tb, int m, int n, int k, const void *a,
                  int lda, const void *b, int ldb, bool accumulate, void *c,
                  int ldc);
/* em__gemm_f32 through OpenBLAS only (what em__gemm_f32 falls back to). */
void em__gemm_f32_blas(bool ta, bool tb, int m, int n, int k, const void *a,
                       int lda, const void *b, int ldb, bool accumulate,
                       void *c, int ldc);
/* sgemm_avx512.c: whether this CPU runs em__sgemm_avx512 (AVX-512F; never
 * in the baseline build), and the product itself, single-threaded, same
 * arguments as em__gemm_f32. Returns false, C untouched, when it did not
 * run (no AVX-512 build, m, n or k not positive, allocation failed). */
bool em__sgemm_avx512_available(void);
bool em__sgemm_avx512(bool ta, bool tb, int m, int n, int k, const float *a,
                      int lda, const float *b, int ldb, bool accumulate,
                      float *c, int ldc);
void em__gemm_f64(bool ta, bool tb, int m, int n, int k, const void *a,
                  int lda, const void *b, int ldb, bool accumulate, void *c,
                  int ldc);
void em__gemm_c64(bool ta, bool tb, int m, int n, int k, const void *a,
                  int lda, const void *b, int ldb, bool accumulate, void *c,
                  int ldc);
void em__gemm_c128(bool ta, bool tb, int m, int n, int k, const void *a,
                  int lda, const void *b, int ldb, bool accumulate, void *c,
                  int ldc);

/* nbatch products of one shape; a[i], b[i], c[i] are problem i's matrices
 * (dimensions below INT_MAX: the caller checks). */
typedef struct em_gemm_problem {
    em_gemm_fn gemm;
    size_t esz; /* bytes per element */
    bool ta, tb;
    bool accumulate; /* C += instead of C = */
    int64_t m, n, k, lda, ldb, ldc, nbatch;
    const char *const *a;
    const char *const *b;
    char *const *c;
} em_gemm_problem;

/* Runs the products on the thread pool, BLAS single-threaded. */
void em__gemm_parallel(const em_gemm_problem *p);
/* One product, the same way. */
void em__gemm_one(em_gemm_fn gemm, size_t esz, bool ta, bool tb, int64_t m,
                  int64_t n, int64_t k, const void *a, int64_t lda,
                  const void *b, int64_t ldb, bool accumulate, void *c,
                  int64_t ldc);


/* Whether em__matvec handles dtype. */
bool em__matvec_dtype(em_dtype dtype);
void em__matvec(const em_matvec_job *job);

/* dst[i] = (float)src[i] for i < n, src f16 or bf16 (vectorised). */
void em__widen_half(em_dtype dtype, const void *src, float *dst, int64_t n);

/* One bf16 GEMM C[m, n] = A[m, k] · B[k, n] with float accumulation
 * (dot_bf16.c): element (i, p) of A at a[i * lda + p], or a[i + p * lda]
 * when ta; B likewise; C row-major contiguous. Threaded. */
typedef struct em_bf16_gemm {
    int64_t m, n, k;
    const uint16_t *a;
    bool ta;
    int64_t lda;
    const uint16_t *b;
    bool tb;
    int64_t ldb;
    uint16_t *c;
} em_bf16_gemm;

/* Whether this CPU runs em__gemm_bf16 (AVX512_BF16; never in the
 * baseline build). */
bool em__gemm_bf16_available(void);
em_status em__gemm_bf16(const em_bf16_gemm *g);

#endif
