/* join.c — ops that assemble one array from several: put_slice and
 * concatenate. Both write their inputs into regions of a row-major output
 * with the shared strided copy. */
#include "copy.h"
#include "params.h"

#include <limits.h>

static em_status null_argument(const char *op, em_array **out) {
    if (out)
        *out = NULL;
    return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", op);
}

/* ---- put_slice ---------------------------------------------------------- */

static em_status put_slice_eval(em_array *node) {
    em_array *a = node->inputs[0], *update = node->inputs[1];
    const put_slice_params *p = node->params;
    /* `a`'s buffer becomes the output when nothing else holds it (the core
     * checks the buffer's own refcount, so an update that aliases it is
     * never overwritten); otherwise `a` is copied first. */
    em_buffer *a_buffer = a->buffer;
    em_status st = em__alloc_output(node, &a, 1);
    if (st != EM_OK)
        return st;
    if (node->buffer != a_buffer && node->size > 0)
        em__copy_array(em__data(node), a);
    if (update->size == 0)
        return EM_OK;
    int64_t offset = 0;
    for (int i = 0; i < node->ndim; i++)
        offset += p->start[i] * node->strides[i];
    size_t es = em_dtype_size(node->dtype);
    em__copy_strided((char *)em__data(node) + (size_t)offset * es,
                     node->strides, em__data(update), update->strides,
                     update->shape, update->ndim, es);
    return EM_OK;
}

static const em_prim put_slice_prim = {"put_slice", put_slice_eval,
                                       em__vjp_put_slice,
                                       em__gpu_put_slice_eval};

em_status em_put_slice(em_array *a, const int64_t *start, em_array *update,
                       em_array **out) {
    if (!a || !update || !out || (a->ndim > 0 && !start))
        return null_argument("put_slice", out);
    *out = NULL;
    em_desc da, du;
    if (a->dtype != update->dtype || a->ndim != update->ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "put_slice: update %s does not match %s (expected the "
                        "same dtype and rank)",
                        em__describe(update, &du), em__describe(a, &da));
    put_slice_params p = {{0}};
    for (int i = 0; i < a->ndim; i++) {
        if (update->shape[i] > a->shape[i])
            return em__fail(EM_ERR_ARGUMENT,
                            "put_slice: update %s does not fit in %s (axis %d)",
                            em__describe(update, &du), em__describe(a, &da), i);
        /* Nx clamps the start so the update fits; the engine's static API
         * takes exact starts and rejects these (the caller clamps). */
        if (start[i] < 0 || start[i] > a->shape[i] - update->shape[i])
            return em__fail(EM_ERR_ARGUMENT,
                            "put_slice: start %lld on axis %d is out of range "
                            "for update %s in %s (expected 0..%lld; starts "
                            "are not clamped)",
                            (long long)start[i], i, em__describe(update, &du),
                            em__describe(a, &da),
                            (long long)(a->shape[i] - update->shape[i]));
        p.start[i] = start[i];
    }
    em_array *inputs[2] = {a, update};
    em_status st = em__node_new_params(&put_slice_prim, a->dtype, a->shape,
                                       a->ndim, inputs, 2, &p, sizeof p, out);
    return st;
}

/* ---- concatenate -------------------------------------------------------- */

static em_status concat_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    const concat_params *p = node->params;
    size_t es = em_dtype_size(node->dtype);
    char *dst = em__data(node);
    int64_t at = 0; /* where the current input starts along the axis */
    for (int i = 0; i < node->ninputs; i++) {
        const em_array *in = node->inputs[i];
        if (in->size > 0)
            em__copy_strided(dst + (size_t)(at * node->strides[p->axis]) * es,
                             node->strides, em__data(in), in->strides,
                             in->shape, in->ndim, es);
        at += in->shape[p->axis];
    }
    return EM_OK;
}

static const em_prim concat_prim = {"concatenate", concat_eval,
                                    em__vjp_concatenate, em__gpu_concat_eval};

em_status em_concatenate(em_array *const *arrays, size_t n, int axis,
                         em_array **out) {
    if (!out)
        return null_argument("concatenate", out);
    *out = NULL;
    if (n == 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "concatenate: no arrays given (expected at least one)");
    if (!arrays)
        return null_argument("concatenate", out);
    for (size_t i = 0; i < n; i++)
        if (!arrays[i])
            return null_argument("concatenate", out);
    if (n > INT_MAX)
        return em__fail(EM_ERR_ARGUMENT, "concatenate: too many arrays (%zu)",
                        n);
    const em_array *first = arrays[0];
    em_desc d0, di;
    if (first->ndim == 0)
        return em__fail(EM_ERR_ARGUMENT,
                        "concatenate: cannot join 0-d arrays (%s); expected "
                        "rank >= 1",
                        em__describe(first, &d0));
    int ax;
    em_status st = em__check_axis("concatenate", axis, first->ndim, &ax);
    if (st != EM_OK)
        return st;
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, first->shape, sizeof(int64_t) * (size_t)first->ndim);
    shape[ax] = 0;
    for (size_t i = 0; i < n; i++) {
        const em_array *a = arrays[i];
        bool ok = a->dtype == first->dtype && a->ndim == first->ndim;
        for (int j = 0; ok && j < a->ndim; j++)
            ok = j == ax || a->shape[j] == first->shape[j];
        if (!ok)
            return em__fail(EM_ERR_ARGUMENT,
                            "concatenate: array %zu is %s but array 0 is %s "
                            "(expected the same dtype, rank and dimensions "
                            "except axis %d)",
                            i, em__describe(a, &di), em__describe(first, &d0),
                            ax);
        if (a->shape[ax] > INT64_MAX - shape[ax])
            return em__fail(EM_ERR_ARGUMENT,
                            "concatenate: axis %d grows too large", ax);
        shape[ax] += a->shape[ax];
    }
    st = em__check_shape("concatenate", shape, first->ndim, first->dtype, NULL);
    if (st != EM_OK)
        return st;
    if (n == 1) { /* arrays are immutable: the input is its own result */
        em_array_retain(arrays[0]);
        *out = arrays[0];
        return EM_OK;
    }
    concat_params p = {ax};
    return em__node_new_params(&concat_prim, first->dtype, shape, first->ndim,
                               arrays, (int)n, &p, sizeof p, out);
}
