/*
 * gpu_ggml.c — em_ggml_dequantize and em_ggml_matmul on the GPU: the job
 * for the plugin's ggml kernels (src/cuda/ggml.cu). The builders made both
 * inputs row-contiguous, so the blocks and x are read in place.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "quant/ggml_blocks.h"

static em_status ggml_gpu(em_array *node, bool matmul) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const ggml_params *p = node->params;
    const em_array *raw = node->inputs[matmul ? 1 : 0];
    em_cuda_ggml job;
    memset(&job, 0, sizeof job);
    job.type = p->type;
    job.dtype = node->dtype;
    job.rows = raw->shape[0];
    job.k = p->k;
    job.m = matmul ? node->size / job.rows : 0;
    job.block_elems = p->block_elems;
    job.block_bytes = p->block_bytes;
    job.raw = em__data(raw);
    job.x = matmul ? em__data(node->inputs[0]) : NULL;
    job.out = em__data(node);
    int rc = matmul ? api->ggml_matmul(ord, &job) : api->ggml_dequantize(ord, &job);
    return rc ? em__gpu_fail(api, rc, matmul ? "ggml_matmul" : "ggml_dequantize")
              : EM_OK;
}

em_status em__gpu_ggml_dequantize_eval(em_array *node) {
    return ggml_gpu(node, false);
}

em_status em__gpu_ggml_matmul_eval(em_array *node) {
    return ggml_gpu(node, true);
}
