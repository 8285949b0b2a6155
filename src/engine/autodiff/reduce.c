/*
 * reduce.c — vjp rule of the reductions. The cotangent is broadcast back
 * over the reduced axes: as is for sum; times prod/x for product; split
 * evenly among the elements equal to the extreme for max and min (as Nx).
 */
#include "rules.h"

em_status em__vjp_reduce(em_array *node, em_array *ct, const bool *needs,
                         em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const reduce_params *p = node->params;
    em_array *x = node->inputs[0];
    if (!needs[0])
        return EM_OK;
    /* The output's shape with the reduced axes kept as 1. */
    int64_t kept[EM_MAX_NDIM];
    int axes[EM_MAX_NDIM], naxes = 0;
    for (int i = 0; i < x->ndim; i++) {
        bool reduced = (p->mask & (1u << i)) != 0;
        kept[i] = reduced ? 1 : x->shape[i];
        if (reduced)
            axes[naxes++] = i;
    }
    em_array *spread =
        ad_broadcast(&c, ad_reshape(&c, ct, kept, x->ndim), x->shape, x->ndim);
    em_array *g = NULL;
    switch (p->op) {
    case EM_REDUCE_sum:
        g = spread;
        break;
    case EM_REDUCE_product: {
        em_array *y = ad_broadcast(&c, ad_reshape(&c, node, kept, x->ndim),
                                   x->shape, x->ndim);
        g = ad_div(&c, ad_mul(&c, spread, y), x);
        break;
    }
    case EM_REDUCE_max:
    case EM_REDUCE_min: {
        em_array *y = ad_broadcast(&c, ad_reshape(&c, node, kept, x->ndim),
                                   x->shape, x->ndim);
        em_array *hit =
            ad_as_type(&c, ad_bin(&c, EM_BINARY_equal, x, y), x->dtype);
        em_array *count = ad_sum_axes(&c, hit, axes, naxes, true);
        g = ad_div(&c, ad_mul(&c, spread, hit), count);
        break;
    }
    default:
        return em__fail(EM_ERR_ARGUMENT, "grad: no gradient rule for %s",
                        em_reduce_name(p->op));
    }
    ad_out(&c, &in_cts[0], g);
    return ad_finish(&c, in_cts, 1);
}
