/*
 * reduce.c — reductions (sum, product, max, min, all, any) over any set of
 * axes, and argmax/argmin.
 *
 * Layout. The input's axes split into kept ("outer") axes, which index the
 * row-major output, and reduced axes. Each group is collapsed on its own
 * (em__collapse), so a reduction reads as "for each output element, fold a
 * strided multi-dimensional range". Two loop shapes cover the common cases
 * at memory speed:
 *   - per-output folding, when the innermost reduced axis is contiguous
 *     (sum over the last axis, or everything): a multi-accumulator kernel;
 *   - row folding, when the innermost kept axis is contiguous (sum over
 *     axis 0): a block of neighbouring outputs is updated from each input
 *     row, which vectorises across outputs.
 * Everything else falls back to per-output folding with strides.
 *
 * Accuracy. Floating sums fold in the compute type (float for f16/bf16/f32)
 * with 16 independent lanes inside leaves of a few thousand elements, and
 * combine leaves pairwise, so the error grows with log(n) rather than n.
 *
 * Kernels are written once (DEFINE_REDUCE) and instantiated per op and dtype
 * from the dtype tables; the drivers are dtype-agnostic and see the kernels
 * through a small table of function pointers.
 */
#include "elementwise_internal.h"
#include "internal.h"
#include "params.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* Largest accumulator (c128) — sizes the stack scratch used by drivers. */
#define ACC_MAX_SIZE 16
#define REDUCE_LANES 16

typedef struct reduce_kernel {
    size_t acc_size;
    /* acc[0..m) = identity */
    void (*init)(void *acc, int64_t m);
    /* *acc = fold of *acc and n elements at x, x+stride, ... */
    void (*leaf)(void *acc, const void *x, int64_t n, int64_t stride);
    /* acc[j] = step(acc[j], x[j]) for j < m (x contiguous) */
    void (*rows)(void *acc, const void *x, int64_t m);
    /* acc[j] = step(acc[j], other[j]) */
    void (*merge)(void *acc, const void *other, int64_t m);
    /* out[j] = acc[j] converted to the output dtype */
    void (*final)(void *out, const void *acc, int64_t m);
    /* out[o] = fold of rn elements at x + o*ostride (stride rstride), for
     * o < nout: short reductions, one serial accumulator each */
    void (*many)(void *out, const void *x, int64_t nout, int64_t ostride,
                 int64_t rn, int64_t rstride);
} reduce_kernel;

/* Hot contiguous loops: EM_CLONES (internal.h). */

/* The lowest / highest value of a compute type: identities of max / min. */
#define EM_LOWEST(C)                                                           \
    ((C) _Generic((C)0, uint8_t : 0, uint16_t : 0, uint32_t : 0, uint64_t : 0, \
                  int8_t                                                       \
                  : INT8_MIN, int16_t                                          \
                  : INT16_MIN, int32_t                                         \
                  : INT32_MIN, int64_t                                         \
                  : INT64_MIN, float                                           \
                  : -INFINITY, double                                          \
                  : -INFINITY))
#define EM_HIGHEST(C)                                                          \
    ((C) _Generic((C)0, uint8_t                                                \
                  : UINT8_MAX, uint16_t                                        \
                  : UINT16_MAX, uint32_t                                       \
                  : UINT32_MAX, uint64_t                                       \
                  : UINT64_MAX, int8_t                                         \
                  : INT8_MAX, int16_t                                          \
                  : INT16_MAX, int32_t                                         \
                  : INT32_MAX, int64_t                                         \
                  : INT64_MAX, float                                           \
                  : INFINITY, double                                           \
                  : INFINITY))

/* Steps: new accumulator from accumulator `a` and compute-type value `x`.
 * Integer sums and products run in the unsigned type, so they wrap; the
 * `* 1u` lifts u8/u16 to unsigned int before multiplying (int would
 * overflow). max/min take a NaN and then keep it. */
#define STEP_SUM(ACC, a, x) ((ACC)((a) + (ACC)(x)))
#define STEP_PROD_INT(ACC, a, x) ((ACC)((a)*1u * (ACC)(x)))
#define STEP_PROD(ACC, a, x) ((ACC)((a) * (ACC)(x)))
#define STEP_MAX(ACC, a, x) (((x) > (a) || (x) != (x)) ? (ACC)(x) : (a))
#define STEP_MIN(ACC, a, x) (((x) < (a) || (x) != (x)) ? (ACC)(x) : (a))
#define STEP_ALL(ACC, a, x) ((ACC)((a) & ((x) != 0)))
#define STEP_ANY(ACC, a, x) ((ACC)((a) | ((x) != 0)))

/*
 * One definition of every kernel of a (op, dtype) pair.
 *   T: storage type, C: compute type, ACC: accumulator type, OUT: output
 *   storage type, LOAD: T -> C, INIT: identity (an ACC), STEP: see above,
 *   STORE: (C) -> OUT.
 */
