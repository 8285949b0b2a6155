/*
 * gpu_attention.c — em_sdpa on the GPU: fills the plugin's job (operands
 * read in place through their strides, the mask's broadcast as zero
 * strides) and picks the schedule: up to EM_CUDA_SDPA_DECODE_MAX_LQ
 * queries go to the grouped-head decode kernel (attention_decode.cu) when
 * K / V allow 16-byte loads; otherwise a few queries over many keys split
 * the keys into chunks (flash-decoding; the plugin combines them); more
 * queries in f16/bf16 with head dims 32/64/96/128 and dense aligned rows go
 * to the tensor-core flash kernel (attention_prefill.cu), anything else
 * runs the tiled kernel over query blocks.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/attention_params.h"

/* Blocks below which the decode schedule splits the keys further. */
#define SDPA_GPU_BLOCKS 512
#define SDPA_GPU_MIN_CHUNK 256

/* The last axis contiguous, the others multiples of 8 elements (16 bytes
 * of f16/bf16: cp.async's unit) unless of extent 1, the data 16-byte
 * aligned. */
static bool sdpa_rows_dense(const em_array *a, const void *data) {
    if (a->strides[3] != 1 || ((uintptr_t)data & 15) != 0)
        return false;
    for (int i = 0; i < 3; i++)
        if (a->shape[i] != 1 && a->strides[i] % 8 != 0)
            return false;
    return true;
}

/* What attention_prefill.cu handles (the plugin checks it again). */
static bool sdpa_prefill_fits(const em_cuda_sdpa *job, const em_array *q,
                              const em_array *k, const em_array *v) {
    return job->Lq > EM_CUDA_SDPA_DECODE_MAX_LQ && job->nsplit == 1 &&
           (job->dtype == EM_F16 || job->dtype == EM_BF16) &&
           job->D == job->Dv &&
           (job->D == 32 || job->D == 64 || job->D == 96 || job->D == 128) &&
           job->B <= 65535 && job->H <= 65535 && sdpa_rows_dense(q, job->q) &&
           sdpa_rows_dense(k, job->k) && sdpa_rows_dense(v, job->v) &&
           ((uintptr_t)job->out & 15) == 0;
}

/* Whether attention_decode.cu's kernel takes the job: f16 / bf16 / f32,
 * equal head dimensions of 64, 128 or 256, grouped heads, K and V
 * contiguous along the head dimension with 16-byte aligned rows (it reads
 * them with 16-byte loads). The plugin checks the same and fails clearly. */
static bool sdpa_decode_fits(const em_cuda_sdpa *j) {
    if (j->dtype != EM_F16 && j->dtype != EM_BF16 && j->dtype != EM_F32)
        return false;
    if (j->D != j->Dv || (j->D != 64 && j->D != 128 && j->D != 256))
        return false;
    if (j->Hkv < 1 || j->H % j->Hkv || j->B > 65535 || j->Hkv > 65535)
        return false;
    const int64_t vec = 16 / (int64_t)em_dtype_size(j->dtype);
    if (j->k_st[3] != 1 || j->v_st[3] != 1)
        return false;
    for (int i = 0; i < 3; i++)
        if (j->k_st[i] % vec || j->v_st[i] % vec)
            return false;
    return (uintptr_t)j->k % 16 == 0 && (uintptr_t)j->v % 16 == 0;
}

em_status em__gpu_sdpa_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const sdpa_params *p = node->params;
    const em_array *q = node->inputs[0], *k = node->inputs[1],
                   *v = node->inputs[2];
    em_cuda_sdpa job;
    memset(&job, 0, sizeof job);
    job.dtype = node->dtype;
    job.causal = p->causal;
    job.mask_kind = p->mask_kind;
    job.scale = p->scale;
    job.B = q->shape[0];
    job.H = q->shape[1];
    job.Lq = q->shape[2];
    job.D = q->shape[3];
    job.Hkv = k->shape[1];
    job.Lk = k->shape[2];
    job.Dv = v->shape[3];
    job.q = em__data(q);
    job.k = em__data(k);
    job.v = em__data(v);
    job.out = em__data(node);
    for (int i = 0; i < 4; i++) {
        job.q_st[i] = q->strides[i];
        job.k_st[i] = k->strides[i];
        job.v_st[i] = v->strides[i];
    }
    int next = 3;
    if (p->mask_kind != SDPA_MASK_NONE) {
        const em_array *m = node->inputs[next++];
        job.mask = em__data(m);
        for (int i = 0; i < 4; i++) {
            int mi = m->ndim - 4 + i;
            job.mask_st[i] = mi >= 0 && m->shape[mi] != 1 ? m->strides[mi] : 0;
        }
    }
    if (p->has_sinks) {
        const em_array *s = node->inputs[next++];
        job.sinks = em__data(s);
        job.sinks_st = s->strides[0];
    }
    /* Decode (Lq <= EM_CUDA_SDPA_DECODE_MAX_LQ): the grouped-head
     * flash-decoding kernel (attention_decode.cu) where its layout
     * conditions hold, else the general kernel below. */
    if (job.Lq <= EM_CUDA_SDPA_DECODE_MAX_LQ && sdpa_decode_fits(&job)) {
        int rc = api->sdpa_decode(ord, &job);
        return rc ? em__gpu_fail(api, rc, "sdpa") : EM_OK;
    }
    job.nsplit = 1;
    if (job.Lq <= EM_CUDA_SDPA_DECODE_MAX_LQ &&
        job.Lk >= 2 * SDPA_GPU_MIN_CHUNK) {
        const int64_t blocks = job.B * job.H; /* one query block each */
        int64_t want = (SDPA_GPU_BLOCKS + blocks - 1) / blocks;
        int64_t most = job.Lk / SDPA_GPU_MIN_CHUNK;
        job.nsplit = want < most ? want : most;
        if (job.nsplit < 1)
            job.nsplit = 1;
    }
    /* Prefill (more than EM_CUDA_SDPA_DECODE_MAX_LQ queries) in f16/bf16 with
     * head dims 32, 64, 96 or 128 and dense, aligned rows: the tensor-core
     * kernel (attention_prefill.cu); everything else the tiled kernel. */
    if (sdpa_prefill_fits(&job, q, k, v) && api->sdpa_prefill) {
        int rc = api->sdpa_prefill(ord, &job);
        return rc ? em__gpu_fail(api, rc, "sdpa prefill") : EM_OK;
    }
    int rc = api->sdpa(ord, &job);
    return rc ? em__gpu_fail(api, rc, "sdpa") : EM_OK;
}
