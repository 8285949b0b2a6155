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

#ifdef __cplusplus
}
#endif

#endif
