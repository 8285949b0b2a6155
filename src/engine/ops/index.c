/*
 * index.c — gather, take, take_along_axis, indexed_add, indexed_put and
 * indices_in_range (Nx semantics).
 *
 * Index arrays may have any integer dtype (pred included). At eval time
 * every index is first widened to int64 (u64 values above INT64_MAX
 * saturate) and then CLAMPED into [0, dim - 1] of the axis it addresses:
 * an out-of-range index reads or writes the nearest edge element, never
 * memory outside the array. This matches XLA's gather/scatter clamping for
 * reads; callers that want an error check with em_indices_in_range first
 * (Emily's :debug_bounds_check). Build time rejects only what is known
 * statically: indexing an empty axis when elements would be read.
 *
 * Data moves are byte-size generic (the words of copy.c); only
 * indexed_add looks at values and is instantiated per dtype.
 */
#include "copy.h"
#include "params.h"

#include <stdlib.h>

typedef uint8_t __attribute__((may_alias)) em_word1;
typedef uint16_t __attribute__((may_alias)) em_word2;
typedef uint32_t __attribute__((may_alias)) em_word4;
typedef uint64_t __attribute__((may_alias)) em_word8;
typedef struct __attribute__((may_alias)) em_word16 {
    uint64_t lo, hi;
} em_word16;

#define EM_INDEX_WORDS(X) X(1) X(2) X(4) X(8) X(16)

static em_status null_argument(const char *op, em_array **out) {
    if (out)
        *out = NULL;
    return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", op);
}

static em_status check_index_dtype(const char *op, const em_array *indices) {
    if (em_dtype_is_integer(indices->dtype))
        return EM_OK;
    em_desc d;
    return em__fail(EM_ERR_ARGUMENT,
                    "%s: indices %s must have an integer dtype", op,
                    em__describe(indices, &d));
}

static int64_t shape_product(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* ---- loading indices ---------------------------------------------------- */

static inline int64_t index_from_s64(int64_t v) { return v; }
static inline int64_t index_from_u64(uint64_t v) {
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}
#define EM_TO_INDEX(v)                                                         \
    _Generic((v), uint64_t : index_from_u64, default : index_from_s64)(v)

typedef struct widen_job {
    const void *raw; /* row-major elements of the index dtype */
    int64_t *out;
} widen_job;

#define EM_DEFINE_WIDEN(ENUM, sfx, T, CT, LOAD, STORE)                         \
    static void widen_##sfx(void *ctx, int64_t begin, int64_t end) {           \
        const widen_job *job = ctx;                                            \
        const T *raw = job->raw;                                               \
        for (int64_t i = begin; i < end; i++)                                  \
            job->out[i] = EM_TO_INDEX(raw[i]);                                 \
    }
EM_DTYPES_INT(EM_DEFINE_WIDEN)
#undef EM_DEFINE_WIDEN

/* `indices` read with the given layout (its own, or a broadcast of it) as
 * n int64 values in row-major order. Returns NULL when out of memory. The
 * buffer has room for at least `min_slots` entries. */
static int64_t *load_indices(const em_array *indices, int ndim,
                             const int64_t *shape, const int64_t *strides,
                             int64_t n, int64_t min_slots) {
    int64_t slots = n > min_slots ? n : min_slots;
    int64_t *buf = malloc((size_t)(slots > 0 ? slots : 1) * sizeof(int64_t));
    if (!buf || n == 0)
        return buf;
    size_t es = em_dtype_size(indices->dtype);
    widen_job job = {em__data(indices), buf};
    void *packed = NULL;
    if (!em__is_row_contiguous(shape, strides, ndim)) {
        /* Strided or broadcast: pack the raw elements first. */
        packed = malloc((size_t)n * es);
        if (!packed) {
            free(buf);
            return NULL;
        }
        em__copy_strided(packed, NULL, job.raw, strides, shape, ndim, es);
        job.raw = packed;
    }
    em_range_fn fn = NULL;
    switch (indices->dtype) {
#define EM_CASE(ENUM, sfx, T, CT, LOAD, STORE)                                 \
    case ENUM:                                                                 \
        fn = widen_##sfx;                                                      \
        break;
        EM_DTYPES_INT(EM_CASE)
#undef EM_CASE
    default:
        break;
    }
    if (fn)
        em__parallel_for(n, EM_PARALLEL_GRAIN, fn, &job);
    free(packed);
    return buf;
}

