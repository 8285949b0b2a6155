/*
 * gpu_quant.c — affine quantization on the GPU (include/emily_quant.h):
 * fills the plugin's em_cuda_affine job for the three nodes of
 * src/engine/quant/affine.c. The builders made every input row-major, so
 * the kernels read rows in place; quantize's three nodes each run the one
 * kernel that writes their part into scratch buffers for the other two.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "quant/affine.h"

static em_status run(em_array *node, const char *op, em_cuda_affine *job,
                     const em_cuda_api *api, int ord) {
    int rc = api->affine(ord, job);
    return rc ? em__gpu_fail(api, rc, op) : EM_OK;
}

em_status em__gpu_quantize_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_quant_params *p = node->params;
    const em_array *w = node->inputs[0];
    const int64_t len = w->shape[w->ndim - 1], rows = w->size / len;
    const int64_t G = len / p->group_size;
    const size_t es = em_dtype_size(w->dtype);
    /* Scratch for the two parts this node does not return. */
    size_t sizes[3] = {(size_t)(rows * len * p->bits / 32) * 4,
                       (size_t)(rows * G) * es, (size_t)(rows * G) * es};
    em_buffer *scratch[3] = {NULL, NULL, NULL};
    void *ptr[3];
    for (int i = 0; i < 3 && st == EM_OK; i++) {
        if (i == p->part) {
            ptr[i] = em__data(node);
            continue;
        }
        st = em__buffer_new_on(node->device, sizes[i], &scratch[i]);
        if (st == EM_OK)
            ptr[i] = scratch[i]->data;
    }
    if (st == EM_OK) {
        em_cuda_affine job;
        memset(&job, 0, sizeof job);
        job.op = 0;
        job.dtype = w->dtype;
        job.group_size = p->group_size;
        job.bits = p->bits;
        job.rows = rows;
        job.len = len;
        job.w = em__data(w);
        job.wq = ptr[0];
        job.scales = ptr[1];
        job.biases = ptr[2];
        st = run(node, "quantize", &job, api, ord);
    }
    /* Released once queued: the device's one stream orders any reuse. */
    for (int i = 0; i < 3; i++)
        em__buffer_release(scratch[i]);
    return st;
}

em_status em__gpu_dequantize_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_quant_params *p = node->params;
    em_cuda_affine job;
    memset(&job, 0, sizeof job);
    job.op = 1;
    job.dtype = node->dtype;
    job.group_size = p->group_size;
    job.bits = p->bits;
    job.len = node->shape[node->ndim - 1];
    job.rows = node->size / job.len;
    job.wq = em__data(node->inputs[0]);
    job.scales = em__data(node->inputs[1]);
    job.biases = em__data(node->inputs[2]);
    job.out = em__data(node);
    /* The kernel computes in the scales' dtype; a different output dtype
     * is refused rather than silently rounded differently. */
    if (node->inputs[1]->dtype != node->dtype)
        return em__fail(EM_ERR_UNSUPPORTED,
                        "dequantize: on the GPU the output dtype must be the "
                        "scales' dtype");
    return run(node, "dequantize", &job, api, ord);
}

/* Rows of x up to which the plugin's matrix-vector kernels run; above,
 * the weights are dequantized (in x's dtype) and multiplied by the GEMM
 * path (cuBLAS, f32 accumulation). */
#define GPU_QMV_MAX_M 16

em_status em__gpu_quantized_matmul_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_quant_params *p = node->params;
    const em_array *x = node->inputs[0], *wq = node->inputs[1];
    em_cuda_affine job;
    memset(&job, 0, sizeof job);
    job.op = 2;
    job.dtype = node->dtype;
    job.group_size = p->group_size;
    job.bits = p->bits;
    job.transpose = p->transpose;
    job.k = x->shape[x->ndim - 1];
    job.m = x->size / job.k;
    job.n = node->shape[node->ndim - 1];
    job.x = em__data(x);
    job.wq = em__data(wq);
    job.scales = em__data(node->inputs[2]);
    job.biases = em__data(node->inputs[3]);
    job.out = em__data(node);
    if (job.m <= GPU_QMV_MAX_M)
        return run(node, "quantized_matmul", &job, api, ord);

    /* D: (n, k) when transposed, else (k, n); dequantized in x's dtype. */
    const int64_t rows = wq->shape[0], len = job.transpose ? job.k : job.n;
    em_buffer *dense = NULL;
    st = em__buffer_new_on(node->device,
                           (size_t)(rows * len) * em_dtype_size(node->dtype),
                           &dense);
    if (st != EM_OK)
        return st;
    job.op = 1;
    job.rows = rows;
    job.len = len;
    job.out = dense->data;
    st = run(node, "quantized_matmul", &job, api, ord);
    if (st == EM_OK) {
        em_cuda_gemm g;
        memset(&g, 0, sizeof g);
        g.dtype = node->dtype;
        g.batch = 1;
        g.m = job.m;
        g.n = job.n;
        g.k = job.k;
        g.a = em__data(x);
        g.b = dense->data;
        g.c = em__data(node);
        g.lda = job.k;
        g.trans_b = job.transpose;
        g.ldb = job.transpose ? job.k : job.n;
        int rc = api->gemm(ord, &g);
        if (rc)
            st = em__gpu_fail(api, rc, "quantized_matmul");
    }
    /* Released once queued: the device's one stream orders any reuse. */
    em__buffer_release(dense);
    return st;
}
