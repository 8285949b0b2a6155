/*
 * window.c — em_window_reduce (Nx.window_sum/product/max/min) and
 * em_window_scatter (Nx.window_scatter_max/min).
 *
 * Padding is never materialised. Because the padding value is the
 * reduction's identity, a window's result is the reduction over its
 * in-bounds elements only: for each output element and axis the range of
 * window offsets k whose input position o*stride + k*dilation - low falls
 * inside [0, dim) is computed in closed form, and only that box of the
 * window is visited (an odometer over the outer axes, a strided loop over
 * the last). Inputs are read through their strides (views need no copy).
 *
 * Kernels are written once as macros over the dtype tables and instantiated
 * for every dtype: sum and product accumulate in a wrapping unsigned work
 * type for integers (as dot.c does), in float for f16/bf16, in the dtype
 * itself otherwise; max and min (real dtypes) propagate NaN.
 *
 * The scatter runs in two passes: the selected position of every window is
 * found in parallel (ties: the last position in row-major window order, as
 * Nx's BinaryBackend selects with >=), then the source values are added
 * into the init-filled output sequentially in window order (overlapping
 * windows may pick the same position; the order matches Nx's fold).
 */
#include "copy.h"
#include "emily_window.h"
#include "params.h"

#include <limits.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Geometry                                                                  */
/* ------------------------------------------------------------------------ */

/* What a kernel needs, with rank-0 inputs turned into rank 1 of size 1. */
typedef struct win_job {
    int ndim;
    int64_t out_shape[EM_MAX_NDIM];
    int64_t in_shape[EM_MAX_NDIM];
    int64_t in_strides[EM_MAX_NDIM];
    int64_t in_rowstr[EM_MAX_NDIM]; /* row-major strides of the input */
    int64_t window[EM_MAX_NDIM], strides[EM_MAX_NDIM], dil[EM_MAX_NDIM],
        low[EM_MAX_NDIM];
    const void *src;
    void *dst;
    int64_t *sel; /* scatter: selected row-major input index, or -1 */
} win_job;

static void job_init(win_job *j, const win_params *p, const em_array *in,
                     const int64_t *out_shape) {
    memset(j, 0, sizeof *j);
    if (in->ndim == 0) {
        j->ndim = 1;
        j->out_shape[0] = j->in_shape[0] = j->window[0] = 1;
        j->strides[0] = j->dil[0] = j->in_strides[0] = j->in_rowstr[0] = 1;
        return;
    }
    j->ndim = in->ndim;
    for (int i = 0; i < in->ndim; i++) {
        j->out_shape[i] = out_shape[i];
        j->in_shape[i] = in->shape[i];
        j->in_strides[i] = in->strides[i];
        j->window[i] = p->window[i];
        j->strides[i] = p->strides[i];
        j->dil[i] = p->dil[i];
        j->low[i] = p->low[i];
    }
    em__row_strides(j->in_shape, j->ndim, j->in_rowstr);
}

/* The in-bounds box of the window at output index `idx`: per axis
 * k in [kmin, kmax). Returns false when the box is empty. *off is the
 * strided input offset and *flat the row-major input index of the box's
 * first element. */
static inline bool window_box(const win_job *j, const int64_t *idx,
                              int64_t *kmin, int64_t *kmax, int64_t *off,
                              int64_t *flat) {
    int64_t o = 0, f = 0;
    for (int i = 0; i < j->ndim; i++) {
        const int64_t base = idx[i] * j->strides[i] - j->low[i];
        const int64_t d = j->dil[i], dim = j->in_shape[i];
        int64_t lo = base >= 0 ? 0 : (-base + d - 1) / d;
        int64_t last = dim - 1 - base; /* k*d <= last */
        int64_t hi = last < 0 ? 0 : last / d + 1;
        if (hi > j->window[i])
            hi = j->window[i];
        if (lo >= hi)
            return false;
        kmin[i] = lo;
        kmax[i] = hi;
        o += (base + lo * d) * j->in_strides[i];
        f += (base + lo * d) * j->in_rowstr[i];
    }
    *off = o;
    *flat = f;
    return true;
}

static void unflatten(int64_t n, const int64_t *shape, int ndim, int64_t *idx) {
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = shape[i] ? n % shape[i] : 0;
        n = shape[i] ? n / shape[i] : 0;
    }
}

static inline void next_index(int64_t *idx, const int64_t *shape, int ndim) {
    for (int i = ndim - 1; i >= 0; i--) {
        if (++idx[i] < shape[i])
            return;
        idx[i] = 0;
    }
}

