/*
 * gpu_linalg.c — the linalg node's GPU eval: the matrices' layout (batch
 * axes, row and column strides: any view is read in place) and the
 * packing linalg.c uses for the results, handed to the CUDA backend's
 * cuSOLVER / cuBLAS path (src/cuda/linalg.cu). Value failures the CPU
 * reports as errors (cholesky of a matrix that is not positive definite,
 * solve and triangular_solve of a singular one) come back as the first
 * failing matrix and give the CPU's message.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/linalg_params.h"

/* The backend's op numbers are the engine's. */
_Static_assert((int)OP_CHOL == EM_CUDA_CHOLESKY && (int)OP_QR == EM_CUDA_QR &&
                   (int)OP_LU == EM_CUDA_LU && (int)OP_EIGH == EM_CUDA_EIGH &&
                   (int)OP_SVD == EM_CUDA_SVD &&
                   (int)OP_TRSOLVE == EM_CUDA_TRSOLVE &&
                   (int)OP_SOLVE == EM_CUDA_SOLVE &&
                   (int)OP_DET == EM_CUDA_DET && (int)OP_INV == EM_CUDA_INV,
               "em_cuda_linalg_op follows lop");

static const void *data_or_null(const em_array *a) {
    return a->size > 0 ? em__data(a) : NULL;
}

em_status em__gpu_linalg_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    const lparams *p = node->params;
    em_status st = em__gpu_backend(node->device, &api, &ord);
    if (st == EM_OK)
        st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || p->batch == 0)
        return st;
    const em_array *a = node->inputs[0];
    const em_array *b = node->ninputs > 1 ? node->inputs[1] : NULL;
    const int nb = a->ndim - 2;
    em_cuda_linalg job;
    memset(&job, 0, sizeof job);
    job.op = (int)p->op;
    job.dtype = node->dtype;
    job.nbatch_dims = nb;
    job.flag = p->flag;
    job.left = p->left;
    job.lower = p->lower;
    job.trans = p->trans;
    job.batch = p->batch;
    job.m = p->m;
    job.n = p->n;
    job.k = p->k;
    job.per = p->per;
    for (int d = 0; d < nb; d++) {
        job.bshape[d] = a->shape[d];
        job.a_bstride[d] = a->strides[d];
        job.b_bstride[d] = b ? b->strides[d] : 0;
    }
    job.a_rs = a->strides[nb];
    job.a_cs = a->strides[nb + 1];
    job.a = data_or_null(a);
    if (b && b->ndim == a->ndim - 1) { /* a vector: [n, 1], or [1, n] */
        job.b_rs = p->left ? b->strides[nb] : 0;
        job.b_cs = p->left ? 0 : b->strides[nb];
    } else if (b) {
        job.b_rs = b->strides[nb];
        job.b_cs = b->strides[nb + 1];
    }
    job.b = b ? data_or_null(b) : NULL;
    job.out = node->size > 0 ? em__data(node) : NULL;
    job.failed = -1;
    int rc = api->linalg(ord, &job);
    if (rc)
        return em__gpu_fail(api, rc, "linalg");
    return job.failed >= 0 ? em__linalg_value_error(p, job.failed) : EM_OK;
}
