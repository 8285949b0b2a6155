/*
 * dot_bf16.c — bf16 GEMM with the AVX512_BF16 dot-product instruction.
 *
 * vdpbf16ps multiplies pairs of bf16 values and adds both products to a
 * float accumulator: 32 multiply-adds per instruction, against 16 for a
 * float FMA, and no widening pass. The operands are repacked so that each
 * 32-bit lane holds the pair (k = 2p, 2p + 1):
 *   A: per row, the pairs along K (zero-padded to even K);
 *   B: panels of 32 columns, for each pair p the 32 columns' pairs (two
 *      vectors), zero-padded to a whole panel.
 * A 6 x 32 block of C stays in twelve vector registers over the whole K
 * and is rounded to bf16 once, at the end.
 *
 * Rounding differs from float math in two documented ways of the
 * instruction: bf16 denormal inputs count as zero, and each accumulation
 * step rounds to nearest even (as float FMAs do, but two products per
 * step). Results stay within float accumulation error of the exact sum;
 * denormal results (below 1.2e-38) flush to zero.
 *
 * Used when the CPU has AVX512_BF16 (CPUID leaf 7.1 EAX bit 5) and both
 * operands can be read with a leading dimension; elsewhere bf16 goes
 * through float and sgemm (dot.c). AMX tiles (Sapphire Rapids) are not
 * used: the machines we can test on have none.
 */
#include "dot_cpu.h"

#if defined(__x86_64__) && !defined(EM_SIMD_BASELINE)
#include <cpuid.h>
#include <immintrin.h>

#define BF_ATTR __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define PANEL 32 /* columns of C per panel: two vectors of 16 floats */
#define MR 6     /* rows of C per register block */
#define ROW_BLOCK (8 * MR) /* rows per work unit: a panel is reused over them */
/* Unroll the loops over the rows of a block, so that the accumulators live
 * in registers (GCC at -O2 leaves them in memory otherwise). */
#define UNROLL_ROWS _Pragma("GCC unroll 6")

bool em__gemm_bf16_available(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") ||
        !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl"))
        return false;
    unsigned eax = 0, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
        return false;
    return (eax >> 5) & 1u;
}

/* Element (i, j) of a matrix stored with a leading dimension. */
static inline uint16_t at(const uint16_t *x, bool trans, int64_t ld, int64_t i,
                          int64_t j) {
    return trans ? x[i + j * ld] : x[i * ld + j];
}

typedef struct bf16_job {
    const em_bf16_gemm *g;
    int64_t k2, npanels, nrowblocks;
    uint32_t *ap; /* [m][k2] */
    uint32_t *bp; /* [npanels][k2][PANEL] */
} bf16_job;

/* A's rows as pairs. */
static void pack_a_task(void *ctx, int64_t begin, int64_t end) {
    const bf16_job *j = ctx;
    const em_bf16_gemm *g = j->g;
    for (int64_t i = begin; i < end; i++) {
        uint32_t *dst = j->ap + i * j->k2;
        for (int64_t p = 0; p < j->k2; p++) {
            uint32_t lo = at(g->a, g->ta, g->lda, i, 2 * p);
            uint32_t hi =
                2 * p + 1 < g->k ? at(g->a, g->ta, g->lda, i, 2 * p + 1) : 0;
            dst[p] = lo | hi << 16;
        }
    }
}

/* B's panels as pairs; columns past n are zero. */
static void pack_b_task(void *ctx, int64_t begin, int64_t end) {
    const bf16_job *j = ctx;
    const em_bf16_gemm *g = j->g;
    for (int64_t panel = begin; panel < end; panel++) {
        uint32_t *dst = j->bp + panel * j->k2 * PANEL;
        int64_t j0 = panel * PANEL;
        int64_t cols = g->n - j0 < PANEL ? g->n - j0 : PANEL;
        for (int64_t p = 0; p < j->k2; p++, dst += PANEL) {
            bool odd = 2 * p + 1 >= g->k;
            for (int64_t c = 0; c < cols; c++) {
                uint32_t lo = at(g->b, g->tb, g->ldb, 2 * p, j0 + c);
                uint32_t hi =
                    odd ? 0 : at(g->b, g->tb, g->ldb, 2 * p + 1, j0 + c);
                dst[c] = lo | hi << 16;
            }
            for (int64_t c = cols; c < PANEL; c++)
                dst[c] = 0;
        }
    }
}

/* C[rows, cols] (rows <= MR, cols <= PANEL) from rows of packed A and one
 * packed panel of B over all k2 pairs. */