#define DEFINE_REDUCE(NAME, T, C, ACC, OUT, LOAD, INIT, STEP, STORE)           \
    static void NAME##_init(void *accp, int64_t m) {                           \
        ACC *acc = accp;                                                       \
        for (int64_t j = 0; j < m; j++)                                        \
            acc[j] = INIT;                                                     \
    }                                                                          \
    EM_CLONES static ACC NAME##_contig(const T *restrict x, int64_t n) {       \
        ACC lane[REDUCE_LANES];                                                \
        for (int l = 0; l < REDUCE_LANES; l++)                                 \
            lane[l] = INIT;                                                    \
        int64_t i = 0;                                                         \
        for (; i + REDUCE_LANES <= n; i += REDUCE_LANES)                       \
            for (int l = 0; l < REDUCE_LANES; l++)                             \
                lane[l] = STEP(ACC, lane[l], LOAD(x[i + l]));                  \
        ACC tail = INIT;                                                       \
        for (; i < n; i++)                                                     \
            tail = STEP(ACC, tail, LOAD(x[i]));                                \
        for (int w = REDUCE_LANES / 2; w > 0; w /= 2)                          \
            for (int l = 0; l < w; l++)                                        \
                lane[l] = STEP(ACC, lane[l], lane[l + w]);                     \
        return STEP(ACC, lane[0], tail);                                       \
    }                                                                          \
    static void NAME##_leaf(void *accp, const void *xp, int64_t n,             \
                            int64_t s) {                                       \
        ACC *acc = accp;                                                       \
        const T *x = xp;                                                       \
        if (s == 1) {                                                          \
            *acc = STEP(ACC, *acc, NAME##_contig(x, n));                       \
            return;                                                            \
        }                                                                      \
        /* Four chains hide the latency of the strided loads and steps. */     \
        ACC a0 = INIT, a1 = INIT, a2 = INIT, a3 = INIT;                        \
        int64_t i = 0;                                                         \
        for (; i + 4 <= n; i += 4) {                                           \
            a0 = STEP(ACC, a0, LOAD(x[i * s]));                                \
            a1 = STEP(ACC, a1, LOAD(x[(i + 1) * s]));                          \
            a2 = STEP(ACC, a2, LOAD(x[(i + 2) * s]));                          \
            a3 = STEP(ACC, a3, LOAD(x[(i + 3) * s]));                          \
        }                                                                      \
        for (; i < n; i++)                                                     \
            a0 = STEP(ACC, a0, LOAD(x[i * s]));                                \
        a0 = STEP(ACC, a0, a1);                                                \
        a2 = STEP(ACC, a2, a3);                                                \
        *acc = STEP(ACC, *acc, STEP(ACC, a0, a2));                             \
    }                                                                          \
    EM_CLONES static void NAME##_rows(void *accp, const void *xp, int64_t m) { \
        ACC *restrict acc = accp;                                              \
        const T *restrict x = xp;                                              \
        for (int64_t j = 0; j < m; j++)                                        \
            acc[j] = STEP(ACC, acc[j], LOAD(x[j]));                            \
    }                                                                          \
    static void NAME##_merge(void *accp, const void *otherp, int64_t m) {      \
        ACC *acc = accp;                                                       \
        const ACC *other = otherp;                                             \
        for (int64_t j = 0; j < m; j++)                                        \
            acc[j] = STEP(ACC, acc[j], other[j]);                              \
    }                                                                          \
    static void NAME##_final(void *outp, const void *accp, int64_t m) {        \
        OUT *out = outp;                                                       \
        const ACC *acc = accp;                                                 \
        for (int64_t j = 0; j < m; j++)                                        \
            out[j] = STORE((C)acc[j]);                                         \
    }                                                                          \
    static void NAME##_many(void *outp, const void *xp, int64_t nout,          \
                            int64_t ostride, int64_t rn, int64_t rstride) {    \
        OUT *out = outp;                                                       \
        const T *x = xp;                                                       \
        for (int64_t o = 0; o < nout; o++) {                                   \
            const T *p = x + o * ostride;                                      \
            ACC a = INIT;                                                      \
            for (int64_t i = 0; i < rn; i++)                                   \
                a = STEP(ACC, a, LOAD(p[i * rstride]));                        \
            out[o] = STORE((C)a);                                              \
        }                                                                      \
    }                                                                          \
    static const reduce_kernel NAME##_kernel = {                               \
        sizeof(ACC),  NAME##_init,  NAME##_leaf, NAME##_rows,                  \
        NAME##_merge, NAME##_final, NAME##_many,                               \
    };

#define EM_STORE_BOOL(x) ((uint8_t)(x))

/* sum and product: every dtype (pred is rejected before a kernel is
 * chosen, but instantiating it keeps the tables uniform). */
#define SUM_KERNEL(E, sfx, T, C, LOAD, STORE)                                  \
    DEFINE_REDUCE(sum_##sfx, T, C, EM_UNSIGNED_OF(C), T, LOAD,                 \
                  (EM_UNSIGNED_OF(C))0, STEP_SUM, STORE)
#define PROD_INT_KERNEL(E, sfx, T, C, LOAD, STORE)                             \
    DEFINE_REDUCE(product_##sfx, T, C, EM_UNSIGNED_OF(C), T, LOAD,             \
                  (EM_UNSIGNED_OF(C))1, STEP_PROD_INT, STORE)