/* Advance the box odometer over axes [0, n-1) (the last axis is the inner
 * loop). Returns false when the box is done. */
static inline bool next_box(const win_job *j, int64_t *k, const int64_t *kmin,
                            const int64_t *kmax, int64_t *off, int64_t *flat) {
    for (int ax = j->ndim - 2; ax >= 0; ax--) {
        const int64_t d = j->dil[ax];
        k[ax]++;
        *off += d * j->in_strides[ax];
        *flat += d * j->in_rowstr[ax];
        if (k[ax] < kmax[ax])
            return true;
        const int64_t span = (kmax[ax] - kmin[ax]) * d;
        *off -= span * j->in_strides[ax];
        *flat -= span * j->in_rowstr[ax];
        k[ax] = kmin[ax];
    }
    return false;
}

/* ------------------------------------------------------------------------ */
/* Reduction kernels                                                         */
/* ------------------------------------------------------------------------ */

/* Accumulator of sum/product: wrapping unsigned for integers. */
#define WIN_WORK(C)                                                            \
    __typeof__(_Generic((C)0, uint8_t                                          \
                        : (uint32_t)0, uint16_t                                \
                        : (uint32_t)0, uint32_t                                \
                        : (uint32_t)0, int8_t                                  \
                        : (uint32_t)0, int16_t                                 \
                        : (uint32_t)0, int32_t                                 \
                        : (uint32_t)0, uint64_t                                \
                        : (uint64_t)0, int64_t                                 \
                        : (uint64_t)0, default                                 \
                        : (C)0))

#define WIN_LOWEST(C)                                                          \
    _Generic((C)0, uint8_t : 0, uint16_t : 0, uint32_t : 0, uint64_t : 0,      \
             int8_t                                                            \
             : INT8_MIN, int16_t                                               \
             : INT16_MIN, int32_t                                              \
             : INT32_MIN, int64_t                                              \
             : INT64_MIN, float                                                \
             : -INFINITY, double                                               \
             : -INFINITY)
#define WIN_HIGHEST(C)                                                         \
    _Generic((C)0, uint8_t                                                     \
             : UINT8_MAX, uint16_t                                             \
             : UINT16_MAX, uint32_t                                            \
             : UINT32_MAX, uint64_t                                            \
             : UINT64_MAX, int8_t                                              \
             : INT8_MAX, int16_t                                               \
             : INT16_MAX, int32_t                                              \
             : INT32_MAX, int64_t                                              \
             : INT64_MAX, float                                                \
             : INFINITY, double                                                \
             : INFINITY)

#define WIN_SUM_INIT(C) ((WIN_WORK(C))0)
#define WIN_SUM_STEP(acc, x) ((acc) = (acc) + (x))
#define WIN_PROD_INIT(C) ((WIN_WORK(C))1)
#define WIN_PROD_STEP(acc, x) ((acc) = (acc) * (x))
#define WIN_MAX_INIT(C) ((C)WIN_LOWEST(C))
#define WIN_MAX_STEP(acc, x) ((acc) = ((x) > (acc) || (x) != (x)) ? (x) : (acc))
#define WIN_MIN_INIT(C) ((C)WIN_HIGHEST(C))
#define WIN_MIN_STEP(acc, x) ((acc) = ((x) < (acc) || (x) != (x)) ? (x) : (acc))

/* NaN is sticky for max/min: once acc is NaN, `x > acc` is false and only
 * another NaN would replace it. */

#define DEFINE_WINDOW(NAME, INIT, STEP, ACC_T, E, sfx, S, C, LOAD, STORE)      \
    static void win_##NAME##_##sfx(void *ctx, int64_t begin, int64_t end) {    \
        const win_job *j = ctx;                                                \
        const S *src = j->src;                                                 \
        S *dst = j->dst;                                                       \
        const int n = j->ndim;                                                 \
        const int64_t inner_step = j->dil[n - 1] * j->in_strides[n - 1];       \
        int64_t idx[EM_MAX_NDIM], kmin[EM_MAX_NDIM], kmax[EM_MAX_NDIM],        \
            k[EM_MAX_NDIM];                                                    \
        unflatten(begin, j->out_shape, n, idx);                                \
        for (int64_t o = begin; o < end; o++) {                                \
            ACC_T acc = INIT(C);                                               \
            int64_t off, flat;                                                 \
            if (window_box(j, idx, kmin, kmax, &off, &flat)) {                 \
                memcpy(k, kmin, sizeof k);                                     \
                const int64_t cnt = kmax[n - 1] - kmin[n - 1];                 \
                do {                                                           \
                    const S *p = src + off;                                    \
                    for (int64_t t = 0; t < cnt; t++) {                        \
                        ACC_T x = (ACC_T)LOAD(p[t * inner_step]);              \
                        STEP(acc, x);                                          \
                    }                                                          \
                } while (next_box(j, k, kmin, kmax, &off, &flat));             \
            }                                                                  \
            dst[o] = STORE((C)acc);                                            \
            next_index(idx, j->out_shape, n);                                  \
        }                                                                      \
    }

