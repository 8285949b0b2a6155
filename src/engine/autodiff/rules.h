/*
 * rules.h — what the vjp rules of src/engine/autodiff/ share: a small
 * builder that chains op builders, keeps the temporaries for release and
 * remembers the first failure, so a rule reads as its formula.
 *
 *     ad_ctx c = AD_INIT;
 *     em_array *x = node->inputs[0];
 *     ad_out(&c, &in_cts[0], ad_mul(&c, ct, ad_un(&c, EM_UNARY_cos, x)));
 *     return ad_finish(&c, in_cts, node->ninputs);
 *
 * Every ad_* builder returns a borrowed pointer owned by the context (NULL
 * once something failed: later builders then do nothing).
 */
#ifndef EMILY_AUTODIFF_RULES_H
#define EMILY_AUTODIFF_RULES_H

#include "emily_pad.h"
#include "internal.h"
#include "ops/params.h"

#define AD_MAX_TMP 64

typedef struct ad_ctx {
    em_status st;
    int ntmp;
    em_array *tmp[AD_MAX_TMP];
} ad_ctx;

#define AD_INIT                                                                \
    {                                                                          \
        EM_OK, 0, { 0 }                                                        \
    }

/* Keep `a` (built with status st) as a temporary; NULL on failure. */
em_array *ad_keep(ad_ctx *c, em_status st, em_array *a);
/* The rule's result for one input: a new reference in *slot. */
void ad_out(ad_ctx *c, em_array **slot, em_array *a);
/* Release the temporaries; on failure also the results already stored in
 * outs[0..n). Returns the first failure. */
em_status ad_finish(ad_ctx *c, em_array **outs, int n);

em_array *ad_un(ad_ctx *c, em_unary_op op, em_array *a);
em_array *ad_bin(ad_ctx *c, em_binary_op op, em_array *a, em_array *b);
em_array *ad_add(ad_ctx *c, em_array *a, em_array *b);
em_array *ad_sub(ad_ctx *c, em_array *a, em_array *b);
em_array *ad_mul(ad_ctx *c, em_array *a, em_array *b);
em_array *ad_div(ad_ctx *c, em_array *a, em_array *b);
/* A 0-d array of `dtype` holding v. */
em_array *ad_scalar(ad_ctx *c, double v, em_dtype dtype);
/* a * v with v a scalar of a's dtype. */
em_array *ad_scale(ad_ctx *c, em_array *a, double v);
em_array *ad_zeros(ad_ctx *c, const int64_t *shape, int ndim, em_dtype dtype);
em_array *ad_as_type(ad_ctx *c, em_array *a, em_dtype dtype);
em_array *ad_reshape(ad_ctx *c, em_array *a, const int64_t *shape, int ndim);
em_array *ad_broadcast(ad_ctx *c, em_array *a, const int64_t *shape, int ndim);
em_array *ad_select(ad_ctx *c, em_array *pred, em_array *t, em_array *f);
/* Sum a broadcast result's cotangent back to `like`'s shape (the leading
 * axes and the axes where `like` has size 1). */
em_array *ad_sum_to(ad_ctx *c, em_array *ct, const em_array *like);
em_array *ad_sum_axes(ad_ctx *c, em_array *a, const int *axes, int naxes,
                      bool keep);
em_array *ad_transpose(ad_ctx *c, em_array *a, const int *perm, int ndim);

#endif
