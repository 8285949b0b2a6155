/*
 * dot.c — vjp rule of the general contraction (em_dot, em_matmul).
 *
 * The output's axes are [batch..., a free (m)..., b free (n)...]. The
 * cotangent of one operand x is the contraction of ct with the other
 * operand y over y's free axes, batched over the batch axes both share;
 * the result is then transposed into x's axis order. Batch axes that x
 * broadcasts (matmul's -1) are contracted too (x's cotangent sums over
 * them); y's size-1 broadcast batch axes are squeezed away.
 */
#include "rules.h"

typedef struct dot_side {
    const int *bx, *by; /* batch axes of x and y (-1: broadcast) */
    const int *x_free, *y_free;
    int nx_free, ny_free;
    int x_free_pos, y_free_pos; /* first position of each in ct */
    const int *kx, *ky;         /* contracted pairs */
} dot_side;

static em_array *dot_grad(ad_ctx *c, const dot_params *p, const dot_side *s,
                          em_array *ct, em_array *x, em_array *y) {
    if (c->st != EM_OK)
        return NULL;
    const int nb = p->nbatch;
    /* 1. Sum ct over the batch axes both broadcast (size 1); ct1_pos maps
     * ct axes. */
    int sum_axes[EM_MAX_NDIM], nsum = 0, ct1_pos[EM_MAX_NDIM];
    for (int i = 0, kept = 0; i < ct->ndim; i++) {
        if (i < nb && s->bx[i] < 0 && s->by[i] < 0) {
            sum_axes[nsum++] = i;
            ct1_pos[i] = -1;
        } else {
            ct1_pos[i] = kept++;
        }
    }
    em_array *ct1 = nsum ? ad_sum_axes(c, ct, sum_axes, nsum, false) : ct;
    /* 2. Squeeze y's size-1 axes that are neither batch, contracted nor
     * free (matmul's broadcast batch axes); y1_pos maps y axes. */
    unsigned used = 0;
    for (int i = 0; i < nb; i++)
        if (s->by[i] >= 0)
            used |= 1u << s->by[i];
    for (int i = 0; i < p->nk; i++)
        used |= 1u << s->ky[i];
    for (int i = 0; i < s->ny_free; i++)
        used |= 1u << s->y_free[i];
    int64_t y1_shape[EM_MAX_NDIM];
    int y1_pos[EM_MAX_NDIM], ny1 = 0;
    for (int i = 0; i < y->ndim; i++) {
        y1_pos[i] = (used & (1u << i)) ? ny1 : -1;
        if (used & (1u << i))
            y1_shape[ny1++] = y->shape[i];
    }
    em_array *y1 = ny1 != y->ndim ? ad_reshape(c, y, y1_shape, ny1) : y;
    /* 3. Contract ct1's y-free axes with y1's; batch where both batch. */
    em_dot_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < s->ny_free; i++) {
        o.contract_a[o.ncontract] = ct1_pos[s->y_free_pos + i];
        o.contract_b[o.ncontract++] = y1_pos[s->y_free[i]];
    }
    for (int i = 0; i < nb; i++) /* x broadcast on it: sum of products */
        if (s->bx[i] < 0 && s->by[i] >= 0) {
            o.contract_a[o.ncontract] = ct1_pos[i];
            o.contract_b[o.ncontract++] = y1_pos[s->by[i]];
        }
    for (int i = 0; i < nb; i++)
        if (s->bx[i] >= 0 && s->by[i] >= 0) {
            o.batch_a[o.nbatch] = ct1_pos[i];
            o.batch_b[o.nbatch++] = y1_pos[s->by[i]];
        }
    em_array *r = NULL;
    if (c->st != EM_OK)
        return NULL;
    em_status st = em_dot(ct1, y1, &o, &r);
    r = ad_keep(c, st, r);
    if (!r)
        return NULL;
    /* 4. Result axes: paired batch, ct1's free axes (x-only batch, then x's
     * free), then y1's free axes (y's contracted axes, in y's order). */
    int xpos[EM_MAX_NDIM]; /* result position of each x axis, -1: absent */
    for (int i = 0; i < x->ndim; i++)
        xpos[i] = -1;
    int pos = 0;
    for (int i = 0; i < nb; i++)
        if (s->bx[i] >= 0 && s->by[i] >= 0)
            xpos[s->bx[i]] = pos++;
    for (int i = 0; i < nb; i++)
        if (s->bx[i] >= 0 && s->by[i] < 0)
            xpos[s->bx[i]] = pos++;
    for (int i = 0; i < s->nx_free; i++)
        xpos[s->x_free[i]] = pos++;
    for (int yax = 0; yax < y->ndim; yax++)
        for (int i = 0; i < p->nk; i++)
            if (s->ky[i] == yax)
                xpos[s->kx[i]] = pos++;
    int perm[EM_MAX_NDIM], np = 0;
    for (int i = 0; i < x->ndim; i++)
        if (xpos[i] >= 0)
            perm[np++] = xpos[i];
    return ad_reshape(c, ad_transpose(c, r, perm, np), x->shape, x->ndim);
}

em_status em__vjp_dot(em_array *node, em_array *ct, const bool *needs,
                      em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const dot_params *p = node->params;
    em_array *a = node->inputs[0], *b = node->inputs[1];
    if (needs[0]) {
        dot_side s = {p->batch_a, p->batch_b, p->m_axes, p->n_axes,
                      p->nm,      p->nn,      p->nbatch, p->nbatch + p->nm,
                      p->k_a,     p->k_b};
        ad_out(&c, &in_cts[0], dot_grad(&c, p, &s, ct, a, b));
    }
    if (needs[1]) {
        dot_side s = {p->batch_b, p->batch_a, p->n_axes,         p->m_axes,
                      p->nn,      p->nm,      p->nbatch + p->nm, p->nbatch,
                      p->k_b,     p->k_a};
        ad_out(&c, &in_cts[1], dot_grad(&c, p, &s, ct, b, a));
    }
    return ad_finish(&c, in_cts, 2);
}