#define PROD_FLOAT_KERNEL(E, sfx, T, C, LOAD, STORE)                           \
    DEFINE_REDUCE(product_##sfx, T, C, C, T, LOAD, (C)1, STEP_PROD, STORE)
#define MAX_KERNEL(E, sfx, T, C, LOAD, STORE)                                  \
    DEFINE_REDUCE(max_##sfx, T, C, C, T, LOAD, EM_LOWEST(C), STEP_MAX, STORE)
#define MIN_KERNEL(E, sfx, T, C, LOAD, STORE)                                  \
    DEFINE_REDUCE(min_##sfx, T, C, C, T, LOAD, EM_HIGHEST(C), STEP_MIN, STORE)
#define ALL_KERNEL(E, sfx, T, C, LOAD, STORE)                                  \
    DEFINE_REDUCE(all_##sfx, T, uint8_t, uint8_t, uint8_t, LOAD, (uint8_t)1,   \
                  STEP_ALL, EM_STORE_BOOL)
#define ANY_KERNEL(E, sfx, T, C, LOAD, STORE)                                  \
    DEFINE_REDUCE(any_##sfx, T, uint8_t, uint8_t, uint8_t, LOAD, (uint8_t)0,   \
                  STEP_ANY, EM_STORE_BOOL)

EM_DTYPES_ALL(SUM_KERNEL)
EM_DTYPES_INT(PROD_INT_KERNEL)
EM_DTYPES_FLOATING(PROD_FLOAT_KERNEL)
EM_DTYPES_REAL(MAX_KERNEL)
EM_DTYPES_REAL(MIN_KERNEL)
EM_DTYPES_ALL(ALL_KERNEL)
EM_DTYPES_ALL(ANY_KERNEL)

#define REG(OP, E, sfx) [EM_REDUCE_##OP][E] = &OP##_##sfx##_kernel,
#define REG_SUM(E, sfx, ...) REG(sum, E, sfx)
#define REG_PROD(E, sfx, ...) REG(product, E, sfx)
#define REG_MAX(E, sfx, ...) REG(max, E, sfx)
#define REG_MIN(E, sfx, ...) REG(min, E, sfx)
#define REG_ALL(E, sfx, ...) REG(all, E, sfx)
#define REG_ANY(E, sfx, ...) REG(any, E, sfx)

static const reduce_kernel
    *const reduce_kernels[EM_REDUCE_COUNT][EM_DTYPE_COUNT] = {
        EM_DTYPES_ALL(REG_SUM) EM_DTYPES_ALL(REG_PROD) EM_DTYPES_REAL(REG_MAX)
            EM_DTYPES_REAL(REG_MIN) EM_DTYPES_ALL(REG_ALL)
                EM_DTYPES_ALL(REG_ANY)};

/* ------------------------------------------------------------------------ */
/* Multi-dimensional iteration                                               */
/* ------------------------------------------------------------------------ */

/* Walks a strided index space in row-major order, innermost axis in runs. */
typedef struct nd_iter {
    int nd;
    const int64_t *shape, *strides;
    int64_t idx[EM_MAX_NDIM];
    int64_t off; /* element offset of the current position */
} nd_iter;

static void iter_start(nd_iter *it, int nd, const int64_t *shape,
                       const int64_t *strides, int64_t flat) {
    it->nd = nd;
    it->shape = shape;
    it->strides = strides;
    it->off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        it->idx[d] = flat % shape[d];
        flat /= shape[d];
        it->off += it->idx[d] * strides[d];
    }
}

/* Elements left in the innermost axis from the current position. */
static inline int64_t iter_run(const nd_iter *it) {
    return it->nd ? it->shape[it->nd - 1] - it->idx[it->nd - 1] : 1;
}

/* Move `count` elements along the innermost axis (not past its end), then
 * carry into the outer axes. */
static inline void iter_advance(nd_iter *it, int64_t count) {
    int d = it->nd - 1;
    if (d < 0)
        return;
    it->idx[d] += count;
    it->off += count * it->strides[d];
    for (; d > 0 && it->idx[d] == it->shape[d]; d--) {
        it->off -= it->idx[d] * it->strides[d];
        it->idx[d] = 0;
        it->idx[d - 1]++;
        it->off += it->strides[d - 1];
    }
}

/* ------------------------------------------------------------------------ */
/* Reduction driver                                                          */
/* ------------------------------------------------------------------------ */

/* Elements per leaf of the pairwise fold. */
#define FOLD_LEAF 4096
/* Bytes of accumulators per block of the row fold: wide enough that each
 * input row is read as a long contiguous run (prefetch-friendly). */
#define ROW_BLOCK_BYTES 16384
/* Rows below which the row fold stops halving. */
#define ROW_LEAF_MIN 16
/* Reduced elements per partial when one output is split across threads. */
#define SPLIT_CHUNK 65536
/* Reduced lengths folded with one serial accumulator per output. */
#define SHORT_REDUCE 32
/* Outputs per task when merging partials. */
#define MERGE_PIECE 256

typedef struct reduce_job {
    const reduce_kernel *k;
    const char *in;
    size_t isz, osz;
    char *out;
    int no, nr; /* collapsed outer / reduced ranks */
    int64_t oshape[EM_MAX_NDIM], ostride[EM_MAX_NDIM];
    int64_t rshape[EM_MAX_NDIM], rstride[EM_MAX_NDIM];
    int64_t rn; /* reduced elements per output */
    /* Row fold: outputs come in groups of row_len contiguous elements,
     * each cut into blocks of row_block. */
    bool rows;
    int64_t row_len, row_block, blocks_per_row;
    /* Split mode: partial results per (unit, chunk). */
    int64_t chunk, nchunks, merge_pieces;
    char *partials;
} reduce_job;

/* Fold reduced positions [b, e) of the output whose input base is `base`. */
static void fold_range(const reduce_job *j, void *acc, const char *base,
                       int64_t b, int64_t e) {
    if (e - b > FOLD_LEAF) {
        int64_t mid = b + (e - b) / 2;
        _Alignas(16) unsigned char right[ACC_MAX_SIZE];
        fold_range(j, acc, base, b, mid);
        fold_range(j, right, base, mid, e);
        j->k->merge(acc, right, 1);
        return;
    }
    j->k->init(acc, 1);
    nd_iter it;
    iter_start(&it, j->nr, j->rshape, j->rstride, b);
    int64_t inner_stride = j->nr ? j->rstride[j->nr - 1] : 1;
    while (b < e) {
        int64_t run = iter_run(&it);
        if (run > e - b)
            run = e - b;
        j->k->leaf(acc, base + it.off * (int64_t)j->isz, run, inner_stride);
        b += run;
        iter_advance(&it, run);
    }
}

/* Fold reduced positions [b, e) into m contiguous outputs at `base`.
 * Halves are combined pairwise; the right half of each level is folded into
 * `scratch` (depth levels of m accumulators). Without scratch the range is
 * folded serially. */
static void fold_rows(const reduce_job *j, void *acc, const char *base,
                      int64_t m, int64_t b, int64_t e, char *scratch) {
    if (scratch && e - b > ROW_LEAF_MIN && (e - b) * m > FOLD_LEAF) {
        int64_t mid = b + (e - b) / 2;
        char *next = scratch + m * (int64_t)j->k->acc_size;
        fold_rows(j, acc, base, m, b, mid, scratch);
        fold_rows(j, scratch, base, m, mid, e, next);
        j->k->merge(acc, scratch, m);
        return;
    }
    j->k->init(acc, m);
    nd_iter it;
    iter_start(&it, j->nr, j->rshape, j->rstride, b);
    for (; b < e; b++) {
        j->k->rows(acc, base + it.off * (int64_t)j->isz, m);
        iter_advance(&it, 1);
    }
}

/* Levels of scratch fold_rows needs for n rows. */
static int64_t fold_rows_depth(int64_t n) {
    int64_t depth = 1;
    while (n > ROW_LEAF_MIN) {
        n = (n + 1) / 2;
        depth++;
    }
    return depth;
}

/* A unit is one output (per-output fold) or one block of up to row_block
 * outputs (row fold). Locate its input base, output index and width. */
static void unit_locate(const reduce_job *j, int64_t u, const char **base,
                        int64_t *out_index, int64_t *m) {
    nd_iter it;
    if (j->rows) {
        int64_t group = u / j->blocks_per_row;
        int64_t start = (u % j->blocks_per_row) * j->row_block;
        iter_start(&it, j->no - 1, j->oshape, j->ostride, group);
        *base = j->in + (it.off + start) * (int64_t)j->isz;
        *out_index = group * j->row_len + start;
        *m = j->row_len - start < j->row_block ? j->row_len - start
                                               : j->row_block;
    } else {
        iter_start(&it, j->no, j->oshape, j->ostride, u);
        *base = j->in + it.off * (int64_t)j->isz;
        *out_index = u;
        *m = 1;
    }
}

static void fold_unit(const reduce_job *j, void *acc, int64_t u, int64_t b,
                      int64_t e, int64_t *out_index, int64_t *m,
                      char *scratch) {
    const char *base;
    unit_locate(j, u, &base, out_index, m);
    if (j->rows)
        fold_rows(j, acc, base, *m, b, e, scratch);
    else
        fold_range(j, acc, base, b, e);
}

/* Scratch for the row fold of up to `rows` rows (NULL for per-output
 * folds, or when memory is short: the fold is then serial). */
static char *rows_scratch(const reduce_job *j, int64_t rows) {
    if (!j->rows)
        return NULL;
    return malloc((size_t)(fold_rows_depth(rows) * j->row_block) *
                  j->k->acc_size);
}

static void reduce_units_task(void *ctx, int64_t begin, int64_t end) {
    const reduce_job *j = ctx;
    _Alignas(64) unsigned char acc[ROW_BLOCK_BYTES];
    if (!j->rows && j->nr <= 1 && j->rn <= FOLD_LEAF) {
        /* Many short reductions along one axis: walk the outputs
         * incrementally and fold each with a single kernel call. */
        nd_iter it;
        iter_start(&it, j->no, j->oshape, j->ostride, begin);
        int64_t stride = j->nr ? j->rstride[0] : 1;
        if (j->rn <= SHORT_REDUCE) {
            /* Runs of outputs along the innermost kept axis. */
            int64_t ostride = j->no ? j->ostride[j->no - 1] : 0;
            for (int64_t u = begin; u < end;) {
                int64_t run = iter_run(&it);
                if (run > end - u)
                    run = end - u;
                j->k->many(j->out + u * (int64_t)j->osz,
                           j->in + it.off * (int64_t)j->isz, run, ostride,
                           j->rn, stride);
                u += run;
                iter_advance(&it, run);
            }
            return;
        }
        for (int64_t u = begin; u < end; u++) {
            j->k->init(acc, 1);
            j->k->leaf(acc, j->in + it.off * (int64_t)j->isz, j->rn, stride);
            j->k->final(j->out + u * (int64_t)j->osz, acc, 1);
            iter_advance(&it, 1);
        }
        return;
    }
    char *scratch = rows_scratch(j, j->rn);
    for (int64_t u = begin; u < end; u++) {
        int64_t out_index, m;
        fold_unit(j, acc, u, 0, j->rn, &out_index, &m, scratch);
        j->k->final(j->out + out_index * (int64_t)j->osz, acc, m);
    }
    free(scratch);
}

/* Split mode: task t computes chunk (t % nchunks) of unit (t / nchunks). */
static void reduce_chunks_task(void *ctx, int64_t begin, int64_t end) {
    const reduce_job *j = ctx;
    int64_t width = j->rows ? j->row_block : 1;
    char *scratch = rows_scratch(j, j->chunk);
    for (int64_t t = begin; t < end; t++) {
        int64_t u = t / j->nchunks, c = t % j->nchunks;
        int64_t b = c * j->chunk;
        int64_t e = b + j->chunk < j->rn ? b + j->chunk : j->rn;
        int64_t out_index, m;
        fold_unit(j, j->partials + t * width * (int64_t)j->k->acc_size, u, b, e,
                  &out_index, &m, scratch);
    }
    free(scratch);
}

/* Split mode, second pass: task t merges the partials of column piece
 * (t % merge_pieces) of unit (t / merge_pieces) in chunk order and writes
 * those outputs. */
static void reduce_merge_task(void *ctx, int64_t begin, int64_t end) {
    const reduce_job *j = ctx;
    int64_t width = j->rows ? j->row_block : 1;
    size_t stride = (size_t)width * j->k->acc_size;
    for (int64_t t = begin; t < end; t++) {
        int64_t u = t / j->merge_pieces;
        int64_t col = (t % j->merge_pieces) * MERGE_PIECE;
        const char *base;
        int64_t out_index, m;
        unit_locate(j, u, &base, &out_index, &m);
        if (col >= m)
            continue;
        int64_t cols = m - col < MERGE_PIECE ? m - col : MERGE_PIECE;
        char *first = j->partials + (size_t)(u * j->nchunks) * stride +
                      (size_t)col * j->k->acc_size;
        for (int64_t c = 1; c < j->nchunks; c++)
            j->k->merge(first, first + c * stride, cols);
        j->k->final(j->out + (out_index + col) * (int64_t)j->osz, first, cols);
    }
}

/* Fold every output of `j` (j->rn > 0, at least one output). */
static void reduce_run(reduce_job *j, int64_t nunits) {
    int64_t width = j->rows ? j->row_block : 1;
    int64_t work = j->rn * width;
    /* Few heavy units: split their reduced ranges across threads too, with
     * fixed chunk boundaries so the result does not depend on timing. */
    int threads = em__num_threads();
    if (threads > 1 && nunits < 2 * threads && work >= 2 * SPLIT_CHUNK) {
        int64_t chunk = SPLIT_CHUNK / width;
        if (chunk < 1)
            chunk = 1;
        int64_t nchunks = (j->rn + chunk - 1) / chunk;
        size_t bytes = (size_t)(nunits * nchunks * width) * j->k->acc_size;
        j->partials = malloc(bytes);
        if (j->partials) {
            j->chunk = chunk;
            j->nchunks = nchunks;
            em__parallel_units(nunits * nchunks, chunk * width,
                               reduce_chunks_task, j);
            j->merge_pieces = (width + MERGE_PIECE - 1) / MERGE_PIECE;
            em__parallel_units(nunits * j->merge_pieces, nchunks * MERGE_PIECE,
                               reduce_merge_task, j);
            free(j->partials);
            j->partials = NULL;
            return;
        }
        /* No memory for partials: fold each unit whole instead. */
    }
    em__parallel_units(nunits, work, reduce_units_task, j);
}

static em_status reduce_eval(em_array *node) {
    const reduce_params *p = node->params;
    const em_array *in = node->inputs[0];
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;

    reduce_job j;
    memset(&j, 0, sizeof j);
    j.k = reduce_kernels[p->op][in->dtype];
    j.in = em__data(in);
    j.out = em__data(node);
    j.isz = em_dtype_size(in->dtype);
    j.osz = em_dtype_size(node->dtype);

    int64_t oshape[EM_MAX_NDIM], ostride_in[EM_MAX_NDIM],
        ostride_out[EM_MAX_NDIM];
    int64_t rshape[EM_MAX_NDIM], rstride[EM_MAX_NDIM];
    int no, nr;
    int64_t rn = em__split_axes(in, p->mask, oshape, ostride_in, &no, rshape,
                                rstride, &nr);
    int64_t nout = em__row_strides(oshape, no, ostride_out);
    if (nout == 0)
        return EM_OK;
    if (rn == 0) { /* empty reduction: every output is the identity */
        _Alignas(16) unsigned char acc[ACC_MAX_SIZE];
        j.k->init(acc, 1);
        for (int64_t o = 0; o < nout; o++)
            j.k->final(j.out + o * (int64_t)j.osz, acc, 1);
        return EM_OK;
    }

    const int64_t *ostrides[2] = {ostride_in, ostride_out};
    int64_t collapsed[2][EM_MAX_NDIM];
    j.no = em__collapse(no, oshape, 2, ostrides, j.oshape, collapsed);
    memcpy(j.ostride, collapsed[0], sizeof j.ostride);
    const int64_t *rstrides[1] = {rstride};
    int64_t rcollapsed[1][EM_MAX_NDIM];
    j.nr = em__collapse(nr, rshape, 1, rstrides, j.rshape, rcollapsed);
    memcpy(j.rstride, rcollapsed[0], sizeof j.rstride);
    j.rn = rn;

    bool inner_reduced_contiguous = j.nr > 0 && j.rstride[j.nr - 1] == 1;
    j.rows = !inner_reduced_contiguous && j.no > 0 &&
             j.ostride[j.no - 1] == 1 && j.oshape[j.no - 1] >= 4;
    int64_t nunits = nout;
    if (j.rows) {
        j.row_len = j.oshape[j.no - 1];
        j.row_block = ROW_BLOCK_BYTES / (int64_t)j.k->acc_size;
        if (j.row_block > j.row_len)
            j.row_block = j.row_len;
        j.blocks_per_row = (j.row_len + j.row_block - 1) / j.row_block;
        nunits = nout / j.row_len * j.blocks_per_row;
    }
    reduce_run(&j, nunits);
    return EM_OK;
}

static const em_prim reduce_prim = {"reduce", reduce_eval, em__vjp_reduce,
                                    em__gpu_reduce_eval};

const char *em_reduce_name(em_reduce_op op) {
    switch (op) {
#define EM_X(name, accepts)                                                    \
    case EM_REDUCE_##name:                                                     \
        return #name;
        EM_REDUCE_OPS(EM_X)
#undef EM_X
    default:
        return "unknown";
    }
}

static bool reduce_accepts(em_reduce_op op, em_dtype d) {
    switch (op) {
#define EM_X(name, accepts)                                                    \
    case EM_REDUCE_##name:                                                     \
        return EM_ACCEPTS_##accepts(d);
        EM_REDUCE_OPS(EM_X)
#undef EM_X
    default:
        return false;
    }
}

em_status em_reduce(em_reduce_op op, em_array *a, const int *axes, int naxes,
                    bool keep_axes, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "reduce: out is NULL");
    *out = NULL;
    if ((int)op < 0 || op >= EM_REDUCE_COUNT)
        return em__fail(EM_ERR_ARGUMENT, "reduce: unknown op %d", (int)op);
    const char *name = em_reduce_name(op);
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);
    em_desc d;
    if (!reduce_accepts(op, a->dtype) || !reduce_kernels[op][a->dtype])
        return em__fail(EM_ERR_ARGUMENT, "%s: dtype of %s is not accepted",
                        name, em__describe(a, &d));
    unsigned mask;
    if (naxes == 0 && axes == NULL) {
        mask = a->ndim ? (unsigned)((1u << a->ndim) - 1) : 0u;
    } else {
        if (naxes > 0 && !axes)
            return em__fail(EM_ERR_ARGUMENT, "%s: axes is NULL for %d axes",
                            name, naxes);
        char op_desc[64];
        snprintf(op_desc, sizeof op_desc, "%s of %s", name,
                 em__describe(a, &d));
        em_status st = em__check_axes(op_desc, axes, naxes, a->ndim, &mask);
        if (st != EM_OK)
            return st;
    }
    int64_t shape[EM_MAX_NDIM];
    int ndim = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (!(mask & (1u << i)))
            shape[ndim++] = a->shape[i];
        else if (keep_axes)
            shape[ndim++] = 1;
    }
    em_dtype dtype =
        (op == EM_REDUCE_all || op == EM_REDUCE_any) ? EM_PRED : a->dtype;
    reduce_params p = {op, mask};
    return em__node_new_params(&reduce_prim, dtype, shape, ndim, &a, 1, &p,
                               sizeof p, out);
}

