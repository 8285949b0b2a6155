/* copy.c — strided element copies, byte-size generic (see copy.h). */
#include "copy.h"

/* Elements are moved as opaque words of their size. may_alias lets the same
 * words carry float, complex or integer data without breaking the compiler's
 * type-based aliasing assumptions. */
typedef uint8_t __attribute__((may_alias)) em_word1;
typedef uint16_t __attribute__((may_alias)) em_word2;
typedef uint32_t __attribute__((may_alias)) em_word4;
typedef uint64_t __attribute__((may_alias)) em_word8;
typedef struct __attribute__((may_alias)) em_word16 {
    uint64_t lo, hi;
} em_word16;

#define EM_COPY_WORDS(X) X(1) X(2) X(4) X(8) X(16)

/* One kernel body for every word size. It starts at the multi-index of
 * `begin` and walks runs of the innermost axis, carrying into the outer axes
 * as each run ends, so a chunk may start and stop anywhere. */
#define EM_DEFINE_COPY_RANGE(BYTES)                                            \
    static void copy_range_##BYTES(const em_copy_plan *p, void *dst_v,         \
                                   const void *src_v, int64_t begin,           \
                                   int64_t end) {                              \
        em_word##BYTES *dst = dst_v;                                           \
        const em_word##BYTES *src = src_v;                                     \
        const int last = p->ndim - 1;                                          \
        int64_t idx[EM_MAX_NDIM];                                              \
        int64_t src_pos = 0, dst_pos = 0, rest = begin;                        \
        for (int i = last; i >= 0; i--) {                                      \
            idx[i] = rest % p->shape[i];                                       \
            rest /= p->shape[i];                                               \
            src_pos += idx[i] * p->src_strides[i];                             \
            dst_pos += idx[i] * p->dst_strides[i];                             \
        }                                                                      \
        const int64_t inner = p->shape[last];                                  \
        const int64_t ss = p->src_strides[last], ds = p->dst_strides[last];    \
        int64_t left = end - begin;                                            \
        while (left > 0) {                                                     \
            int64_t run = inner - idx[last];                                   \
            if (run > left)                                                    \
                run = left;                                                    \
            em_word##BYTES *d = dst + dst_pos;                                 \
            const em_word##BYTES *s = src + src_pos;                           \
            if (ss == 1 && ds == 1) {                                          \
                memcpy(d, s, (size_t)run *BYTES);                              \
            } else if (ss == 0) { /* broadcast source: a fill */               \
                const em_word##BYTES v = *s;                                   \
                for (int64_t k = 0; k < run; k++)                              \
                    d[k * ds] = v;                                             \
            } else if (ds == 1) {                                              \
                for (int64_t k = 0; k < run; k++)                              \
                    d[k] = s[k * ss];                                          \
            } else {                                                           \
                for (int64_t k = 0; k < run; k++)                              \
                    d[k * ds] = s[k * ss];                                     \
            }                                                                  \
            left -= run;                                                       \
            if (left == 0)                                                     \
                break;                                                         \
            src_pos += run * ss;                                               \
            dst_pos += run * ds;                                               \
            idx[last] += run;                                                  \
            for (int i = last; i > 0 && idx[i] == p->shape[i]; i--) {          \
                src_pos += p->src_strides[i - 1] - idx[i] * p->src_strides[i]; \
                dst_pos += p->dst_strides[i - 1] - idx[i] * p->dst_strides[i]; \
                idx[i] = 0;                                                    \
                idx[i - 1]++;                                                  \
            }                                                                  \
        }                                                                      \
    }
EM_COPY_WORDS(EM_DEFINE_COPY_RANGE)
#undef EM_DEFINE_COPY_RANGE

void em__copy_plan_init(em_copy_plan *plan, size_t elem_size, int ndim,
                        const int64_t *shape, const int64_t *dst_strides,
                        const int64_t *src_strides) {
    int64_t row_major[EM_MAX_NDIM];
    int64_t size = em__row_strides(shape, ndim, row_major);
    plan->elem_size = elem_size;
    plan->size = size;
    if (size == 0) { /* em__collapse expects non-empty shapes */
        plan->ndim = 1;
        plan->shape[0] = 0;
        plan->dst_strides[0] = plan->src_strides[0] = 0;
        return;
    }
    const int64_t *strides_in[2] = {dst_strides ? dst_strides : row_major,
                                    src_strides};
    int64_t strides_out[2][EM_MAX_NDIM];
    int n = em__collapse(ndim, shape, 2, strides_in, plan->shape, strides_out);
    if (n == 0) { /* a single element */
        n = 1;
        plan->shape[0] = 1;
        strides_out[0][0] = strides_out[1][0] = 0;
    }
    plan->ndim = n;
    memcpy(plan->dst_strides, strides_out[0], sizeof(int64_t) * (size_t)n);
    memcpy(plan->src_strides, strides_out[1], sizeof(int64_t) * (size_t)n);
}

void em__copy_plan_range(const em_copy_plan *plan, void *dst, const void *src,
                         int64_t begin, int64_t end) {
    if (begin >= end)
        return;
    switch (plan->elem_size) {
#define EM_CASE(BYTES)                                                         \
    case BYTES:                                                                \
        copy_range_##BYTES(plan, dst, src, begin, end);                        \
        break;
        EM_COPY_WORDS(EM_CASE)
#undef EM_CASE
    default: /* every dtype has one of the sizes above */
        break;
    }
}

/* ---- transposing copies ------------------------------------------------ */

/*
 * When the destination's last axis is contiguous but the source walks it
 * with a large stride while some outer axis j of the source is contiguous
 * (a transpose), row-by-row copying reads one element per cache line. Such
 * copies go tile by tile instead: a square block of (axis j) x (last axis)
 * is small enough that both its source lines and its destination lines stay
 * in L1 while it is copied.
 */