static inline int64_t clamp_index(int64_t i, int64_t dim) {
    return i < 0 ? 0 : i >= dim ? dim - 1 : i;
}

static em_status out_of_memory(const char *op) {
    return em__fail(EM_ERR_OOM, "%s: out of memory for the index buffer", op);
}

/* ---- the row gather kernel ---------------------------------------------- */

/*
 * The output of gather and take is laid out as [outer..., rows, inner...]:
 * output row q = (o, r) is a copy of the block of `a` that starts at
 * outer_offset(o) + row_offsets[r] and has the inner shape (a's strides).
 * gather has no outer axes; take has a's axes before `axis`;
 * take_along_axis uses one row per element.
 */
typedef struct rows_job {
    char *dst;
    const char *src; /* em__data(a) */
    size_t elem_size;
    int64_t nrows;
    const int64_t *row_offsets;
    int outer_ndim; /* collapsed; 0 when there are no outer axes */
    int64_t outer_shape[EM_MAX_NDIM];
    int64_t outer_strides[EM_MAX_NDIM];
    em_copy_plan inner;
} rows_job;

static int64_t outer_offset(const rows_job *job, int64_t o) {
    int64_t off = 0;
    for (int i = job->outer_ndim - 1; i >= 0; i--) {
        off += (o % job->outer_shape[i]) * job->outer_strides[i];
        o /= job->outer_shape[i];
    }
    return off;
}

/* Single-element rows: a plain indexed load per output element. */
#define EM_DEFINE_GATHER_ELEMENTS(BYTES)                                       \
    static void gather_elements_##BYTES(void *ctx, int64_t begin,              \
                                        int64_t end) {                         \
        const rows_job *job = ctx;                                             \
        em_word##BYTES *dst = (em_word##BYTES *)job->dst;                      \
        const em_word##BYTES *src = (const em_word##BYTES *)job->src;          \
        const int64_t *offs = job->row_offsets;                                \
        if (job->outer_ndim == 0) {                                            \
            for (int64_t q = begin; q < end; q++)                              \
                dst[q] = src[offs[q]];                                         \
            return;                                                            \
        }                                                                      \
        int64_t o = begin / job->nrows, r = begin % job->nrows;                \
        const em_word##BYTES *base = src + outer_offset(job, o);               \
        for (int64_t q = begin; q < end; q++) {                                \
            dst[q] = base[offs[r]];                                            \
            if (++r == job->nrows) {                                           \
                r = 0;                                                         \
                base = src + outer_offset(job, ++o);                           \
            }                                                                  \
        }                                                                      \
    }
EM_INDEX_WORDS(EM_DEFINE_GATHER_ELEMENTS)
#undef EM_DEFINE_GATHER_ELEMENTS

/* Rows of several elements: each (part of a) row is a strided block copy.
 * The range is in output elements so one huge row still spreads across
 * threads. */
static void gather_rows_range(void *ctx, int64_t begin, int64_t end) {
    const rows_job *job = ctx;
    const int64_t inner = job->inner.size;
    const int64_t es = (int64_t)job->elem_size;
    while (begin < end) {
        int64_t q = begin / inner, within = begin - q * inner;
        int64_t stop = (q + 1) * inner < end ? (q + 1) * inner : end;
        int64_t o = q / job->nrows, r = q - o * job->nrows;
        int64_t src_off = job->row_offsets[r] + outer_offset(job, o);
        em__copy_plan_range(&job->inner, job->dst + q * inner * es,
                            job->src + src_off * es, within,
                            within + (stop - begin));
        begin = stop;
    }
}

/* Fill node (already allocated) from the job; outer/rows/inner set. */
static void run_rows_job(rows_job *job, int64_t total) {
    if (job->inner.size == 1) {
        em_range_fn fn = NULL;
        switch (job->elem_size) {
#define EM_CASE(BYTES)                                                         \
    case BYTES:                                                                \
        fn = gather_elements_##BYTES;                                          \
        break;
            EM_INDEX_WORDS(EM_CASE)
#undef EM_CASE
        default:
            return;
        }
        em__parallel_for(total, EM_PARALLEL_GRAIN, fn, job);
    } else {
        em__parallel_for(total, EM_PARALLEL_GRAIN, gather_rows_range, job);
    }
}

