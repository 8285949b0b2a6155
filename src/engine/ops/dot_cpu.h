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

/* Whether em__matvec handles dtype. */
bool em__matvec_dtype(em_dtype dtype);
void em__matvec(const em_matvec_job *job);

/* dst[i] = (float)src[i] for i < n, src f16 or bf16 (vectorised). */
void em__widen_half(em_dtype dtype, const void *src, float *dst, int64_t n);

#endif
