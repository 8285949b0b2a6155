/*
 * gpu_window.c — the GPU evals of window_reduce, window_scatter and
 * random_erf_inv: the geometry worked out as window.c / random.c do, then
 * one call into the CUDA backend (src/cuda/window.cu).
 */
#include "../cuda/emily_cuda.h"
#include "internal.h"
#include "ops/params.h"

/* The window geometry of params `p` over `in` with windows `out_shape`
 * (rank 0 becomes one axis of size 1, as window.c's job_init). */
static void window_geom(em_cuda_window *w, const win_params *p,
                        const em_array *in, const int64_t *out_shape) {
    memset(w, 0, sizeof *w);
    if (in->ndim == 0) {
        w->ndim = 1;
        w->out_shape[0] = w->in_shape[0] = w->window[0] = 1;
        w->strides[0] = w->dil[0] = w->in_strides[0] = 1;
    } else {
        w->ndim = in->ndim;
        for (int i = 0; i < in->ndim; i++) {
            w->out_shape[i] = out_shape[i];
            w->in_shape[i] = in->shape[i];
            w->in_strides[i] = in->strides[i];
            w->window[i] = p->window[i];
            w->strides[i] = p->strides[i];
            w->dil[i] = p->dil[i];
            w->low[i] = p->low[i];
        }
    }
    w->n = 1;
    for (int i = 0; i < w->ndim; i++)
        w->n *= w->out_shape[i];
    w->op = p->op;
    w->dtype = in->dtype;
    w->in = em__data(in);
}

em_status em__gpu_window_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    em_cuda_window job;
    window_geom(&job, node->params, node->inputs[0], node->shape);
    job.out = em__data(node);
    int rc = api->window_reduce(ord, &job);
    return rc ? em__gpu_fail(api, rc, "window_reduce") : EM_OK;
}

em_status em__gpu_window_scatter_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK || node->size == 0)
        return st;
    const em_array *a = node->inputs[0], *source = node->inputs[1],
                   *init = node->inputs[2];
    em_cuda_window_scatter job;
    window_geom(&job.win, node->params, a, source->shape);
    job.src_dtype = node->dtype;
    job.nout = node->size;
    job.source = em__data(source); /* contiguous (the builder made it so) */
    job.init = em__data(init);
    job.out = em__data(node);
    job.sel = NULL;
    em_buffer *sel = NULL;
    if (job.win.n > 0) {
        st = em__buffer_new_on(node->device,
                               (size_t)job.win.n * sizeof(int64_t), &sel);
        if (st != EM_OK)
            return st;
        job.sel = sel->data;
    }
    int rc = api->window_scatter(ord, &job);
    /* Released once queued: the device's one stream orders any reuse. */
    em__buffer_release(sel);
    return rc ? em__gpu_fail(api, rc, "window_scatter") : EM_OK;
}

em_status em__gpu_erf_inv_eval(em_array *node) {
    const em_cuda_api *api;
    int ord;
    em_array *in = node->inputs[0];
    em_status st = em__gpu_backend(node->device, &api, &ord);
    if (st == EM_OK)
        st = em__alloc_output(node, &in, 1);
    if (st != EM_OK || node->size == 0)
        return st;
    /* The builder made the input contiguous. */
    int rc = api->erf_inv(ord, node->dtype, em__data(in), em__data(node),
                          node->size);
    return rc ? em__gpu_fail(api, rc, "random_erf_inv") : EM_OK;
}
