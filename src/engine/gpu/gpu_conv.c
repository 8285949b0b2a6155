/*
 * gpu_conv.c — conv on the GPU, every dtype. Paths, in the order tried
 * (em_gpu_conv_stats counts which ran; em_gpu_conv_set_path forces the
 * older orders for tests and benchmarks):
 *
 * 1. 1x1 convolutions (1x1 kernel or no spatial axes, unit strides, no
 *    padding or input dilation, one group of either kind): out[n] (O, L) =
 *    W (O, C) · x[n] (C, L), one GEMM batched over the batches with W
 *    broadcast. x[n] is its own patch matrix, read in place when its
 *    positions collapse to one stride: row-major (then the channel stride
 *    is the leading dimension) or channels-last (the GEMM's transposed
 *    operand); any other layout is gathered by im2col first (for a 1x1
 *    kernel a plain copy). Through cuDNN such shapes ran up to 3x slower
 *    than this GEMM behind an im2col copy (bench/RESULTS.md).
 * 2. Depthwise convolutions (feature groups = input channels, no input
 *    dilation or batch groups): conv.cu's direct kernel, one thread per
 *    output element over the input in place; a GEMM with K = kernel
 *    volume is all memory traffic, and cuDNN's kernels ran 1.3-3.3x slower
 *    than PyTorch's on them (bench/RESULTS.md).
 * 3. cuDNN (src/cuda/cudnn_conv.cu): f32/f16/bf16 cases without input
 *    dilation or batch groups go to cuDNN with a workspace from the
 *    engine's allocator, the input and kernel made row-contiguous (and
 *    16-byte aligned) first. Padding cuDNN expresses (the same amount both
 *    sides; the plugin checks that cuDNN's output shape is ours) is passed
 *    as such; other padding (asymmetric, negative) is applied here: the
 *    input copied into a zeroed buffer of the span the windows read,
 *    convolved unpadded. A case cuDNN declines, or a machine without
 *    cuDNN, takes the next path.
 * 4. im2col + GEMM: for a chunk of output batches the plugin's im2col
 *    kernel writes the patch matrices col[b][t][c * kvol + k][x] of every
 *    (batch, group) pair into a scratch buffer (input dilation, padding,
 *    kernel dilation and strides resolved there; holes are zeros); the
 *    GEMM path then multiplies each group's kernel rows W[t] (the kernel
 *    read in place when row-major, else packed) by them: out[n][t * Og +
 *    o][x] = W[t] · col. One group: one GEMM batched over the chunk's
 *    batches (W broadcast); several: per batch, one GEMM batched over the
 *    groups. Batch groups (the CPU's bgroups) read output batch n of group
 *    t from input batch n + t * (N / B): a stride per group, as for
 *    feature groups (channel block t * Cg). The scratch is bounded by
 *    COL_BYTES per chunk (at least one batch).
 *
 * Work types are the CPU's: cuBLAS does the floating dtypes (f16/bf16
 * accumulate in f32 and round once; complex too), gemm.cu's wrapping
 * kernel the integers; the depthwise kernel accumulates the same way.
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/params.h"

#include "emily_conv.h"

#include <stdio.h>

#define COL_BYTES ((int64_t)512 << 20)

static _Atomic int64_t cudnn_runs, im2col_runs, gemm_1x1_runs, depthwise_runs;
static _Atomic int conv_path = EM_GPU_CONV_AUTO;

em_status em_gpu_conv_set_path(em_gpu_conv_path path) {
    if (path != EM_GPU_CONV_AUTO && path != EM_GPU_CONV_IM2COL &&
        path != EM_GPU_CONV_CUDNN)
        return em__fail(EM_ERR_ARGUMENT, "gpu_conv_set_path: unknown path %d",
                        (int)path);
    atomic_store(&conv_path, (int)path);
    return EM_OK;
}

em_status em_gpu_conv_stats_get(em_gpu_conv_stats *out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "gpu_conv_stats: NULL argument");
    memset(out, 0, sizeof *out);
    out->cudnn_runs = atomic_load(&cudnn_runs);
    out->im2col_runs = atomic_load(&im2col_runs);
    out->gemm_1x1_runs = atomic_load(&gemm_1x1_runs);
    out->depthwise_runs = atomic_load(&depthwise_runs);
    const em_cuda_api *api;
    int ord;
    if (em__gpu_backend(EM_DEVICE_GPU(0), &api, &ord) != EM_OK) {
        snprintf(out->cudnn_status, sizeof out->cudnn_status,
                 "no CUDA backend: %s", em_last_error());
        return EM_OK;
    }
    out->cudnn_available =
        api->cudnn_info(out->cudnn_status, sizeof out->cudnn_status);
    return EM_OK;
}

/* `a` row-contiguous and 16-byte aligned (cuDNN's vector loads): its own
 * data, or a packed copy in *copy (released by the caller). */
