/*
 * conv.c — vjp rule of the convolution (em_conv), batch_groups 1.
 *
 * Per spatial axis (stride s, kernel dilation kd, input dilation idil, low
 * padding pl, kernel length k, input length n, output length m), output x
 * reads padded input position p = x*s + j*kd for kernel tap j. Both
 * cotangents are convolutions again:
 *
 *   input:  ct dilated by s, correlated with the kernel flipped and with
 *           its channel axes swapped (per feature group), padded so that
 *           output position i lands on padded position i + pl; with idil
 *           > 1 only every idil-th position is an input element.
 *   kernel: the input (batch and channel axes swapped) correlated with ct
 *           (as a kernel dilated by s) at stride kd; feature groups become
 *           batch groups of that convolution.
 */
#include "emily_conv.h"
#include "rules.h"

static em_array *ad_conv(ad_ctx *c, em_array *in, em_array *k,
                         const em_conv_options *o) {
    if (c->st != EM_OK)
        return NULL;
    em_array *r = NULL;
    em_status st = em_conv(in, k, o, &r);
    return ad_keep(c, st, r);
}

/* Swap the two leading axes. */
static em_array *swap01(ad_ctx *c, em_array *a) {
    int perm[EM_MAX_NDIM];
    for (int i = 0; i < a->ndim; i++)
        perm[i] = i;
    perm[0] = 1;
    perm[1] = 0;
    return ad_transpose(c, a, perm, a->ndim);
}

static em_array *input_grad(ad_ctx *c, const conv_params *p, em_array *x,
                            em_array *kernel, em_array *ct) {
    const int ns = x->ndim - 2;
    const int64_t F = p->fgroups, O = kernel->shape[0], Cg = kernel->shape[1];
    /* kernel (O, Cg, k...) -> (F, Og, Cg, k...) -> (F, Cg, Og, k...) ->
     * (C, Og, k...), taps reversed. */
    int64_t split[EM_MAX_NDIM + 1], merged[EM_MAX_NDIM];
    int perm[EM_MAX_NDIM + 1], spatial[EM_MAX_NDIM];
    split[0] = F, split[1] = O / F, split[2] = Cg;
    merged[0] = F * Cg, merged[1] = O / F;
    perm[0] = 0, perm[1] = 2, perm[2] = 1;
    for (int i = 0; i < ns; i++) {
        split[3 + i] = kernel->shape[2 + i];
        merged[2 + i] = kernel->shape[2 + i];
        perm[3 + i] = 3 + i;
        spatial[i] = 2 + i;
    }
    if (ns + 3 > EM_MAX_NDIM && F > 1)
        return NULL; /* caller checked */
    em_array *k2 = kernel;
    if (F > 1)
        k2 = ad_reshape(
            c,
            ad_transpose(c, ad_reshape(c, kernel, split, ns + 3), perm, ns + 3),
            merged, ns + 2);
    else
        k2 = swap01(c, kernel);
    em_array *flipped = NULL;
    if (c->st == EM_OK) {
        em_status st = em_reverse(k2, spatial, ns, &flipped);
        flipped = ad_keep(c, st, flipped);
    }
    em_conv_options o;
    memset(&o, 0, sizeof o);
    bool strided = false;
    int64_t want[EM_MAX_NDIM];
    for (int i = 0; i < ns; i++) {
        int64_t k = kernel->shape[2 + i], m = ct->shape[2 + i];
        int64_t n = x->shape[2 + i];
        int64_t span = (k - 1) * p->kdil[i];
        want[i] = (n - 1) * p->idil[i] + 1;
        o.input_dilation[i] = p->strides[i];
        o.kernel_dilation[i] = p->kdil[i];
        o.pad_low[i] = span - p->low[i];
        o.pad_high[i] = want[i] - (m - 1) * p->strides[i] - 1 + p->low[i];
        strided = strided || p->idil[i] > 1;
    }
    o.feature_groups = F;
    em_array *g = ad_conv(c, ct, flipped, &o);
    if (!strided || !g)
        return g;
    /* every idil-th padded position is an input element */
    int64_t start[EM_MAX_NDIM] = {0}, stop[EM_MAX_NDIM], step[EM_MAX_NDIM];
    stop[0] = g->shape[0], step[0] = 1;
    stop[1] = g->shape[1], step[1] = 1;
    for (int i = 0; i < ns; i++) {
        stop[2 + i] = want[i];
        step[2 + i] = p->idil[i];
    }
    em_array *r = NULL;
    em_status st = em_slice(g, start, stop, step, &r);
    return ad_keep(c, st, r);
}

static em_array *kernel_grad(ad_ctx *c, const conv_params *p, em_array *x,
                             em_array *kernel, em_array *ct) {
    const int ns = x->ndim - 2;
    em_conv_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < ns; i++) {
        int64_t k = kernel->shape[2 + i], m = ct->shape[2 + i];
        int64_t n = x->shape[2 + i];
        /* the padded length that every output reads: (m-1)s + (k-1)kd + 1 */
        int64_t used = (m - 1) * p->strides[i] + (k - 1) * p->kdil[i] + 1;
        o.pad_low[i] = p->low[i];
        o.pad_high[i] = used - ((n - 1) * p->idil[i] + 1) - p->low[i];
        o.input_dilation[i] = p->idil[i];
        o.kernel_dilation[i] = p->strides[i];
        o.strides[i] = p->kdil[i];
    }
    o.batch_groups = p->fgroups;
    /* (C, N, ...) with (O, N, m...) gives (Cg, O, k...) */
    em_array *g = ad_conv(c, swap01(c, x), swap01(c, ct), &o);
    return swap01(c, g);
}

em_status em__vjp_conv(em_array *node, em_array *ct, const bool *needs,
                       em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const conv_params *p = node->params;
    em_array *x = node->inputs[0], *kernel = node->inputs[1];
    if (p->bgroups != 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "grad: no gradient rule for conv with batch_groups");
    if (p->fgroups > 1 && x->ndim + 1 > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT,
                        "grad: no gradient rule for grouped conv of rank %d",
                        x->ndim);
    bool empty = x->size == 0 || kernel->size == 0 || ct->size == 0;
    if (needs[0])
        ad_out(&c, &in_cts[0],
               empty ? ad_zeros(&c, x->shape, x->ndim, x->dtype)
                     : input_grad(&c, p, x, kernel, ct));
    if (needs[1])
        ad_out(&c, &in_cts[1],
               empty ? ad_zeros(&c, kernel->shape, kernel->ndim, kernel->dtype)
                     : kernel_grad(&c, p, x, kernel, ct));
    return ad_finish(&c, in_cts, 2);
}
