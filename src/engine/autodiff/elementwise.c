/*
 * elementwise.c — vjp rules of unary and binary ops, select, clip and
 * as_type. Inputs are real floats here (em_vjp only sends float gradients);
 * broadcast inputs get their cotangent summed back to their shape.
 */
#include "rules.h"

/* d/dx of the unary op, times ct. x is the input, y the node's value.
 * NULL result: the op is piecewise constant (zero gradient). */
static em_array *unary_grad(ad_ctx *c, em_unary_op op, em_array *x, em_array *y,
                            em_array *ct) {
    em_dtype t = x->dtype;
#define ONE ad_scalar(c, 1.0, t)
#define SQ(v) ad_mul(c, (v), (v))
    switch (op) {
    case EM_UNARY_negate:
        return ad_un(c, EM_UNARY_negate, ct);
    case EM_UNARY_abs:
        return ad_mul(c, ct, ad_un(c, EM_UNARY_sign, x));
    case EM_UNARY_sqrt: /* 1 / (2 sqrt x) */
        return ad_div(c, ad_scale(c, ct, 0.5), y);
    case EM_UNARY_rsqrt: /* -x^(-3/2) / 2 = -y / (2x) */
        return ad_div(c, ad_mul(c, ad_scale(c, ct, -0.5), y), x);
    case EM_UNARY_exp:
        return ad_mul(c, ct, y);
    case EM_UNARY_expm1:
        return ad_mul(c, ct, ad_add(c, y, ONE));
    case EM_UNARY_log:
        return ad_div(c, ct, x);
    case EM_UNARY_log1p:
        return ad_div(c, ct, ad_add(c, x, ONE));
    case EM_UNARY_sin:
        return ad_mul(c, ct, ad_un(c, EM_UNARY_cos, x));
    case EM_UNARY_cos:
        return ad_mul(c, ad_un(c, EM_UNARY_negate, ct),
                      ad_un(c, EM_UNARY_sin, x));
    case EM_UNARY_tan: /* 1 + tan^2 */
        return ad_mul(c, ct, ad_add(c, ONE, SQ(y)));
    case EM_UNARY_tanh:
        return ad_mul(c, ct, ad_sub(c, ONE, SQ(y)));
    case EM_UNARY_sigmoid:
        return ad_mul(c, ct, ad_mul(c, y, ad_sub(c, ONE, y)));
    case EM_UNARY_erf: /* 2/sqrt(pi) exp(-x^2) */
    case EM_UNARY_erfc: {
        double k = (op == EM_UNARY_erf ? 2.0 : -2.0) / sqrt(M_PI);
        em_array *e = ad_un(c, EM_UNARY_exp, ad_un(c, EM_UNARY_negate, SQ(x)));
        return ad_mul(c, ad_scale(c, ct, k), e);
    }
    case EM_UNARY_erf_inv: /* sqrt(pi)/2 exp(y^2) */
        return ad_mul(c, ad_scale(c, ct, sqrt(M_PI) / 2.0),
                      ad_un(c, EM_UNARY_exp, SQ(y)));
    case EM_UNARY_asin: /* 1 / sqrt(1 - x^2) */
        return ad_mul(c, ct, ad_un(c, EM_UNARY_rsqrt, ad_sub(c, ONE, SQ(x))));
    case EM_UNARY_acos:
        return ad_mul(c, ad_un(c, EM_UNARY_negate, ct),
                      ad_un(c, EM_UNARY_rsqrt, ad_sub(c, ONE, SQ(x))));
    case EM_UNARY_atan:
        return ad_div(c, ct, ad_add(c, ONE, SQ(x)));
    case EM_UNARY_sinh:
        return ad_mul(c, ct, ad_un(c, EM_UNARY_cosh, x));
    case EM_UNARY_cosh:
        return ad_mul(c, ct, ad_un(c, EM_UNARY_sinh, x));
    case EM_UNARY_asinh:
        return ad_mul(c, ct, ad_un(c, EM_UNARY_rsqrt, ad_add(c, SQ(x), ONE)));
    case EM_UNARY_acosh:
        return ad_mul(c, ct, ad_un(c, EM_UNARY_rsqrt, ad_sub(c, SQ(x), ONE)));
    case EM_UNARY_atanh:
        return ad_div(c, ct, ad_sub(c, ONE, SQ(x)));
    case EM_UNARY_cbrt: /* x^(-2/3) / 3 = 1 / (3 y^2) */
        return ad_div(c, ad_scale(c, ct, 1.0 / 3.0), SQ(y));
    case EM_UNARY_real:
    case EM_UNARY_conjugate: /* of a real value: the identity */
        return ct;
    default: /* sign, floor, ceil, round, imag of a real: constant */
        return NULL;
    }
#undef ONE
#undef SQ
}

em_status em__vjp_unary(em_array *node, em_array *ct, const bool *needs,
                        em_array **in_cts) {
    ad_ctx c = AD_INIT;
    em_unary_op op = (em_unary_op)(*(const int *)node->params);
    if (needs[0])
        ad_out(&c, &in_cts[0], unary_grad(&c, op, node->inputs[0], node, ct));
    return ad_finish(&c, in_cts, 1);
}

/* Where a and b tie, max/min send half of the cotangent to each (as Nx). */
static void extremum_grad(ad_ctx *c, em_array *node, em_array *ct,
                          em_array **ga, em_array **gb) {
    em_array *a = node->inputs[0], *b = node->inputs[1];
    em_array *ma =
        ad_as_type(c, ad_bin(c, EM_BINARY_equal, a, node), ct->dtype);
    em_array *mb =
        ad_as_type(c, ad_bin(c, EM_BINARY_equal, b, node), ct->dtype);
    em_array *share = ad_div(c, ct, ad_add(c, ma, mb));
    *ga = ad_mul(c, share, ma);
    *gb = ad_mul(c, share, mb);
}

