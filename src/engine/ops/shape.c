/*
 * shape.c — shape ops: reshape, transpose, broadcast_to, squeeze,
 * expand_dims, slice, reverse, contiguous.
 *
 * Every op here except contiguous (and reshape of a layout that cannot be
 * expressed with strides) is a view: the node's strides and offset are
 * computed when it is built, composed with the input's own strides and
 * offset (the input may itself be a view), and its eval only shares the
 * input's buffer. When the result would be the input unchanged the op
 * returns a new reference to the input instead of a node.
 */
#include "copy.h"
#include "params.h"

#include <stdlib.h>

static em_status view_eval(em_array *node) {
    em__share_buffer(node, node->inputs[0]);
    return EM_OK;
}

/* The input copied into a fresh row-major buffer. */
static em_status copy_eval(em_array *node) {
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK)
        return st;
    if (node->size > 0)
        em__copy_array(em__data(node), node->inputs[0]);
    return EM_OK;
}

/* Views share their input's buffer on any device; copies have a GPU
 * kernel (the same-dtype cast). */
static const em_prim reshape_view_prim = {"reshape", view_eval, em__vjp_reshape,
                                          view_eval};
static const em_prim reshape_copy_prim = {"reshape", copy_eval, em__vjp_reshape,
                                          em__gpu_cast_eval};
static const em_prim transpose_prim = {"transpose", view_eval,
                                       em__vjp_transpose, view_eval};
static const em_prim broadcast_prim = {"broadcast_to", view_eval,
                                       em__vjp_broadcast, view_eval};
static const em_prim squeeze_prim = {"squeeze", view_eval, em__vjp_reshape,
                                     view_eval};
static const em_prim expand_dims_prim = {"expand_dims", view_eval,
                                         em__vjp_reshape, view_eval};
static const em_prim slice_prim = {"slice", view_eval, em__vjp_slice,
                                   view_eval};
static const em_prim reverse_prim = {"reverse", view_eval, em__vjp_reverse,
                                     view_eval};
static const em_prim contiguous_prim = {"contiguous", copy_eval,
                                        em__vjp_identity, em__gpu_cast_eval};

static em_status null_argument(const char *op, em_array **out) {
    if (out)
        *out = NULL;
    return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", op);
}

static em_status same_array(em_array *a, em_array **out) {
    em_array_retain(a);
    *out = a;
    return EM_OK;
}

/* A view node of `a` with the given layout, relative to a's buffer. When
 * the layout is row-major (size-1 axes may have any stride), the node keeps
 * the exact row-major strides em__node_new gave it, so kernels that compare
 * strides see a contiguous array. */
static em_status make_view(const em_prim *prim, em_array *a,
                           const int64_t *shape, int ndim,
                           const int64_t *strides, int64_t offset,
                           em_array **out) {
    em_array *node;
    em_status st = em__node_new(prim, a->dtype, shape, ndim, &a, 1, &node);
    if (st != EM_OK)
        return st;
    node->offset = node->size == 0 ? a->offset : offset;
    node->row_contiguous = em__is_row_contiguous(node->shape, strides, ndim);
    if (!node->row_contiguous)
        memcpy(node->strides, strides, sizeof(int64_t) * (size_t)ndim);
    *out = node;
    return EM_OK;
}

/* Record a view's parameters (for its gradient rule) once make_view built
 * it; on failure the node is released. */
static em_status with_params(em_status st, const void *params, size_t size,
                             em_array **out) {
    if (st == EM_OK &&
        (st = em__node_set_params(*out, params, size)) != EM_OK) {
        em_array_release(*out);
        *out = NULL;
    }
    return st;
}