#define EM_TILE 16

#define EM_DEFINE_COPY_TILE(BYTES)                                             \
    static void copy_tile_##BYTES(                                             \
        void *dst_v, const void *src_v, int64_t rows, int64_t cols,            \
        int64_t dst_row_stride, int64_t src_col_stride) {                      \
        em_word##BYTES *dst = dst_v;                                           \
        const em_word##BYTES *src = src_v;                                     \
        for (int64_t r = 0; r < rows; r++)                                     \
            for (int64_t c = 0; c < cols; c++)                                 \
                dst[r * dst_row_stride + c] = src[r + c * src_col_stride];     \
    }
EM_COPY_WORDS(EM_DEFINE_COPY_TILE)
#undef EM_DEFINE_COPY_TILE

typedef void (*copy_tile_fn)(void *, const void *, int64_t, int64_t, int64_t,
                             int64_t);

typedef struct tile_job {
    const em_copy_plan *plan;
    char *dst;
    const char *src;
    copy_tile_fn tile_fn;
    int axis; /* the source-contiguous axis j */
    int64_t tiles_rows, tiles_cols;
} tile_job;

static void tile_job_range(void *ctx, int64_t begin, int64_t end) {
    const tile_job *job = ctx;
    const em_copy_plan *p = job->plan;
    const int last = p->ndim - 1, j = job->axis;
    const int64_t es = (int64_t)p->elem_size;
    for (int64_t t = begin; t < end; t++) {
        int64_t tc = t % job->tiles_cols;
        int64_t tr = (t / job->tiles_cols) % job->tiles_rows;
        int64_t outer = t / (job->tiles_cols * job->tiles_rows);
        int64_t src_off = 0, dst_off = 0;
        for (int i = last - 1; i >= 0; i--) { /* the other axes */
            if (i == j)
                continue;
            int64_t k = outer % p->shape[i];
            outer /= p->shape[i];
            src_off += k * p->src_strides[i];
            dst_off += k * p->dst_strides[i];
        }
        int64_t r0 = tr * EM_TILE, c0 = tc * EM_TILE;
        int64_t rows = p->shape[j] - r0 < EM_TILE ? p->shape[j] - r0 : EM_TILE;
        int64_t cols =
            p->shape[last] - c0 < EM_TILE ? p->shape[last] - c0 : EM_TILE;
        src_off += r0 * p->src_strides[j] + c0 * p->src_strides[last];
        dst_off += r0 * p->dst_strides[j] + c0;
        job->tile_fn(job->dst + dst_off * es, job->src + src_off * es, rows,
                     cols, p->dst_strides[j], p->src_strides[last]);
    }
}

/* The tiled path applies when the source is contiguous along an outer axis
 * and both tiled axes are long enough for tiles to pay off. */
static bool run_tiled(const em_copy_plan *p, void *dst, const void *src) {
    const int last = p->ndim - 1;
    if (p->ndim < 2 || p->dst_strides[last] != 1 || p->src_strides[last] == 1 ||
        p->src_strides[last] == 0 || p->shape[last] < EM_TILE)
        return false;
    int j = -1;
    for (int i = last - 1; i >= 0 && j < 0; i--)
        if (p->src_strides[i] == 1 && p->shape[i] >= EM_TILE)
            j = i;
    if (j < 0)
        return false;
    tile_job job = {p,
                    dst,
                    src,
                    NULL,
                    j,
                    (p->shape[j] + EM_TILE - 1) / EM_TILE,
                    (p->shape[last] + EM_TILE - 1) / EM_TILE};
    switch (p->elem_size) {
#define EM_CASE(BYTES)                                                         \
    case BYTES:                                                                \
        job.tile_fn = copy_tile_##BYTES;                                       \
        break;
        EM_COPY_WORDS(EM_CASE)
#undef EM_CASE
    default:
        return false;
    }
    int64_t ntiles = p->size / (p->shape[j] * p->shape[last]) * job.tiles_rows *
                     job.tiles_cols;
    int64_t grain =
        EM_PARALLEL_GRAIN * 4 / (int64_t)p->elem_size / (EM_TILE * EM_TILE) + 1;
    em__parallel_for(ntiles, grain, tile_job_range, &job);
    return true;
}

typedef struct copy_job {
    const em_copy_plan *plan;
    void *dst;
    const void *src;
} copy_job;

static void copy_job_range(void *ctx, int64_t begin, int64_t end) {
    const copy_job *job = ctx;
    em__copy_plan_range(job->plan, job->dst, job->src, begin, end);
}

void em__copy_plan_run(const em_copy_plan *plan, void *dst, const void *src) {
    if (plan->size == 0)
        return;
    /* Copies are bound by memory bandwidth: the grain is counted in bytes
     * (256 KiB per chunk at least), so narrow dtypes get longer chunks. */
    int64_t grain = EM_PARALLEL_GRAIN * 4 / (int64_t)plan->elem_size;
    if (run_tiled(plan, dst, src))
        return;
    copy_job job = {plan, dst, src};
    em__parallel_for(plan->size, grain, copy_job_range, &job);
}

void em__copy_strided(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, const int64_t *shape,
                      int ndim, size_t elem_size) {
    em_copy_plan plan;
    em__copy_plan_init(&plan, elem_size, ndim, shape, dst_strides, src_strides);
    em__copy_plan_run(&plan, dst, src);
}

void em__copy_array(void *dst, const em_array *src) {
    if (src->size == 0)
        return;
    em__copy_strided(dst, NULL, em__data(src), src->strides, src->shape,
                     src->ndim, em_dtype_size(src->dtype));
}
