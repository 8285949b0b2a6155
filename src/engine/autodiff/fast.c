/*
 * fast.c — vjp rules of the Emily.Fast primitives (ops/fast_norm.c,
 * ops/fast_rope.c), built from ordinary ops. The norms' rules recompute
 * their row statistics from x (cheaper to store nothing); f16 and bf16
 * cotangents are computed in f32 and rounded once, as the kernels do.
 *
 * With g the output cotangent, rows over the last axis (D elements), and
 * h = g * weight (g without a weight):
 *   rms_norm:   r = rsqrt(mean(x^2) + eps)
 *               dx = r h - x r^3 mean(h x),  dweight = sum_rows(g x r)
 *   layer_norm: xhat = (x - mean(x)) r, r = rsqrt(var(x) + eps)
 *               dx = r (h - mean(h) - xhat mean(h xhat)),
 *               dweight = sum_rows(g xhat), dbias = sum_rows(g)
 *   softmax:    dx = y (g - sum(g y))
 *   rope:       a rotation, so its transpose is the rotation by the
 *               opposite angle: rope of g with scale negated.
 */
#include "../ops/fast_params.h"
#include "emily_fast.h"
#include "rules.h"

static em_dtype compute_dtype(em_dtype d) {
    return d == EM_F64 ? EM_F64 : EM_F32;
}

/* Row mean over the last axis, kept as a size-1 axis. */
static em_array *row_mean(ad_ctx *c, em_array *a) {
    int last = a->ndim - 1;
    return ad_scale(c, ad_sum_axes(c, a, &last, 1, true),
                    1.0 / (double)a->shape[last]);
}

/* Sum over every axis but the last: a (..., D) -> (D). */
static em_array *sum_rows(ad_ctx *c, em_array *a) {
    if (!a || a->ndim == 1)
        return a;
    int axes[EM_MAX_NDIM];
    for (int i = 0; i < a->ndim - 1; i++)
        axes[i] = i;
    return ad_sum_axes(c, a, axes, a->ndim - 1, false);
}

em_status em__vjp_fast_rows(em_array *node, em_array *ct, const bool *needs,
                            em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const fast_row_params *p = node->params;
    const em_dtype dt = node->dtype, cf = compute_dtype(dt);
    em_array *x = node->inputs[0];
    int k = 1;
    const int wi = p->has_weight ? k++ : -1;
    const int bi = p->has_bias ? k++ : -1;
    em_array *g = ad_as_type(&c, ct, cf);
    const int last = x->ndim - 1;

    if (p->kind == FAST_SOFTMAX) {
        em_array *y = ad_as_type(&c, node, cf);
        em_array *gy = ad_sum_axes(&c, ad_mul(&c, g, y), &last, 1, true);
        if (needs[0])
            ad_out(&c, &in_cts[0],
                   ad_as_type(&c, ad_mul(&c, y, ad_sub(&c, g, gy)), dt));
        return ad_finish(&c, in_cts, node->ninputs);
    }

    em_array *xf = ad_as_type(&c, x, cf);
    em_array *eps = ad_scalar(&c, p->eps, cf);
    em_array *w = wi >= 0 ? ad_as_type(&c, node->inputs[wi], cf) : NULL;
    em_array *h = w ? ad_mul(&c, g, w) : g;

    if (p->kind == FAST_RMS_NORM) {
        em_array *r = ad_un(&c, EM_UNARY_rsqrt,
                            ad_add(&c, row_mean(&c, ad_mul(&c, xf, xf)), eps));
        if (needs[0]) {
            em_array *r3 = ad_mul(&c, r, ad_mul(&c, r, r));
            em_array *hx = row_mean(&c, ad_mul(&c, h, xf));
            em_array *dx = ad_sub(&c, ad_mul(&c, r, h),
                                  ad_mul(&c, xf, ad_mul(&c, r3, hx)));
            ad_out(&c, &in_cts[0], ad_as_type(&c, dx, dt));
        }
        if (wi >= 0 && needs[wi])
            ad_out(&c, &in_cts[wi],
                   ad_as_type(&c,
                              sum_rows(&c, ad_mul(&c, g, ad_mul(&c, xf, r))),
                              dt));
        return ad_finish(&c, in_cts, node->ninputs);
    }

    /* layer norm */
    em_array *xc = ad_sub(&c, xf, row_mean(&c, xf));
    em_array *r = ad_un(&c, EM_UNARY_rsqrt,
                        ad_add(&c, row_mean(&c, ad_mul(&c, xc, xc)), eps));
    em_array *xhat = ad_mul(&c, xc, r);
    if (needs[0]) {
        em_array *inner =
            ad_sub(&c, ad_sub(&c, h, row_mean(&c, h)),
                   ad_mul(&c, xhat, row_mean(&c, ad_mul(&c, h, xhat))));
        ad_out(&c, &in_cts[0], ad_as_type(&c, ad_mul(&c, r, inner), dt));
    }
    if (wi >= 0 && needs[wi])
        ad_out(&c, &in_cts[wi],
               ad_as_type(&c, sum_rows(&c, ad_mul(&c, g, xhat)), dt));
    if (bi >= 0 && needs[bi])
        ad_out(&c, &in_cts[bi], ad_as_type(&c, sum_rows(&c, g), dt));
    return ad_finish(&c, in_cts, node->ninputs);
}

em_status em__vjp_fast_rope(em_array *node, em_array *ct, const bool *needs,
                            em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const fast_rope_params *p = node->params;
    if (needs[0]) {
        em_rope_options o = {p->dims, p->traditional, p->base, -p->scale,
                             p->has_freqs ? node->inputs[2] : NULL};
        em_array *r = NULL;
        em_status st = em_rope(ct, node->inputs[1], &o, &r);
        ad_out(&c, &in_cts[0], ad_keep(&c, st, r));
    }
    /* offset is an integer and freqs a constant: no cotangent */
    return ad_finish(&c, in_cts, node->ninputs);
}