static em_status contiguous_data(const em_array *a, em_device device,
                                 em_buffer **copy, const void **data) {
    *copy = NULL;
    *data = em__data(a);
    if (em__is_row_contiguous(a->shape, a->strides, a->ndim) &&
        (uintptr_t)*data % 16 == 0)
        return EM_OK;
    const size_t es = em_dtype_size(a->dtype);
    em_status st = em__buffer_new_on(device, (size_t)a->size * es, copy);
    if (st == EM_OK)
        st = em__gpu_copy_strided(device, (*copy)->data, NULL, em__data(a),
                                  a->strides, a->shape, a->ndim, es);
    if (st == EM_OK)
        *data = (*copy)->data;
    return st;
}

/* The input zero-padded (or cropped) explicitly for a job whose padding
 * cuDNN cannot express: per spatial axis the span the windows read,
 * (out - 1) * stride + (k - 1) * kdil + 1 elements, the input placed at
 * `low` (cut where low < 0 or past the span). The job then convolves it
 * without padding: the same windows, the same output. */
static em_status padded_input(const em_array *in, const conv_params *p,
                              em_device device, em_cuda_cudnn_conv *job,
                              const em_cuda_api *api, int ord,
                              em_buffer **out) {
    const int nd = in->ndim, ns = nd - 2;
    const size_t es = em_dtype_size(in->dtype);
    int64_t span[EM_MAX_NDIM], copy[EM_MAX_NDIM], dst_strides[EM_MAX_NDIM];
    int64_t src_off = 0, dst_off = 0, total = 1;
    bool empty = false;
    copy[0] = span[0] = in->shape[0];
    copy[1] = span[1] = in->shape[1];
    for (int i = 0; i < ns; i++) {
        span[2 + i] = (job->out_sp[i] - 1) * job->strides[i] +
                      (job->k_sp[i] - 1) * job->dil[i] + 1;
        const int64_t dst_lo = p->low[i] > 0 ? p->low[i] : 0;
        const int64_t src_lo = p->low[i] < 0 ? -p->low[i] : 0;
        int64_t len = in->shape[2 + i] - src_lo;
        if (len > span[2 + i] - dst_lo)
            len = span[2 + i] - dst_lo;
        copy[2 + i] = len > 0 ? len : 0;
        empty = empty || copy[2 + i] == 0;
        src_off += src_lo * in->strides[2 + i];
        job->in_sp[i] = span[2 + i];
        job->pad[i] = 0;
    }
    for (int d = nd - 1; d >= 0; d--) {
        dst_strides[d] = total;
        total *= span[d];
    }
    for (int i = 0; i < ns; i++)
        dst_off += (p->low[i] > 0 ? p->low[i] : 0) * dst_strides[2 + i];
    em_status st = em__buffer_new_on(device, (size_t)total * es, out);
    if (st != EM_OK)
        return st;
    int rc = api->memset(ord, (*out)->data, 0, (size_t)total * es);
    if (rc)
        return em__gpu_fail(api, rc, "conv (padding for cuDNN)");
    if (!empty)
        st = em__gpu_copy_strided(
            device, (char *)(*out)->data + (size_t)dst_off * es, dst_strides,
            (const char *)em__data(in) + (size_t)src_off * es, in->strides,
            copy, nd, es);
    return st;
}

