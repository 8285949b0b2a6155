/*
 * comm.h — the communicator and its TCP transport, shared by comm.c (the
 * sockets) and collective.c (the ops). See include/emily_distributed.h.
 *
 * Every transfer is a pair of byte streams moved at the same time (send to
 * one peer, receive from another, either may be empty) by one poll() loop
 * over non-blocking sockets: a ring step where every rank sends before it
 * receives would deadlock once the messages outgrow the socket buffers.
 * "No progress for timeout_ms" is the failure that turns a dead or stuck
 * peer into an error instead of a hang.
 */
#ifndef EMILY_DISTRIBUTED_COMM_H
#define EMILY_DISTRIBUTED_COMM_H

#include "emily_distributed.h"
#include "internal.h"

#include <pthread.h>

struct em_comm {
    atomic_int refcount;
    /* Points at the communicator itself: the bytes of the holder array
     * through which nodes keep it alive (em__comm_holder). */
    em_comm *self;
    /* Held for a whole collective or connect (seconds, maybe): nothing
     * that runs on a caller's thread while building graphs takes it. The
     * flags below are read without it. */
    pthread_mutex_t lock;
    int listen_fd; /* open until released */
    int rank, size; /* written once, before `connected` */
    int *fds;       /* fds[r]: socket to rank r (-1 for self) */
    int64_t timeout_ms;
    uint64_t seq; /* collectives run so far (headers carry it); locked */
    atomic_bool connected;
    atomic_bool closed; /* em_comm_close was called */
    atomic_bool broken; /* a transport failure left the streams out of step */
    char broken_reason[256]; /* written before `broken` is set */
    /* An NCCL communicator (nccl.c) instead of sockets: its handle in the
     * CUDA plugin, and the GPU it was made for. */
    void *nccl;
    em_device nccl_device;
};

/* Move send_len bytes to rank `to` while receiving recv_len bytes from
 * rank `from` (either length may be 0). On failure records a message
 * "<op>: peer rank N closed the connection" (or timed out) and marks the
 * communicator broken. Call with comm->lock held. */
em_status em__comm_exchange(em_comm *comm, const char *op, int to,
                            const void *send_buf, size_t send_len, int from,
                            void *recv_buf, size_t recv_len);

/* Fail unless the communicator is connected, open and not broken. */
em_status em__comm_check_usable(em_comm *comm, const char *op);

/* A 0-d u64 array with data whose buffer keeps `comm` alive (a reference
 * held until the array's buffer is freed): collective nodes take it as an
 * input, so a program that captured one keeps the communicator, and
 * programs on different communicators differ in that constant. */
em_status em__comm_holder(em_comm *comm, em_array **out);
em_comm *em__comm_from_holder(const em_array *holder);

/* ---- NCCL communicators (nccl.c) -----------------------------------------
 * The evals of the collectives on a communicator made by em_comm_nccl_new:
 * queued on the calling thread's CUDA stream of the communicator's GPU,
 * like any kernel. all_gather and reduce_scatter take the flat layout
 * (along the outermost axis; the builders reshape around them). */
em_status em__nccl_all_sum(em_array *node, em_comm *comm);
em_status em__nccl_all_gather(em_array *node, em_comm *comm);
em_status em__nccl_reduce_scatter(em_array *node, em_comm *comm);
em_status em__nccl_send(em_array *node, em_comm *comm, int dest);
em_status em__nccl_recv(em_array *node, em_comm *comm, int source);
/* Returns once every rank's barrier has run on the GPU. */
em_status em__nccl_barrier(em_comm *comm);
void em__nccl_destroy(em_comm *comm);

/* Copy `bytes` of host memory into the (GPU) node's fresh buffer. */
em_status em__copy_to_device_buffer(em_array *node, const void *host,
                                    size_t bytes);

#endif