/* Describe a's axes selected by `keep` (bit i = axis i) as an inner block
 * plan whose destination is row-major. */
static void inner_plan(rows_job *job, const em_array *a, unsigned keep) {
    int64_t shape[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    int n = 0;
    for (int i = 0; i < a->ndim; i++)
        if (keep & (1u << i)) {
            shape[n] = a->shape[i];
            strides[n] = a->strides[i];
            n++;
        }
    em__copy_plan_init(&job->inner, em_dtype_size(a->dtype), n, shape, NULL,
                       strides);
}

/* ---- gather ------------------------------------------------------------- */

/* Normalise the axes that the last dimension of `indices` addresses:
 * naxes == 0 means the leading k axes. Order matters (entry j of an index
 * row addresses axes[j]), so the list is kept, not turned into a mask. */
static em_status index_axes(const char *op, const em_array *a,
                            const em_array *indices, const int *axes, int naxes,
                            int *out_axes, unsigned *mask_out) {
    em_desc da, di;
    if (indices->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: indices %s must have rank >= 1 (the last "
                        "dimension addresses the axes)",
                        op, em__describe(indices, &di));
    int64_t k = indices->shape[indices->ndim - 1];
    if (k > a->ndim || (naxes > 0 && naxes != k) || naxes < 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: indices %s address %lld axes but %s has rank %d "
                        "and %d axes were given",
                        op, em__describe(indices, &di), (long long)k,
                        em__describe(a, &da), a->ndim, naxes);
    unsigned mask = 0;
    for (int j = 0; j < (int)k; j++) {
        int ax = j;
        if (naxes > 0) {
            em_status st = em__check_axis(op, axes[j], a->ndim, &ax);
            if (st != EM_OK)
                return st;
        }
        if (mask & (1u << ax))
            return em__fail(EM_ERR_ARGUMENT, "%s: axis %d is repeated", op,
                            axes[j]);
        mask |= 1u << ax;
        out_axes[j] = ax;
    }
    *mask_out = mask;
    return EM_OK;
}

/* Reading (or writing) through an empty axis is impossible; say so at build
 * time when elements would actually move. */
static em_status check_not_empty_axes(const char *op, const em_array *a,
                                      unsigned mask, int64_t elements) {
    if (elements == 0)
        return EM_OK;
    for (int i = 0; i < a->ndim; i++)
        if ((mask & (1u << i)) && a->shape[i] == 0) {
            em_desc d;
            return em__fail(EM_ERR_ARGUMENT,
                            "%s: cannot index axis %d of %s: it is empty", op,
                            i, em__describe(a, &d));
        }
    return EM_OK;
}

static em_status gather_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const gather_params *p = node->params;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    const int k = p->naxes;
    const int64_t rows = shape_product(idx->shape, idx->ndim - 1);
    int64_t *offsets =
        load_indices(idx, idx->ndim, idx->shape, idx->strides, idx->size, rows);
    if (!offsets)
        return out_of_memory("gather");
    /* Row r's index entries r*k .. r*k+k-1 become its element offset,
     * written in place at slot r (never ahead of what is still unread). */
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int j = 0; j < k; j++) {
            int ax = p->axes[j];
            off +=
                clamp_index(offsets[r * k + j], a->shape[ax]) * a->strides[ax];
        }
        offsets[r] = off;
    }
    unsigned mask = 0;
    for (int j = 0; j < k; j++)
        mask |= 1u << p->axes[j];
    rows_job job = {0};
    job.dst = em__data(node);
    job.src = em__data(a);
    job.elem_size = em_dtype_size(a->dtype);
    job.nrows = rows;
    job.row_offsets = offsets;
    inner_plan(&job, a, ~mask & ((1u << a->ndim) - 1));
    run_rows_job(&job, node->size);
    free(offsets);
    return EM_OK;
}

static const em_prim gather_prim = {"gather", gather_eval, em__vjp_gather,
                                    em__gpu_gather_eval};

