/*
 * rules.c — the builder helpers of rules.h.
 */
#include "rules.h"

em_array *ad_keep(ad_ctx *c, em_status st, em_array *a) {
    if (c->st != EM_OK) {
        em_array_release(a);
        return NULL;
    }
    if (st != EM_OK) {
        c->st = st;
        em_array_release(a);
        return NULL;
    }
    if (c->ntmp == AD_MAX_TMP) {
        em_array_release(a);
        c->st =
            em__fail(EM_ERR_RUNTIME,
                     "grad: a rule built more than %d temporaries", AD_MAX_TMP);
        return NULL;
    }
    c->tmp[c->ntmp++] = a;
    return a;
}

void ad_out(ad_ctx *c, em_array **slot, em_array *a) {
    if (c->st != EM_OK || !a)
        return;
    em_array_retain(a);
    *slot = a;
}

em_status ad_finish(ad_ctx *c, em_array **outs, int n) {
    for (int i = 0; i < c->ntmp; i++)
        em_array_release(c->tmp[i]);
    c->ntmp = 0;
    if (c->st != EM_OK)
        for (int i = 0; i < n; i++) {
            em_array_release(outs[i]);
            outs[i] = NULL;
        }
    return c->st;
}

/* Skip building once a failure is recorded. */
#define AD_GUARD(c)                                                            \
    do {                                                                       \
        if ((c)->st != EM_OK)                                                  \
            return NULL;                                                       \
    } while (0)

em_array *ad_un(ad_ctx *c, em_unary_op op, em_array *a) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_unary(op, a, &r);
    return ad_keep(c, st, r);
}

em_array *ad_bin(ad_ctx *c, em_binary_op op, em_array *a, em_array *b) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_binary(op, a, b, &r);
    return ad_keep(c, st, r);
}

em_array *ad_add(ad_ctx *c, em_array *a, em_array *b) {
    return ad_bin(c, EM_BINARY_add, a, b);
}
em_array *ad_sub(ad_ctx *c, em_array *a, em_array *b) {
    return ad_bin(c, EM_BINARY_subtract, a, b);
}
em_array *ad_mul(ad_ctx *c, em_array *a, em_array *b) {
    return ad_bin(c, EM_BINARY_multiply, a, b);
}
em_array *ad_div(ad_ctx *c, em_array *a, em_array *b) {
    return ad_bin(c, EM_BINARY_divide, a, b);
}

em_array *ad_scalar(ad_ctx *c, double v, em_dtype dtype) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_scalar_f64(v, dtype, &r);
    return ad_keep(c, st, r);
}

em_array *ad_scale(ad_ctx *c, em_array *a, double v) {
    AD_GUARD(c);
    return ad_mul(c, a, ad_scalar(c, v, a->dtype));
}

em_array *ad_zeros(ad_ctx *c, const int64_t *shape, int ndim, em_dtype dtype) {
    em_array *zero = ad_scalar(c, 0.0, dtype);
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_full(zero, shape, ndim, dtype, &r);
    return ad_keep(c, st, r);
}

em_array *ad_as_type(ad_ctx *c, em_array *a, em_dtype dtype) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_as_type(a, dtype, &r);
    return ad_keep(c, st, r);
}

em_array *ad_reshape(ad_ctx *c, em_array *a, const int64_t *shape, int ndim) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_reshape(a, shape, ndim, &r);
    return ad_keep(c, st, r);
}

em_array *ad_broadcast(ad_ctx *c, em_array *a, const int64_t *shape, int ndim) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_broadcast_to(a, shape, ndim, &r);
    return ad_keep(c, st, r);
}

em_array *ad_select(ad_ctx *c, em_array *pred, em_array *t, em_array *f) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_select(pred, t, f, &r);
    return ad_keep(c, st, r);
}

em_array *ad_sum_axes(ad_ctx *c, em_array *a, const int *axes, int naxes,
                      bool keep) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_reduce(EM_REDUCE_sum, a, axes, naxes, keep, &r);
    return ad_keep(c, st, r);
}

em_array *ad_sum_to(ad_ctx *c, em_array *ct, const em_array *like) {
    AD_GUARD(c);
    int axes[EM_MAX_NDIM], naxes = 0;
    int lead = ct->ndim - like->ndim;
    for (int i = 0; i < ct->ndim; i++)
        if (i < lead || (like->shape[i - lead] == 1 && ct->shape[i] != 1))
            axes[naxes++] = i;
    em_array *summed = naxes ? ad_sum_axes(c, ct, axes, naxes, false) : ct;
    return ad_reshape(c, summed, like->shape, like->ndim);
}

em_array *ad_transpose(ad_ctx *c, em_array *a, const int *perm, int ndim) {
    AD_GUARD(c);
    em_array *r = NULL;
    em_status st = em_transpose(a, perm, ndim, &r);
    return ad_keep(c, st, r);
}
