/*
 * ordering.c — vjp rules of the ops that move elements by value: sort
 * (through the sorting permutation), cumulative ops (scan) and window
 * reductions.
 *
 * Sort and cumulative max/min read each output element from one input
 * position; the rule finds those positions, builds the equivalent
 * take_along_axis node (never evaluated) and lets its rule scatter the
 * cotangent back.
 */
#include "emily_scan.h"
#include "emily_sort.h"
#include "emily_window.h"
#include "rules.h"

/* The cotangent of x for out = take_along_axis(x, positions, axis). */
static em_array *scatter_along(ad_ctx *c, em_array *x, em_array *positions,
                               int axis, em_array *ct) {
    if (c->st != EM_OK)
        return NULL;
    em_array *gather = NULL;
    em_status st = em_take_along_axis(x, positions, axis, &gather);
    gather = ad_keep(c, st, gather);
    if (!gather)
        return NULL;
    bool needs[2] = {true, false};
    em_array *g[2] = {NULL, NULL};
    st = em__vjp_take_along(gather, ct, needs, g);
    return ad_keep(c, st, g[0]);
}

em_status em__vjp_sort(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const sort_params *p = node->params;
    em_array *x = node->inputs[0];
    if (!needs[0] || p->indices)
        return EM_OK;
    em_array *perm = NULL;
    em_status st = em_argsort(x, p->axis, p->descending, EM_S64, &perm);
    perm = ad_keep(&c, st, perm);
    ad_out(&c, &in_cts[0], scatter_along(&c, x, perm, p->axis, ct));
    return ad_finish(&c, in_cts, 1);
}

static em_array *ad_scan(ad_ctx *c, em_scan_op op, em_array *a, int axis,
                         bool reverse) {
    if (c->st != EM_OK)
        return NULL;
    em_array *r = NULL;
    em_status st = em_scan(op, a, axis, reverse, &r);
    return ad_keep(c, st, r);
}

/* Cumulative max/min: out[j] = x[s(j)] where s(j) is the last position
 * i <= j at which the running extreme was reached (x[i] == out[i]); in
 * reverse the first such i >= j. */
static em_array *scan_source(ad_ctx *c, em_array *node, const scan_params *p) {
    em_array *x = node->inputs[0];
    if (c->st != EM_OK)
        return NULL;
    em_array *pos = NULL;
    em_status st = em_iota(x->shape, x->ndim, p->axis, EM_S64, &pos);
    pos = ad_keep(c, st, pos);
    double fill = p->reverse ? (double)(x->shape[p->axis] - 1) : 0.0;
    em_array *reached = ad_bin(c, EM_BINARY_equal, x, node);
    em_array *idx = ad_select(c, reached, pos, ad_scalar(c, fill, EM_S64));
    return ad_scan(c, p->reverse ? EM_SCAN_MIN : EM_SCAN_MAX, idx, p->axis,
                   p->reverse);
}

em_status em__vjp_scan(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const scan_params *p = node->params;
    em_array *x = node->inputs[0];
    if (!needs[0])
        return EM_OK;
    em_array *g = NULL;
    switch ((em_scan_op)p->op) {
    case EM_SCAN_SUM: /* each x[i] feeds every later output */
        g = ad_scan(&c, EM_SCAN_SUM, ct, p->axis, !p->reverse);
        break;
    case EM_SCAN_PRODUCT: /* d out[j] / d x[i] = out[j] / x[i] for j >= i */
        g = ad_div(&c,
                   ad_scan(&c, EM_SCAN_SUM, ad_mul(&c, ct, node), p->axis,
                           !p->reverse),
                   x);
        break;
    case EM_SCAN_MAX:
    case EM_SCAN_MIN:
        g = scatter_along(&c, x, scan_source(&c, node, p), p->axis, ct);
        break;
    default:
        return em__fail(EM_ERR_ARGUMENT, "grad: no gradient rule for scan %d",
                        p->op);
    }
    ad_out(&c, &in_cts[0], g);
    return ad_finish(&c, in_cts, 1);
}

/* The adjoint of a window sum: x[i] receives ct[o] from every window o
 * that covers it. Along each axis (window w, stride s, dilation d, low
 * padding pl): dilate ct by s and pad it by (w-1)d in front, so that the
 * window sums of w elements d apart (stride 1) give one value per padded
 * position p; then x[i] is the value at p = i + pl. The padded length P
 * only has to cover every window and every input position (the high
 * padding is not recorded; any larger P adds zeros). */
