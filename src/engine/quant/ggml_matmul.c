/*
 * ggml_matmul.c — the CPU kernels of em_ggml_matmul: x (M, K) @ W^T with
 * W (N, K) in a ggml block format, read block by block.
 *
 * Decoding (M <= MATVEC_MAX_ROWS): every weight row is streamed once; each
 * block is decoded into f32 in L1 (the format's decoder from ggml_blocks.h,
 * inlined) and multiplied into 32 lane accumulators per row of x, so that
 * the loops vectorise without reassociating a reduction; the lanes are
 * summed in a fixed order at the end of the row. Weight rows are split over
 * the thread pool; each format's kernel is compiled for AVX-512, AVX2+FMA
 * and the baseline and picked at load time (EM_CLONES). That portable
 * kernel runs where the intrinsics kernels cannot: x86-64 CPUs with
 * AVX-512 run ggml_matvec_avx512.c, those with AVX2 + FMA
 * ggml_matvec_avx2.c (both decode 4 weight rows per pass, in another
 * summation order). The kernels should be bound by memory bandwidth on
 * the blocks (4.5 bits a weight for q4_0), which is why the weights are
 * never expanded whole; products of fewer than 2^19 weights run on the
 * calling thread (waking the pool costs more than they take).
 *
 * Larger M (prefill, batches): tiles of weight rows are decoded into an
 * f32 scratch (rows split over the pool) and multiplied by OpenBLAS's
 * sgemm, x (M, K) times tile^T, written into the output's columns.
 *
 * x is read as f32 (f16/bf16 widened into a scratch copy) and the result
 * rounded once to x's dtype.
 */
#include "ggml_blocks.h"
#include "ops/dot_cpu.h"

#include <limits.h>
#include <stdlib.h>

/* Rows of x up to which the streaming kernel beats decode + sgemm. */
#define MATVEC_MAX_ROWS GGML_MATVEC_MAX_ROWS
/* Weights (times rows of x) per thread below which the streaming kernel
 * stays on one thread. */
#define MATVEC_PARALLEL_WEIGHTS ((int64_t)1 << 18)
/* Scratch per decoded tile of weight rows (f32 elements). */
#define TILE_ELEMS ((int64_t)1 << 20)

typedef ggml_matvec_job matvec_job;

/* Sum 32 lanes pairwise in a fixed order. */
static inline float sum_lanes(const float *lane) {
    float t[16];
    for (int j = 0; j < 16; j++)
        t[j] = lane[j] + lane[j + 16];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++)
            t[j] += t[j + w];
    return t[0];
}

#define DEFINE_MATVEC(T, name, BE, BB)                                         \
    EM_CLONES static void matvec_##name(void *ctx, int64_t r0, int64_t r1) {   \
        const matvec_job *jb = ctx;                                            \
        const int64_t nblocks = jb->k / (BE), m = jb->m, k = jb->k;            \
        float w[BE];                                                           \
        float lane[MATVEC_MAX_ROWS][32];                                       \
        for (int64_t r = r0; r < r1; r++) {                                    \
            const uint8_t *row = jb->raw + r * nblocks * (BB);                 \
            for (int64_t i = 0; i < m; i++)                                    \
                for (int j = 0; j < 32; j++)                                   \
                    lane[i][j] = 0.0f;                                         \
            if (m == 1) {                                                      \
                float acc[32] = {0};                                           \
                for (int64_t b = 0; b < nblocks; b++) {                        \
                    ggml_decode_##name(row + b * (BB), w);                     \
                    const float *xb = jb->x + b * (BE);                        \
                    for (int s = 0; s < (BE); s += 32)                         \
                        for (int j = 0; j < 32; j++)                           \
                            acc[j] += w[s + j] * xb[s + j];                    \
                }                                                              \
                jb->out[r] = sum_lanes(acc);                                   \
                continue;                                                      \
            }                                                                  \
            for (int64_t b = 0; b < nblocks; b++) {                            \
                ggml_decode_##name(row + b * (BB), w);                         \
                for (int64_t i = 0; i < m; i++) {                              \
                    const float *xb = jb->x + i * k + b * (BE);                \
                    for (int s = 0; s < (BE); s += 32)                         \
                        for (int j = 0; j < 32; j++)                           \
                            lane[i][j] += w[s + j] * xb[s + j];                \
                }                                                              \
            }                                                                  \
            for (int64_t i = 0; i < m; i++)                                    \
                jb->out[i * jb->n + r] = sum_lanes(lane[i]);                   \
        }                                                                      \
    }

/* Decode weight rows [r0, r1) of the job's tile into f32. */
typedef struct tile_job {
    const uint8_t *raw; /* the tile's first row */
    float *tile;        /* (rows, k) */
    int64_t k;
} tile_job;

