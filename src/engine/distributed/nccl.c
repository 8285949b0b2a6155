/*
 * nccl.c — communicators of GPU arrays through NCCL (the CUDA plugin's
 * nccl.cu opens libnccl.so.2 on first use).
 *
 * One NCCL communicator per process and GPU: rank 0 makes a clique id
 * (em_comm_nccl_unique_id), the caller sends it to every rank (Emily.
 * Distributed does it through Erlang distribution), and each rank joins
 * with em_comm_nccl_new. Collectives are then queued on the evaluating
 * thread's CUDA stream like any kernel: the engine's stream ordering (gpu_
 * stream.h) covers them, and nothing waits for the GPU but a barrier.
 *
 * Unlike the TCP transport, NCCL exchanges no headers: ranks that pass
 * different shapes get NCCL's behaviour (a hang or wrong data), as with
 * NCCL itself. The builders still check everything a rank can check on
 * its own (device, divisibility, peers).
 */
#include "comm.h"
#include "../cuda/emily_cuda.h"

#include <stdlib.h>

static em_status backend(em_comm *comm, const em_cuda_api **api, int *ord) {
    return em__gpu_backend(comm->nccl_device, api, ord);
}

em_status em_comm_nccl_unique_id(em_device device,
                                 uint8_t id[EM_NCCL_ID_BYTES]) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    int rc = api->nccl_unique_id(id);
    return rc ? em__gpu_fail(api, rc, "comm_nccl_unique_id") : EM_OK;
}

em_status em_comm_nccl_new(em_device device, int rank, int size,
                           const uint8_t id[EM_NCCL_ID_BYTES],
                           em_comm **out) {
    if (out)
        *out = NULL;
    if (!out || !id)
        return em__fail(EM_ERR_ARGUMENT, "comm_nccl_new: NULL argument");
    if (device == EM_DEVICE_CPU)
        return em__fail(EM_ERR_ARGUMENT,
                        "comm_nccl_new: NCCL communicators are for GPUs; use "
                        "the TCP transport (em_comm_listen) for the CPU");
    if (size < 1 || rank < 0 || rank >= size)
        return em__fail(EM_ERR_ARGUMENT,
                        "comm_nccl_new: rank %d of size %d: size must be >= 1 "
                        "and rank in [0, size)",
                        rank, size);
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(device, &api, &ord);
    if (st != EM_OK)
        return st;
    em_comm *c = calloc(1, sizeof *c);
    if (!c)
        return em__fail(EM_ERR_OOM, "comm_nccl_new: out of memory");
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return em__fail(EM_ERR_RUNTIME, "comm_nccl_new: cannot make a lock");
    }
    void *handle = NULL;
    int rc = api->nccl_comm_init(ord, size, rank, id, &handle);
    if (rc) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return em__gpu_fail(api, rc, "comm_nccl_new");
    }
    atomic_init(&c->refcount, 1);
    c->self = c;
    c->listen_fd = -1;
    c->rank = rank;
    c->size = size;
    c->nccl = handle;
    c->nccl_device = device;
    atomic_store(&c->connected, true);
    *out = c;
    return EM_OK;
}

void em__nccl_destroy(em_comm *comm) {
    const em_cuda_api *api;
    int ord;
    if (comm->nccl && backend(comm, &api, &ord) == EM_OK)
        api->nccl_comm_destroy(comm->nccl);
    comm->nccl = NULL;
}

/* Queue one NCCL operation (lock held, so that the ranks' operations are
 * queued in the order their evaluations reach them). */
static em_status queue(em_comm *comm, const char *op, em_cuda_nccl *job) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__comm_check_usable(comm, op);
    if (st == EM_OK)
        st = backend(comm, &api, &ord);
    if (st != EM_OK)
        return st;
    job->comm = comm->nccl;
    pthread_mutex_lock(&comm->lock);
    int rc = api->nccl_collective(ord, job);
    pthread_mutex_unlock(&comm->lock);
    return rc ? em__gpu_fail(api, rc, op) : EM_OK;
}

