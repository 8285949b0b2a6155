/*
 * dynamic_slice.c — em_dynamic_slice and em_dynamic_put_slice: slice and
 * put_slice whose start indices come from an integer array read at
 * evaluation time.
 *
 * Starts are widened to int64 (u64 above INT64_MAX saturates) and CLAMPED
 * into [0, dim - window] per axis, as Nx does for tensor start indices, so
 * the window always lies inside the array. The data moves are the shared
 * strided copy (by element size, every dtype).
 */
#include "copy.h"
#include "emily_pad.h"
#include "params.h"

/* ---- reading the starts -------------------------------------------------- */

static inline int64_t widen_s64(int64_t v) { return v; }
static inline int64_t widen_u64(uint64_t v) {
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}
#define EM_WIDEN(v) _Generic((v), uint64_t : widen_u64, default : widen_s64)(v)

/* Entry i of the evaluated 1-D integer array `starts`. */
static int64_t read_start(const em_array *starts, int64_t i) {
    const char *base = em__data(starts);
    int64_t at = i * starts->strides[0];
    switch (starts->dtype) {
#define EM_CASE(ENUM, sfx, T, CT, LOAD, STORE)                                 \
    case ENUM:                                                                 \
        return EM_WIDEN(((const T *)base)[at]);
        EM_DTYPES_INT(EM_CASE)
#undef EM_CASE
    default:
        return 0;
    }
}

static inline int64_t clamp_start(int64_t s, int64_t dim, int64_t window) {
    int64_t hi = dim - window;
    return s < 0 ? 0 : s > hi ? hi : s;
}

static em_status check_starts(const char *op, const em_array *a,
                              const em_array *starts) {
    em_desc da, ds;
    if (!em_dtype_is_integer(starts->dtype) || starts->ndim != 1 ||
        starts->shape[0] != a->ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: starts %s must be a 1-D integer array with one "
                        "entry per axis of %s",
                        op, em__describe(starts, &ds), em__describe(a, &da));
    return EM_OK;
}

/* ---- dynamic_slice ------------------------------------------------------- */

static em_status dslice_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const dslice_params *p = node->params;
    const em_array *a = node->inputs[0], *starts = node->inputs[1];
    const size_t es = em_dtype_size(node->dtype);
    int64_t src_strides[EM_MAX_NDIM], off = 0;
    for (int i = 0; i < a->ndim; i++) {
        int64_t s =
            clamp_start(read_start(starts, i), a->shape[i], p->sizes[i]);
        off += s * a->strides[i];
        src_strides[i] = a->strides[i] * p->strides[i];
    }
    em__copy_strided(em__data(node), NULL,
                     (const char *)em__data(a) + off * (int64_t)es, src_strides,
                     node->shape, node->ndim, es);
    return EM_OK;
}

static const em_prim dslice_prim = {"dynamic_slice", dslice_eval,
                                    em__vjp_dynamic_slice,
                                    em__gpu_dynamic_slice_eval};

em_status em_dynamic_slice(em_array *a, em_array *starts, const int64_t *sizes,
                           const int64_t *strides, em_array **out) {
    if (out)
        *out = NULL;
    if (!a || !starts || !out || (a->ndim > 0 && !sizes))
        return em__fail(EM_ERR_ARGUMENT, "dynamic_slice: NULL argument");
    em_status st = check_starts("dynamic_slice", a, starts);
    if (st != EM_OK)
        return st;
    em_desc da;
    dslice_params p;
    int64_t shape[EM_MAX_NDIM];
    for (int i = 0; i < a->ndim; i++) {
        int64_t step = strides ? strides[i] : 1;
        if (sizes[i] < 0 || sizes[i] > a->shape[i] || step < 1)
            return em__fail(EM_ERR_ARGUMENT,
                            "dynamic_slice: size %lld with stride %lld on axis "
                            "%d of %s is invalid (expected 0 <= size <= %lld "
                            "and stride >= 1)",
                            (long long)sizes[i], (long long)step, i,
                            em__describe(a, &da), (long long)a->shape[i]);
        p.sizes[i] = sizes[i];
        p.strides[i] = step;
        shape[i] = sizes[i] / step + (sizes[i] % step != 0);
    }
    em_array *inputs[2] = {a, starts};
    return em__node_new_params(&dslice_prim, a->dtype, shape, a->ndim, inputs,
                               2, &p, sizeof p, out);
}

/* ---- dynamic_put_slice --------------------------------------------------- */

static em_status dput_eval(em_array *node) {
    em_array *a = node->inputs[0], *starts = node->inputs[1],
             *update = node->inputs[2];
    /* a's buffer becomes the output when nothing else holds it (as in
     * put_slice); otherwise a is copied first. */
    em_buffer *a_buffer = a->buffer;
    em_status st = em__alloc_output(node, &a, 1);
    if (st != EM_OK)
        return st;
    if (node->buffer != a_buffer && node->size > 0)
        em__copy_array(em__data(node), a);
    if (update->size == 0)
        return EM_OK;
    int64_t off = 0;
    for (int i = 0; i < node->ndim; i++)
        off += clamp_start(read_start(starts, i), node->shape[i],
                           update->shape[i]) *
               node->strides[i];
    size_t es = em_dtype_size(node->dtype);
    em__copy_strided((char *)em__data(node) + (size_t)off * es, node->strides,
                     em__data(update), update->strides, update->shape,
                     update->ndim, es);
    return EM_OK;
}

static const em_prim dput_prim = {"dynamic_put_slice", dput_eval,
                                  em__vjp_dynamic_put_slice,
                                  em__gpu_dynamic_put_slice_eval};

em_status em_dynamic_put_slice(em_array *a, em_array *starts, em_array *update,
                               em_array **out) {
    if (out)
        *out = NULL;
    if (!a || !starts || !update || !out)
        return em__fail(EM_ERR_ARGUMENT, "dynamic_put_slice: NULL argument");
    em_status st = check_starts("dynamic_put_slice", a, starts);
    if (st != EM_OK)
        return st;
    em_desc da, du;
    bool ok = a->dtype == update->dtype && a->ndim == update->ndim;
    for (int i = 0; ok && i < a->ndim; i++)
        ok = update->shape[i] <= a->shape[i];
    if (!ok)
        return em__fail(EM_ERR_ARGUMENT,
                        "dynamic_put_slice: update %s does not fit in %s "
                        "(expected the same dtype and rank, and each "
                        "dimension <= the array's)",
                        em__describe(update, &du), em__describe(a, &da));
    em_array *inputs[3] = {a, starts, update};
    return em__node_new(&dput_prim, a->dtype, a->shape, a->ndim, inputs, 3,
                        out);
}