#define DEFINE_SUM(E, sfx, S, C, L, ST)                                        \
    DEFINE_WINDOW(sum, WIN_SUM_INIT, WIN_SUM_STEP, WIN_WORK(C), E, sfx, S, C,  \
                  L, ST)
#define DEFINE_PROD(E, sfx, S, C, L, ST)                                       \
    DEFINE_WINDOW(prod, WIN_PROD_INIT, WIN_PROD_STEP, WIN_WORK(C), E, sfx, S,  \
                  C, L, ST)
#define DEFINE_MAX(E, sfx, S, C, L, ST)                                        \
    DEFINE_WINDOW(max, WIN_MAX_INIT, WIN_MAX_STEP, C, E, sfx, S, C, L, ST)
#define DEFINE_MIN(E, sfx, S, C, L, ST)                                        \
    DEFINE_WINDOW(min, WIN_MIN_INIT, WIN_MIN_STEP, C, E, sfx, S, C, L, ST)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-equal"
EM_DTYPES_ALL(DEFINE_SUM)
EM_DTYPES_ALL(DEFINE_PROD)
EM_DTYPES_REAL(DEFINE_MAX)
EM_DTYPES_REAL(DEFINE_MIN)
#pragma GCC diagnostic pop

#define REG_SUM(E, sfx, ...) [E] = win_sum_##sfx,
#define REG_PROD(E, sfx, ...) [E] = win_prod_##sfx,
#define REG_MAX(E, sfx, ...) [E] = win_max_##sfx,
#define REG_MIN(E, sfx, ...) [E] = win_min_##sfx,
static const em_range_fn win_fns[4][EM_DTYPE_COUNT] = {
    {EM_DTYPES_ALL(REG_SUM)},
    {EM_DTYPES_ALL(REG_PROD)},
    {EM_DTYPES_REAL(REG_MAX)},
    {EM_DTYPES_REAL(REG_MIN)},
};

static int64_t window_volume(const win_job *j) {
    int64_t v = 1;
    for (int i = 0; i < j->ndim; i++)
        v *= j->window[i];
    return v;
}

static em_status window_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const win_params *p = node->params;
    const em_array *a = node->inputs[0];
    win_job j;
    job_init(&j, p, a, node->shape);
    j.src = em__data(a);
    j.dst = em__data(node);
    int64_t vol = window_volume(&j);
    int64_t grain = EM_PARALLEL_GRAIN / (vol > 0 ? vol : 1);
    em__parallel_for(node->size, grain < 1 ? 1 : grain,
                     win_fns[p->op][node->dtype], &j);
    return EM_OK;
}

static const em_prim window_prim = {"window_reduce", window_eval,
                                    em__vjp_window, em__gpu_window_eval};

/* ------------------------------------------------------------------------ */
/* Building                                                                  */
/* ------------------------------------------------------------------------ */

static const char *op_name(int op) {
    static const char *names[] = {"window_sum", "window_product", "window_max",
                                  "window_min"};
    return op >= 0 && op < 4 ? names[op] : "window_reduce";
}

/* Validate the geometry against `a`; fill params and the output shape. */
static em_status check_geometry(const char *name, const em_array *a,
                                const em_window_options *o, bool allow_dil,
                                win_params *p, int64_t *shape) {
    em_desc da;
    for (int i = 0; i < a->ndim; i++) {
        int64_t w = o->window[i], s = o->strides[i] ? o->strides[i] : 1;
        int64_t d = o->dilations[i] ? o->dilations[i] : 1;
        if (w < 1 || s < 1 || d < 1)
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: window %lld, stride %lld and dilation %lld on "
                            "axis %d of %s must all be >= 1",
                            name, (long long)w, (long long)s, (long long)d, i,
                            em__describe(a, &da));
        if (d != 1 && !allow_dil)
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: window dilations are not supported (axis %d "
                            "has %lld)",
                            name, i, (long long)d);
        int64_t padded, wd;
        if (__builtin_add_overflow(a->shape[i], o->pad_low[i], &padded) ||
            __builtin_add_overflow(padded, o->pad_high[i], &padded) ||
            __builtin_mul_overflow(w - 1, d, &wd) || padded < 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: padding (%lld, %lld) of axis %d of %s gives a "
                            "negative or too large size",
                            name, (long long)o->pad_low[i],
                            (long long)o->pad_high[i], i, em__describe(a, &da));
        wd += 1;
        shape[i] = padded >= wd ? (padded - wd) / s + 1 : 0;
        p->window[i] = w;
        p->strides[i] = s;
        p->dil[i] = d;
        p->low[i] = o->pad_low[i];
    }
    return em__check_shape(name, shape, a->ndim, a->dtype, NULL);
}