static bool same_shape(const int64_t *a, const int64_t *b, int ndim) {
    for (int i = 0; i < ndim; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* ---- reshape ------------------------------------------------------------ */

/* Strides that read a's elements in row-major order with shape `shape`,
 * when a's layout allows it without copying. Axes are matched in groups
 * whose products are equal; inside a group a's (non-unit) axes must be
 * nested contiguously, and the new axes then divide the group's span. */
static bool reshape_strides(const em_array *a, const int64_t *shape, int ndim,
                            int64_t *strides) {
    int64_t old_shape[EM_MAX_NDIM], old_strides[EM_MAX_NDIM];
    int on = 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != 1) {
            old_shape[on] = a->shape[i];
            old_strides[on] = a->strides[i];
            on++;
        }
    em__row_strides(shape, ndim, strides); /* size-1 axes keep these */
    int i = 0, j = 0;
    while (i < on && j < ndim) {
        int64_t old_prod = old_shape[i], new_prod = shape[j];
        int i_end = i + 1, j_end = j + 1;
        while (old_prod != new_prod) {
            if (new_prod < old_prod)
                new_prod *= shape[j_end++];
            else
                old_prod *= old_shape[i_end++];
        }
        for (int k = i; k < i_end - 1; k++)
            if (old_strides[k] != old_strides[k + 1] * old_shape[k + 1])
                return false;
        strides[j_end - 1] = old_strides[i_end - 1];
        for (int k = j_end - 2; k >= j; k--)
            strides[k] = strides[k + 1] * shape[k + 1];
        i = i_end;
        j = j_end;
    }
    return true;
}

em_status em_reshape(em_array *a, const int64_t *shape, int ndim,
                     em_array **out) {
    if (!a || !out || (ndim > 0 && !shape))
        return null_argument("reshape", out);
    *out = NULL;
    em_desc d, ds;
    if (ndim < 0 || ndim > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "reshape: cannot reshape %s to rank %d (0..%d)",
                        em__describe(a, &d), ndim, EM_MAX_NDIM);
    int64_t want[EM_MAX_NDIM];
    int inferred = -1;
    for (int i = 0; i < ndim; i++) {
        want[i] = shape[i];
        if (shape[i] == -1 && inferred < 0)
            inferred = i;
        else if (shape[i] < 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "reshape: cannot reshape %s to %s: dimensions must "
                            "be >= 0 with at most one -1",
                            em__describe(a, &d),
                            em__describe_shape(shape, ndim, &ds));
    }
    if (inferred >= 0) {
        /* The product of the other dimensions; 0 or an overflow leaves the
         * -1 undetermined. */
        int64_t known = 1;
        for (int i = 0; i < ndim && known > 0; i++) {
            if (i == inferred)
                continue;
            if (shape[i] != 0 && known > INT64_MAX / shape[i])
                known = -1;
            else
                known *= shape[i];
        }
        if (known <= 0 || a->size % known != 0)
            return em__fail(EM_ERR_ARGUMENT,
                            "reshape: cannot infer the -1 dimension of %s for "
                            "%s (%lld elements)",
                            em__describe_shape(shape, ndim, &ds),
                            em__describe(a, &d), (long long)a->size);
        want[inferred] = a->size / known;
    }
    int64_t size;
    em_status st = em__check_shape("reshape", want, ndim, a->dtype, &size);
    if (st != EM_OK)
        return st;
    if (size != a->size)
        return em__fail(EM_ERR_ARGUMENT,
                        "reshape: cannot reshape %s (%lld elements) to %s "
                        "(%lld elements): element counts must match",
                        em__describe(a, &d), (long long)a->size,
                        em__describe_shape(want, ndim, &ds), (long long)size);
    if (ndim == a->ndim && same_shape(want, a->shape, ndim))
        return same_array(a, out);
    int64_t strides[EM_MAX_NDIM];
    if (size == 0 || reshape_strides(a, want, ndim, strides)) {
        if (size == 0)
            em__row_strides(want, ndim, strides);
        return make_view(&reshape_view_prim, a, want, ndim, strides, a->offset,
                         out);
    }
    return em__node_new(&reshape_copy_prim, a->dtype, want, ndim, &a, 1, out);
}

/* ---- transpose ---------------------------------------------------------- */

em_status em_transpose(em_array *a, const int *perm, int ndim, em_array **out) {
    if (!a || !out || (ndim > 0 && !perm))
        return null_argument("transpose", out);
    *out = NULL;
    em_desc d;
    if (ndim != a->ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "transpose: permutation of %d axes given for %s "
                        "(expected %d)",
                        ndim, em__describe(a, &d), a->ndim);
    int64_t shape[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    unsigned seen = 0;
    bool identity = true;
    for (int i = 0; i < ndim; i++) {
        int ax;
        em_status st = em__check_axis("transpose", perm[i], ndim, &ax);
        if (st != EM_OK)
            return st;
        if (seen & (1u << ax))
            return em__fail(EM_ERR_ARGUMENT,
                            "transpose: axis %d appears twice in the "
                            "permutation for %s",
                            perm[i], em__describe(a, &d));
        seen |= 1u << ax;
        identity = identity && ax == i;
        shape[i] = a->shape[ax];
        strides[i] = a->strides[ax];
    }
    if (identity)
        return same_array(a, out);
    transpose_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < ndim; i++)
        p.perm[i] = perm[i] < 0 ? perm[i] + ndim : perm[i];
    return with_params(
        make_view(&transpose_prim, a, shape, ndim, strides, a->offset, out), &p,
        sizeof p, out);
}

/* ---- broadcast_to ------------------------------------------------------- */

em_status em_broadcast_to(em_array *a, const int64_t *shape, int ndim,
                          em_array **out) {
    if (!a || !out || (ndim > 0 && !shape))
        return null_argument("broadcast_to", out);
    *out = NULL;
    em_desc d, ds;
    em_status st = em__check_shape("broadcast_to", shape, ndim, a->dtype, NULL);
    if (st != EM_OK)
        return st;
    if (ndim < a->ndim)
        return em__fail(EM_ERR_ARGUMENT,
                        "broadcast_to: cannot broadcast %s to the lower rank "
                        "shape %s",
                        em__describe(a, &d),
                        em__describe_shape(shape, ndim, &ds));
    int64_t strides[EM_MAX_NDIM];
    int lead = ndim - a->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        if (j < 0 || (a->shape[j] == 1 && shape[i] != 1)) {
            strides[i] = 0; /* every index reads the same element */
        } else if (a->shape[j] == shape[i]) {
            strides[i] = a->strides[j];
        } else {
            return em__fail(EM_ERR_ARGUMENT,
                            "broadcast_to: cannot broadcast %s to %s (axis %d "
                            "has size %lld, expected 1 or %lld)",
                            em__describe(a, &d),
                            em__describe_shape(shape, ndim, &ds), j,
                            (long long)a->shape[j], (long long)shape[i]);
        }
    }
    if (lead == 0 && same_shape(shape, a->shape, ndim))
        return same_array(a, out);
    return make_view(&broadcast_prim, a, shape, ndim, strides, a->offset, out);
}

