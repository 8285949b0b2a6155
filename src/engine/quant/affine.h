/*
 * affine.h — what the affine quantization sources share (affine.c, its
 * vjp and the GPU evals of src/engine/gpu/gpu_quant.c).
 */
#ifndef EMILY_QUANT_AFFINE_H
#define EMILY_QUANT_AFFINE_H

#include "internal.h"

/* Parameters of the quantize, dequantize and quantized_matmul nodes. */
typedef struct em_quant_params {
    int32_t group_size, bits;
    int32_t transpose; /* quantized_matmul: 1 for x @ w^T */
    int32_t part;      /* quantize: 0 codes, 1 scales, 2 biases */
} em_quant_params;

em_status em__vjp_quantized_matmul(em_array *node, em_array *ct,
                                   const bool *needs, em_array **in_cts);

/* GPU evals (gpu_quant.c). */
em_status em__gpu_quantize_eval(em_array *node);
em_status em__gpu_dequantize_eval(em_array *node);
em_status em__gpu_quantized_matmul_eval(em_array *node);

#endif