/* ------------------------------------------------------------------------ */
/* argmax / argmin                                                           */
/* ------------------------------------------------------------------------ */

/* The running best of an argreduce scan: compute-type value and index
 * (index < 0: nothing seen yet). */
typedef struct arg_best {
    _Alignas(8) unsigned char value[8];
    int64_t index;
} arg_best;

typedef struct arg_kernel {
    /* Fold n elements at x, x+stride, ... whose flat indices are
     * first, first+1, ... into *best. */
    void (*scan)(arg_best *best, const void *x, int64_t n, int64_t stride,
                 int64_t first, bool tie_high);
    /* Fold `later` (covering later indices) into *best. */
    void (*merge)(arg_best *best, const arg_best *later, bool tie_high);
} arg_kernel;

#define ARG_GREATER(a, b) ((a) > (b))
#define ARG_LESS(a, b) ((a) < (b))

/* `v` with index `i` replaces the best when it is the first element, the
 * first NaN, strictly better, or equal with tie_high. A NaN best is final. */
#define ARG_UPDATE(BETTER, bv, bi, v, i, tie_high)                             \
    do {                                                                       \
        if ((bi) < 0 || (v) != (v) || BETTER(v, bv) ||                         \
            ((tie_high) && (v) == (bv))) {                                     \
            bv = (v);                                                          \
            bi = (i);                                                          \
        }                                                                      \
    } while (0)

