/*
 * emily_distributed.h — collectives across processes (part of libemily;
 * include after or instead of emily.h).
 *
 * A communicator (em_comm) joins `size` processes, each with its `rank` in
 * [0, size). Collectives on it are lazy graph nodes like any op: they run
 * when evaluated, on the evaluating thread (a stream's worker), so a
 * program (em_program_new, Emily.Compiler) may contain them and a compiled
 * training step includes its gradient all-reduce.
 *
 * Transport for CPU arrays: plain TCP sockets, with no protocol beyond a
 * small header per message and no bootstrap of its own. TCP rather than
 * MPI: ranks are BEAM nodes that anybody starts (no mpirun to launch them,
 * no MPI runtime to install), and a dead peer must become an error with a
 * timeout, never MPI's default of aborting every process. GPU arrays use
 * NCCL (below).
 * Wiring a communicator takes two calls, with the exchange of addresses in
 * between done by the caller (Emily.Distributed does it through Erlang
 * distribution):
 *
 *   em_comm_listen(host, &comm, &port)      every rank: a listening socket
 *                                           on host (port 0: the kernel's
 *                                           choice), reported back
 *   ... the caller collects every rank's (host, port) ...
 *   em_comm_connect(comm, rank, size, hosts, ports, &opts)
 *
 * The connect step makes a full mesh (rank i connects to every j > i and
 * accepts every j < i): the collectives use only the ring of neighbours
 * (rank + 1 and rank - 1 modulo size), and send/recv any pair. A mesh of n
 * ranks has n - 1 sockets per rank, fine for the handful of processes a
 * machine or a small cluster runs.
 *
 * Ordering: like MPI and NCCL, every rank must run the same collectives in
 * the same order. Each message starts with a header (operation, sequence
 * number, dtype, shape); a mismatch between ranks fails with
 * EM_ERR_ARGUMENT on every rank, naming both sides' shapes, and leaves the
 * communicator usable. A peer that dies or closes its socket, or that
 * sends nothing for `timeout_ms`, fails the op with EM_ERR_RUNTIME ("peer
 * rank 1 closed the connection"); after such a failure the byte stream is
 * out of step, so the communicator is marked broken and every later op on
 * it fails at once. Collectives on one communicator are serialised by a
 * lock (two streams evaluating collectives on one communicator at once run
 * them one after the other, in an order the program does not control: use
 * one stream per communicator, or one communicator per stream).
 *
 * Results are bit-identical on every rank: the ring all-reduce is a
 * reduce-scatter, where each chunk is summed once in a fixed order along
 * the ring (starting at the rank after the one that ends up owning it),
 * then an all-gather that copies the owner's bytes everywhere.
 *
 * Arrays on a GPU go through host memory over TCP (a copy each way, on
 * the evaluating thread); NCCL communicators (below) keep them there.
 *
 * Every dtype of `add`: integers wrap, pred is a logical or, f16/bf16 are
 * added in float and rounded at each step along the ring.
 */
#ifndef EMILY_DISTRIBUTED_H
#define EMILY_DISTRIBUTED_H

#include "emily.h"
#include "emily_device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_comm em_comm;

/* Options of em_comm_connect. Zero value: the defaults. */
typedef struct em_comm_options {
    /* Milliseconds without progress before a send, receive or connect
     * fails (0: 60000). */
    int64_t timeout_ms;
} em_comm_options;

/* A new communicator listening on `host` (a numeric IPv4 address, NULL
 * for 127.0.0.1) at port 0 (any free port), written to *port. Not
 * connected yet: collectives fail until em_comm_connect. */
em_status em_comm_listen(const char *host, em_comm **out, int *port);

/* Connect the communicator as `rank` of `size`: hosts[i]/ports[i] is rank
 * i's listener (this rank's own entry is ignored). Blocks until every
 * peer is connected or the timeout passes. Fails when called twice. */
em_status em_comm_connect(em_comm *comm, int rank, int size,
                          const char *const *hosts, const int *ports,
                          const em_comm_options *opts);

int em_comm_rank(const em_comm *comm);
int em_comm_size(const em_comm *comm); /* 0 until connected */

/* Close the sockets now: later ops on the communicator fail with
 * EM_ERR_ARGUMENT ("communicator is closed"), peers see the connection
 * close. The handle stays valid until released. */
void em_comm_close(em_comm *comm);

void em_comm_retain(em_comm *comm);
void em_comm_release(em_comm *comm); /* NULL is allowed */

/* ---- NCCL: communicators of GPU arrays -----------------------------------
 *
 * One communicator per process and GPU, through NCCL (libnccl.so.2, opened
 * by the CUDA backend on first use: $EMILY_NCCL_LIB, the loader's path, or
 * the nvidia-nccl-cu* pip package; absent, EM_ERR_RUNTIME "NCCL is not
 * available" says where it looked). Rank 0 makes the clique's id, the caller hands it to every
 * rank, and each rank joins (blocking until all have). Collectives on such
 * a communicator take arrays on its GPU and are queued on the evaluating
 * thread's CUDA stream like any kernel. NCCL sends no headers: ranks that
 * disagree on shapes get NCCL's behaviour (a hang or wrong data), and
 * em_comm_close does not interrupt queued work. */
#define EM_NCCL_ID_BYTES 128
em_status em_comm_nccl_unique_id(em_device device,
                                 uint8_t id[EM_NCCL_ID_BYTES]);
em_status em_comm_nccl_new(em_device device, int rank, int size,
                           const uint8_t id[EM_NCCL_ID_BYTES], em_comm **out);

/* ---- collectives: lazy nodes holding a reference to the communicator ---- */

/* Element-wise sum of x over all ranks; same shape and dtype on every
 * rank. vjp: all_sum of the cotangent. */
em_status em_all_sum(em_array *x, em_comm *comm, em_array **out);

/* The ranks' x concatenated along `axis` in rank order (the same shape on
 * every rank; the output's axis is size times longer). vjp:
 * reduce_scatter of the cotangent. */
em_status em_all_gather(em_array *x, em_comm *comm, int axis, em_array **out);

/* Sum of x over all ranks, split along `axis` into size equal parts:
 * rank r gets part r. x's axis must be divisible by size. vjp: all_gather
 * of the cotangent. */
em_status em_reduce_scatter(em_array *x, em_comm *comm, int axis,
                            em_array **out);

/* Send x to rank `dest` when evaluated; the result is x itself (chain it
 * into what follows so the send is evaluated). The send completes when the
 * receiver has checked the header (a rendezvous). Not differentiable. */
em_status em_send(em_array *x, em_comm *comm, int dest, em_array **out);

/* Receive an array of (dtype, shape) from rank `source`; a sender with
 * another dtype or shape fails both sides. Not differentiable. */
em_status em_recv(em_comm *comm, int source, em_dtype dtype,
                  const int64_t *shape, int ndim, em_array **out);

/* A 0-d pred (true) that is evaluated only once every rank has reached its
 * barrier. */
em_status em_barrier(em_comm *comm, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
