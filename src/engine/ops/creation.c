/* creation.c — arrays made from a shape: iota, eye, full. */
#include "copy.h"
#include "params.h"

static em_status null_argument(const char *op, em_array **out) {
    if (out)
        *out = NULL;
    return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", op);
}

/* An integer count converted to a dtype's compute type. Integers wrap like
 * any conversion; pred is 1 for every nonzero count. */
#define EM_COUNT_TO(ENUM, CT, i) ((ENUM) == EM_PRED ? (CT)((i) != 0) : (CT)(i))

/* ---- iota --------------------------------------------------------------- */

typedef struct iota_job {
    void *dst;
    int64_t dim;   /* size of the counting axis */
    int64_t inner; /* elements after it (one count repeats this often) */
} iota_job;

/* Output element f holds (f / inner) % dim. */
#define EM_DEFINE_IOTA(ENUM, sfx, T, CT, LOAD, STORE)                          \
    static void iota_range_##sfx(void *ctx, int64_t begin, int64_t end) {      \
        const iota_job *job = ctx;                                             \
        T *dst = job->dst;                                                     \
        int64_t run_start = begin;                                             \
        while (run_start < end) {                                              \
            int64_t run = run_start / job->inner;                              \
            int64_t run_end = (run + 1) * job->inner;                          \
            if (run_end > end)                                                 \
                run_end = end;                                                 \
            const T v = STORE(EM_COUNT_TO(ENUM, CT, run % job->dim));          \
            for (int64_t f = run_start; f < run_end; f++)                      \
                dst[f] = v;                                                    \
            run_start = run_end;                                               \
        }                                                                      \
    }
EM_DTYPES_ALL(EM_DEFINE_IOTA)
#undef EM_DEFINE_IOTA

static em_status iota_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const iota_params *p = node->params;
    iota_job job = {em__data(node), node->shape[p->axis],
                    node->strides[p->axis]};
    em_range_fn fn = NULL;
    switch (node->dtype) {
#define EM_CASE(ENUM, sfx, T, CT, LOAD, STORE)                                 \
    case ENUM:                                                                 \
        fn = iota_range_##sfx;                                                 \
        break;
        EM_DTYPES_ALL(EM_CASE)
#undef EM_CASE
    default:
        return em__fail(EM_ERR_RUNTIME, "iota: unknown dtype");
    }
    em__parallel_for(node->size, EM_PARALLEL_GRAIN, fn, &job);
    return EM_OK;
}

static const em_prim iota_prim = {"iota", iota_eval, NULL, em__gpu_iota_eval};

em_status em_iota(const int64_t *shape, int ndim, int axis, em_dtype dtype,
                  em_array **out) {
    if (!out)
        return null_argument("iota", out);
    *out = NULL;
    em_status st = em__check_shape("iota", shape, ndim, dtype, NULL);
    if (st != EM_OK)
        return st;
    iota_params p;
    st = em__check_axis("iota", axis, ndim, &p.axis);
    if (st != EM_OK)
        return st;
    return em__node_new_params(&iota_prim, dtype, shape, ndim, NULL, 0, &p,
                               sizeof p, out);
}

/* ---- eye ---------------------------------------------------------------- */

typedef struct eye_params {
    int64_t k;
} eye_params;

typedef struct eye_job {
    char *dst;
    size_t elem_size;
    int64_t rows, cols, k;
    unsigned char one[16]; /* the dtype's 1, as stored */
} eye_job;

/* Each matrix row (over all batches) is zeroed, then gets its 1 if the
 * diagonal crosses it. All-zero bytes are 0 in every dtype. */
static void eye_range(void *ctx, int64_t begin, int64_t end) {
    const eye_job *job = ctx;
    size_t row_bytes = (size_t)job->cols * job->elem_size;
    for (int64_t r = begin; r < end; r++) {
        char *row = job->dst + (size_t)r * row_bytes;
        memset(row, 0, row_bytes);
        int64_t i = r % job->rows;
        /* Compare before adding: k may be near INT64's limits. */
        if (job->k >= -i && job->k < job->cols - i)
            memcpy(row + (size_t)(i + job->k) * job->elem_size, job->one,
                   job->elem_size);
    }
}

static void store_one(em_dtype dtype, unsigned char *bytes) {
    switch (dtype) {
#define EM_CASE(ENUM, sfx, T, CT, LOAD, STORE)                                 \
    case ENUM: {                                                               \
        const T v = STORE((CT)1);                                              \
        memcpy(bytes, &v, sizeof v);                                           \
        break;                                                                 \
    }
        EM_DTYPES_ALL(EM_CASE)
#undef EM_CASE
    default:
        break;
    }
}

static em_status eye_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const eye_params *p = node->params;
    eye_job job;
    job.dst = em__data(node);
    job.elem_size = em_dtype_size(node->dtype);
    job.rows = node->shape[node->ndim - 2];
    job.cols = node->shape[node->ndim - 1];
    job.k = p->k;
    store_one(node->dtype, job.one);
    int64_t grain = EM_PARALLEL_GRAIN / job.cols + 1;
    em__parallel_for(node->size / job.cols, grain, eye_range, &job);
    return EM_OK;
}

static em_status eye_gpu_eval(em_array *node) {
    unsigned char one[16] = {0};
    store_one(node->dtype, one);
    return em__gpu_eye_eval_with(node, ((const eye_params *)node->params)->k,
                                 one);
}

static const em_prim eye_prim = {"eye", eye_eval, NULL, eye_gpu_eval};

em_status em_eye(const int64_t *shape, int ndim, int64_t k, em_dtype dtype,
                 em_array **out) {
    if (!out)
        return null_argument("eye", out);
    *out = NULL;
    em_status st = em__check_shape("eye", shape, ndim, dtype, NULL);
    if (st != EM_OK)
        return st;
    if (ndim < 2) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT,
                        "eye: shape %s has rank %d, expected rank >= 2",
                        em__describe_shape(shape, ndim, &d), ndim);
    }
    eye_params p = {k};
    return em__node_new_params(&eye_prim, dtype, shape, ndim, NULL, 0, &p,
                               sizeof p, out);
}

/* ---- full --------------------------------------------------------------- */

/* Convert first (one element, typically), then broadcast as a view, then
 * materialise with the copy kernel, which fills from a zero-stride source. */
em_status em_full(em_array *value, const int64_t *shape, int ndim,
                  em_dtype dtype, em_array **out) {
    if (!value || !out)
        return null_argument("full", out);
    *out = NULL;
    em_status st = em__check_shape("full", shape, ndim, dtype, NULL);
    if (st != EM_OK)
        return st;
    em_desc dv, ds;
    bool fits = value->ndim <= ndim;
    for (int i = 0; fits && i < value->ndim; i++) {
        int64_t have = value->shape[i], want = shape[ndim - value->ndim + i];
        fits = have == want || have == 1;
    }
    if (!fits)
        return em__fail(
            EM_ERR_ARGUMENT, "full: value %s cannot be broadcast to shape %s",
            em__describe(value, &dv), em__describe_shape(shape, ndim, &ds));
    em_array *converted = NULL, *broadcast = NULL;
    if (value->dtype == dtype) {
        em_array_retain(value);
        converted = value;
    } else {
        st = em_as_type(value, dtype, &converted);
    }
    if (st == EM_OK)
        st = em_broadcast_to(converted, shape, ndim, &broadcast);
    if (st == EM_OK)
        st = em_contiguous(broadcast, out);
    em_array_release(broadcast);
    em_array_release(converted);
    return st;
}