em_status em__vjp_binary(em_array *node, em_array *ct, const bool *needs,
                         em_array **in_cts) {
    ad_ctx c = AD_INIT;
    em_binary_op op = (em_binary_op)(*(const int *)node->params);
    em_array *a = node->inputs[0], *b = node->inputs[1];
    em_array *ga = NULL, *gb = NULL;
    switch (op) {
    case EM_BINARY_add:
        ga = ct;
        gb = ct;
        break;
    case EM_BINARY_subtract:
        ga = ct;
        gb = needs[1] ? ad_un(&c, EM_UNARY_negate, ct) : NULL;
        break;
    case EM_BINARY_multiply:
        ga = needs[0] ? ad_mul(&c, ct, b) : NULL;
        gb = needs[1] ? ad_mul(&c, ct, a) : NULL;
        break;
    case EM_BINARY_divide: /* d/db a/b = -(a/b)/b */
        ga = needs[0] ? ad_div(&c, ct, b) : NULL;
        gb = needs[1] ? ad_un(&c, EM_UNARY_negate,
                              ad_div(&c, ad_mul(&c, ct, node), b))
                      : NULL;
        break;
    case EM_BINARY_pow: { /* b a^(b-1); a^b log a (0 where a^b is 0) */
        if (needs[0]) {
            em_array *bm1 = ad_sub(&c, b, ad_scalar(&c, 1.0, b->dtype));
            ga = ad_mul(&c, ct,
                        ad_mul(&c, b, ad_bin(&c, EM_BINARY_pow, a, bm1)));
        }
        if (needs[1]) {
            em_array *zero = ad_scalar(&c, 0.0, a->dtype);
            em_array *is_zero = ad_bin(&c, EM_BINARY_equal, node, zero);
            em_array *l = ad_mul(&c, node, ad_un(&c, EM_UNARY_log, a));
            gb = ad_mul(&c, ct, ad_select(&c, is_zero, zero, l));
        }
        break;
    }
    case EM_BINARY_maximum:
    case EM_BINARY_minimum:
        extremum_grad(&c, node, ct, &ga, &gb);
        break;
    case EM_BINARY_remainder: /* a - b trunc(a/b): trunc(a/b) = (a - r)/b */
        ga = ct;
        gb = needs[1]
                 ? ad_un(&c, EM_UNARY_negate,
                         ad_mul(&c, ct, ad_div(&c, ad_sub(&c, a, node), b)))
                 : NULL;
        break;
    case EM_BINARY_atan2: { /* atan2(a, b): (b, -a) / (a^2 + b^2) */
        em_array *r2 = ad_add(&c, ad_mul(&c, a, a), ad_mul(&c, b, b));
        em_array *k = ad_div(&c, ct, r2);
        ga = needs[0] ? ad_mul(&c, k, b) : NULL;
        gb = needs[1] ? ad_un(&c, EM_UNARY_negate, ad_mul(&c, k, a)) : NULL;
        break;
    }
    default: /* integer and pred ops never carry a float gradient */
        return em__fail(EM_ERR_ARGUMENT, "grad: no gradient rule for %s",
                        node->prim->name);
    }
    if (needs[0] && ga)
        ad_out(&c, &in_cts[0], ad_sum_to(&c, ga, a));
    if (needs[1] && gb)
        ad_out(&c, &in_cts[1], ad_sum_to(&c, gb, b));
    return ad_finish(&c, in_cts, 2);
}

em_status em__vjp_select(em_array *node, em_array *ct, const bool *needs,
                         em_array **in_cts) {
    ad_ctx c = AD_INIT;
    em_array *pred = node->inputs[0];
    em_array *zero = ad_scalar(&c, 0.0, ct->dtype);
    if (needs[1])
        ad_out(&c, &in_cts[1],
               ad_sum_to(&c, ad_select(&c, pred, ct, zero), node->inputs[1]));
    if (needs[2])
        ad_out(&c, &in_cts[2],
               ad_sum_to(&c, ad_select(&c, pred, zero, ct), node->inputs[2]));
    return ad_finish(&c, in_cts, 3);
}

/* clip = min(max(a, lo), hi): the cotangent goes to hi where the result is
 * hi and a is above it, else to a where a >= lo, else to lo. */
em_status em__vjp_clip(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    ad_ctx c = AD_INIT;
    em_array *a = node->inputs[0], *lo = node->inputs[1], *hi = node->inputs[2];
    em_array *zero = ad_scalar(&c, 0.0, ct->dtype);
    em_array *raised = ad_bin(&c, EM_BINARY_maximum, a, lo);
    em_array *to_hi = ad_bin(&c, EM_BINARY_greater, raised, hi);
    em_array *to_lo = ad_bin(&c, EM_BINARY_less, a, lo);
    em_array *below_hi = ad_select(&c, to_hi, zero, ct);
    if (needs[0])
        ad_out(&c, &in_cts[0], ad_select(&c, to_lo, zero, below_hi));
    if (needs[1])
        ad_out(&c, &in_cts[1],
               ad_sum_to(&c, ad_select(&c, to_lo, below_hi, zero), lo));
    if (needs[2])
        ad_out(&c, &in_cts[2],
               ad_sum_to(&c, ad_select(&c, to_hi, ct, zero), hi));
    return ad_finish(&c, in_cts, 3);
}

em_status em__vjp_as_type(em_array *node, em_array *ct, const bool *needs,
                          em_array **in_cts) {
    ad_ctx c = AD_INIT;
    if (needs[0])
        ad_out(&c, &in_cts[0], ad_as_type(&c, ct, node->inputs[0]->dtype));
    return ad_finish(&c, in_cts, 1);
}