/* ---- squeeze / expand_dims ---------------------------------------------- */

em_status em_squeeze(em_array *a, const int *axes, int naxes, em_array **out) {
    if (!a || !out || (naxes > 0 && !axes))
        return null_argument("squeeze", out);
    *out = NULL;
    em_desc d;
    unsigned mask = 0;
    if (naxes == 0) {
        for (int i = 0; i < a->ndim; i++)
            if (a->shape[i] == 1)
                mask |= 1u << i;
    } else {
        em_status st = em__check_axes("squeeze", axes, naxes, a->ndim, &mask);
        if (st != EM_OK)
            return st;
        for (int i = 0; i < a->ndim; i++)
            if ((mask & (1u << i)) && a->shape[i] != 1)
                return em__fail(EM_ERR_ARGUMENT,
                                "squeeze: cannot remove axis %d of %s: its "
                                "size is %lld, expected 1",
                                i, em__describe(a, &d), (long long)a->shape[i]);
    }
    if (mask == 0)
        return same_array(a, out);
    int64_t shape[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    int n = 0;
    for (int i = 0; i < a->ndim; i++)
        if (!(mask & (1u << i))) {
            shape[n] = a->shape[i];
            strides[n] = a->strides[i];
            n++;
        }
    return make_view(&squeeze_prim, a, shape, n, strides, a->offset, out);
}

em_status em_expand_dims(em_array *a, int axis, em_array **out) {
    if (!a || !out)
        return null_argument("expand_dims", out);
    *out = NULL;
    em_desc d;
    if (a->ndim >= EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "expand_dims: %s already has the maximum rank %d",
                        em__describe(a, &d), EM_MAX_NDIM);
    int ax;
    em_status st = em__check_axis("expand_dims", axis, a->ndim + 1, &ax);
    if (st != EM_OK)
        return st;
    int64_t shape[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    for (int i = 0, j = 0; i <= a->ndim; i++) {
        if (i == ax) {
            shape[i] = 1;
            /* Any stride reads the same element; this one keeps the layout
             * recognisably row-major. */
            strides[i] = j < a->ndim ? a->strides[j] * a->shape[j] : 1;
        } else {
            shape[i] = a->shape[j];
            strides[i] = a->strides[j];
            j++;
        }
    }
    return make_view(&expand_dims_prim, a, shape, a->ndim + 1, strides,
                     a->offset, out);
}

/* ---- slice -------------------------------------------------------------- */

em_status em_slice(em_array *a, const int64_t *start, const int64_t *stop,
                   const int64_t *strides, em_array **out) {
    if (!a || !out || (a->ndim > 0 && (!start || !stop)))
        return null_argument("slice", out);
    *out = NULL;
    em_desc d;
    int64_t shape[EM_MAX_NDIM], view_strides[EM_MAX_NDIM];
    int64_t offset = a->offset;
    bool whole = true;
    for (int i = 0; i < a->ndim; i++) {
        int64_t step = strides ? strides[i] : 1;
        if (step < 1)
            return em__fail(EM_ERR_ARGUMENT,
                            "slice: stride %lld on axis %d of %s must be >= 1",
                            (long long)step, i, em__describe(a, &d));
        if (start[i] < 0 || stop[i] > a->shape[i] || start[i] > stop[i])
            return em__fail(EM_ERR_ARGUMENT,
                            "slice: range [%lld, %lld) on axis %d of %s is "
                            "invalid (expected 0 <= start <= stop <= %lld)",
                            (long long)start[i], (long long)stop[i], i,
                            em__describe(a, &d), (long long)a->shape[i]);
        int64_t len = stop[i] - start[i];
        shape[i] = len / step + (len % step != 0);
        /* With one element the stride never moves the pointer; keeping the
         * input's avoids overflow for huge steps. */
        view_strides[i] = shape[i] > 1 ? a->strides[i] * step : a->strides[i];
        offset += start[i] * a->strides[i];
        whole = whole && shape[i] == a->shape[i]; /* start 0, step 1 */
    }
    if (whole)
        return same_array(a, out);
    slice_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < a->ndim; i++) {
        p.start[i] = start[i];
        p.step[i] = strides ? strides[i] : 1;
    }
    return with_params(
        make_view(&slice_prim, a, shape, a->ndim, view_strides, offset, out),
        &p, sizeof p, out);
}

/* ---- reverse ------------------------------------------------------------ */

em_status em_reverse(em_array *a, const int *axes, int naxes, em_array **out) {
    if (!a || !out || (naxes > 0 && !axes))
        return null_argument("reverse", out);
    *out = NULL;
    unsigned mask;
    em_status st = em__check_axes("reverse", axes, naxes, a->ndim, &mask);
    if (st != EM_OK)
        return st;
    int64_t strides[EM_MAX_NDIM];
    int64_t offset = a->offset;
    bool changed = false;
    for (int i = 0; i < a->ndim; i++) {
        strides[i] = a->strides[i];
        if ((mask & (1u << i)) && a->shape[i] > 1) {
            /* Start at the last element and walk backwards. */
            offset += (a->shape[i] - 1) * a->strides[i];
            strides[i] = -a->strides[i];
            changed = true;
        }
    }
    if (!changed || a->size == 0)
        return same_array(a, out);
    reverse_params p = {mask};
    return with_params(
        make_view(&reverse_prim, a, a->shape, a->ndim, strides, offset, out),
        &p, sizeof p, out);
}

/* ---- contiguous --------------------------------------------------------- */

em_status em_contiguous(em_array *a, em_array **out) {
    if (!a || !out)
        return null_argument("contiguous", out);
    *out = NULL;
    /* A row-major view with an offset reads fine as it is (em__data adds the
     * offset), so only other layouts are copied. */
    if (a->row_contiguous)
        return same_array(a, out);
    return em__node_new(&contiguous_prim, a->dtype, a->shape, a->ndim, &a, 1,
                        out);
}
