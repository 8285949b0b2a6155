/*
 * emily_fast.h — fused transformer kernels: RMS norm, layer norm, softmax
 * and rotary position embeddings (part of libemily; include after or
 * instead of emily.h).
 *
 * Each is one primitive with a CPU kernel, a CUDA kernel and a vjp rule
 * built from ordinary ops, so that grad and compile see through them. They
 * are the engine side of Emily.Fast. Conventions are those of emily.h:
 * em_status results, new references through `out`, borrowed inputs.
 *
 * Dtypes: f16, bf16, f32 and f64. The output has the input's dtype. f16,
 * bf16 and f32 accumulate in float, f64 in double; each result is rounded
 * once to the output dtype. NaN and Inf in a row propagate as the composed
 * formula would (a NaN anywhere in a row makes the whole row NaN).
 */
#ifndef EMILY_FAST_H
#define EMILY_FAST_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x * rsqrt(mean(x^2) + eps) * weight, the mean over the last axis.
 * weight: shape (D) with D = x's last dimension and x's dtype, or NULL (no
 * scaling). x has rank >= 1. */
em_status em_rms_norm(em_array *x, em_array *weight, double eps,
                      em_array **out);

/* y = (x - mean) * rsqrt(var + eps) * weight + bias over the last axis,
 * var the biased (population) variance. weight and bias: shape (D) and x's
 * dtype, each optional (NULL: 1 and 0). x has rank >= 1. */
em_status em_layer_norm(em_array *x, em_array *weight, em_array *bias,
                        double eps, em_array **out);

/* exp(x - max) / sum(exp(x - max)) along `axis` (negative counts from the
 * end; -1 is the last axis), numerically stable. One read pass keeps a
 * running max and a running sum rescaled when the max grows (online
 * softmax), then one pass writes: the row is read from memory once. A row
 * holding +Inf, or only -Inf, gives NaN (as the composed formula). Other
 * axes than the last go through a transposed copy. */
em_status em_softmax(em_array *x, int axis, em_array **out);

/* Rotary position embedding options. The zero value is not usable: dims
 * must be set; base 0 means 10000 and scale 0 means 1. */
typedef struct em_rope_options {
    /* Rotate the first `dims` features of the last axis (even, 2 <= dims
     * <= D); the others pass through unchanged. */
    int64_t dims;
    /* true: the pairs are interleaved, (x0, x1), (x2, x3), ... (the
     * original RoFormer / GPT-J form); false: pair i is (x_i,
     * x_{i + dims/2}) (the HF / GPT-NeoX half rotation). */
    bool traditional;
    /* Inverse frequency of pair i: base^(-2i/dims). */
    double base;
    /* Multiplies every position (linear RoPE scaling uses 1/factor). */
    double scale;
    /* Optional, replaces base: a 1-D f32 array of dims/2 values, MLX's
     * convention — they are periods, pair i turns by scale * pos /
     * freqs[i]. Llama 3, LongRoPE, linear and dynamic scaling precompute
     * them. NULL: use base. */
    em_array *freqs;
} em_rope_options;

/* Rotate the feature pairs of x (shape (..., L, D), rank >= 2: Emily.Fast
 * uses {batch, heads, seq, head_dim}) by the angle scale * pos * inv_freq_i
 * at position pos = offset + l for sequence index l (the second-to-last
 * axis). offset is a 0-d s32 or s64 array, not a C integer, so that a
 * compiled decode step can replay the same program with a new offset.
 * Pair (a, b) becomes (a cos - b sin, a sin + b cos). Angles are computed
 * in double, then rounded to the compute type. */
em_status em_rope(em_array *x, em_array *offset, const em_rope_options *opts,
                  em_array **out);

#ifdef __cplusplus
}
#endif

#endif