em_status em_window_reduce(em_window_op op, em_array *a,
                           const em_window_options *opts, em_array **out) {
    if (out)
        *out = NULL;
    if (!a || !opts || !out)
        return em__fail(EM_ERR_ARGUMENT, "window_reduce: NULL argument");
    if ((int)op < 0 || (int)op > 3)
        return em__fail(EM_ERR_ARGUMENT, "window_reduce: unknown op %d",
                        (int)op);
    const char *name = op_name(op);
    em_desc da;
    if (win_fns[op][a->dtype] == NULL)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: dtype of %s is not supported (complex inputs "
                        "have no order)",
                        name, em__describe(a, &da));
    win_params p;
    memset(&p, 0, sizeof p);
    p.op = op;
    int64_t shape[EM_MAX_NDIM];
    em_status st = check_geometry(name, a, opts, true, &p, shape);
    if (st != EM_OK)
        return st;
    return em__node_new_params(&window_prim, a->dtype, shape, a->ndim, &a, 1,
                               &p, sizeof p, out);
}

/* ------------------------------------------------------------------------ */
/* Scatter                                                                   */
/* ------------------------------------------------------------------------ */

/* sel[o] = row-major input index of window o's selected element, or -1. */
#define DEFINE_SELECT(NAME, CMP, E, sfx, S, C, LOAD, STORE)                    \
    static void sel_##NAME##_##sfx(void *ctx, int64_t begin, int64_t end) {    \
        const win_job *j = ctx;                                                \
        const S *src = j->src;                                                 \
        const int n = j->ndim;                                                 \
        const int64_t inner_step = j->dil[n - 1] * j->in_strides[n - 1];       \
        const int64_t inner_flat = j->dil[n - 1] * j->in_rowstr[n - 1];        \
        int64_t idx[EM_MAX_NDIM], kmin[EM_MAX_NDIM], kmax[EM_MAX_NDIM],        \
            k[EM_MAX_NDIM];                                                    \
        unflatten(begin, j->out_shape, n, idx);                                \
        for (int64_t o = begin; o < end; o++) {                                \
            int64_t off, flat, sel = -1;                                       \
            if (window_box(j, idx, kmin, kmax, &off, &flat)) {                 \
                memcpy(k, kmin, sizeof k);                                     \
                const int64_t cnt = kmax[n - 1] - kmin[n - 1];                 \
                C cur = 0;                                                     \
                do {                                                           \
                    for (int64_t t = 0; t < cnt; t++) {                        \
                        C x = LOAD(src[off + t * inner_step]);                 \
                        if (sel < 0 || (CMP)) {                                \
                            cur = x;                                           \
                            sel = flat + t * inner_flat;                       \
                        }                                                      \
                    }                                                          \
                } while (next_box(j, k, kmin, kmax, &off, &flat));             \
            }                                                                  \
            j->sel[o] = sel;                                                   \
            next_index(idx, j->out_shape, n);                                  \
        }                                                                      \
    }
#define DEFINE_SEL_MAX(E, sfx, S, C, L, ST)                                    \
    DEFINE_SELECT(max, x >= cur, E, sfx, S, C, L, ST)
#define DEFINE_SEL_MIN(E, sfx, S, C, L, ST)                                    \
    DEFINE_SELECT(min, x <= cur, E, sfx, S, C, L, ST)
EM_DTYPES_REAL(DEFINE_SEL_MAX)
EM_DTYPES_REAL(DEFINE_SEL_MIN)
#define REG_SEL_MAX(E, sfx, ...) [E] = sel_max_##sfx,
#define REG_SEL_MIN(E, sfx, ...) [E] = sel_min_##sfx,
static const em_range_fn sel_fns[2][EM_DTYPE_COUNT] = {
    {EM_DTYPES_REAL(REG_SEL_MAX)},
    {EM_DTYPES_REAL(REG_SEL_MIN)},
};