/* A fresh output buffer on the node's GPU. */
static em_status prepare(em_array *node) {
    const em_cuda_api *api;
    int ord;
    return em__gpu_prepare(node, &api, &ord);
}

em_status em__nccl_all_sum(em_array *node, em_comm *comm) {
    em_array *x = node->inputs[0];
    em_status st = prepare(node);
    if (st != EM_OK || node->size == 0)
        return st;
    em_cuda_nccl job = {EM_CUDA_NCCL_ALL_SUM, (int)node->dtype, 0, x->size,
                        NULL, em__data(x), node->buffer->data};
    return queue(comm, "all_sum", &job);
}

em_status em__nccl_all_gather(em_array *node, em_comm *comm) {
    em_array *x = node->inputs[0];
    em_status st = prepare(node);
    if (st != EM_OK || node->size == 0)
        return st;
    em_cuda_nccl job = {EM_CUDA_NCCL_ALL_GATHER, (int)node->dtype, 0, x->size,
                        NULL, em__data(x), node->buffer->data};
    return queue(comm, "all_gather", &job);
}

em_status em__nccl_reduce_scatter(em_array *node, em_comm *comm) {
    em_array *x = node->inputs[0];
    em_status st = prepare(node);
    if (st != EM_OK || node->size == 0)
        return st;
    em_cuda_nccl job = {EM_CUDA_NCCL_REDUCE_SCATTER, (int)node->dtype, 0,
                        node->size, NULL, em__data(x), node->buffer->data};
    return queue(comm, "reduce_scatter", &job);
}

em_status em__nccl_send(em_array *node, em_comm *comm, int dest) {
    em_array *x = node->inputs[0];
    em_status st = EM_OK;
    if (x->size) {
        em_cuda_nccl job = {EM_CUDA_NCCL_SEND, (int)x->dtype, dest, x->size,
                            NULL, em__data(x), NULL};
        st = queue(comm, "send", &job);
    }
    if (st == EM_OK)
        em__share_buffer(node, x);
    return st;
}

em_status em__nccl_recv(em_array *node, em_comm *comm, int source) {
    em_status st = prepare(node);
    if (st != EM_OK || node->size == 0)
        return st;
    em_cuda_nccl job = {EM_CUDA_NCCL_RECV, (int)node->dtype, source,
                        node->size, NULL, NULL, node->buffer->data};
    return queue(comm, "recv", &job);
}

em_status em__nccl_barrier(em_comm *comm) {
    const em_cuda_api *api;
    int ord;
    em_status st = backend(comm, &api, &ord);
    if (st != EM_OK)
        return st;
    em_buffer *one = NULL;
    st = em__buffer_new_on(comm->nccl_device, 1, &one);
    if (st != EM_OK)
        return st;
    int rc = api->memset(ord, one->data, 0, 1);
    if (rc)
        st = em__gpu_fail(api, rc, "barrier");
    if (st == EM_OK) {
        em_cuda_nccl job = {EM_CUDA_NCCL_ALL_SUM, EM_U8, 0, 1, NULL,
                            one->data, one->data};
        st = queue(comm, "barrier", &job);
    }
    /* The barrier is over when the all-reduce is: wait for the GPU. */
    if (st == EM_OK && (rc = api->synchronize(ord)) != 0)
        st = em__gpu_fail(api, rc, "barrier");
    em__buffer_release(one);
    return st;
}

em_status em__copy_to_device_buffer(em_array *node, const void *host,
                                    size_t bytes) {
    const em_cuda_api *api;
    int ord;
    em_status st = em__gpu_backend(node->device, &api, &ord);
    if (st != EM_OK)
        return st;
    int rc = api->copy_to_device(ord, node->buffer->data, host, bytes);
    return rc ? em__gpu_fail(api, rc, node->prim->name) : EM_OK;
}