#define DEFINE_ARG(NAME, T, C, LOAD, BETTER)                                   \
    static void NAME##_scan(arg_best *best, const void *xp, int64_t n,         \
                            int64_t s, int64_t first, bool tie_high) {         \
        const T *x = xp;                                                       \
        C bv;                                                                  \
        memcpy(&bv, best->value, sizeof bv);                                   \
        int64_t bi = best->index;                                              \
        if (bi >= 0 && bv != bv)                                               \
            return;                                                            \
        for (int64_t i = 0; i < n; i++) {                                      \
            C v = LOAD(x[i * s]);                                              \
            ARG_UPDATE(BETTER, bv, bi, v, first + i, tie_high);                \
            if (v != v)                                                        \
                break;                                                         \
        }                                                                      \
        memcpy(best->value, &bv, sizeof bv);                                   \
        best->index = bi;                                                      \
    }                                                                          \
    static void NAME##_merge(arg_best *best, const arg_best *later,            \
                             bool tie_high) {                                  \
        C bv, v;                                                               \
        memcpy(&bv, best->value, sizeof bv);                                   \
        memcpy(&v, later->value, sizeof v);                                    \
        int64_t bi = best->index;                                              \
        if (later->index < 0 || (bi >= 0 && bv != bv))                         \
            return;                                                            \
        ARG_UPDATE(BETTER, bv, bi, v, later->index, tie_high);                 \
        memcpy(best->value, &bv, sizeof bv);                                   \
        best->index = bi;                                                      \
    }                                                                          \
    static const arg_kernel NAME##_kernel = {NAME##_scan, NAME##_merge};