em_status em_gather(em_array *a, em_array *indices, const int *axes, int naxes,
                    em_array **out) {
    if (!a || !indices || !out || (naxes > 0 && !axes))
        return null_argument("gather", out);
    *out = NULL;
    em_status st = check_index_dtype("gather", indices);
    if (st != EM_OK)
        return st;
    gather_params p = {0};
    unsigned mask;
    st = index_axes("gather", a, indices, axes, naxes, p.axes, &mask);
    if (st != EM_OK)
        return st;
    p.naxes = (int)indices->shape[indices->ndim - 1];
    int64_t shape[2 * EM_MAX_NDIM];
    int n = 0;
    for (int i = 0; i < indices->ndim - 1; i++)
        shape[n++] = indices->shape[i];
    for (int i = 0; i < a->ndim; i++)
        if (!(mask & (1u << i)))
            shape[n++] = a->shape[i];
    em_desc da, di;
    if (n > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "gather: the result of gathering %s from %s would have "
                        "rank %d (max %d)",
                        em__describe(indices, &di), em__describe(a, &da), n,
                        EM_MAX_NDIM);
    int64_t size;
    st = em__check_shape("gather", shape, n, a->dtype, &size);
    if (st == EM_OK)
        st = check_not_empty_axes("gather", a, mask, size);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {a, indices};
    return em__node_new_params(&gather_prim, a->dtype, shape, n, inputs, 2, &p,
                               sizeof p, out);
}

/* ---- take --------------------------------------------------------------- */

static em_status take_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const int axis = ((const axis_params *)node->params)->axis;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    int64_t *offsets =
        load_indices(idx, idx->ndim, idx->shape, idx->strides, idx->size, 1);
    if (!offsets)
        return out_of_memory("take");
    for (int64_t r = 0; r < idx->size; r++)
        offsets[r] = clamp_index(offsets[r], a->shape[axis]) * a->strides[axis];
    rows_job job = {0};
    job.dst = em__data(node);
    job.src = em__data(a);
    job.elem_size = em_dtype_size(a->dtype);
    job.nrows = idx->size;
    job.row_offsets = offsets;
    const int64_t *outer_strides[1] = {a->strides};
    job.outer_ndim = em__collapse(axis, a->shape, 1, outer_strides,
                                  job.outer_shape, &job.outer_strides);
    unsigned after = ((1u << a->ndim) - 1) & ~((1u << (axis + 1)) - 1);
    inner_plan(&job, a, after);
    run_rows_job(&job, node->size);
    free(offsets);
    return EM_OK;
}

static const em_prim take_prim = {"take", take_eval, em__vjp_take,
                                  em__gpu_take_eval};

em_status em_take(em_array *a, em_array *indices, int axis, em_array **out) {
    if (!a || !indices || !out)
        return null_argument("take", out);
    *out = NULL;
    em_status st = check_index_dtype("take", indices);
    if (st != EM_OK)
        return st;
    axis_params p;
    st = em__check_axis("take", axis, a->ndim, &p.axis);
    if (st != EM_OK)
        return st;
    int64_t shape[2 * EM_MAX_NDIM];
    int n = 0;
    for (int i = 0; i < p.axis; i++)
        shape[n++] = a->shape[i];
    for (int i = 0; i < indices->ndim; i++)
        shape[n++] = indices->shape[i];
    for (int i = p.axis + 1; i < a->ndim; i++)
        shape[n++] = a->shape[i];
    em_desc da, di;
    if (n > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "take: taking %s from %s along axis %d gives rank %d "
                        "(max %d)",
                        em__describe(indices, &di), em__describe(a, &da),
                        p.axis, n, EM_MAX_NDIM);
    int64_t size;
    st = em__check_shape("take", shape, n, a->dtype, &size);
    if (st == EM_OK)
        st = check_not_empty_axes("take", a, 1u << p.axis, size);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {a, indices};
    return em__node_new_params(&take_prim, a->dtype, shape, n, inputs, 2, &p,
                               sizeof p, out);
}

/* ---- take_along_axis ---------------------------------------------------- */

/* Add to out[p] the offset of p's multi-index under `strides`, for p in
 * [begin, end) in row-major order of shape. */