/* The cuDNN path; *ran = false (and EM_OK) when it does not apply. */
static em_status cudnn_conv(em_array *node, const em_cuda_api *api, int ord,
                            bool *ran) {
    *ran = false;
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    const int ns = in->ndim - 2;
    if ((node->dtype != EM_F32 && node->dtype != EM_F16 &&
         node->dtype != EM_BF16) ||
        p->bgroups != 1 || ns > 3)
        return EM_OK;
    em_cuda_cudnn_conv job;
    memset(&job, 0, sizeof job);
    job.dtype = node->dtype;
    job.ns = ns;
    job.n = in->shape[0];
    job.c = in->shape[1];
    job.o = ker->shape[0];
    job.groups = p->fgroups;
    bool cropped = false;
    for (int i = 0; i < ns; i++) {
        if (p->idil[i] != 1)
            return EM_OK;
        cropped = cropped || p->low[i] < 0;
        job.in_sp[i] = in->shape[2 + i];
        job.k_sp[i] = ker->shape[2 + i];
        job.out_sp[i] = node->shape[2 + i];
        job.pad[i] = p->low[i] > 0 ? p->low[i] : 0;
        job.strides[i] = p->strides[i];
        job.dil[i] = p->kdil[i];
    }
    /* cuDNN pads both sides alike: first as given (cuDNN's output shape
     * must then be ours), else with the input padded here. */
    int supported = 0;
    size_t ws_bytes = 0;
    int rc = cropped ? 0
                     : api->cudnn_conv_plan(ord, &job, &supported, &ws_bytes);
    if (rc)
        return em__gpu_fail(api, rc, "conv (cuDNN)");
    bool pad_here = false;
    em_cuda_cudnn_conv padded = job;
    if (!supported && ns > 0) {
        for (int i = 0; i < ns; i++) {
            padded.in_sp[i] = (job.out_sp[i] - 1) * job.strides[i] +
                              (job.k_sp[i] - 1) * job.dil[i] + 1;
            padded.pad[i] = 0;
        }
        rc = api->cudnn_conv_plan(ord, &padded, &supported, &ws_bytes);
        if (rc)
            return em__gpu_fail(api, rc, "conv (cuDNN)");
        pad_here = supported;
    }
    if (!supported)
        return EM_OK;
    em_buffer *in_copy = NULL, *ker_copy = NULL, *ws = NULL;
    bool declined = false;
    em_status st;
    if (pad_here) {
        job = padded;
        st = padded_input(in, p, node->device, &job, api, ord, &in_copy);
        if (st == EM_OK)
            job.x = in_copy->data;
    } else {
        st = contiguous_data(in, node->device, &in_copy, &job.x);
    }
    if (st == EM_OK)
        st = contiguous_data(ker, node->device, &ker_copy, &job.w);
    if (st == EM_OK && ws_bytes)
        st = em__buffer_new_on(node->device, ws_bytes, &ws);
    if (st == EM_OK) {
        job.y = em__data(node);
        job.workspace = ws ? ws->data : NULL;
        job.workspace_bytes = ws_bytes;
        int no = 0;
        rc = api->cudnn_conv_run(ord, &job, &no);
        st = rc ? em__gpu_fail(api, rc, "conv (cuDNN)") : EM_OK;
        declined = no != 0; /* nothing queued: im2col instead */
    }
    /* Released once queued, as im2col's scratch below. */
    em__buffer_release(ws);
    em__buffer_release(ker_copy);
    em__buffer_release(in_copy);
    if (st == EM_OK && !declined) {
        *ran = true;
        atomic_fetch_add(&cudnn_runs, 1);
    }
    return st;
}

/* ---- 1x1 convolutions -------------------------------------------------- */

/* out[n] = W · x[n]: a 1x1 kernel (or no spatial axes), unit strides, no
 * padding or input dilation (the output's positions are the input's), one
 * group of either kind. */
static bool is_pointwise(const em_array *node) {
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    if (p->fgroups != 1 || p->bgroups != 1)
        return false;
    for (int i = 0; i < in->ndim - 2; i++)
        if (ker->shape[2 + i] != 1 || p->strides[i] != 1 || p->low[i] != 0 ||
            p->idil[i] != 1 || node->shape[2 + i] != in->shape[2 + i])
            return false;
    return true;
}

/* How the GEMM reads x[n] as its (C, L) operand in place: as stored
 * (trans 0, ld the channel stride) or as its transpose (channels-last:
 * trans 1, ld the position stride). */
typedef struct x_operand {
    int trans;
    int64_t ld;
} x_operand;

/* The one stride stepping through the input's spatial positions in
 * row-major order (size-1 axes aside; 0 when there is one position), or
 * false when the positions are not evenly spaced. */
static bool position_stride(const em_array *in, int64_t *st) {
    int64_t next = 0;
    bool first = true;
    *st = 0;
    for (int d = in->ndim - 1; d >= 2; d--) {
        if (in->shape[d] == 1)
            continue;
        if (first)
            *st = in->strides[d];
        else if (in->strides[d] != next)
            return false;
        first = false;
        next = in->strides[d] * in->shape[d];
    }
    return true;
}

