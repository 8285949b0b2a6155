/*
 * ggml_types.c — the block layout of the ggml tensor types the engine
 * reads (include/emily_ggml.h). Sizes follow ggml's block structs: a
 * half-precision scale (d), for the "_1" types a half-precision minimum
 * (m), for the 5-bit types 4 bytes of fifth bits, then the packed
 * weights; the K-quants group 256 weights with 6- or 8-bit sub-scales.
 */
#include "emily_ggml.h"
#include "internal.h"

typedef struct ggml_type_row {
    int type;
    const char *name;
    int64_t block_elems, block_bytes;
} ggml_type_row;

static const ggml_type_row ggml_types[] = {
    {EM_GGML_F32, "f32", 1, 4},
    {EM_GGML_F16, "f16", 1, 2},
    {EM_GGML_BF16, "bf16", 1, 2},
    {EM_GGML_Q4_0, "q4_0", 32, 2 + 16},         /* d, 32 nibbles */
    {EM_GGML_Q4_1, "q4_1", 32, 2 + 2 + 16},     /* d, m, 32 nibbles */
    {EM_GGML_Q5_0, "q5_0", 32, 2 + 4 + 16},     /* d, high bits, nibbles */
    {EM_GGML_Q5_1, "q5_1", 32, 2 + 2 + 4 + 16}, /* d, m, high bits, nibbles */
    {EM_GGML_Q8_0, "q8_0", 32, 2 + 32},         /* d, 32 bytes */
    /* d, dmin, 12 bytes of 6-bit scales and mins, 128 nibble bytes */
    {EM_GGML_Q4_K, "q4_k", 256, 2 + 2 + 12 + 128},
    /* as q4_k plus 32 bytes of fifth bits */
    {EM_GGML_Q5_K, "q5_k", 256, 2 + 2 + 12 + 32 + 128},
    /* 128 low-nibble bytes, 64 bytes of high 2 bits, 16 s8 scales, d */
    {EM_GGML_Q6_K, "q6_k", 256, 128 + 64 + 16 + 2},
};

static const ggml_type_row *ggml_row(int type) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].type == type)
            return &ggml_types[i];
    return NULL;
}

const char *em_ggml_type_name(int type) {
    const ggml_type_row *row = ggml_row(type);
    return row ? row->name : NULL;
}

em_status em_ggml_type_info(int type, int64_t *block_elems,
                            int64_t *block_bytes) {
    const ggml_type_row *row = ggml_row(type);
    if (!row)
        return em__fail(EM_ERR_UNSUPPORTED,
                        "ggml: tensor type %d is not one the engine reads "
                        "(f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, "
                        "q5_k, q6_k)",
                        type);
    *block_elems = row->block_elems;
    *block_bytes = row->block_bytes;
    return EM_OK;
}
