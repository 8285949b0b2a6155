/*
 * index.c — vjp rules of gather, take, take_along_axis, indexed_add and
 * indexed_put. Reading by index sends the cotangent back with indexed_add
 * into zeros (duplicate indices accumulate); writing by index reads the
 * updates' cotangent back with gather.
 */
#include "rules.h"

/* zeros shaped like `a`, with `updates` added at `indices` on `axes`. */
static em_array *scatter_add_into_zeros(ad_ctx *c, const em_array *a,
                                        em_array *indices, em_array *updates,
                                        const int *axes, int naxes) {
    em_array *zeros =
        ad_zeros(c, a->shape, a->ndim, updates ? updates->dtype : a->dtype);
    if (c->st != EM_OK)
        return NULL;
    em_array *r = NULL;
    em_status st = em_indexed_add(zeros, indices, updates, axes, naxes, &r);
    return ad_keep(c, st, r);
}

em_status em__vjp_gather(em_array *node, em_array *ct, const bool *needs,
                         em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const gather_params *p = node->params;
    if (needs[0])
        ad_out(&c, &in_cts[0],
               scatter_add_into_zeros(&c, node->inputs[0], node->inputs[1], ct,
                                      p->axes, p->naxes));
    return ad_finish(&c, in_cts, 2);
}

/* take along `axis` with indices of shape S gives a[:axis] ++ S ++
 * a[axis+1:]; indexed_add wants updates S ++ (a without axis) and index
 * rows S ++ [1]. */
em_status em__vjp_take(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const int axis = ((const axis_params *)node->params)->axis;
    em_array *a = node->inputs[0], *idx = node->inputs[1];
    if (!needs[0])
        return EM_OK;
    int perm[EM_MAX_NDIM], np = 0;
    for (int i = 0; i < idx->ndim; i++)
        perm[np++] = axis + i;
    for (int i = 0; i < axis; i++)
        perm[np++] = i;
    for (int i = axis + idx->ndim; i < ct->ndim; i++)
        perm[np++] = i;
    int64_t rows[EM_MAX_NDIM + 1];
    memcpy(rows, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    rows[idx->ndim] = 1;
    if (idx->ndim + 1 > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "grad: take with %d-d indices has no gradient rule "
                        "(index rows would exceed rank %d)",
                        idx->ndim, EM_MAX_NDIM);
    em_array *index_rows = ad_reshape(&c, idx, rows, idx->ndim + 1);
    em_array *updates = ad_transpose(&c, ct, perm, np);
    int axes[1] = {axis};
    ad_out(&c, &in_cts[0],
           scatter_add_into_zeros(&c, a, index_rows, updates, axes, 1));
    return ad_finish(&c, in_cts, 2);
}

/* Full coordinates of every output element: iota along the other axes
 * (clamped by indexed_add where a broadcasts), the indices along `axis`. */
em_status em__vjp_take_along(em_array *node, em_array *ct, const bool *needs,
                             em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const int axis = ((const axis_params *)node->params)->axis;
    em_array *a = node->inputs[0], *idx = node->inputs[1];
    const int nd = node->ndim;
    if (!needs[0])
        return EM_OK;
    if (nd + 1 > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "grad: take_along_axis of rank %d has no gradient "
                        "rule (index rows would exceed rank %d)",
                        nd, EM_MAX_NDIM);
    int64_t col[EM_MAX_NDIM];
    memcpy(col, node->shape, sizeof(int64_t) * (size_t)nd);
    col[nd] = 1;
    em_array *parts[EM_MAX_NDIM];
    em_array *idx64 = ad_as_type(&c, idx, EM_S64);
    for (int d = 0; d < nd; d++) {
        em_array *coord;
        if (d == axis) {
            coord = ad_broadcast(&c, idx64, node->shape, nd);
        } else {
            em_array *r = NULL;
            em_status st =
                c.st == EM_OK ? em_iota(node->shape, nd, d, EM_S64, &r) : c.st;
            coord = ad_keep(&c, st, r);
        }
        parts[d] = ad_reshape(&c, coord, col, nd + 1);
    }
    em_array *coords = NULL;
    if (c.st == EM_OK) {
        em_status st = em_concatenate(parts, (size_t)nd, nd, &coords);
        coords = ad_keep(&c, st, coords);
    }
    ad_out(&c, &in_cts[0], scatter_add_into_zeros(&c, a, coords, ct, NULL, 0));
    return ad_finish(&c, in_cts, 2);
}

/* indexed_add: a passes ct through; updates read ct at the indices.
 * indexed_put: a's overwritten places get zero. */
em_status em__vjp_indexed(em_array *node, em_array *ct, const bool *needs,
                          em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const scatter_params *p = node->params;
    em_array *idx = node->inputs[1], *upd = node->inputs[2];
    if (needs[0]) {
        if (p->add) {
            ad_out(&c, &in_cts[0], ct);
        } else {
            em_array *zeros = ad_zeros(&c, upd->shape, upd->ndim, ct->dtype);
            em_array *r = NULL;
            em_status st = c.st == EM_OK ? em_indexed_put(ct, idx, zeros,
                                                          p->axes, p->naxes, &r)
                                         : c.st;
            ad_out(&c, &in_cts[0], ad_keep(&c, st, r));
        }
    }
    if (needs[2]) {
        em_array *r = NULL;
        em_status st =
            c.st == EM_OK ? em_gather(ct, idx, p->axes, p->naxes, &r) : c.st;
        ad_out(&c, &in_cts[2], ad_keep(&c, st, r));
    }
    return ad_finish(&c, in_cts, 3);
}