/* Whether x[n] (C channels, L positions) can be the GEMM's operand in
 * place, and how (cuBLAS: ld >= the stored rows' length, within int). */
static bool x_in_place(const em_array *in, int64_t L, x_operand *x) {
    const int64_t C = in->shape[1], cst = in->strides[1];
    int64_t lst;
    if (!position_stride(in, &lst) || in->strides[0] < 0)
        return false;
    if ((L == 1 || lst == 1) && (C == 1 || cst >= L)) {
        x->trans = 0;
        x->ld = C == 1 ? L : cst;
    } else if ((C == 1 || cst == 1) && (L == 1 || lst >= C)) {
        x->trans = 1;
        x->ld = L == 1 ? C : lst;
    } else {
        return false;
    }
    return x->ld <= INT32_MAX;
}

/* ---- depthwise convolutions ------------------------------------------- */

/* One input channel per group (feature groups = input channels), no input
 * dilation or batch groups; the kernel indexes positions in 32 bits. */
static bool is_depthwise(const em_array *node, int64_t L) {
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0];
    if (p->bgroups != 1 || p->fgroups != in->shape[1] || L > INT32_MAX)
        return false;
    for (int i = 0; i < in->ndim - 2; i++)
        if (p->idil[i] != 1)
            return false;
    return true;
}

/* The direct kernel over the geometry im2col's job `g` already holds. */
static em_status depthwise_conv(em_array *node, const em_cuda_api *api, int ord,
                                const em_cuda_im2col *g) {
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    em_cuda_depthwise job;
    memset(&job, 0, sizeof job);
    job.dtype = node->dtype;
    job.ns = g->ns;
    job.n = in->shape[0];
    job.c = in->shape[1];
    job.mult = ker->shape[0] / job.c;
    job.L = g->L;
    job.x_batch_stride = in->strides[0];
    job.x_c_stride = in->strides[1];
    memcpy(job.in_sp, g->in_sp, sizeof job.in_sp);
    memcpy(job.in_st, g->in_st, sizeof job.in_st);
    memcpy(job.k_sp, g->k_sp, sizeof job.k_sp);
    memcpy(job.out_sp, g->out_sp, sizeof job.out_sp);
    memcpy(job.strides, g->strides, sizeof job.strides);
    memcpy(job.low, g->low, sizeof job.low);
    memcpy(job.kdil, g->kdil, sizeof job.kdil);
    job.x = em__data(in);
    job.y = em__data(node);
    em_buffer *ker_copy = NULL;
    em_status st = contiguous_data(ker, node->device, &ker_copy, &job.w);
    if (st == EM_OK) {
        int rc = api->depthwise_conv(ord, &job);
        st = rc ? em__gpu_fail(api, rc, "conv (depthwise)") : EM_OK;
    }
    em__buffer_release(ker_copy); /* once queued, as im2col's scratch */
    return st;
}

/* ---- GEMM over patch matrices (im2col), or over x itself (1x1) ---------- */

/* conv.c's geometry in an im2col job: at least one spatial axis (none:
 * one of size 1), kvol and L. */
static void geometry_of(const em_array *node, em_cuda_im2col *job) {
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    memset(job, 0, sizeof *job);
    job->elem_size = (int)em_dtype_size(node->dtype);
    job->ns = in->ndim - 2;
    if (job->ns == 0) {
        job->ns = 1;
        job->in_sp[0] = job->k_sp[0] = job->out_sp[0] = 1;
        job->strides[0] = job->idil[0] = job->kdil[0] = 1;
    } else {
        for (int i = 0; i < job->ns; i++) {
            job->in_sp[i] = in->shape[2 + i];
            job->in_st[i] = in->strides[2 + i];
            job->k_sp[i] = ker->shape[2 + i];
            job->out_sp[i] = node->shape[2 + i];
            job->strides[i] = p->strides[i];
            job->low[i] = p->low[i];
            job->idil[i] = p->idil[i];
            job->kdil[i] = p->kdil[i];
        }
    }
    job->kvol = job->L = 1;
    for (int i = 0; i < job->ns; i++) {
        job->kvol *= job->k_sp[i];
        job->L *= job->out_sp[i];
    }
}

/* The kernel rows times the patch matrices, chunk by chunk: built by
 * im2col into a scratch buffer, or, with `x` (1x1 convolutions), x's own
 * batches read in place. */
