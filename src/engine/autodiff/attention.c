/*
 * attention.c — vjp rule of em_sdpa, composed from ordinary ops (the
 * scores are recomputed; nothing of the fused kernel is kept).
 *
 * With the query heads of a KV head grouped as rows (q as (B, Hkv, G*Lq,
 * D), g-major, which is a plain reshape of (B, H, Lq, D)), the forward is
 *   S = scale q k^T + mask (causal and boolean masks: -inf)
 *   m = max(rowmax S, sink), E = exp(S - m), den = rowsum E + exp(sink - m)
 *   P = E / den (0 on fully masked rows), out = P v
 * and with the cotangent dO:
 *   dV = P^T dO (the group's rows summed by the contraction)
 *   dP = dO v^T, delta = rowsum(P * dP) (= rowsum(dO * out))
 *   dS = P * (dP - delta)
 *   dq = scale dS k, dk = scale dS^T q, dmask = dS summed to the mask's
 *   shape, dsink[h] = -sum_{b,i} exp(sink - m) / den * delta.
 * Half types are differentiated in f32 and the cotangents rounded once. A
 * boolean mask has no cotangent.
 */
#include "emily_attention.h"
#include "ops/attention_params.h"
#include "rules.h"

static em_array *ad_dot2(ad_ctx *c, em_array *a, int ca, em_array *b, int cb) {
    /* batch axes (0, 1) of both, contracting a's axis ca with b's cb */
    if (c->st != EM_OK)
        return NULL;
    em_dot_options o;
    memset(&o, 0, sizeof o);
    o.ncontract = 1;
    o.contract_a[0] = ca;
    o.contract_b[0] = cb;
    o.nbatch = 2;
    o.batch_a[0] = o.batch_b[0] = 0;
    o.batch_a[1] = o.batch_b[1] = 1;
    em_array *r = NULL;
    em_status st = em_dot(a, b, &o, &r);
    return ad_keep(c, st, r);
}

static em_array *ad_reduce_last(ad_ctx *c, em_reduce_op op, em_array *a) {
    if (c->st != EM_OK)
        return NULL;
    int axis = a->ndim - 1;
    em_array *r = NULL;
    em_status st = em_reduce(op, a, &axis, 1, true, &r);
    return ad_keep(c, st, r);
}

/* true where key j may be seen by query i: j <= i + (Lk - Lq), (Lq, Lk) */
static em_array *causal_allowed(ad_ctx *c, int64_t Lq, int64_t Lk) {
    if (c->st != EM_OK)
        return NULL;
    const int64_t shape[2] = {Lq, Lk};
    em_array *rows = NULL, *cols = NULL;
    em_status st = em_iota(shape, 2, 0, EM_S64, &rows);
    rows = ad_keep(c, st, rows);
    if (c->st == EM_OK) {
        st = em_iota(shape, 2, 1, EM_S64, &cols);
        cols = ad_keep(c, st, cols);
    }
    em_array *limit = ad_add(c, rows, ad_scalar(c, (double)(Lk - Lq), EM_S64));
    return ad_bin(c, EM_BINARY_less_equal, cols, limit);
}