static void add_walk_offsets(int64_t *out, int ndim, const int64_t *shape,
                             const int64_t *strides, int64_t begin,
                             int64_t end) {
    int64_t idx[EM_MAX_NDIM] = {0};
    int64_t off = 0, rest = begin;
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = rest % shape[i];
        rest /= shape[i];
        off += idx[i] * strides[i];
    }
    for (int64_t p = begin; p < end; p++) {
        out[p] += off;
        for (int i = ndim - 1; i >= 0; i--) {
            off += strides[i];
            if (++idx[i] < shape[i])
                break;
            off -= idx[i] * strides[i];
            idx[i] = 0;
        }
    }
}

/* take_along_axis: index value -> element offset of a, in parallel. */
typedef struct along_job {
    int64_t *offsets;
    int ndim;
    const int64_t *shape;
    const int64_t *a_strides; /* 0 on the indexed and broadcast axes */
    int64_t dim, stride;      /* the indexed axis of a */
} along_job;

static void along_offsets_range(void *ctx, int64_t begin, int64_t end) {
    const along_job *job = ctx;
    for (int64_t q = begin; q < end; q++)
        job->offsets[q] = clamp_index(job->offsets[q], job->dim) * job->stride;
    add_walk_offsets(job->offsets, job->ndim, job->shape, job->a_strides, begin,
                     end);
}

static em_status take_along_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const int axis = ((const axis_params *)node->params)->axis;
    const em_array *a = node->inputs[0], *idx = node->inputs[1];
    const int nd = node->ndim;
    /* Both a and the indices are read broadcast to the output shape; a's
     * indexed axis contributes through the index, not its position. */
    int64_t idx_strides[EM_MAX_NDIM], a_strides[EM_MAX_NDIM];
    for (int i = 0; i < nd; i++) {
        idx_strides[i] = idx->shape[i] == node->shape[i] ? idx->strides[i] : 0;
        a_strides[i] =
            i == axis || a->shape[i] != node->shape[i] ? 0 : a->strides[i];
    }
    int64_t *offsets =
        load_indices(idx, nd, node->shape, idx_strides, node->size, 1);
    if (!offsets)
        return out_of_memory("take_along_axis");
    along_job along = {
        offsets, nd, node->shape, a_strides, a->shape[axis], a->strides[axis]};
    em__parallel_for(node->size, EM_PARALLEL_GRAIN, along_offsets_range,
                     &along);
    rows_job job = {0};
    job.dst = em__data(node);
    job.src = em__data(a);
    job.elem_size = em_dtype_size(a->dtype);
    job.nrows = node->size;
    job.row_offsets = offsets;
    em__copy_plan_init(&job.inner, job.elem_size, 0, NULL, NULL, NULL);
    run_rows_job(&job, node->size);
    free(offsets);
    return EM_OK;
}

static const em_prim take_along_prim = {"take_along_axis", take_along_eval,
                                        em__vjp_take_along,
                                        em__gpu_take_along_eval};

em_status em_take_along_axis(em_array *a, em_array *indices, int axis,
                             em_array **out) {
    if (!a || !indices || !out)
        return null_argument("take_along_axis", out);
    *out = NULL;
    em_status st = check_index_dtype("take_along_axis", indices);
    if (st != EM_OK)
        return st;
    axis_params p;
    st = em__check_axis("take_along_axis", axis, a->ndim, &p.axis);
    if (st != EM_OK)
        return st;
    em_desc da, di;
    if (indices->ndim != a->ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "take_along_axis: indices %s must have the rank of %s",
                        em__describe(indices, &di), em__describe(a, &da));
    int64_t shape[EM_MAX_NDIM];
    for (int i = 0; i < a->ndim; i++) {
        int64_t da_ = a->shape[i], di_ = indices->shape[i];
        if (i == p.axis)
            shape[i] = di_;
        else if (da_ == di_ || di_ == 1)
            shape[i] = da_;
        else if (da_ == 1)
            shape[i] = di_;
        else
            return em__fail(EM_ERR_ARGUMENT,
                            "take_along_axis: indices %s do not broadcast with "
                            "%s on axis %d (expected equal sizes or 1)",
                            em__describe(indices, &di), em__describe(a, &da),
                            i);
    }
    int64_t size;
    st = em__check_shape("take_along_axis", shape, a->ndim, a->dtype, &size);
    if (st == EM_OK)
        st = check_not_empty_axes("take_along_axis", a, 1u << p.axis, size);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {a, indices};
    return em__node_new_params(&take_along_prim, a->dtype, shape, a->ndim,
                               inputs, 2, &p, sizeof p, out);
}

