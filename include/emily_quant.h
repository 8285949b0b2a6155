/*
 * emily_quant.h — MLX-style affine quantization (part of libemily; include
 * after or instead of emily.h). The engine ops behind Emily.Quantization.
 *
 * Format (MLX's "affine" mode, bit-compatible with mlx.core.quantize):
 *
 *   A float matrix w (..., N, K) is quantized along its last axis in groups
 *   of `group_size` (32, 64 or 128) consecutive values, with `bits` in
 *   {2, 3, 4, 5, 6, 8}. Each group g of a row has a scale s and a bias b
 *   (stored in w's dtype) and every value an integer q in [0, 2^bits - 1]:
 *
 *       w ≈ q * s + b
 *
 *   - wq: u32 (..., N, K * bits / 32). A row of K codes is one little-endian
 *     bit stream: code i occupies bits [i*bits, (i+1)*bits) of the stream,
 *     bit j of the stream being bit (j % 32) of word j / 32. With 3, 5 and 6
 *     bits a code may straddle two words. 32 codes fill exactly `bits`
 *     words, so every group starts on a word boundary.
 *   - scales, biases: w's dtype, (..., N, K / group_size).
 *
 * Quantization of a group (MLX's definition, in f32):
 *
 *       n = 2^bits - 1, lo = min(group), hi = max(group)
 *       s = max((hi - lo) / n, 1e-7)
 *       the edge e is lo when |lo| > |hi| (s stays positive), else hi (s is
 *         negated): the value of larger magnitude is represented exactly
 *       q0 = round_half_even(e / s)
 *       if q0 != 0: s = e / q0, b = e      else: b = 0
 *       q = clamp(round_half_even((w - b) / s), 0, n)
 *   then s and b are rounded to w's dtype (q was computed with the f32 ones).
 *
 * Dequantization: q * s rounded to the output dtype, plus b, rounded again
 * (the product and the sum each in the dtype, as MLX computes it; for f32
 * that is plain f32 arithmetic). Bit-exact against MLX for f32 and f16.
 *
 * Accepted inputs: w f32, f16 or bf16 of rank >= 1 (2-D typical); K a
 * multiple of group_size (which makes K * bits a multiple of 32). Build-time
 * errors name the op, the arrays (dtype and shape) and the rule broken.
 */
#ifndef EMILY_QUANT_H
#define EMILY_QUANT_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Quantize w (..., N, K) along its last axis: three new arrays wq (u32),
 * scales and biases (w's dtype). */
em_status em_quantize(em_array *w, int group_size, int bits, em_array **wq,
                      em_array **scales, em_array **biases);

/* The float matrix of wq (..., N, K*bits/32) with scales and biases
 * (..., N, K/group_size), all leading axes equal: a new array of `dtype`
 * (f32, f16 or bf16) and shape (..., N, K). On a GPU `dtype` must be the
 * scales' dtype (evaluation fails with EM_ERR_UNSUPPORTED otherwise). */
em_status em_dequantize(em_array *wq, em_array *scales, em_array *biases,
                        int group_size, int bits, em_dtype dtype,
                        em_array **out);

/*
 * x @ dequantize(w)^T (transpose true) or x @ dequantize(w) (transpose
 * false), without materialising the dequantized matrix.
 *
 *   transpose true:  w is (N, K) quantized along K (the [out, in] layout of
 *                    MLX and PyTorch linear layers); wq (N, K*bits/32),
 *                    scales/biases (N, K/group_size).
 *   transpose false: w is (K, N) quantized along N; wq (K, N*bits/32),
 *                    scales/biases (K, N/group_size).
 *
 * x is (..., K) of rank >= 1 (a leading batch of any shape; rank 1 is a
 * vector), f32, f16 or bf16, the dtype of scales and biases; the result is
 * (..., N) in that dtype. The weights are 2-D (batched weights are
 * rejected). Accumulation is f32.
 *
 * GPU (the CUDA plugin): up to 16 rows of x, warps streaming the weight
 * rows (transpose true: a lane per 32 codes, 128-bit loads for 4 and 8
 * bits, split-K over up to 8 warps per row; src/cuda/quant_matvec.cu) or
 * one thread per output column (false); more rows: the weights dequantized
 * in x's dtype, then the GEMM path (cuBLAS, f32 accumulation).
 *
 * CPU kernels: for M = rows of x up to 8 (decoding) a matrix-vector kernel
 * streams the packed words once, unpacking them in vector registers
 * (AVX2/AVX-512 clones picked at run time), split over output rows
 * (transpose true) or output columns (false); for larger M, tiles of the
 * weights are dequantized to f32 and multiplied with OpenBLAS sgemm.
 *
 * Gradient: with respect to x only (weights are frozen; no cotangent flows
 * to wq, scales or biases): dx = ct @ dequantize(w) for transpose true, the
 * same op with transpose false, and vice versa.
 */
em_status em_quantized_matmul(em_array *x, em_array *wq, em_array *scales,
                              em_array *biases, bool transpose,
                              int group_size, int bits, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
