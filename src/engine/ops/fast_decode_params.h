/*
 * fast_decode_params.h — parameter blocks of the decode-path primitives
 * (ops/fast_decode.c), read back by their GPU evals (gpu/gpu_decode.c).
 */
#ifndef EMILY_OPS_FAST_DECODE_PARAMS_H
#define EMILY_OPS_FAST_DECODE_PARAMS_H

#include "internal.h"

/* fast_linear. Inputs, all row-contiguous: x (..., K), w (N, K), then
 * norm_weight (K) when has_norm_weight, gate (N, K) when has_gate,
 * residual (..., N) when has_residual. */
typedef struct linear_params {
    bool norm, has_norm_weight, has_gate, has_residual;
    double eps;
} linear_params;

em_status em__gpu_fast_linear_eval(em_array *node);

#endif