/* ---- indexed_add / indexed_put ------------------------------------------ */

/*
 * The output is a row-major copy of `a` (a's own buffer when it can be
 * donated). Index row r addresses a target element offset; updates row r
 * (a block of the "rest" shape: a without the indexed axes) is combined
 * into the output at target + rest_offset(i). Rows are applied in order,
 * so duplicates accumulate (add) and the last one wins (put). Different
 * rest positions i never touch the same element, so threads split the rest
 * positions and each walks all rows in order.
 */
typedef struct scatter_job {
    void *dst;
    const void *updates; /* row-major, rows x inner */
    const int64_t *targets;
    int64_t rows, inner;
    const int64_t *rest_offsets; /* NULL: rest_offset(i) = i * rest_stride */
    int64_t rest_stride;
} scatter_job;

#define EM_SCATTER_BODY(T, COMBINE)                                            \
    const scatter_job *job = ctx;                                              \
    T *dst = job->dst;                                                         \
    const T *updates = job->updates;                                           \
    for (int64_t r = 0; r < job->rows; r++) {                                  \
        T *target = dst + job->targets[r];                                     \
        const T *row = updates + r * job->inner;                               \
        if (job->rest_offsets) {                                               \
            for (int64_t i = begin; i < end; i++)                              \
                COMBINE(&target[job->rest_offsets[i]], row[i]);                \
        } else {                                                               \
            for (int64_t i = begin; i < end; i++)                              \
                COMBINE(&target[i * job->rest_stride], row[i]);                \
        }                                                                      \
    }

#define EM_DEFINE_PUT(BYTES)                                                   \
    static inline void put_word_##BYTES(em_word##BYTES *d, em_word##BYTES v) { \
        *d = v;                                                                \
    }                                                                          \
    static void scatter_put_##BYTES(void *ctx, int64_t begin, int64_t end) {   \
        EM_SCATTER_BODY(em_word##BYTES, put_word_##BYTES)                      \
    }
EM_INDEX_WORDS(EM_DEFINE_PUT)
#undef EM_DEFINE_PUT

/* Integer sums wrap (computed in the unsigned type); f16/bf16 add in float
 * and round once per update. */
#define EM_DEFINE_ADD(ENUM, sfx, T, CT, LOAD, STORE)                           \
    static inline void add_elem_##sfx(T *d, T v) {                             \
        typedef EM_UNSIGNED_OF(CT) wrap_t;                                     \
        *d = STORE((CT)((wrap_t)LOAD(*d) + (wrap_t)LOAD(v)));                  \
    }                                                                          \
    static void scatter_add_##sfx(void *ctx, int64_t begin, int64_t end) {     \
        EM_SCATTER_BODY(T, add_elem_##sfx)                                     \
    }
EM_DTYPES_ALL(EM_DEFINE_ADD)
#undef EM_DEFINE_ADD

