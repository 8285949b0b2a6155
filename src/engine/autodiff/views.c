/*
 * views.c — vjp rules of the shape ops, slicing, padding and joining. The
 * forward views have strides fixed at build time; their rules build
 * ordinary new nodes (a reshape back, an inverse transpose, a zero pad).
 */
#include "rules.h"

em_status em__vjp_identity(em_array *node, em_array *ct, const bool *needs,
                           em_array **in_cts) {
    (void)node;
    if (needs[0]) {
        em_array_retain(ct);
        in_cts[0] = ct;
    }
    return EM_OK;
}

em_status em__vjp_zero(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    (void)node, (void)ct, (void)needs, (void)in_cts;
    return EM_OK;
}

em_status em__vjp_reshape(em_array *node, em_array *ct, const bool *needs,
                          em_array **in_cts) {
    ad_ctx c = AD_INIT;
    em_array *a = node->inputs[0];
    if (needs[0])
        ad_out(&c, &in_cts[0], ad_reshape(&c, ct, a->shape, a->ndim));
    return ad_finish(&c, in_cts, 1);
}

em_status em__vjp_broadcast(em_array *node, em_array *ct, const bool *needs,
                            em_array **in_cts) {
    ad_ctx c = AD_INIT;
    if (needs[0])
        ad_out(&c, &in_cts[0], ad_sum_to(&c, ct, node->inputs[0]));
    return ad_finish(&c, in_cts, 1);
}

em_status em__vjp_transpose(em_array *node, em_array *ct, const bool *needs,
                            em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const transpose_params *p = node->params;
    int inverse[EM_MAX_NDIM];
    for (int i = 0; i < node->ndim; i++)
        inverse[p->perm[i]] = i;
    if (needs[0])
        ad_out(&c, &in_cts[0], ad_transpose(&c, ct, inverse, node->ndim));
    return ad_finish(&c, in_cts, 1);
}

/* `ct` placed at positions start + i*step of a zero array of `like`'s
 * shape (interior padding puts the gaps between strided elements). */
static em_array *scatter_strided(ad_ctx *c, em_array *ct, const em_array *like,
                                 const int64_t *start, const int64_t *step) {
    if (c->st != EM_OK)
        return NULL;
    int64_t low[EM_MAX_NDIM], high[EM_MAX_NDIM], interior[EM_MAX_NDIM];
    for (int i = 0; i < like->ndim; i++) {
        int64_t n = ct->shape[i];
        int64_t span = n > 0 ? (n - 1) * step[i] + 1 : 0;
        low[i] = start[i];
        interior[i] = n > 1 ? step[i] - 1 : 0;
        high[i] = like->shape[i] - start[i] - span;
    }
    em_array *r = NULL;
    em_status st =
        em_pad(ct, ad_scalar(c, 0.0, ct->dtype), low, high, interior, &r);
    return ad_keep(c, st, r);
}

em_status em__vjp_slice(em_array *node, em_array *ct, const bool *needs,
                        em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const slice_params *p = node->params;
    if (needs[0])
        ad_out(&c, &in_cts[0],
               scatter_strided(&c, ct, node->inputs[0], p->start, p->step));
    return ad_finish(&c, in_cts, 1);
}

em_status em__vjp_reverse(em_array *node, em_array *ct, const bool *needs,
                          em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const reverse_params *p = node->params;
    int axes[EM_MAX_NDIM], naxes = 0;
    for (int i = 0; i < node->ndim; i++)
        if (p->mask & (1u << i))
            axes[naxes++] = i;
    if (needs[0]) {
        em_array *r = NULL;
        em_status st = em_reverse(ct, axes, naxes, &r);
        ad_out(&c, &in_cts[0], ad_keep(&c, st, r));
    }
    return ad_finish(&c, in_cts, 1);
}

/* The window [start, start + like.shape) of ct. */
static em_array *window_of(ad_ctx *c, em_array *ct, const int64_t *start,
                           const em_array *like) {
    if (c->st != EM_OK)
        return NULL;
    int64_t stop[EM_MAX_NDIM];
    for (int i = 0; i < ct->ndim; i++)
        stop[i] = start[i] + like->shape[i];
    em_array *r = NULL;
    em_status st = em_slice(ct, start, stop, NULL, &r);
    return ad_keep(c, st, r);
}

em_status em__vjp_concatenate(em_array *node, em_array *ct, const bool *needs,
                              em_array **in_cts) {
    ad_ctx c = AD_INIT;
    int axis = ((const concat_params *)node->params)->axis;
    int64_t start[EM_MAX_NDIM] = {0};
    for (int j = 0; j < node->ninputs; j++) {
        em_array *in = node->inputs[j];
        if (needs[j]) {
            ad_out(&c, &in_cts[j], window_of(&c, ct, start, in));
            /* Many inputs: do not let the temporaries pile up. */
            em_status st = ad_finish(&c, in_cts, node->ninputs);
            if (st != EM_OK)
                return st;
        }
        start[axis] += in->shape[axis];
    }
    return ad_finish(&c, in_cts, node->ninputs);
}