static em_array *window_sum_adjoint(ad_ctx *c, const win_params *p,
                                    const em_array *x, em_array *ct) {
    if (c->st != EM_OK)
        return NULL;
    const int nd = x->ndim;
    int64_t low[EM_MAX_NDIM], high[EM_MAX_NDIM], interior[EM_MAX_NDIM];
    int64_t back_lo[EM_MAX_NDIM], back_hi[EM_MAX_NDIM];
    int64_t no_interior[EM_MAX_NDIM] = {0};
    em_window_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < nd; i++) {
        int64_t w = p->window[i], s = p->strides[i], d = p->dil[i];
        int64_t m = ct->shape[i], n = x->shape[i], pl = p->low[i];
        if (m == 0) /* no window: nothing flows back */
            return ad_zeros(c, x->shape, x->ndim, ct->dtype);
        int64_t span = (w - 1) * d;
        int64_t covered = (m - 1) * s + span + 1;
        int64_t padded = pl + n > covered ? pl + n : covered;
        low[i] = span;
        interior[i] = s - 1;
        high[i] = padded - (m - 1) * s - 1;
        back_lo[i] = -pl;
        back_hi[i] = n + pl - padded;
        o.window[i] = w;
        o.strides[i] = 1;
        o.dilations[i] = d;
    }
    em_array *zero = ad_scalar(c, 0.0, ct->dtype);
    if (c->st != EM_OK)
        return NULL;
    em_array *z = NULL, *sums = NULL, *g = NULL;
    em_status st = em_pad(ct, zero, low, high, interior, &z);
    if ((z = ad_keep(c, st, z)) == NULL)
        return NULL;
    st = em_window_reduce(EM_WINDOW_SUM, z, &o, &sums);
    if ((sums = ad_keep(c, st, sums)) == NULL)
        return NULL;
    st = em_pad(sums, zero, back_lo, back_hi, no_interior, &g);
    return ad_keep(c, st, g);
}

em_status em__vjp_window(em_array *node, em_array *ct, const bool *needs,
                         em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const win_params *p = node->params;
    em_array *x = node->inputs[0];
    if (!needs[0])
        return EM_OK;
    em_array *g = NULL;
    switch ((em_window_op)p->op) {
    case EM_WINDOW_SUM:
        g = window_sum_adjoint(&c, p, x, ct);
        break;
    case EM_WINDOW_PRODUCT: /* d out[o] / d x[i] = out[o] / x[i] */
        g = ad_div(&c, window_sum_adjoint(&c, p, x, ad_mul(&c, ct, node)), x);
        break;
    case EM_WINDOW_MAX:
    case EM_WINDOW_MIN: { /* to the selected element, as Nx */
        em_window_options o;
        memset(&o, 0, sizeof o);
        for (int i = 0; i < x->ndim; i++) {
            if (p->dil[i] != 1)
                return em__fail(EM_ERR_ARGUMENT,
                                "grad: no gradient rule for window_%s with "
                                "dilations",
                                p->op == EM_WINDOW_MAX ? "max" : "min");
            o.window[i] = p->window[i];
            o.strides[i] = p->strides[i];
            o.pad_low[i] = p->low[i];
            /* the high padding that gives ct's shape */
            int64_t span = p->window[i], m = ct->shape[i];
            int64_t need = m > 0 ? (m - 1) * p->strides[i] + span : 0;
            int64_t have = x->shape[i] + p->low[i];
            o.pad_high[i] = need > have ? need - have : 0;
            o.dilations[i] = 1;
        }
        em_array *zero = ad_scalar(&c, 0.0, ct->dtype), *r = NULL;
        em_status st = c.st == EM_OK ? em_window_scatter(p->op == EM_WINDOW_MAX,
                                                         x, ct, zero, &o, &r)
                                     : c.st;
        g = ad_keep(&c, st, r);
        break;
    }
    default:
        return em__fail(EM_ERR_ARGUMENT,
                        "grad: no gradient rule for window "
                        "op %d",
                        p->op);
    }
    ad_out(&c, &in_cts[0], g);
    return ad_finish(&c, in_cts, 1);
}
