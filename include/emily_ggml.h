/*
 * emily_ggml.h — ggml's tensor types (part of libemily; include after or
 * instead of emily.h): the numbering GGUF files use, and the block layout
 * of each type the engine reads.
 *
 * A ggml tensor of shape (rows, cols) stores each row as cols / block_elems
 * consecutive blocks of block_bytes; a block holds block_elems weights.
 * The engine keeps such a tensor as a u8 array (rows, cols / block_elems *
 * block_bytes) of the raw blocks plus its type: quantized matrix products
 * read the blocks as they are (emily_ggml's ops), and GGUF files map them
 * without a copy.
 */
#ifndef EMILY_GGML_H
#define EMILY_GGML_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Type numbers as ggml and GGUF define them (gaps: types ggml has
 * retired or that the engine does not read). */
typedef enum em_ggml_type {
    EM_GGML_F32 = 0,
    EM_GGML_F16 = 1,
    EM_GGML_Q4_0 = 2,
    EM_GGML_Q4_1 = 3,
    EM_GGML_Q5_0 = 6,
    EM_GGML_Q5_1 = 7,
    EM_GGML_Q8_0 = 8,
    EM_GGML_Q4_K = 12,
    EM_GGML_Q5_K = 13,
    EM_GGML_Q6_K = 14,
    EM_GGML_BF16 = 30,
} em_ggml_type;

/* The type's name ("q4_0", "bf16", ...), or NULL for a number the engine
 * does not read. */
const char *em_ggml_type_name(int type);

/* Weights per block and bytes per block of a type the engine reads
 * (1 and the element size for f32/f16/bf16). EM_ERR_UNSUPPORTED, with a
 * message naming the number, for any other type. */
em_status em_ggml_type_info(int type, int64_t *block_elems,
                            int64_t *block_bytes);

/* ---- operations on raw blocks ------------------------------------------ */

/*
 * A ggml matrix of N rows and K columns is a u8 array `raw` of shape
 * (N, K / block_elems * block_bytes) holding each row's blocks in order,
 * plus its type (one of q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k:
 * the block formats; f32/f16/bf16 tensors are ordinary arrays). K must be
 * a multiple of the type's block_elems and raw's second dimension must
 * match it exactly. Both ops fail with EM_ERR_ARGUMENT, naming the op,
 * the shapes and the type, otherwise. Neither has a gradient.
 *
 * Block layouts (ggml's, little-endian; d, m, dmin are IEEE half floats):
 *   q4_0  d, 16 bytes: byte j holds weight j (low nibble) and j + 16
 *         (high nibble); w = d * (q - 8)
 *   q4_1  d, m, 16 bytes as q4_0;                    w = d * q + m
 *   q5_0  d, u32 qh, 16 bytes as q4_0; bit j of qh is the fifth bit of
 *         weight j;                                  w = d * (q - 16)
 *   q5_1  d, m, qh, 16 bytes as q5_0;                w = d * q + m
 *   q8_0  d, 32 s8;                                  w = d * q
 *   q4_k  256 weights in 8 sub-blocks of 32: d, dmin, 12 bytes packing
 *         8 six-bit scales sc and mins mn, 128 bytes: 64-weight chunk c
 *         uses bytes 32c..32c+31, low nibbles for sub-block 2c and high
 *         for 2c + 1;               w = (d * sc) * q - (dmin * mn)
 *   q5_k  as q4_k with 32 bytes qh before the nibbles: bit s of qh[l] is
 *         the fifth bit of weight l of sub-block s
 *   q6_k  128 bytes low nibbles, 64 bytes of 2-bit high parts, 16 s8
 *         scales (one per 16 weights), d;  w = (d * sc) * (q - 32)
 *         (each half of 128 weights: ql bytes 0..63 low then high
 *         nibbles, qh bytes 0..31 at shifts 0, 2, 4, 6)
 * The arithmetic is done in f32 in the order written, so that
 * dequantization is bit-exact with ggml's reference.
 */

/* The (N, K) matrix the blocks encode, in dtype f32, f16, bf16 or f64
 * (computed in f32 as ggml does, then converted: exact for f32/f64). */
em_status em_ggml_dequantize(em_array *raw, int type, int64_t k,
                             em_dtype dtype, em_array **out);

/*
 * x @ W^T for x (..., M, K) in f32, f16 or bf16 and the ggml matrix W
 * (N, K): out (..., M, N) in x's dtype. Products are accumulated in f32
 * (f16/bf16 inputs widened, the result rounded once).
 *
 * The blocks are never expanded whole: on the CPU, up to 8 rows of x
 * (decoding) stream each weight row's blocks once, decoding 32 weights at
 * a time in registers (exactly the dequantized values) and multiplying
 * them into every row of x, threaded over weight rows (an AVX2+FMA kernel
 * picked at run time, else a portable one compiled for AVX-512, AVX2 and
 * the baseline); more rows decode tiles of weight rows into an f32
 * scratch multiplied by OpenBLAS's sgemm. On a GPU: up to 16 rows of x,
 * warps stream the weight rows (a lane per 32 weights, split-K over up to
 * 8 warps per row: src/cuda/ggml_matvec.cu), else decoded f32 tiles
 * through cuBLAS. The
 * result equals the f32 dot product of x with the dequantized weights up
 * to f32 summation order: |err| <= ~K * 2^-23 * sum|x_k w_k| per output.
 */
em_status em_ggml_matmul(em_array *x, em_array *raw, int type, int64_t k,
                         em_array **out);

#ifdef __cplusplus
}
#endif

#endif