/* out[sel[w]] += src[w] in window order (src row-major contiguous). */
typedef void (*scatter_add_fn)(void *out, const void *src, const int64_t *sel,
                               int64_t n);
#define DEFINE_SCATTER_ADD(E, sfx, S, C, LOAD, STORE)                          \
    static void scatter_add_##sfx(void *outp, const void *srcp,                \
                                  const int64_t *sel, int64_t n) {             \
        S *out = outp;                                                         \
        const S *src = srcp;                                                   \
        for (int64_t w = 0; w < n; w++) {                                      \
            if (sel[w] < 0)                                                    \
                continue;                                                      \
            WIN_WORK(C) acc = (WIN_WORK(C))LOAD(out[sel[w]]);                  \
            acc = acc + (WIN_WORK(C))LOAD(src[w]);                             \
            out[sel[w]] = STORE((C)acc);                                       \
        }                                                                      \
    }
EM_DTYPES_ALL(DEFINE_SCATTER_ADD)
#define REG_SCATTER_ADD(E, sfx, ...) [E] = scatter_add_##sfx,
static const scatter_add_fn scatter_add_fns[EM_DTYPE_COUNT] = {
    EM_DTYPES_ALL(REG_SCATTER_ADD)};

static em_status scatter_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const win_params *p = node->params;
    const em_array *a = node->inputs[0], *source = node->inputs[1],
                   *init = node->inputs[2];
    const size_t es = em_dtype_size(node->dtype);
    int64_t zeros[EM_MAX_NDIM] = {0};
    em__copy_strided(em__data(node), NULL, em__data(init), zeros, node->shape,
                     node->ndim, es);
    const int64_t nwin = source->size;
    if (nwin == 0)
        return EM_OK;
    int64_t *sel = malloc((size_t)nwin * sizeof *sel);
    if (!sel)
        return em__fail(EM_ERR_OOM,
                        "window_scatter: out of memory for %lld "
                        "window positions",
                        (long long)nwin);
    win_job j;
    job_init(&j, p, a, source->shape);
    j.src = em__data(a);
    j.sel = sel;
    int64_t vol = window_volume(&j);
    int64_t grain = EM_PARALLEL_GRAIN / (vol > 0 ? vol : 1);
    em__parallel_for(nwin, grain < 1 ? 1 : grain, sel_fns[p->op][a->dtype], &j);
    scatter_add_fns[node->dtype](em__data(node), em__data(source), sel, nwin);
    free(sel);
    return EM_OK;
}

static const em_prim scatter_prim = {"window_scatter", scatter_eval, NULL,
                                     em__gpu_window_scatter_eval};

em_status em_window_scatter(bool select_max, em_array *a, em_array *source,
                            em_array *init_value, const em_window_options *opts,
                            em_array **out) {
    if (out)
        *out = NULL;
    const char *name = select_max ? "window_scatter_max" : "window_scatter_min";
    if (!a || !source || !init_value || !opts || !out)
        return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", name);
    em_desc da, ds, di;
    if (em_dtype_is_complex(a->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: the tensor %s must have a real dtype", name,
                        em__describe(a, &da));
    if (init_value->dtype != source->dtype || init_value->size != 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: init value %s must hold one element of the dtype "
                        "of the source %s",
                        name, em__describe(init_value, &di),
                        em__describe(source, &ds));
    win_params p;
    memset(&p, 0, sizeof p);
    p.op = select_max ? 0 : 1;
    int64_t wshape[EM_MAX_NDIM];
    em_status st = check_geometry(name, a, opts, false, &p, wshape);
    if (st != EM_OK)
        return st;
    bool match = source->ndim == a->ndim;
    for (int i = 0; match && i < a->ndim; i++)
        match = source->shape[i] == wshape[i];
    if (!match) {
        em_desc dw;
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: source %s must have the window output shape %s "
                        "of %s",
                        name, em__describe(source, &ds),
                        em__describe_shape(wshape, a->ndim, &dw),
                        em__describe(a, &da));
    }
    st = em__check_shape(name, a->shape, a->ndim, source->dtype, NULL);
    if (st != EM_OK)
        return st;
    em_array *src_c = NULL;
    st = em_contiguous(source, &src_c);
    if (st != EM_OK)
        return st;
    em_array *inputs[3] = {a, src_c, init_value};
    st = em__node_new_params(&scatter_prim, source->dtype, a->shape, a->ndim,
                             inputs, 3, &p, sizeof p, out);
    em_array_release(src_c); /* the node holds its own reference */
    return st;
}