#define ARGMAX_KERNEL(E, sfx, T, C, LOAD, STORE)                               \
    DEFINE_ARG(argmax_##sfx, T, C, LOAD, ARG_GREATER)
#define ARGMIN_KERNEL(E, sfx, T, C, LOAD, STORE)                               \
    DEFINE_ARG(argmin_##sfx, T, C, LOAD, ARG_LESS)
EM_DTYPES_REAL(ARGMAX_KERNEL)
EM_DTYPES_REAL(ARGMIN_KERNEL)

#define REG_ARGMAX(E, sfx, ...) [EM_ARGMAX][E] = &argmax_##sfx##_kernel,
#define REG_ARGMIN(E, sfx, ...) [EM_ARGMIN][E] = &argmin_##sfx##_kernel,
static const arg_kernel *const arg_kernels[2][EM_DTYPE_COUNT] = {
    EM_DTYPES_REAL(REG_ARGMAX) EM_DTYPES_REAL(REG_ARGMIN)};

/* Store a 64-bit index as any integer dtype (wrapping; sizes are checked at
 * build time so it fits). */
static void store_index(void *out, em_dtype dtype, int64_t pos, int64_t v) {
    switch (dtype) {
#define STORE_INDEX(E, sfx, T, ...)                                            \
    case E:                                                                    \
        ((T *)out)[pos] = (T)v;                                                \
        break;
        EM_DTYPES_INT(STORE_INDEX)
#undef STORE_INDEX
    default:
        break;
    }
}

typedef struct arg_job {
    const arg_kernel *k;
    bool tie_high;
    const char *in;
    size_t isz;
    void *out;
    em_dtype out_dtype;
    int no, nr;
    int64_t oshape[EM_MAX_NDIM], ostride[EM_MAX_NDIM];
    int64_t rshape[EM_MAX_NDIM], rstride[EM_MAX_NDIM];
    int64_t rn;
    int64_t chunk, nchunks;
    arg_best *partials;
} arg_job;

static void arg_fold(const arg_job *j, arg_best *best, const char *base,
                     int64_t b, int64_t e) {
    nd_iter it;
    iter_start(&it, j->nr, j->rshape, j->rstride, b);
    int64_t inner_stride = j->nr ? j->rstride[j->nr - 1] : 1;
    while (b < e) {
        int64_t run = iter_run(&it);
        if (run > e - b)
            run = e - b;
        j->k->scan(best, base + it.off * (int64_t)j->isz, run, inner_stride, b,
                   j->tie_high);
        b += run;
        iter_advance(&it, run);
    }
}

static const char *arg_base(const arg_job *j, int64_t o) {
    nd_iter it;
    iter_start(&it, j->no, j->oshape, j->ostride, o);
    return j->in + it.off * (int64_t)j->isz;
}

static void arg_units_task(void *ctx, int64_t begin, int64_t end) {
    const arg_job *j = ctx;
    for (int64_t o = begin; o < end; o++) {
        arg_best best = {{0}, -1};
        arg_fold(j, &best, arg_base(j, o), 0, j->rn);
        store_index(j->out, j->out_dtype, o, best.index);
    }
}

static void arg_chunks_task(void *ctx, int64_t begin, int64_t end) {
    const arg_job *j = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / j->nchunks, c = t % j->nchunks;
        int64_t b = c * j->chunk;
        int64_t e = b + j->chunk < j->rn ? b + j->chunk : j->rn;
        arg_best *best = &j->partials[t];
        best->index = -1;
        arg_fold(j, best, arg_base(j, o), b, e);
    }
}

static em_status argreduce_eval(em_array *node) {
    const argreduce_params *p = node->params;
    const em_array *in = node->inputs[0];
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    arg_job j;
    memset(&j, 0, sizeof j);
    j.k = arg_kernels[p->op][in->dtype];
    j.tie_high = p->tie_high;
    j.in = em__data(in);
    j.isz = em_dtype_size(in->dtype);
    j.out = em__data(node);
    j.out_dtype = node->dtype;

    int64_t oshape[EM_MAX_NDIM], ostride_in[EM_MAX_NDIM],
        ostride_out[EM_MAX_NDIM];
    int64_t rshape[EM_MAX_NDIM], rstride[EM_MAX_NDIM];
    int no, nr;
    int64_t rn = em__split_axes(in, p->mask, oshape, ostride_in, &no, rshape,
                                rstride, &nr);
    int64_t nout = em__row_strides(oshape, no, ostride_out);
    if (nout == 0)
        return EM_OK;
    /* Collapsing keeps the row-major order of the reduced axes, so the scan
     * position is the flat index that argmax reports. */
    const int64_t *ostrides[2] = {ostride_in, ostride_out};
    int64_t collapsed[2][EM_MAX_NDIM];
    j.no = em__collapse(no, oshape, 2, ostrides, j.oshape, collapsed);
    memcpy(j.ostride, collapsed[0], sizeof j.ostride);
    const int64_t *rstrides[1] = {rstride};
    int64_t rcollapsed[1][EM_MAX_NDIM];
    j.nr = em__collapse(nr, rshape, 1, rstrides, j.rshape, rcollapsed);
    memcpy(j.rstride, rcollapsed[0], sizeof j.rstride);
    j.rn = rn;

    int threads = em__num_threads();
    if (threads > 1 && nout < 2 * threads && rn >= 2 * SPLIT_CHUNK) {
        j.chunk = SPLIT_CHUNK;
        j.nchunks = (rn + SPLIT_CHUNK - 1) / SPLIT_CHUNK;
        j.partials = malloc((size_t)(nout * j.nchunks) * sizeof(arg_best));
        if (j.partials) {
            em__parallel_units(nout * j.nchunks, SPLIT_CHUNK, arg_chunks_task,
                               &j);
            for (int64_t o = 0; o < nout; o++) {
                arg_best *first = &j.partials[o * j.nchunks];
                for (int64_t c = 1; c < j.nchunks; c++)
                    j.k->merge(first, first + c, j.tie_high);
                store_index(j.out, j.out_dtype, o, first->index);
            }
            free(j.partials);
            return EM_OK;
        }
    }
    em__parallel_units(nout, rn, arg_units_task, &j);
    return EM_OK;
}

static const em_prim argreduce_prim = {"argreduce", argreduce_eval, NULL,
                                       em__gpu_argreduce_eval};

/* Largest index representable in an integer dtype. */
static uint64_t index_dtype_max(em_dtype d) {
    size_t bits = em_dtype_size(d) * 8;
    if (bits >= 64)
        return em_dtype_is_signed(d) ? (uint64_t)INT64_MAX : UINT64_MAX;
    return em_dtype_is_signed(d) ? ((uint64_t)1 << (bits - 1)) - 1
                                 : ((uint64_t)1 << bits) - 1;
}

em_status em_argreduce(em_argreduce_op op, em_array *a,
                       const em_argreduce_options *opts, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "argreduce: out is NULL");
    *out = NULL;
    if (op != EM_ARGMAX && op != EM_ARGMIN)
        return em__fail(EM_ERR_ARGUMENT, "argreduce: unknown op %d", (int)op);
    const char *name = op == EM_ARGMAX ? "argmax" : "argmin";
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);
    em_argreduce_options defaults = {0};
    if (!opts)
        opts = &defaults;
    em_desc d;
    if (!arg_kernels[op][a->dtype])
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: %s has a complex dtype; expected a real one", name,
                        em__describe(a, &d));
    em_dtype index_dtype = opts->dtype == 0 ? EM_S64 : opts->dtype;
    if (!em_dtype_is_valid((int)index_dtype) ||
        !em_dtype_is_integer(index_dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: index dtype %d is not an integer dtype (input %s)",
                        name, (int)opts->dtype, em__describe(a, &d));
    unsigned mask;
    int64_t shape[EM_MAX_NDIM];
    int ndim = 0;
    int64_t reduced;
    if (opts->all_axes) {
        mask = a->ndim ? (unsigned)((1u << a->ndim) - 1) : 0u;
        reduced = a->size;
        if (opts->keep_axis)
            for (int i = 0; i < a->ndim; i++)
                shape[ndim++] = 1;
    } else {
        int axis;
        char op_desc[64];
        snprintf(op_desc, sizeof op_desc, "%s of %s", name,
                 em__describe(a, &d));
        em_status st = em__check_axis(op_desc, opts->axis, a->ndim, &axis);
        if (st != EM_OK)
            return st;
        mask = 1u << axis;
        reduced = a->shape[axis];
        for (int i = 0; i < a->ndim; i++) {
            if (i != axis)
                shape[ndim++] = a->shape[i];
            else if (opts->keep_axis)
                shape[ndim++] = 1;
        }
    }
    if (reduced == 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: cannot reduce an empty axis of %s", name,
                        em__describe(a, &d));
    if ((uint64_t)(reduced - 1) > index_dtype_max(index_dtype))
        return em__fail(EM_ERR_ARGUMENT, "%s: indices of %s do not fit in %s",
                        name, em__describe(a, &d), em_dtype_name(index_dtype));
    argreduce_params p = {op, opts->tie_high, mask};
    return em__node_new_params(&argreduce_prim, index_dtype, shape, ndim, &a, 1,
                               &p, sizeof p, out);
}

