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

/* fast_heads: the longest head a row buffer holds (CPU) / a warp's row
 * (GPU: 8 features per lane). */
#define EM_FAST_HEADS_MAX_DIM 256

/* The RoPE inverse frequency of pair i: base^(-2i/dims) (fast_rope.c's). */
static inline double fast_decode_inv_freq(double base, int64_t dims,
                                          int64_t i) {
    return pow(base, -2.0 * (double)i / (double)dims);
}

/* fast_heads. Inputs: x (B, S, N) row-contiguous, then norm_weight
 * (head_dim) when has_norm_weight, then offset (0-d s32/s64) when rope,
 * then, when cache, the cache (B, count, L, head_dim, any layout) and
 * cache_offset (0-d s32/s64): the last two inputs. */
typedef struct heads_params {
    int64_t head_dim, first, count, dims;
    bool norm, has_norm_weight, rope, traditional, cache;
    double eps, base, scale;
} heads_params;

em_status em__gpu_fast_linear_eval(em_array *node);
em_status em__gpu_fast_heads_eval(em_array *node);

#endif
