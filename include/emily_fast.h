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

/* ---- decode-path kernels (issue 16): inference only, no vjp (grad
 * through them fails with "no gradient rule for fast_linear") ---- */

/* Options of em_fast_linear; the zero value is a plain product. */
typedef struct em_fast_linear_options {
    /* RMS-norm prologue: x is replaced by x * rsqrt(mean(x^2) + eps) *
     * norm_weight (norm_weight of shape (K) and x's dtype, or NULL for no
     * scaling), over x's last axis, kept in the compute type (not rounded
     * to x's dtype as em_rms_norm's output would be). */
    bool norm;
    em_array *norm_weight;
    double eps;
    /* Gated product (SwiGLU): with gate (N, K) of w's dtype, the result is
     * silu(x @ gate^T) * (x @ w^T), silu(g) = g / (1 + exp(-g)). NULL:
     * x @ w^T. */
    em_array *gate;
    /* Added to the result: shape x's leading axes and N, x's dtype. NULL:
     * nothing. */
    em_array *residual;
} em_fast_linear_options;

/* out = epilogue(prologue(x) @ w^T): the decode step's matrix-vector
 * products fused with what surrounds them. x (..., K) and w (N, K) (the
 * checkpoint layout: a row per output) of one float dtype; out (..., N) of
 * that dtype. Products and epilogue accumulate in f32 (f64 for f64) and
 * round once. On the GPU the weight rows are streamed once with 16-byte
 * loads, for every row of x (meant for a few rows: decode batches). opts
 * may be NULL. */
em_status em_fast_linear(em_array *x, em_array *w,
                         const em_fast_linear_options *opts, em_array **out);

/* Options of em_fast_heads. */
typedef struct em_fast_heads_options {
    /* x's last axis is a row of heads of head_dim features; the result
     * takes heads [first, first + count). */
    int64_t head_dim, first, count;
    /* Per-head RMS norm over head_dim (Qwen3's q/k norms): x * rsqrt(mean
     * (x^2) + eps) * norm_weight (shape (head_dim), x's dtype; NULL: no
     * scaling), kept in the compute type before the rotation. */
    bool norm;
    em_array *norm_weight;
    double eps;
    /* RoPE at position offset + s for sequence index s (em_rope's
     * semantics: rope.dims, traditional, base, scale; rope.freqs must be
     * NULL). offset NULL: no rotation. */
    em_array *offset;
    em_rope_options rope;
    /* Optional KV-cache write: a (B, count, L, head_dim) array of x's dtype
     * and device, L >= S, any layout. NULL: the result is the heads. Else
     * the result is the cache with, for every (b, h), the S rows [start,
     * start + S) replaced by the computed heads. */
    em_array *cache;
    /* Required with cache (and only then): a 0-d s32 or s64 array, the
     * cache row of x's sequence index 0, read at evaluation and clamped to
     * [0, L - S] as em_dynamic_put_slice clamps its starts. Separate from
     * offset (RoPE's position) because v has no rotation; in a decode step
     * both are the same array. */
    em_array *cache_offset;
} em_fast_heads_options;

/* The decode step's head split, q/k norm, RoPE and KV-cache write in one
 * kernel: x (B, S, N) with N >= (first + count) * head_dim -> out (B,
 * count, S, head_dim), head h of out taken from x's features [(first + h)
 * * head_dim, ...), normed and rotated as the options say, rounded once to
 * x's dtype. With a fused q/k/v product's output it gives q, k or v in the
 * attention layout. With opts->cache, k and v go straight into the cache:
 * out is the updated cache (B, count, L, head_dim), equal to
 * em_dynamic_put_slice(cache, {0, 0, cache_offset, 0}, heads). When
 * nothing but this node holds the cache at evaluation (the caller released
 * it), its buffer becomes out's and only the S new rows are written; else
 * the cache is copied first. No vjp (grad fails naming "fast_heads"). */
em_status em_fast_heads(em_array *x, const em_fast_heads_options *opts,
                        em_array **out);

#ifdef __cplusplus
}
#endif

#endif