/* ---- for the fusion pass (elementwise_internal.h) ---------------------- */

bool em__reduce_op_of(const em_array *node, em_reduce_op *op, unsigned *mask) {
    if (node->prim != &reduce_prim)
        return false;
    const reduce_params *p = node->params;
    *op = p->op;
    *mask = p->mask;
    return true;
}

/* fold_range for one contiguous run: the same halving above FOLD_LEAF and
 * the same leaves, so a fused row folds exactly as the unfused per-output
 * reduction does. */
static void fold_contiguous(const reduce_kernel *k, size_t isz, void *acc,
                            const char *x, int64_t n) {
    if (n > FOLD_LEAF) {
        int64_t mid = n / 2;
        _Alignas(16) unsigned char right[ACC_MAX_SIZE];
        fold_contiguous(k, isz, acc, x, mid);
        fold_contiguous(k, isz, right, x + mid * (int64_t)isz, n - mid);
        k->merge(acc, right, 1);
        return;
    }
    k->init(acc, 1);
    if (n > 0)
        k->leaf(acc, x, n, 1);
}

bool em__reduce_contiguous(em_reduce_op op, em_dtype dtype, const void *x,
                           int64_t n, void *out) {
    if ((int)op < 0 || op >= EM_REDUCE_COUNT || !reduce_accepts(op, dtype) ||
        !reduce_kernels[op][dtype])
        return false;
    const reduce_kernel *k = reduce_kernels[op][dtype];
    _Alignas(16) unsigned char acc[ACC_MAX_SIZE];
    fold_contiguous(k, em_dtype_size(dtype), acc, x, n);
    k->final(out, acc, 1);
    return true;
}