/* pad(a, value): a's elements sit at low + j*(interior+1), possibly cropped
 * by a negative low or high. Pad ct back over the cropped edges first, then
 * take the strided positions. The value receives the rest of the sum. */
em_status em__vjp_pad(em_array *node, em_array *ct, const bool *needs,
                      em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const pad_params *p = node->params;
    em_array *a = node->inputs[0];
    const int nd = a->ndim;
    int64_t grow_lo[EM_MAX_NDIM], grow_hi[EM_MAX_NDIM], zero_int[EM_MAX_NDIM];
    int64_t start[EM_MAX_NDIM], stop[EM_MAX_NDIM], step[EM_MAX_NDIM];
    for (int i = 0; i < nd; i++) {
        int64_t d = a->shape[i], s = p->interior[i] + 1;
        int64_t span = d > 0 ? (d - 1) * s + 1 : 0;
        int64_t high = node->shape[i] - p->low[i] - span;
        grow_lo[i] = p->low[i] < 0 ? -p->low[i] : 0;
        grow_hi[i] = high < 0 ? -high : 0;
        zero_int[i] = 0;
        start[i] = p->low[i] + grow_lo[i];
        stop[i] = start[i] + span;
        step[i] = s;
    }
    em_array *zero = ad_scalar(&c, 0.0, ct->dtype);
    em_array *grown = NULL, *ga = NULL;
    if (c.st == EM_OK) {
        em_status st = em_pad(ct, zero, grow_lo, grow_hi, zero_int, &grown);
        grown = ad_keep(&c, st, grown);
    }
    if (c.st == EM_OK) {
        em_status st = em_slice(grown, start, stop, step, &ga);
        ga = ad_keep(&c, st, ga);
    }
    if (needs[0])
        ad_out(&c, &in_cts[0], ga);
    if (needs[1]) {
        em_array *rest = ad_sub(&c, ad_sum_axes(&c, ct, NULL, 0, false),
                                ad_sum_axes(&c, ga, NULL, 0, false));
        ad_out(&c, &in_cts[1],
               ad_reshape(&c, rest, node->inputs[1]->shape,
                          node->inputs[1]->ndim));
    }
    return ad_finish(&c, in_cts, 2);
}

em_status em__vjp_put_slice(em_array *node, em_array *ct, const bool *needs,
                            em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const put_slice_params *p = node->params;
    em_array *update = node->inputs[1];
    if (needs[0] && c.st == EM_OK) {
        em_array *zeros = ad_zeros(&c, update->shape, update->ndim, ct->dtype);
        em_array *r = NULL;
        em_status st =
            c.st == EM_OK ? em_put_slice(ct, p->start, zeros, &r) : c.st;
        ad_out(&c, &in_cts[0], ad_keep(&c, st, r));
    }
    if (needs[1])
        ad_out(&c, &in_cts[1], window_of(&c, ct, p->start, update));
    return ad_finish(&c, in_cts, 2);
}

em_status em__vjp_dynamic_slice(em_array *node, em_array *ct, const bool *needs,
                                em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const dslice_params *p = node->params;
    em_array *a = node->inputs[0], *starts = node->inputs[1];
    for (int i = 0; i < a->ndim; i++)
        if (p->strides[i] != 1)
            return em__fail(EM_ERR_ARGUMENT,
                            "grad: no gradient rule for dynamic_slice with "
                            "strides");
    if (needs[0]) {
        em_array *zeros = ad_zeros(&c, a->shape, a->ndim, ct->dtype);
        em_array *r = NULL;
        em_status st =
            c.st == EM_OK ? em_dynamic_put_slice(zeros, starts, ct, &r) : c.st;
        ad_out(&c, &in_cts[0], ad_keep(&c, st, r));
    }
    return ad_finish(&c, in_cts, 2);
}

em_status em__vjp_dynamic_put_slice(em_array *node, em_array *ct,
                                    const bool *needs, em_array **in_cts) {
    ad_ctx c = AD_INIT;
    em_array *starts = node->inputs[1], *update = node->inputs[2];
    if (needs[0]) {
        em_array *zeros = ad_zeros(&c, update->shape, update->ndim, ct->dtype);
        em_array *r = NULL;
        em_status st =
            c.st == EM_OK ? em_dynamic_put_slice(ct, starts, zeros, &r) : c.st;
        ad_out(&c, &in_cts[0], ad_keep(&c, st, r));
    }
    if (needs[2]) {
        em_array *r = NULL;
        em_status st = c.st == EM_OK ? em_dynamic_slice(ct, starts,
                                                        update->shape, NULL, &r)
                                     : c.st;
        ad_out(&c, &in_cts[2], ad_keep(&c, st, r));
    }
    return ad_finish(&c, in_cts, 3);
}
