/*
 * gpu_conv.c — conv on the GPU: conv.c's im2col + GEMM, every dtype.
 *
 * For a chunk of output batches the plugin's im2col kernel writes the
 * patch matrices col[b][t][c * kvol + k][x] of every (batch, group) pair
 * into a scratch buffer (input dilation, padding, kernel dilation and
 * strides resolved there; holes are zeros); the existing GEMM path then
 * multiplies each group's kernel rows W[t] (the kernel read in place when
 * row-major, else packed) by them: out[n][t * Og + o][x] = W[t] · col.
 * One group: one GEMM batched over the chunk's batches (W broadcast);
 * several: per batch, one GEMM batched over the groups. cuBLAS does the
 * floating dtypes (f16/bf16 accumulate in f32 and round once, as the CPU;
 * complex too), gemm.cu's wrapping kernel the integers, as the CPU's
 * work types. Batch groups (the CPU's bgroups) read output batch n of
 * group t from input batch n + t * (N / B): a stride per group, as for
 * feature groups (channel block t * Cg). The scratch is bounded by
 * COL_BYTES per chunk (at least one batch).
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/params.h"

#define COL_BYTES ((int64_t)512 << 20)

em_status em__gpu_conv_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    const size_t es = em_dtype_size(node->dtype);

    em_cuda_im2col job;
    memset(&job, 0, sizeof job);
    job.elem_size = (int)es;
    job.ns = in->ndim - 2;
    if (job.ns == 0) { /* one spatial axis of size 1, as conv.c */
        job.ns = 1;
        job.in_sp[0] = job.k_sp[0] = job.out_sp[0] = 1;
        job.strides[0] = job.idil[0] = job.kdil[0] = 1;
    } else {
        for (int i = 0; i < job.ns; i++) {
            job.in_sp[i] = in->shape[2 + i];
            job.in_st[i] = in->strides[2 + i];
            job.k_sp[i] = ker->shape[2 + i];
            job.out_sp[i] = node->shape[2 + i];
            job.strides[i] = p->strides[i];
            job.low[i] = p->low[i];
            job.idil[i] = p->idil[i];
            job.kdil[i] = p->kdil[i];
        }
    }
    job.kvol = job.L = 1;
    for (int i = 0; i < job.ns; i++) {
        job.kvol *= job.k_sp[i];
        job.L *= job.out_sp[i];
    }
    const int64_t N = in->shape[0], O = ker->shape[0], Cg = ker->shape[1];
    const int64_t F = p->fgroups, B = p->bgroups, T = F * B;
    const int64_t Og = O / T, Nout = node->shape[0], Kdim = Cg * job.kvol;
    const int64_t L = job.L;
    char *out = em__data(node);
    if (Kdim == 0) {
        int rc = api->memset(ord, out, 0, (size_t)node->size * es);
        return rc ? em__gpu_fail(api, rc, "conv") : EM_OK;
    }
    job.groups = T;
    job.cg = Cg;
    job.c_stride = in->strides[1];
    job.batch_stride = in->strides[0];
    job.group_stride = B > 1   ? (N / B) * in->strides[0]
                       : F > 1 ? Cg * in->strides[1]
                               : 0;

    /* The kernel as W[O][Kdim], row-major. */
    em_buffer *wbuf = NULL, *col = NULL;
    const void *w = em__data(ker);
    if (!em__is_row_contiguous(ker->shape, ker->strides, ker->ndim)) {
        st = em__buffer_new_on(node->device, (size_t)ker->size * es, &wbuf);
        if (st == EM_OK)
            st = em__gpu_copy_strided(node->device, wbuf->data, NULL,
                                      em__data(ker), ker->strides, ker->shape,
                                      ker->ndim, es);
        if (st != EM_OK) {
            em__buffer_release(wbuf);
            return st;
        }
        w = wbuf->data;
    }

    const int64_t per_batch = T * Kdim * L * (int64_t)es;
    int64_t nb = COL_BYTES / per_batch;
    if (nb < 1)
        nb = 1;
    if (nb > Nout)
        nb = Nout;
    if (nb > 65535) /* the integer GEMM kernel's grid.z */
        nb = 65535;
    st = em__buffer_new_on(node->device, (size_t)(nb * per_batch), &col);
    const char *in_data = em__data(in);
    for (int64_t n0 = 0; st == EM_OK && n0 < Nout; n0 += nb) {
        job.nb = n0 + nb <= Nout ? nb : Nout - n0;
        job.in = in_data + n0 * in->strides[0] * (int64_t)es;
        job.col = col->data;
        int rc = api->im2col(ord, &job);
        em_cuda_gemm g;
        memset(&g, 0, sizeof g);
        g.dtype = node->dtype;
        g.m = Og;
        g.n = L;
        g.k = Kdim;
        g.lda = Kdim;
        g.ldb = L;
        g.stride_b = Kdim * L;
        if (T == 1) { /* W broadcast over the chunk's batches */
            g.batch = job.nb;
            g.a = w;
            g.b = col->data;
            g.c = out + (size_t)(n0 * O * L) * es;
            rc = rc ? rc : api->gemm(ord, &g);
        } else { /* per batch, the groups as the GEMM's batch */
            g.batch = T;
            g.stride_a = Og * Kdim;
            for (int64_t b = 0; rc == 0 && b < job.nb; b++) {
                g.a = w;
                g.b = (const char *)col->data + (size_t)(b * per_batch);
                g.c = out + (size_t)((n0 + b) * O * L) * es;
                rc = api->gemm(ord, &g);
            }
        }
        if (rc)
            st = em__gpu_fail(api, rc, "conv");
    }
    /* Released once queued: the device's one stream orders any reuse. */
    em__buffer_release(col);
    em__buffer_release(wbuf);
    return st;
}
