/*
 * gpu_decode.c — the GPU evals of the decode-path primitives
 * (ops/fast_decode.c): their inputs are contiguous (the builders made them
 * so; fast_heads' cache excepted: it is copied), so a job is pointers and
 * sizes; one call into the CUDA backend (src/cuda/decode.cu).
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/fast_decode_params.h"

em_status em__gpu_fast_linear_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const linear_params *p = node->params;
    const em_array *x = node->inputs[0], *w = node->inputs[1];
    em_cuda_linear job;
    memset(&job, 0, sizeof job);
    int k = 2;
    job.dtype = node->dtype;
    job.norm = p->norm;
    job.eps = p->eps;
    job.K = x->shape[x->ndim - 1];
    job.N = w->shape[0];
    job.M = node->size / job.N; /* x's leading rows; K may be 0 */
    job.x = em__data(x);
    job.w = em__data(w);
    job.norm_weight = p->has_norm_weight ? em__data(node->inputs[k++]) : NULL;
    job.gate = p->has_gate ? em__data(node->inputs[k++]) : NULL;
    job.residual = p->has_residual ? em__data(node->inputs[k++]) : NULL;
    job.out = em__data(node);
    int rc = api->fast_linear(ord, &job);
    return rc ? em__gpu_fail(api, rc, "fast_linear") : EM_OK;
}

/* fast_heads' output buffer, as the CPU eval's heads_alloc: with a cache
 * (the next-to-last input), the cache's own when nothing else holds it
 * (only the new rows are then written), else a fresh one the cache is
 * copied into (any layout) on the node's stream, before the kernel. */
static em_status heads_alloc(em_array *node, const heads_params *p,
                             const em_cuda_api **api, int *ord) {
    if (!p->cache)
        return em__gpu_prepare(node, api, ord);
    em_status st = em__gpu_backend(node->device, api, ord);
    if (st != EM_OK)
        return st;
    em_array *cache = node->inputs[node->ninputs - 2];
    em_buffer *cache_buffer = cache->buffer;
    st = em__alloc_output(node, &cache, 1);
    if (st != EM_OK || node->buffer == cache_buffer || node->size == 0)
        return st;
    return em__gpu_copy_strided(node->device, em__data(node), NULL,
                                em__data(cache), cache->strides, cache->shape,
                                cache->ndim, em_dtype_size(cache->dtype));
}

em_status em__gpu_fast_heads_eval(em_array *node) {
    const heads_params *p = node->params;
    const em_cuda_api *api;
    int ord;
    em_status st = heads_alloc(node, p, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *x = node->inputs[0];
    em_cuda_heads job;
    memset(&job, 0, sizeof job);
    int k = 1;
    job.dtype = node->dtype;
    job.norm = p->norm;
    job.rope = p->rope;
    job.traditional = p->traditional;
    job.B = x->shape[0];
    job.S = x->shape[1];
    job.N = x->shape[2];
    job.head_dim = p->head_dim;
    job.first = p->first;
    job.count = p->count;
    job.L = node->shape[2];
    job.dims = p->dims;
    job.eps = p->eps;
    job.base = p->base;
    job.scale = p->scale;
    job.x = em__data(x);
    job.norm_weight = p->has_norm_weight ? em__data(node->inputs[k++]) : NULL;
    if (p->rope) {
        const em_array *off = node->inputs[k++];
        job.offset = em__data(off);
        job.offset_dtype = off->dtype;
    }
    if (p->cache) {
        const em_array *cache_offset = node->inputs[node->ninputs - 1];
        job.cache_offset = em__data(cache_offset);
        job.cache_offset_dtype = cache_offset->dtype;
    }
    job.out = em__data(node);
    int rc = api->fast_heads(ord, &job);
    return rc ? em__gpu_fail(api, rc, "fast_heads") : EM_OK;
}