static em_status scatter_eval(em_array *node) {
    em_array *a = node->inputs[0];
    const em_array *idx = node->inputs[1], *upd = node->inputs[2];
    const scatter_params *p = node->params;
    const char *op = p->add ? "indexed_add" : "indexed_put";
    em_buffer *a_buffer = a->buffer;
    /* The core donates only a buffer nothing else references, so indices
     * or updates that alias a's buffer are never overwritten. */
    em_status st = em__alloc_output(node, &a, 1);
    if (st != EM_OK || node->size == 0)
        return st;
    if (node->buffer != a_buffer)
        em__copy_array(em__data(node), a);
    const int k = p->naxes;
    const int64_t rows = shape_product(idx->shape, idx->ndim - 1);
    const int64_t inner = upd->size / (rows > 0 ? rows : 1);
    if (rows == 0 || upd->size == 0)
        return EM_OK;

    int64_t *targets =
        load_indices(idx, idx->ndim, idx->shape, idx->strides, idx->size, rows);
    const void *updates = em__data(upd);
    void *updates_copy = NULL;
    int64_t *rest_offsets = NULL;
    if (!targets)
        return out_of_memory(op);
    for (int64_t r = 0; r < rows; r++) { /* in place, as in gather */
        int64_t off = 0;
        for (int j = 0; j < k; j++) {
            int ax = p->axes[j];
            off += clamp_index(targets[r * k + j], node->shape[ax]) *
                   node->strides[ax];
        }
        targets[r] = off;
    }
    if (!upd->row_contiguous) {
        updates_copy = malloc(em_array_nbytes(upd));
        if (!updates_copy) {
            free(targets);
            return out_of_memory(op);
        }
        em__copy_array(updates_copy, upd);
        updates = updates_copy;
    }
    /* Where rest position i lands relative to a row's target. */
    unsigned indexed = 0;
    for (int j = 0; j < k; j++)
        indexed |= 1u << p->axes[j];
    int64_t rest_shape[EM_MAX_NDIM], rest_strides[EM_MAX_NDIM];
    int nrest = 0;
    for (int i = 0; i < node->ndim; i++)
        if (!(indexed & (1u << i))) {
            rest_shape[nrest] = node->shape[i];
            rest_strides[nrest] = node->strides[i];
            nrest++;
        }
    int64_t cshape[EM_MAX_NDIM], cstrides[1][EM_MAX_NDIM];
    const int64_t *strides_in[1] = {rest_strides};
    int nc = em__collapse(nrest, rest_shape, 1, strides_in, cshape, cstrides);
    scatter_job job = {em__data(node),
                       updates,
                       targets,
                       rows,
                       inner,
                       NULL,
                       nc == 1 ? cstrides[0][0] : 0};
    if (nc > 1) {
        rest_offsets = calloc((size_t)inner, sizeof(int64_t));
        if (!rest_offsets) {
            free(targets);
            free(updates_copy);
            return out_of_memory(op);
        }
        add_walk_offsets(rest_offsets, nc, cshape, cstrides[0], 0, inner);
        job.rest_offsets = rest_offsets;
    }
    em_range_fn fn = NULL;
    if (p->add) {
        switch (node->dtype) {
#define EM_CASE(ENUM, sfx, T, CT, LOAD, STORE)                                 \
    case ENUM:                                                                 \
        fn = scatter_add_##sfx;                                                \
        break;
            EM_DTYPES_ALL(EM_CASE)
#undef EM_CASE
        default:
            break;
        }
    } else {
        switch (em_dtype_size(node->dtype)) {
#define EM_CASE(BYTES)                                                         \
    case BYTES:                                                                \
        fn = scatter_put_##BYTES;                                              \
        break;
            EM_INDEX_WORDS(EM_CASE)
#undef EM_CASE
        default:
            break;
        }
    }
    if (fn) {
        /* A chunk of rest positions costs `rows` element updates each. */
        int64_t grain = EM_PARALLEL_GRAIN / rows + 1;
        em__parallel_for(inner, grain, fn, &job);
    }
    free(rest_offsets);
    free(updates_copy);
    free(targets);
    return fn ? EM_OK : em__fail(EM_ERR_RUNTIME, "%s: unknown dtype", op);
}

static const em_prim indexed_add_prim = {"indexed_add", scatter_eval,
                                         em__vjp_indexed, em__gpu_scatter_eval};
static const em_prim indexed_put_prim = {"indexed_put", scatter_eval,
                                         em__vjp_indexed, em__gpu_scatter_eval};

