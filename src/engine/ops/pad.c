/*
 * pad.c — em_pad (Nx.pad): edge padding (negative widths crop) and interior
 * padding, with one pad value.
 *
 * The output is first filled with the value (a copy whose source strides
 * are all 0), then the input elements that survive the cropping are copied
 * to their places: along axis i, input element j lands at
 * low + j * (interior + 1). Both steps use the shared strided copy, so one
 * code path serves every dtype (the copy is by element size).
 */
#include "copy.h"
#include "emily_pad.h"
#include "params.h"

#include <limits.h>

/* Per axis: the first input index j whose position low + j*step is >= 0,
 * and the count of those whose position is below the output size. */
bool em__pad_block(const em_array *node, const em_array *a,
                   const pad_params *p, int64_t *shape, int64_t *dst_strides,
                   int64_t *dst_off, int64_t *src_off) {
    *dst_off = *src_off = 0;
    for (int i = 0; i < node->ndim; i++) {
        const int64_t step = p->interior[i] + 1, low = p->low[i];
        const int64_t out_dim = node->shape[i];
        int64_t first = low >= 0 ? 0 : (-low + step - 1) / step;
        int64_t end =
            out_dim - 1 - low < 0 ? 0 : (out_dim - 1 - low) / step + 1;
        if (end > a->shape[i])
            end = a->shape[i];
        if (end <= first)
            return false;
        shape[i] = end - first;
        dst_strides[i] = node->strides[i] * step;
        *dst_off += (low + first * step) * node->strides[i];
        *src_off += first * a->strides[i];
    }
    return true;
}

static em_status pad_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const pad_params *p = node->params;
    const em_array *a = node->inputs[0], *value = node->inputs[1];
    const int ndim = node->ndim;
    const size_t es = em_dtype_size(node->dtype);
    char *dst = em__data(node);

    int64_t zeros[EM_MAX_NDIM] = {0};
    em__copy_strided(dst, NULL, em__data(value), zeros, node->shape, ndim, es);
    if (a->size == 0)
        return EM_OK;

    int64_t shape[EM_MAX_NDIM], dst_strides[EM_MAX_NDIM], dst_off, src_off;
    if (!em__pad_block(node, a, p, shape, dst_strides, &dst_off, &src_off))
        return EM_OK; /* everything was cropped away */
    em__copy_strided(dst + (size_t)dst_off * es, dst_strides,
                     (const char *)em__data(a) + src_off * (int64_t)es,
                     a->strides, shape, ndim, es);
    return EM_OK;
}

static const em_prim pad_prim = {"pad", pad_eval, em__vjp_pad,
                                 em__gpu_pad_eval};

em_status em_pad(em_array *a, em_array *value, const int64_t *low,
                 const int64_t *high, const int64_t *interior, em_array **out) {
    if (out)
        *out = NULL;
    if (!a || !value || !out || (a->ndim > 0 && (!low || !high || !interior)))
        return em__fail(EM_ERR_ARGUMENT, "pad: NULL argument");
    em_desc da, dv;
    if (value->dtype != a->dtype || value->size != 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "pad: pad value %s must hold one element of the "
                        "dtype of %s",
                        em__describe(value, &dv), em__describe(a, &da));
    if (a->ndim == 0) {
        em_array_retain(a);
        *out = a;
        return EM_OK;
    }
    int64_t shape[EM_MAX_NDIM] = {0};
    bool crop_only = true;
    pad_params p = {{0}, {0}};
    for (int i = 0; i < a->ndim; i++) {
        const int64_t d = a->shape[i];
        if (interior[i] < 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "pad: interior padding %lld on axis %d of %s must "
                            "be >= 0",
                            (long long)interior[i], i, em__describe(a, &da));
        int64_t size = d, extra;
        bool overflow =
            __builtin_mul_overflow(d > 0 ? d - 1 : 0, interior[i], &extra) ||
            __builtin_add_overflow(size, extra, &size) ||
            __builtin_add_overflow(size, low[i], &size) ||
            __builtin_add_overflow(size, high[i], &size);
        if (overflow || size < 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "pad: padding (low %lld, high %lld, interior %lld) "
                            "of axis %d of %s gives a negative or too large "
                            "size",
                            (long long)low[i], (long long)high[i],
                            (long long)interior[i], i, em__describe(a, &da));
        shape[i] = size;
        p.low[i] = low[i];
        p.interior[i] = interior[i];
        crop_only =
            crop_only && interior[i] == 0 && low[i] <= 0 && high[i] <= 0;
    }
    em_status st = em__check_shape("pad", shape, a->ndim, a->dtype, NULL);
    if (st != EM_OK)
        return st;
    if (crop_only) {
        /* A view: the window [-low, d + high) of every axis. */
        int64_t start[EM_MAX_NDIM], stop[EM_MAX_NDIM];
        for (int i = 0; i < a->ndim; i++) {
            start[i] = -low[i];
            stop[i] = -low[i] + shape[i];
        }
        return em_slice(a, start, stop, NULL, out);
    }
    em_array *inputs[2] = {a, value};
    return em__node_new_params(&pad_prim, a->dtype, shape, a->ndim, inputs, 2,
                               &p, sizeof p, out);
}
