/*
 * emily_attention.h — fused scaled dot-product attention (part of libemily;
 * include after or instead of emily.h). The engine primitive behind
 * Emily.Fast.Attention.
 *
 * Layout (every array rank 4, one dtype: f16, bf16, f32 or f64):
 *   q   (B, H,   Lq, D)    queries
 *   k   (B, Hkv, Lk, D)    keys
 *   v   (B, Hkv, Lk, Dv)   values
 *   out (B, H,   Lq, Dv)   of q's dtype
 *
 * Grouped-query and multi-query attention: H must be a multiple of Hkv and
 * consecutive query heads share a KV head, query head h reading KV head
 * h / (H / Hkv) (MLX's convention; Hkv == H is plain multi-head attention).
 *
 *   s[i, j]   = scale * (q[i] . k[j]) + mask[i, j]      (additive mask)
 *   out[i]    = sum_j exp(s[i, j] - m) v[j] / (sum_j exp(s[i, j] - m)
 *                                             + exp(sink[h] - m))
 * with m the row's maximum (the sink term only with sinks). Keys that are
 * masked out (boolean mask false, causal) get s = -inf.
 *
 * Fully masked rows (every key masked out, -inf additive entries included,
 * or Lk == 0) give 0, not NaN, with or without sinks: the row attends to
 * nothing, and a zero row is what the cached-decode padding rows and the
 * gradients need. Rows whose scores are very negative but finite are not
 * masked (the softmax is then taken over them as usual).
 *
 * Inputs may be any views (a slice of a KV cache, transposed heads): the
 * kernels read through the strides. Half types compute in f32 (scores,
 * online softmax and the accumulated output) and round once; f64 computes
 * in f64.
 *
 * CPU: flash-attention style, never materialising Lq x Lk: each task takes
 * a block of query rows of one (batch, KV head), all the query heads of
 * the group together, and walks the keys in tiles with an online softmax.
 * Short query blocks (Lq <= 4, decoding) over many keys split the keys
 * across the thread pool instead (flash-decoding: per chunk a max, a sum
 * and a partial output, then a combine step).
 * CUDA: a tiled kernel for prefill and a split-key kernel plus combine for
 * decoding, same semantics; Dv up to 256 and (16 + 32) * D + 32 * Dv
 * compute elements of shared memory per block (D = Dv = 256 in f64 fits an
 * H100/H200), beyond which the GPU eval fails with EM_ERR_UNSUPPORTED.
 * Prefill (Lq > 16) in f16/bf16 with D == Dv in {32, 64, 96, 128} and
 * dense rows runs a flash-attention kernel on the tensor cores instead
 * (src/cuda/attention_prefill.cu): f32 scores and accumulation, the
 * softmax weights rounded to the input type before they multiply V.
 *
 * Gradients: em_vjp differentiates q, k, v, an additive mask and the
 * sinks (composed from ordinary ops: the scores are recomputed); a
 * boolean mask has no gradient.
 */
#ifndef EMILY_ATTENTION_H
#define EMILY_ATTENTION_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options; the zero value is plain non-causal attention with scale
 * 1/sqrt(D), no mask and no sinks. */
typedef struct em_sdpa_options {
    /* Multiplies q . k; 0 means 1/sqrt(D) (1 when D == 0). Must be finite. */
    double scale;
    /* Query i attends to keys j <= i + (Lk - Lq): the queries are the last
     * Lq positions of the Lk keys (as after appending them to a KV cache).
     * With Lq > Lk the first Lq - Lk rows attend to nothing (0). */
    bool causal;
    /* NULL, or an array broadcastable to (B, H, Lq, Lk) (right-aligned,
     * rank <= 4): pred (false = masked out), or of q's dtype, added to the
     * scaled scores. Combines with causal. */
    em_array *mask;
    /* NULL, or (H) of q's dtype: per-head logits that join each row's
     * softmax denominator only (attention sinks, StreamingLLM / gpt-oss). */
    em_array *sinks;
} em_sdpa_options;

/* out = softmax(scale * q k^T + mask) v, as described above. opts may be
 * NULL (the zero value). */
em_status em_sdpa(em_array *q, em_array *k, em_array *v,
                  const em_sdpa_options *opts, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