#define DEFINE_TILE(T, name, BE, BB)                                           \
    EM_CLONES static void tile_##name(void *ctx, int64_t r0, int64_t r1) {     \
        const tile_job *jb = ctx;                                              \
        const int64_t nblocks = jb->k / (BE);                                  \
        for (int64_t r = r0; r < r1; r++)                                      \
            for (int64_t b = 0; b < nblocks; b++)                              \
                ggml_decode_##name(jb->raw + (r * nblocks + b) * (BB),         \
                                   jb->tile + r * jb->k + b * (BE));           \
    }

EM_GGML_BLOCK_TYPES(DEFINE_MATVEC)
EM_GGML_BLOCK_TYPES(DEFINE_TILE)

typedef struct ggml_kernels {
    int type;
    em_range_fn matvec, tile;
} ggml_kernels;

static const ggml_kernels kernels[] = {
#define KERNEL_ROW(T, name, BE, BB) {T, matvec_##name, tile_##name},
    EM_GGML_BLOCK_TYPES(KERNEL_ROW)
#undef KERNEL_ROW
};

static const ggml_kernels *kernels_for(int type) {
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i].type == type)
            return &kernels[i];
    return NULL;
}

em_status em__ggml_matmul_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const ggml_params *p = node->params;
    const em_array *x = node->inputs[0], *raw = node->inputs[1];
    const int64_t k = p->k, n = raw->shape[0], m = node->size / n;
    const ggml_kernels *kn = kernels_for(p->type);
    if (!kn)
        return em__fail(EM_ERR_ARGUMENT, "ggml_matmul: type %d", p->type);
    if (m > MATVEC_MAX_ROWS && (m > INT_MAX || k > INT_MAX || n > INT_MAX))
        return em__fail(EM_ERR_ARGUMENT,
                        "ggml_matmul: M = %lld, N = %lld, K = %lld exceed "
                        "sgemm's int dimensions",
                        (long long)m, (long long)n, (long long)k);

    /* x as f32, the output in f32 (scratch copies for f16/bf16). */
    const bool wide = node->dtype == EM_F32;
    float *xf = wide ? em__data(x) : malloc((size_t)(m * k) * sizeof(float));
    float *of = wide ? em__data(node) : malloc((size_t)(m * n) * sizeof(float));
    float *tile = NULL;
    const int64_t row_bytes = k / p->block_elems * p->block_bytes;
    int64_t tile_rows = k > 0 ? TILE_ELEMS / k : n;
    if (tile_rows < 16)
        tile_rows = 16;
    if (tile_rows > n)
        tile_rows = n;
    if (m > MATVEC_MAX_ROWS && k > 0)
        tile = malloc((size_t)(tile_rows * k) * sizeof(float));
    if (!xf || !of || (m > MATVEC_MAX_ROWS && k > 0 && !tile)) {
        if (!wide) {
            free(xf);
            free(of);
        }
        free(tile);
        return em__fail(EM_ERR_OOM,
                        "ggml_matmul: out of memory for f32 scratch (M = "
                        "%lld, N = %lld, K = %lld)",
                        (long long)m, (long long)n, (long long)k);
    }
    if (!wide) {
        const uint16_t *xs = em__data(x);
        for (int64_t i = 0; i < m * k; i++)
            xf[i] = node->dtype == EM_F16 ? em_f16_to_f32(xs[i])
                                          : em_bf16_to_f32(xs[i]);
    }

    if (k == 0) {
        memset(of, 0, (size_t)(m * n) * sizeof(float));
    } else if (m <= MATVEC_MAX_ROWS) {
        matvec_job jb = {em__data(raw), xf, of, m, n, k};
        em_range_fn fn = em__ggml_matvec_avx512(p->type);
        if (!fn)
            fn = em__ggml_matvec_avx2(p->type);
        /* Waking the pool costs about as much as decoding a few hundred
         * thousand weights: smaller products run on the calling thread,
         * and larger ones in chunks of at least half that. */
        const int64_t grain = (MATVEC_PARALLEL_WEIGHTS + k * m - 1) / (k * m);
        em__parallel_for(n, grain, fn ? fn : kn->matvec, &jb);
    } else {
        const uint8_t *blocks = em__data(raw);
        for (int64_t r0 = 0; r0 < n; r0 += tile_rows) {
            const int64_t rows = n - r0 < tile_rows ? n - r0 : tile_rows;
            tile_job tj = {blocks + r0 * row_bytes, tile, k};
            em__parallel_units(rows, k, kn->tile, &tj);
            em__gemm_one(em__gemm_f32, sizeof(float), false, true, m, rows, k,
                         xf, k, tile, k, false, of + r0, n);
        }
    }

    if (!wide) {
        uint16_t *os = em__data(node);
        for (int64_t i = 0; i < m * n; i++)
            os[i] = node->dtype == EM_F16 ? em_f32_to_f16(of[i])
                                          : em_f32_to_bf16(of[i]);
        free(xf);
        free(of);
    }
    free(tile);
    return EM_OK;
}
