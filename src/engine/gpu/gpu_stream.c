/*
 * gpu_stream.c — ordering GPU work across engine streams (the rule is in
 * gpu_stream.h). Nothing here runs for CPU nodes.
 */
#include "gpu_stream.h"
#include "../cuda/emily_cuda.h"

static em_status current(const em_array *node, const em_cuda_api **api,
                         int *ord, void **cur) {
    em_status st = em__gpu_backend(node->device, api, ord);
    if (st != EM_OK)
        return st;
    *cur = (*api)->current_stream(*ord);
    return *cur ? EM_OK : em__gpu_fail(*api, EM_ERR_RUNTIME, node->prim->name);
}

static bool on_gpu(const em_buffer *b, em_device device) {
    return b && b->device == device && b->capacity != 0;
}

em_status em__gpu_order_inputs(em_array *node) {
    const em_cuda_api *api;
    int ord;
    void *cur;
    em_status st = current(node, &api, &ord, &cur);
    for (int i = 0; i < node->ninputs && st == EM_OK; i++) {
        em_buffer *b = node->inputs[i]->buffer;
        if (!on_gpu(b, node->device))
            continue;
        void *last = atomic_load_explicit(&b->stream, memory_order_acquire);
        if (last && last != cur) {
            int rc = api->stream_wait(ord, last);
            if (rc)
                st = em__gpu_fail(api, rc, node->prim->name);
        }
    }
    return st;
}

/* Make cur the last stream of b. Another thread may have used b on its
 * stream since order_inputs looked (two consumers at once): then cur waits
 * for that stream too, so the chain still covers every use. */
static int take_over(const em_cuda_api *api, int ord, em_buffer *b, void *cur) {
    void *old = atomic_exchange_explicit(&b->stream, cur, memory_order_acq_rel);
    return old && old != cur ? api->stream_wait(ord, old) : 0;
}

em_status em__gpu_mark_used(em_array *node) {
    const em_cuda_api *api;
    int ord;
    void *cur;
    em_status st = current(node, &api, &ord, &cur);
    if (st != EM_OK)
        return st;
    int rc = 0;
    for (int i = 0; i < node->ninputs && !rc; i++) {
        em_buffer *b = node->inputs[i]->buffer;
        if (on_gpu(b, node->device))
            rc = take_over(api, ord, b, cur);
    }
    if (!rc && on_gpu(node->buffer, node->device))
        rc = take_over(api, ord, node->buffer, cur);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}

em_status em__gpu_wait_buffer(const em_cuda_api *api, int ordinal,
                              em_buffer *b) {
    void *last =
        b ? atomic_load_explicit(&b->stream, memory_order_acquire) : NULL;
    int rc = last ? api->stream_wait(ordinal, last) : 0;
    return rc ? em__gpu_fail(api, rc, "stream wait") : EM_OK;
}

em_status em__gpu_array_pending(const em_array *a, bool *pending) {
    *pending = false;
    if (a->device == EM_DEVICE_CPU || !a->buffer)
        return em__fail(EM_ERR_ARGUMENT, "pending: not an evaluated GPU array");
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(a->device, &api, &ord);
    if (st != EM_OK)
        return st;
    int p = 0;
    int rc = api->stream_pending(
        ord, atomic_load_explicit(&a->buffer->stream, memory_order_acquire),
        &p);
    *pending = p != 0;
    return rc ? em__gpu_fail(api, rc, "pending") : EM_OK;
}
