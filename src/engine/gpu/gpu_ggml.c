#include "internal.h"
#include "quant/ggml_blocks.h"
em_status em__gpu_ggml_dequantize_eval(em_array *node) {
    (void)node;
    return em__fail(EM_ERR_UNSUPPORTED, "ggml_dequantize: no GPU kernel yet");
}
em_status em__gpu_ggml_matmul_eval(em_array *node) {
    (void)node;
    return em__fail(EM_ERR_UNSUPPORTED, "ggml_matmul: no GPU kernel yet");
}
