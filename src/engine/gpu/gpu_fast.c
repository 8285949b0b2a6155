/*
 * gpu_fast.c — the GPU evals of the Emily.Fast primitives (fast_rows and
 * rope): their inputs are row-contiguous (the builders made them so), so
 * the job is pointers, the row length and the options; one call into the
 * CUDA backend (src/cuda/fast.cu).
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/fast_params.h"

em_status em__gpu_fast_rows_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const fast_row_params *p = node->params;
    em_cuda_fast_rows job;
    memset(&job, 0, sizeof job);
    int k = 1;
    job.kind = p->kind;
    job.dtype = node->dtype;
    job.D = node->shape[node->ndim - 1];
    job.rows = node->size / job.D;
    job.eps = p->eps;
    job.x = em__data(node->inputs[0]);
    job.weight = p->has_weight ? em__data(node->inputs[k++]) : NULL;
    job.bias = p->has_bias ? em__data(node->inputs[k++]) : NULL;
    job.out = em__data(node);
    int rc = api->fast_rows(ord, &job);
    return rc ? em__gpu_fail(api, rc, "fast_rows") : EM_OK;
}

em_status em__gpu_fast_rope_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const fast_rope_params *p = node->params;
    const em_array *x = node->inputs[0], *offset = node->inputs[1];
    em_cuda_fast_rope job;
    memset(&job, 0, sizeof job);
    job.dtype = node->dtype;
    job.traditional = p->traditional;
    job.offset_dtype = offset->dtype;
    job.L = x->shape[x->ndim - 2];
    job.D = x->shape[x->ndim - 1];
    job.rows = node->size / job.D;
    job.dims = p->dims;
    job.base = p->base;
    job.scale = p->scale;
    job.x = em__data(x);
    job.offset = em__data(offset);
    job.freqs = p->has_freqs ? em__data(node->inputs[2]) : NULL;
    job.out = em__data(node);
    int rc = api->fast_rope(ord, &job);
    return rc ? em__gpu_fail(api, rc, "rope") : EM_OK;
}