em_status em__vjp_sdpa(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const sdpa_params *p = node->params;
    em_array *q = node->inputs[0], *k = node->inputs[1], *v = node->inputs[2];
    int next = 3;
    em_array *mask = NULL, *sinks = NULL;
    int mask_at = -1, sinks_at = -1;
    if (p->mask_kind != SDPA_MASK_NONE)
        mask = node->inputs[mask_at = next++];
    if (p->has_sinks)
        sinks = node->inputs[sinks_at = next++];
    const em_dtype dt = q->dtype;
    const em_dtype wt = dt == EM_F64 ? EM_F64 : EM_F32; /* work type */
    const int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2],
                  D = q->shape[3];
    const int64_t Hkv = k->shape[1], Lk = k->shape[2], Dv = v->shape[3];
    const int64_t G = H / Hkv;

    em_array *qw = ad_as_type(&c, q, wt), *kw = ad_as_type(&c, k, wt);
    em_array *vw = ad_as_type(&c, v, wt), *ctw = ad_as_type(&c, ct, wt);
    const int64_t qg_shape[4] = {B, Hkv, G * Lq, D};
    const int64_t ctg_shape[4] = {B, Hkv, G * Lq, Dv};
    const int64_t s_shape[4] = {B, H, Lq, Lk};
    const int64_t sg_shape[4] = {B, Hkv, G * Lq, Lk};
    em_array *qg = ad_reshape(&c, qw, qg_shape, 4);
    em_array *ctg = ad_reshape(&c, ctw, ctg_shape, 4);

    /* scores (B, H, Lq, Lk) */
    em_array *s = ad_reshape(
        &c, ad_scale(&c, ad_dot2(&c, qg, 3, kw, 3), p->scale), s_shape, 4);
    em_array *neg_inf = ad_scalar(&c, -INFINITY, wt);
    if (p->mask_kind == SDPA_MASK_ADDITIVE)
        s = ad_add(&c, s, ad_as_type(&c, mask, wt));
    else if (p->mask_kind == SDPA_MASK_BOOL)
        s = ad_select(&c, mask, s, neg_inf);
    if (p->causal)
        s = ad_select(&c, causal_allowed(&c, Lq, Lk), s, neg_inf);

    /* weights */
    const int64_t sink_shape[4] = {1, H, 1, 1};
    em_array *sink4 =
        sinks ? ad_reshape(&c, ad_as_type(&c, sinks, wt), sink_shape, 4) : NULL;
    em_array *m = ad_reduce_last(&c, EM_REDUCE_max, s);
    if (sink4)
        m = ad_bin(&c, EM_BINARY_maximum, m, sink4);
    em_array *zero = ad_scalar(&c, 0, wt);
    m = ad_select(&c, ad_bin(&c, EM_BINARY_equal, m, neg_inf), zero, m);
    em_array *e = ad_un(&c, EM_UNARY_exp, ad_sub(&c, s, m));
    em_array *den = ad_reduce_last(&c, EM_REDUCE_sum, e);
    em_array *esink =
        sink4 ? ad_un(&c, EM_UNARY_exp, ad_sub(&c, sink4, m)) : NULL;
    if (esink)
        den = ad_add(&c, den, esink);
    den = ad_select(&c, ad_bin(&c, EM_BINARY_equal, den, zero),
                    ad_scalar(&c, 1, wt), den);
    em_array *pw = ad_div(&c, e, den);
    em_array *pg = ad_reshape(&c, pw, sg_shape, 4);

    if (c.st != EM_OK)
        return ad_finish(&c, in_cts, node->ninputs);
    /* The cotangents: a second context, so that neither holds more than
     * AD_MAX_TMP temporaries (the forward's stay alive until the end). */
    ad_ctx g = AD_INIT;
    /* dV (B, Hkv, Lk, Dv) */
    if (needs[2])
        ad_out(&g, &in_cts[2], ad_as_type(&g, ad_dot2(&g, pg, 2, ctg, 2), dt));
    bool want_s = needs[0] || needs[1] ||
                  (mask_at >= 0 && needs[mask_at] &&
                   p->mask_kind == SDPA_MASK_ADDITIVE) ||
                  (sinks_at >= 0 && needs[sinks_at]);
    if (want_s) {
        em_array *dp = ad_reshape(&g, ad_dot2(&g, ctg, 3, vw, 3), s_shape, 4);
        em_array *delta = ad_reduce_last(&g, EM_REDUCE_sum, ad_mul(&g, pw, dp));
        em_array *ds = ad_mul(&g, pw, ad_sub(&g, dp, delta));
        em_array *dsg = ad_reshape(&g, ds, sg_shape, 4);
        if (needs[0]) {
            em_array *dq = ad_scale(&g, ad_dot2(&g, dsg, 3, kw, 2), p->scale);
            const int64_t q_shape[4] = {B, H, Lq, D};
            ad_out(&g, &in_cts[0],
                   ad_as_type(&g, ad_reshape(&g, dq, q_shape, 4), dt));
        }
        if (needs[1])
            ad_out(&g, &in_cts[1],
                   ad_as_type(
                       &g, ad_scale(&g, ad_dot2(&g, dsg, 2, qg, 2), p->scale),
                       dt));
        if (mask_at >= 0 && needs[mask_at] &&
            p->mask_kind == SDPA_MASK_ADDITIVE)
            ad_out(&g, &in_cts[mask_at],
                   ad_as_type(&g, ad_sum_to(&g, ds, mask), dt));
        if (sinks_at >= 0 && needs[sinks_at]) {
            /* -sum over (b, i) of exp(sink - m) / den * delta */
            em_array *t = ad_mul(&g, ad_div(&g, esink, den), delta);
            const int axes[3] = {0, 2, 3};
            em_array *dsink =
                ad_un(&g, EM_UNARY_negate, ad_sum_axes(&g, t, axes, 3, false));
            ad_out(&g, &in_cts[sinks_at], ad_as_type(&g, dsink, dt));
        }
    }
    em_status st = ad_finish(&g, in_cts, node->ninputs);
    ad_finish(&c, NULL, 0);
    return st;
}