BF_ATTR static inline __attribute__((always_inline)) void
bf16_block(const int rows, const uint32_t *a, int64_t k2, const uint32_t *b,
           uint16_t *c, int64_t ldc, int cols) {
    __m512 acc[MR][2];
    UNROLL_ROWS for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] =
        _mm512_setzero_ps();
    for (int64_t p = 0; p < k2; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * PANEL);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * PANEL + 16);
        UNROLL_ROWS for (int r = 0; r < rows; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * k2 + p]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
    __mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
    __mmask16 m1 = cols <= 16   ? 0
                   : cols >= 32 ? 0xffff
                                : (__mmask16)((1u << (cols - 16)) - 1);
    UNROLL_ROWS for (int r = 0; r < rows; r++) {
        __m256i lo = (__m256i)_mm512_cvtneps_pbh(acc[r][0]);
        __m256i hi = (__m256i)_mm512_cvtneps_pbh(acc[r][1]);
        _mm256_mask_storeu_epi16(c + r * ldc, m0, lo);
        _mm256_mask_storeu_epi16(c + r * ldc + 16, m1, hi);
    }
}

BF_ATTR static void bf16_rows(int rows, const uint32_t *a, int64_t k2,
                              const uint32_t *b, uint16_t *c, int64_t ldc,
                              int cols) {
    switch (rows) {
    case 6:
        bf16_block(6, a, k2, b, c, ldc, cols);
        break;
    case 5:
        bf16_block(5, a, k2, b, c, ldc, cols);
        break;
    case 4:
        bf16_block(4, a, k2, b, c, ldc, cols);
        break;
    case 3:
        bf16_block(3, a, k2, b, c, ldc, cols);
        break;
    case 2:
        bf16_block(2, a, k2, b, c, ldc, cols);
        break;
    default:
        bf16_block(1, a, k2, b, c, ldc, cols);
        break;
    }
}

/* Unit u: panel u / nrowblocks, rows of block u % nrowblocks (a thread's
 * consecutive units share the panel, which stays in its L2). */
static void compute_task(void *ctx, int64_t begin, int64_t end) {
    const bf16_job *j = ctx;
    const em_bf16_gemm *g = j->g;
    for (int64_t u = begin; u < end; u++) {
        int64_t panel = u / j->nrowblocks, rb = u % j->nrowblocks;
        int64_t j0 = panel * PANEL;
        int cols = (int)(g->n - j0 < PANEL ? g->n - j0 : PANEL);
        int64_t i1 = (rb + 1) * ROW_BLOCK < g->m ? (rb + 1) * ROW_BLOCK : g->m;
        for (int64_t i = rb * ROW_BLOCK; i < i1; i += MR) {
            int rows = (int)(i1 - i < MR ? i1 - i : MR);
            bf16_rows(rows, j->ap + i * j->k2, j->k2,
                      j->bp + panel * j->k2 * PANEL, g->c + i * g->n + j0, g->n,
                      cols);
        }
    }
}

em_status em__gemm_bf16(const em_bf16_gemm *g) {
    bf16_job j = {g,
                  (g->k + 1) / 2,
                  (g->n + PANEL - 1) / PANEL,
                  (g->m + ROW_BLOCK - 1) / ROW_BLOCK,
                  NULL,
                  NULL};
    em_buffer *abuf = NULL, *bbuf = NULL;
    em_status st = em__buffer_new((size_t)(g->m * j.k2) * 4, &abuf);
    if (st == EM_OK)
        st = em__buffer_new((size_t)(j.npanels * j.k2 * PANEL) * 4, &bbuf);
    if (st != EM_OK) {
        if (abuf)
            em__buffer_release(abuf);
        return em__fail(st, "dot: out of memory for packed bf16 operands");
    }
    j.ap = abuf->data;
    j.bp = bbuf->data;
    em__parallel_units(g->m, g->k, pack_a_task, &j);
    em__parallel_units(j.npanels, g->k * PANEL, pack_b_task, &j);
    em__parallel_units(j.npanels * j.nrowblocks, ROW_BLOCK * PANEL * g->k,
                       compute_task, &j);
    em__buffer_release(abuf);
    em__buffer_release(bbuf);
    return EM_OK;
}

#else /* no x86-64 or the baseline build: sgemm on widened operands */

bool em__gemm_bf16_available(void) { return false; }

em_status em__gemm_bf16(const em_bf16_gemm *g) {
    (void)g;
    return em__fail(EM_ERR_UNSUPPORTED, "dot: no AVX512_BF16 kernel here");
}

#endif