static em_status gemm_conv(em_array *node, const em_cuda_api *api, int ord,
                           em_cuda_im2col *job, const x_operand *x) {
    const conv_params *p = node->params;
    const em_array *in = node->inputs[0], *ker = node->inputs[1];
    const size_t es = em_dtype_size(node->dtype);
    const int64_t N = in->shape[0], O = ker->shape[0], Cg = ker->shape[1];
    const int64_t F = p->fgroups, B = p->bgroups, T = F * B;
    const int64_t Og = O / T, Nout = node->shape[0], Kdim = Cg * job->kvol;
    const int64_t L = job->L;
    char *out = em__data(node);
    job->groups = T;
    job->cg = Cg;
    job->c_stride = in->strides[1];
    job->batch_stride = in->strides[0];
    job->group_stride = B > 1   ? (N / B) * in->strides[0]
                        : F > 1 ? Cg * in->strides[1]
                                : 0;

    /* The kernel as W[O][Kdim], row-major. */
    em_buffer *wbuf = NULL, *col = NULL;
    const void *w;
    em_status st = contiguous_data(ker, node->device, &wbuf, &w);

    const int64_t per_batch = T * Kdim * L * (int64_t)es;
    int64_t nb = x ? Nout : COL_BYTES / per_batch;
    if (nb < 1)
        nb = 1;
    if (nb > Nout)
        nb = Nout;
    if (nb > 65535) /* the integer GEMM kernel's grid.z */
        nb = 65535;
    if (st == EM_OK && !x)
        st = em__buffer_new_on(node->device, (size_t)(nb * per_batch), &col);
    const char *in_data = em__data(in);
    for (int64_t n0 = 0; st == EM_OK && n0 < Nout; n0 += nb) {
        job->nb = n0 + nb <= Nout ? nb : Nout - n0;
        job->in = in_data + n0 * in->strides[0] * (int64_t)es;
        em_cuda_gemm g;
        memset(&g, 0, sizeof g);
        g.dtype = node->dtype;
        g.m = Og;
        g.n = L;
        g.k = Kdim;
        g.lda = Kdim;
        int rc = 0;
        if (x) { /* x[n] is its own patch matrix */
            g.b = job->in;
            g.trans_b = x->trans;
            g.ldb = x->ld;
            g.stride_b = in->strides[0];
        } else {
            job->col = col->data;
            rc = api->im2col(ord, job);
            g.b = col->data;
            g.ldb = L;
            g.stride_b = Kdim * L;
        }
        if (T == 1) { /* W broadcast over the chunk's batches */
            g.batch = job->nb;
            g.a = w;
            g.c = out + (size_t)(n0 * O * L) * es;
            rc = rc ? rc : api->gemm(ord, &g);
        } else { /* per batch, the groups as the GEMM's batch */
            g.batch = T;
            g.stride_a = Og * Kdim;
            for (int64_t b = 0; rc == 0 && b < job->nb; b++) {
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

/* Counts a path's run when it succeeded. */
static em_status counted(em_status st, _Atomic int64_t *runs) {
    if (st == EM_OK)
        atomic_fetch_add(runs, 1);
    return st;
}

em_status em__gpu_conv_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    em_cuda_im2col job;
    geometry_of(node, &job);
    if (node->inputs[1]->shape[1] * job.kvol == 0) { /* no taps: zeros */
        int rc = api->memset(ord, em__data(node), 0,
                             (size_t)node->size * em_dtype_size(node->dtype));
        return rc ? em__gpu_fail(api, rc, "conv") : EM_OK;
    }
    const int path = atomic_load(&conv_path);
    if (path == EM_GPU_CONV_AUTO && is_pointwise(node)) {
        x_operand x;
        const bool in_place = x_in_place(node->inputs[0], job.L, &x);
        return counted(gemm_conv(node, api, ord, &job, in_place ? &x : NULL),
                       &gemm_1x1_runs);
    }
    if (path == EM_GPU_CONV_AUTO && is_depthwise(node, job.L))
        return counted(depthwise_conv(node, api, ord, &job), &depthwise_runs);
    if (path != EM_GPU_CONV_IM2COL) {
        bool ran;
        st = cudnn_conv(node, api, ord, &ran);
        if (st != EM_OK || ran)
            return st;
    }
    return counted(gemm_conv(node, api, ord, &job, NULL), &im2col_runs);
}
