/*
 * gpu_fft.c — em_fft's GPU eval: the CPU eval's row description (fft.c:
 * the transformed axis's length and stride, every other axis an outer
 * row axis) handed to the CUDA backend's cuFFT path (src/cuda/fft.cu).
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/linalg_params.h"

em_status em__gpu_fft_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const fft_params *pr = node->params;
    const em_array *a = node->inputs[0];
    em_cuda_fft job;
    memset(&job, 0, sizeof job);
    job.mode = (int)pr->mode;
    job.dtype_in = a->dtype;
    job.dtype_out = node->dtype;
    job.n = pr->n;
    job.eps = pr->eps;
    job.in = a->size > 0 ? em__data(a) : NULL; /* an empty axis reads nothing */
    job.out = em__data(node);
    job.in_len = a->shape[pr->axis];
    job.in_stride = a->strides[pr->axis];
    job.out_len = node->shape[pr->axis];
    job.out_stride = node->strides[pr->axis];
    job.rows = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (d == pr->axis)
            continue;
        job.oshape[job.nouter] = a->shape[d];
        job.istride[job.nouter] = a->strides[d];
        job.ostride[job.nouter] = node->strides[d];
        job.nouter++;
        job.rows *= a->shape[d];
    }
    int rc = api->fft(ord, &job);
    return rc ? em__gpu_fail(api, rc, "fft") : EM_OK;
}