static em_status indexed_update(const char *op, const em_prim *prim, bool add,
                                em_array *a, em_array *indices,
                                em_array *updates, const int *axes, int naxes,
                                em_array **out) {
    if (!a || !indices || !updates || !out || (naxes > 0 && !axes))
        return null_argument(op, out);
    *out = NULL;
    em_status st = check_index_dtype(op, indices);
    if (st != EM_OK)
        return st;
    scatter_params p = {0};
    p.add = add;
    unsigned mask;
    st = index_axes(op, a, indices, axes, naxes, p.axes, &mask);
    if (st != EM_OK)
        return st;
    p.naxes = (int)indices->shape[indices->ndim - 1];
    em_desc da, du;
    if (updates->dtype != a->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: updates %s must have the dtype of %s", op,
                        em__describe(updates, &du), em__describe(a, &da));
    /* updates: indices.shape[:-1] ++ (a's shape without the indexed axes) */
    int64_t want[2 * EM_MAX_NDIM];
    int n = 0;
    for (int i = 0; i < indices->ndim - 1; i++)
        want[n++] = indices->shape[i];
    for (int i = 0; i < a->ndim; i++)
        if (!(mask & (1u << i)))
            want[n++] = a->shape[i];
    bool ok = n == updates->ndim;
    for (int i = 0; ok && i < n; i++)
        ok = want[i] == updates->shape[i];
    if (!ok) {
        em_desc di, dw;
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: updates %s do not match indices %s into %s "
                        "(expected updates of shape %s)",
                        op, em__describe(updates, &du),
                        em__describe(indices, &di), em__describe(a, &da),
                        n <= EM_MAX_NDIM ? em__describe_shape(want, n, &dw)
                                         : "(rank > 8)");
    }
    st = check_not_empty_axes(op, a, mask, updates->size);
    if (st != EM_OK)
        return st;
    em_array *inputs[3] = {a, indices, updates};
    return em__node_new_params(prim, a->dtype, a->shape, a->ndim, inputs, 3, &p,
                               sizeof p, out);
}

em_status em_indexed_add(em_array *a, em_array *indices, em_array *updates,
                         const int *axes, int naxes, em_array **out) {
    return indexed_update("indexed_add", &indexed_add_prim, true, a, indices,
                          updates, axes, naxes, out);
}

em_status em_indexed_put(em_array *a, em_array *indices, em_array *updates,
                         const int *axes, int naxes, em_array **out) {
    return indexed_update("indexed_put", &indexed_put_prim, false, a, indices,
                          updates, axes, naxes, out);
}

/* ---- indices_in_range --------------------------------------------------- */

typedef struct in_range_params {
    int64_t bound;
} in_range_params;

static em_status in_range_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    const em_array *idx = node->inputs[0];
    const int64_t bound = ((const in_range_params *)node->params)->bound;
    uint8_t all = 1;
    if (idx->size > 0) {
        /* Widened values keep their order (u64 saturates above any bound). */
        int64_t *values = load_indices(idx, idx->ndim, idx->shape, idx->strides,
                                       idx->size, 1);
        if (!values)
            return out_of_memory("indices_in_range");
        for (int64_t i = 0; i < idx->size && all; i++)
            all = values[i] >= 0 && values[i] < bound;
        free(values);
    }
    *(uint8_t *)em__data(node) = all;
    return EM_OK;
}

static const em_prim in_range_prim = {"indices_in_range", in_range_eval, NULL};

/* On a GPU: all(0 <= w && w < bound) over the indices widened to s64, from
 * ops that run there. A u64 index above INT64_MAX wraps negative where the
 * CPU eval saturates it: out of range either way. */
static em_status in_range_composed(em_array *indices, int64_t bound,
                                   em_array **out) {
    em_array *w = NULL, *zero = NULL, *hi = NULL, *ge = NULL, *lt = NULL,
             *both = NULL;
    em_status st = em_as_type(indices, EM_S64, &w);
    if (st == EM_OK)
        st = em_scalar_s64(0, EM_S64, &zero);
    if (st == EM_OK)
        st = em_scalar_s64(bound, EM_S64, &hi);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_greater_equal, w, zero, &ge);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_less, w, hi, &lt);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_logical_and, ge, lt, &both);
    if (st == EM_OK) {
        int axes[EM_MAX_NDIM];
        for (int i = 0; i < both->ndim; i++)
            axes[i] = i;
        st = em_reduce(EM_REDUCE_all, both, axes, both->ndim, false, out);
    }
    em_array *tmp[6] = {w, zero, hi, ge, lt, both};
    for (int i = 0; i < 6; i++)
        em_array_release(tmp[i]);
    return st;
}

em_status em_indices_in_range(em_array *indices, int64_t bound,
                              em_array **out) {
    if (!indices || !out)
        return null_argument("indices_in_range", out);
    *out = NULL;
    em_status st = check_index_dtype("indices_in_range", indices);
    if (st != EM_OK)
        return st;
    if (indices->device != EM_DEVICE_CPU)
        return in_range_composed(indices, bound, out);
    in_range_params p = {bound};
    return em__node_new_params(&in_range_prim, EM_PRED, NULL, 0, &indices, 1,
                               &p, sizeof p, out);
}
