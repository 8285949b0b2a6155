/*
 * affine_vjp.c — the vjp rule of em_quantized_matmul, with respect to x
 * only: the weights are frozen (no cotangent for wq, scales, biases).
 *
 * out = x @ D^T (transpose) has dx = ct @ D, which is the same packed
 * weights read the other way: em_quantized_matmul with transpose negated
 * (and vice versa). ct (..., N) gives (..., K), x's shape.
 */
#include "autodiff/rules.h"
#include "quant/affine.h"

#include "emily_quant.h"

em_status em__vjp_quantized_matmul(em_array *node, em_array *ct,
                                   const bool *needs, em_array **in_cts) {
    ad_ctx c = AD_INIT;
    const em_quant_params *p = node->params;
    if (needs[0]) {
        em_array *dx = NULL;
        em_status st = em_quantized_matmul(
            ct, node->inputs[1], node->inputs[2], node->inputs[3],
            !p->transpose, p->group_size, p->bits, &dx);
        ad_out(&c, &in_cts[0], ad_keep(&c, st, dx));
    }
    return ad_finish(&c, in_cts, node->ninputs);
}