/* A running reduction of pieces of one output (elementwise_internal.h). */
static const reduce_kernel *acc_kernel(em_reduce_op op, em_dtype dtype) {
    if ((int)op < 0 || op >= EM_REDUCE_COUNT || !reduce_accepts(op, dtype))
        return NULL;
    return reduce_kernels[op][dtype];
}

size_t em__reduce_acc_size(em_reduce_op op, em_dtype dtype) {
    const reduce_kernel *k = acc_kernel(op, dtype);
    return k ? k->acc_size : 0;
}

void em__reduce_acc_init(em_reduce_op op, em_dtype dtype, void *acc) {
    acc_kernel(op, dtype)->init(acc, 1);
}

void em__reduce_acc_fold(em_reduce_op op, em_dtype dtype, void *acc,
                         const void *x, int64_t n) {
    if (n > 0)
        acc_kernel(op, dtype)->leaf(acc, x, n, 1);
}

void em__reduce_acc_merge(em_reduce_op op, em_dtype dtype, void *acc,
                          const void *other) {
    acc_kernel(op, dtype)->merge(acc, other, 1);
}

void em__reduce_acc_final(em_reduce_op op, em_dtype dtype, const void *acc,
                          void *out) {
    acc_kernel(op, dtype)->final(out, acc, 1);
}
