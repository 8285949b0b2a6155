/*
 * collective.c — all_sum, all_gather, reduce_scatter, send, recv and
 * barrier as lazy nodes over a TCP communicator (comm.c).
 *
 * Each node's inputs are its array (none for recv and barrier) and the
 * communicator's holder (comm.h), so a program that captured the node
 * keeps the communicator alive. Parameters are plain bytes (the tape
 * contract): the axis, the peer, and for send/recv a process-wide unique
 * number so that common-subexpression elimination never merges two
 * transfers (two all_sums of one array on one communicator may merge:
 * every rank merges them alike).
 *
 * Every collective first passes a header around the ring (an all-gather
 * of n small records: n - 1 steps), so every rank sees every rank's op,
 * sequence number, dtype and shape and takes the same decision: all go on,
 * or all fail naming the first rank that differs from rank 0. The ring
 * algorithms, on a row-major staging copy of the data:
 *
 *   reduce-scatter: chunk c starts at rank c + 1, and each step adds the
 *     received partial sum to the local chunk and passes it right, so
 *     after n - 1 steps rank c holds chunk c summed in one fixed order;
 *   all-gather: each rank passes the chunk it got last to the right.
 *
 * all_sum is the two over n nearly equal chunks of the flat array;
 * reduce_scatter is the first over the n parts of its axis (moved to the
 * front by a strided copy); all_gather the second over the ranks' whole
 * arrays (then moved into place along the axis).
 */
#include "comm.h"
#include "ops/copy.h"

#include <stdio.h>
#include <stdlib.h>

enum coll_kind {
    COLL_ALL_SUM = 1,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_BARRIER,
    COLL_SEND,
    COLL_ACK,
};

static const char *kind_name(uint32_t kind) {
    switch (kind) {
    case COLL_ALL_SUM: return "all_sum";
    case COLL_ALL_GATHER: return "all_gather";
    case COLL_REDUCE_SCATTER: return "reduce_scatter";
    case COLL_BARRIER: return "barrier";
    case COLL_SEND: return "send";
    case COLL_ACK: return "recv";
    default: return "?";
    }
}

typedef struct coll_params {
    int32_t axis;
    int32_t peer;    /* send: dest, recv: source */
    uint64_t unique; /* send/recv: never merged by CSE */
} coll_params;

/* What every message starts with (both sides are the same build: native
 * byte order). */
typedef struct wire_header {
    uint32_t magic;
    uint32_t kind;
    uint64_t seq;
    int32_t dtype;
    int32_t ndim;
    int32_t axis;
    int32_t rank;
    int64_t shape[EM_MAX_NDIM];
} wire_header;

#define WIRE_MAGIC 0x454d4831u /* "EMH1" */

static atomic_uint_fast64_t transfer_counter;

/* ---- the sum kernel: acc[i] = acc[i] + in[i], one definition ------------ */

typedef struct add_job {
    em_dtype dtype;
    void *acc;
    const void *in;
} add_job;

#define EM_WRAP_ADD(C, a, b)                                                   \
    ((C)((EM_UNSIGNED_OF(C))(a) + (EM_UNSIGNED_OF(C))(b)))

/* Integers wrap through their unsigned type; floats and complex add. */
#define DEFINE_ADD(E, sfx, S, C, LOAD, STORE)                                  \
    EM_CLONES static void add_into_##sfx(S *restrict acc,                      \
                                         const S *restrict in, int64_t n) {    \
        for (int64_t i = 0; i < n; i++) {                                      \
            C a = LOAD(acc[i]), b = LOAD(in[i]);                               \
            acc[i] = STORE(ADD_OF(C, a, b));                                   \
        }                                                                      \
    }
#define ADD_OF(C, a, b)                                                        \
    _Generic((C)0, float : (a) + (b), double : (a) + (b),                      \
             em_c64_t : (a) + (b), em_c128_t : (a) + (b),                      \
             default : EM_WRAP_ADD(C, a, b))
EM_DTYPES_ALL(DEFINE_ADD)
#undef DEFINE_ADD

static void add_range(void *ctx, int64_t begin, int64_t end) {
    const add_job *j = ctx;
    size_t es = em_dtype_size(j->dtype);
    void *acc = (char *)j->acc + (size_t)begin * es;
    const void *in = (const char *)j->in + (size_t)begin * es;
    switch (j->dtype) {
#define ADD_CASE(E, sfx, S, C, LOAD, STORE)                                    \
    case E:                                                                    \
        add_into_##sfx(acc, in, end - begin);                                  \
        break;
        EM_DTYPES_ALL(ADD_CASE)
#undef ADD_CASE
    default:
        break;
    }
}

static void add_into(em_dtype dtype, void *acc, const void *in, int64_t n) {
    add_job j = {dtype, acc, in};
    em__parallel_for(n, EM_PARALLEL_GRAIN, add_range, &j);
}

/* ---- headers ------------------------------------------------------------- */

static int mod(int a, int n) { return ((a % n) + n) % n; }

static wire_header make_header(uint32_t kind, uint64_t seq, int rank,
                               em_dtype dtype, const int64_t *shape, int ndim,
                               int axis) {
    wire_header h;
    memset(&h, 0, sizeof h);
    h.magic = WIRE_MAGIC;
    h.kind = kind;
    h.seq = seq;
    h.dtype = (int32_t)dtype;
    h.ndim = ndim;
    h.axis = axis;
    h.rank = rank;
    for (int i = 0; i < ndim; i++)
        h.shape[i] = shape[i];
    return h;
}

static bool same_data(const wire_header *a, const wire_header *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && a->axis == b->axis &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static const char *describe_header(const wire_header *h, em_desc *buf) {
    em_desc shape;
    int ndim = h->ndim < 0 || h->ndim > EM_MAX_NDIM ? 0 : h->ndim;
    em__describe_shape(h->shape, ndim, &shape);
    /* em__describe_shape writes "[2,3]"; prefix the dtype's name. */
    bool known = h->dtype >= 0 && h->dtype < EM_DTYPE_COUNT;
    snprintf(buf->text, sizeof buf->text, "%.8s%.80s",
             known ? em_dtype_name((em_dtype)h->dtype) : "?", shape.text);
    return buf->text;
}

/* Pass every rank's header around the ring; fail on all ranks alike when
 * they differ. Called with the lock held. */
static em_status agree(em_comm *comm, const char *op, const wire_header *mine) {
    const int n = comm->size, r = comm->rank;
    wire_header stack[8], *all = n <= 8 ? stack : malloc(sizeof *all * (size_t)n);
    if (!all)
        return em__fail(EM_ERR_OOM, "distributed %s: out of memory", op);
    all[r] = *mine;
    em_status st = EM_OK;
    for (int s = 0; s < n - 1 && st == EM_OK; s++)
        st = em__comm_exchange(comm, op, mod(r + 1, n), &all[mod(r - s, n)],
                               sizeof *all, mod(r - 1, n),
                               &all[mod(r - s - 1, n)], sizeof *all);
    for (int i = 1; i < n && st == EM_OK; i++) {
        if (all[i].magic != WIRE_MAGIC || all[i].kind != all[0].kind ||
            all[i].seq != all[0].seq) {
            /* The ranks are not running the same collectives in the same
             * order: what follows cannot be trusted. */
            snprintf(comm->broken_reason, sizeof comm->broken_reason,
                     "ranks ran different collectives");
            atomic_store(&comm->broken, true);
            st = em__fail(EM_ERR_RUNTIME,
                          "distributed %s: rank 0 runs %s (collective #%llu) "
                          "but rank %d runs %s (collective #%llu): every rank "
                          "must run the same collectives in the same order",
                          op, kind_name(all[0].kind),
                          (unsigned long long)all[0].seq, i,
                          kind_name(all[i].kind),
                          (unsigned long long)all[i].seq);
        } else if (!same_data(&all[i], &all[0])) {
            em_desc d0, di;
            st = em__fail(EM_ERR_ARGUMENT,
                          "distributed %s: rank 0 has %s but rank %d has %s "
                          "(axis %d vs %d): every rank must pass the same "
                          "shape and dtype",
                          op, describe_header(&all[0], &d0), i,
                          describe_header(&all[i], &di), all[0].axis,
                          all[i].axis);
        }
    }
    if (all != stack)
        free(all);
    return st;
}

/* Lock the communicator and check it can be used. */
static em_status enter(em_comm *comm, const char *op) {
    pthread_mutex_lock(&comm->lock);
    em_status st = em__comm_check_usable(comm, op);
    if (st != EM_OK)
        pthread_mutex_unlock(&comm->lock);
    return st;
}

static void leave(em_comm *comm) { pthread_mutex_unlock(&comm->lock); }

/* ---- ring algorithms over n chunks of a staging buffer ------------------- */

typedef struct chunks {
    int64_t count; /* elements in all */
    int n;
    bool equal; /* count divisible by n (reduce_scatter) */
} chunks;

static int64_t chunk_start(const chunks *c, int i) {
    int64_t base = c->count / c->n, extra = c->count % c->n;
    return base * i + (i < extra ? i : extra);
}

static int64_t chunk_len(const chunks *c, int i) {
    return chunk_start(c, i + 1) - chunk_start(c, i);
}

/* After this, rank r holds chunk r summed over every rank. */
static em_status ring_reduce_scatter(em_comm *comm, const char *op,
                                     em_dtype dtype, char *data,
                                     const chunks *c) {
    const int n = comm->size, r = comm->rank;
    const size_t es = em_dtype_size(dtype);
    int64_t most = chunk_len(c, 0);
    /* From the engine's buffer cache: a fresh malloc of a large chunk
     * would page-fault its way through every call. */
    em_buffer *scratch = NULL;
    em_status st = em__buffer_new((size_t)(most ? most : 1) * es, &scratch);
    if (st != EM_OK)
        return st;
    char *tmp = scratch->data;
    for (int s = 0; s < n - 1 && st == EM_OK; s++) {
        int sc = mod(r - s - 1, n), rc = mod(r - s - 2, n);
        st = em__comm_exchange(
            comm, op, mod(r + 1, n), data + (size_t)chunk_start(c, sc) * es,
            (size_t)chunk_len(c, sc) * es, mod(r - 1, n), tmp,
            (size_t)chunk_len(c, rc) * es);
        if (st == EM_OK)
            add_into(dtype, data + (size_t)chunk_start(c, rc) * es, tmp,
                     chunk_len(c, rc));
    }
    em__buffer_release(scratch);
    return st;
}

/* Given rank r holding chunk r, every rank ends with every chunk. */
static em_status ring_all_gather(em_comm *comm, const char *op, size_t es,
                                 char *data, const chunks *c) {
    const int n = comm->size, r = comm->rank;
    em_status st = EM_OK;
    for (int s = 0; s < n - 1 && st == EM_OK; s++) {
        int sc = mod(r - s, n), rc = mod(r - s - 1, n);
        st = em__comm_exchange(
            comm, op, mod(r + 1, n), data + (size_t)chunk_start(c, sc) * es,
            (size_t)chunk_len(c, sc) * es, mod(r - 1, n),
            data + (size_t)chunk_start(c, rc) * es,
            (size_t)chunk_len(c, rc) * es);
    }
    return st;
}

/* ---- evals ---------------------------------------------------------------- */

static em_comm *comm_of(const em_array *node, int holder_index) {
    return em__comm_from_holder(node->inputs[holder_index]);
}

/* Copy x (evaluated, any layout) into dst, row-major. */
static void stage(void *dst, const em_array *x) {
    if (x->size)
        em__copy_array(dst, x);
}

/* ---- host bytes: where the TCP transport reads and writes ---------------- */

/* x's elements row-major in host memory: in place for a row-contiguous CPU
 * array, else a malloc'd copy left in *owned (a GPU array is read back:
 * over TCP, device memory goes through the host; its builder made it
 * row-contiguous). */
static em_status input_bytes(const em_array *x, const char *op, char **owned,
                             const char **data) {
    *owned = NULL;
    *data = NULL;
    if (x->size == 0)
        return EM_OK;
    const size_t bytes = (size_t)x->size * em_dtype_size(x->dtype);
    if (x->device == EM_DEVICE_CPU && x->row_contiguous) {
        *data = em__data(x);
        return EM_OK;
    }
    if (!(*owned = malloc(bytes)))
        return em__fail(EM_ERR_OOM, "distributed %s: out of memory", op);
    em_status st = EM_OK;
    if (x->device == EM_DEVICE_CPU)
        stage(*owned, x);
    else
        st = em__read_device(x, *owned, bytes);
    if (st != EM_OK) {
        free(*owned);
        *owned = NULL;
        return st;
    }
    *data = *owned;
    return EM_OK;
}

/* The node's output bytes in host memory: its own buffer on the CPU; for a
 * GPU node a host copy that output_end moves to the device buffer. */
static em_status output_begin(em_array *node, const char *op, char **host) {
    *host = NULL;
    if (node->device == EM_DEVICE_CPU) {
        em_status st = em__alloc_output(node, NULL, 0);
        if (st == EM_OK)
            *host = node->buffer->data;
        return st;
    }
    const struct em_cuda_api *api;
    int ord;
    em_status st = em__gpu_prepare(node, &api, &ord);
    if (st != EM_OK)
        return st;
    size_t bytes = (size_t)node->size * em_dtype_size(node->dtype);
    if (!(*host = malloc(bytes ? bytes : 1)))
        return em__fail(EM_ERR_OOM, "distributed %s: out of memory", op);
    return EM_OK;
}

static em_status output_end(em_array *node, char *host, em_status st) {
    if (node->device == EM_DEVICE_CPU)
        return st;
    size_t bytes = (size_t)node->size * em_dtype_size(node->dtype);
    if (st == EM_OK && bytes)
        st = em__copy_to_device_buffer(node, host, bytes);
    free(host);
    return st;
}

/* ---- evals ------------------------------------------------------------------ */

/* Ring all-reduce of `count` elements in place. Lock held. */
static em_status ring_sum(em_comm *comm, em_dtype dtype, int64_t count,
                          char *data) {
    chunks c = {count, comm->size, false};
    em_status st = EM_OK;
    if (comm->size > 1 && count > 0) {
        st = ring_reduce_scatter(comm, "all_sum", dtype, data, &c);
        if (st == EM_OK)
            st = ring_all_gather(comm, "all_sum", em_dtype_size(dtype), data,
                                 &c);
    }
    return st;
}

static em_status all_sum_eval(em_array *node) {
    em_array *x = node->inputs[0];
    em_comm *comm = comm_of(node, 1);
    if (comm->nccl)
        return em__nccl_all_sum(node, comm);
    char *data = NULL;
    em_status st;
    if (node->device == EM_DEVICE_CPU) {
        st = em__alloc_output(node, &node->inputs[0], 1);
        if (st != EM_OK)
            return st;
        data = node->buffer->data;
        if (node->buffer != x->buffer) /* not donated: copy x in */
            stage(data, x);
    } else {
        st = output_begin(node, "all_sum", &data);
        if (st == EM_OK && x->size)
            st = em__read_device(x, data,
                                 (size_t)x->size * em_dtype_size(x->dtype));
        if (st != EM_OK)
            return output_end(node, data, st);
    }
    if ((st = enter(comm, "all_sum")) != EM_OK)
        return output_end(node, data, st);
    wire_header h = make_header(COLL_ALL_SUM, comm->seq++, comm->rank,
                                node->dtype, node->shape, node->ndim, 0);
    st = agree(comm, "all_sum", &h);
    if (st == EM_OK)
        st = ring_sum(comm, node->dtype, node->size, data);
    leave(comm);
    return output_end(node, data, st);
}

/* Elements before, along and after `axis` of a shape. */
static void split_at(const int64_t *shape, int ndim, int axis, int64_t *outer,
                     int64_t *along, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= shape[i];
    for (int i = axis + 1; i < ndim; i++)
        *inner *= shape[i];
    *along = shape[axis];
}

static em_status all_gather_eval(em_array *node) {
    const coll_params *p = node->params;
    em_array *x = node->inputs[0];
    em_comm *comm = comm_of(node, 1);
    if (comm->nccl)
        return em__nccl_all_gather(node, comm);
    const size_t es = em_dtype_size(node->dtype);
    const size_t xbytes = (size_t)x->size * es;
    char *out = NULL, *owned = NULL;
    const char *xdata = NULL;
    em_status st = output_begin(node, "all_gather", &out);
    if (st == EM_OK)
        st = input_bytes(x, "all_gather", &owned, &xdata);
    if (st != EM_OK)
        return output_end(node, out, st);
    int64_t outer, along, inner;
    split_at(x->shape, x->ndim, p->axis, &outer, &along, &inner);
    const int n = em_comm_size(comm);
    /* [n][x->size] in rank order; the output itself when the axis is the
     * outermost non-trivial one. */
    char *gathered = out;
    if (outer > 1 && node->size > 0 &&
        !(gathered = malloc((size_t)node->size * es))) {
        free(owned);
        return output_end(
            node, out,
            em__fail(EM_ERR_OOM, "distributed all_gather: out of memory"));
    }
    if (xbytes)
        memcpy(gathered + (size_t)em_comm_rank(comm) * xbytes, xdata, xbytes);
    free(owned);
    if ((st = enter(comm, "all_gather")) == EM_OK) {
        wire_header h = make_header(COLL_ALL_GATHER, comm->seq++, comm->rank,
                                    x->dtype, x->shape, x->ndim, p->axis);
        st = agree(comm, "all_gather", &h);
        chunks c = {x->size * n, n, true};
        if (st == EM_OK && n > 1 && x->size > 0)
            st = ring_all_gather(comm, "all_gather", es, gathered, &c);
        leave(comm);
    }
    if (st == EM_OK && gathered != out) {
        /* [n][outer][block] -> [outer][n][block] */
        int64_t block = along * inner;
        int64_t shape[3] = {outer, n, block};
        int64_t src_strides[3] = {block, outer * block, 1};
        em__copy_strided(out, NULL, gathered, src_strides, shape, 3, es);
    }
    if (gathered != out)
        free(gathered);
    return output_end(node, out, st);
}

static em_status reduce_scatter_eval(em_array *node) {
    const coll_params *p = node->params;
    em_array *x = node->inputs[0];
    em_comm *comm = comm_of(node, 1);
    if (comm->nccl)
        return em__nccl_reduce_scatter(node, comm);
    const size_t es = em_dtype_size(node->dtype);
    const int n = em_comm_size(comm);
    char *out = NULL, *owned = NULL;
    const char *xdata = NULL;
    em_status st = output_begin(node, "reduce_scatter", &out);
    if (st == EM_OK)
        st = input_bytes(x, "reduce_scatter", &owned, &xdata);
    char *parts = st == EM_OK ? malloc((size_t)(x->size ? x->size : 1) * es)
                              : NULL;
    if (st == EM_OK && !parts)
        st = em__fail(EM_ERR_OOM, "distributed reduce_scatter: out of memory");
    if (st != EM_OK) {
        free(owned);
        return output_end(node, out, st);
    }
    int64_t outer, along, inner;
    split_at(x->shape, x->ndim, p->axis, &outer, &along, &inner);
    /* [outer][n][piece] -> [n][outer][piece]: part r contiguous. */
    const int64_t piece = along / n * inner;
    if (x->size) {
        int64_t shape[3] = {n, outer, piece};
        int64_t src_strides[3] = {piece, n * piece, 1};
        em__copy_strided(parts, NULL, xdata, src_strides, shape, 3, es);
    }
    free(owned);
    chunks c = {x->size, n, true};
    if ((st = enter(comm, "reduce_scatter")) == EM_OK) {
        wire_header h = make_header(COLL_REDUCE_SCATTER, comm->seq++,
                                    comm->rank, x->dtype, x->shape, x->ndim,
                                    p->axis);
        st = agree(comm, "reduce_scatter", &h);
        if (st == EM_OK && n > 1 && x->size > 0)
            st = ring_reduce_scatter(comm, "reduce_scatter", x->dtype, parts,
                                     &c);
        leave(comm);
    }
    if (st == EM_OK && node->size > 0)
        memcpy(out, parts + (size_t)chunk_start(&c, em_comm_rank(comm)) * es,
               (size_t)node->size * es);
    free(parts);
    return output_end(node, out, st);
}

static em_status barrier_eval(em_array *node) {
    em_comm *comm = comm_of(node, 0);
    char *out = NULL;
    em_status st = output_begin(node, "barrier", &out);
    if (st != EM_OK)
        return output_end(node, out, st);
    *(uint8_t *)out = 1;
    if (comm->nccl)
        return output_end(node, out, em__nccl_barrier(comm));
    if ((st = enter(comm, "barrier")) == EM_OK) {
        wire_header h = make_header(COLL_BARRIER, comm->seq++, comm->rank,
                                    EM_PRED, NULL, 0, 0);
        st = agree(comm, "barrier", &h);
        leave(comm);
    }
    return output_end(node, out, st);
}

/* The receiver answers a send's header with its own expectation: both
 * sides compare and fail alike. */
static em_status check_pair(const char *op, const wire_header *sent,
                            const wire_header *wanted) {
    if (sent->magic != WIRE_MAGIC || wanted->magic != WIRE_MAGIC ||
        sent->kind != COLL_SEND || wanted->kind != COLL_ACK)
        return em__fail(EM_ERR_RUNTIME,
                        "distributed %s: rank %d and rank %d are not running "
                        "a matching send and recv",
                        op, sent->rank, wanted->rank);
    if (!same_data(sent, wanted)) {
        em_desc a, b;
        return em__fail(EM_ERR_ARGUMENT,
                        "distributed %s: rank %d sends %s but rank %d "
                        "receives %s",
                        op, sent->rank, describe_header(sent, &a),
                        wanted->rank, describe_header(wanted, &b));
    }
    return EM_OK;
}

static em_status send_eval(em_array *node) {
    const coll_params *p = node->params;
    em_array *x = node->inputs[0];
    em_comm *comm = comm_of(node, 1);
    if (comm->nccl)
        return em__nccl_send(node, comm, p->peer);
    const size_t bytes = (size_t)x->size * em_dtype_size(x->dtype);
    char *owned = NULL;
    const char *data = NULL;
    em_status st = input_bytes(x, "send", &owned, &data);
    if (st == EM_OK && (st = enter(comm, "send")) == EM_OK) {
        wire_header h = make_header(COLL_SEND, 0, comm->rank, x->dtype,
                                    x->shape, x->ndim, 0),
                    ack;
        st = em__comm_exchange(comm, "send", p->peer, &h, sizeof h, p->peer,
                               &ack, sizeof ack);
        if (st == EM_OK)
            st = check_pair("send", &h, &ack);
        if (st == EM_OK)
            st = em__comm_exchange(comm, "send", p->peer, data, bytes, p->peer,
                                   NULL, 0);
        leave(comm);
    }
    free(owned);
    if (st == EM_OK)
        em__share_buffer(node, x);
    return st;
}

static em_status recv_eval(em_array *node) {
    const coll_params *p = node->params;
    em_comm *comm = comm_of(node, 0);
    if (comm->nccl)
        return em__nccl_recv(node, comm, p->peer);
    char *out = NULL;
    em_status st = output_begin(node, "recv", &out);
    if (st != EM_OK || (st = enter(comm, "recv")) != EM_OK)
        return output_end(node, out, st);
    wire_header want = make_header(COLL_ACK, 0, comm->rank, node->dtype,
                                   node->shape, node->ndim, 0),
                got;
    st = em__comm_exchange(comm, "recv", p->peer, NULL, 0, p->peer, &got,
                           sizeof got);
    if (st == EM_OK)
        st = em__comm_exchange(comm, "recv", p->peer, &want, sizeof want,
                               p->peer, NULL, 0);
    if (st == EM_OK)
        st = check_pair("recv", &got, &want);
    if (st == EM_OK)
        st = em__comm_exchange(comm, "recv", p->peer, NULL, 0, p->peer, out,
                               (size_t)node->size * em_dtype_size(node->dtype));
    leave(comm);
    return output_end(node, out, st);
}

/* ---- gradients ------------------------------------------------------------ */

static em_status vjp_all_sum(em_array *node, em_array *ct, const bool *needs,
                             em_array **in_cts) {
    if (!needs[0])
        return EM_OK;
    return em_all_sum(ct, comm_of(node, 1), &in_cts[0]);
}

static em_status vjp_all_gather(em_array *node, em_array *ct,
                                const bool *needs, em_array **in_cts) {
    const coll_params *p = node->params;
    if (!needs[0])
        return EM_OK;
    return em_reduce_scatter(ct, comm_of(node, 1), p->axis, &in_cts[0]);
}

static em_status vjp_reduce_scatter(em_array *node, em_array *ct,
                                    const bool *needs, em_array **in_cts) {
    const coll_params *p = node->params;
    if (!needs[0])
        return EM_OK;
    return em_all_gather(ct, comm_of(node, 1), p->axis, &in_cts[0]);
}

/* One eval per op for both devices: it picks the transport (NCCL queues
 * on the GPU; TCP moves GPU arrays through the host). */
static const em_prim all_sum_prim = {"all_sum", all_sum_eval, vjp_all_sum,
                                     all_sum_eval};
static const em_prim all_gather_prim = {"all_gather", all_gather_eval,
                                        vjp_all_gather, all_gather_eval};
static const em_prim reduce_scatter_prim = {
    "reduce_scatter", reduce_scatter_eval, vjp_reduce_scatter,
    reduce_scatter_eval};
/* send, recv, barrier: no vjp (a gradient through them is an error). */
static const em_prim send_prim = {"send", send_eval, NULL, send_eval};
static const em_prim recv_prim = {"recv", recv_eval, NULL, recv_eval};
static const em_prim barrier_prim = {"barrier", barrier_eval, NULL,
                                     barrier_eval};

/* ---- builders ------------------------------------------------------------- */

/* Validation shared by the builders: the communicator is connected and
 * open now (it may still close before evaluation: checked again then).
 * Lock-free: a collective being evaluated holds the lock. */
static em_status check_comm(const char *op, em_comm *comm) {
    if (!comm)
        return em__fail(EM_ERR_ARGUMENT, "%s: NULL communicator", op);
    return em__comm_check_usable(comm, op);
}

static em_status build(const em_prim *prim, em_array *x, em_comm *comm,
                       em_dtype dtype, const int64_t *shape, int ndim,
                       const coll_params *p, em_array **out) {
    em_array *holder = NULL;
    em_status st = em__comm_holder(comm, &holder);
    if (st != EM_OK)
        return st;
    em_array *inputs[2];
    int ninputs = 0;
    if (x)
        inputs[ninputs++] = x;
    inputs[ninputs++] = holder;
    if (!x && comm->nccl) {
        /* recv, barrier: on the communicator's GPU */
        st = em__node_new_on(prim, comm->nccl_device, dtype, shape, ndim,
                             inputs, ninputs, out);
        if (st == EM_OK && (st = em__node_set_params(*out, p, sizeof *p)) !=
                               EM_OK) {
            em_array_release(*out);
            *out = NULL;
        }
    } else {
        st = em__node_new_params(prim, dtype, shape, ndim, inputs, ninputs, p,
                                 sizeof *p, out);
    }
    em_array_release(holder);
    return st;
}

/* The array a collective reads: x itself, or a row-major copy where the
 * transport needs one (NCCL and the GPU-to-host read take row-major device
 * memory). An NCCL communicator takes arrays on its own GPU only. */
static em_status transport_input(const char *op, em_array *x, em_comm *comm,
                                 em_array **out) {
    *out = NULL;
    if (comm->nccl && x->device != comm->nccl_device) {
        char want[16], got[16];
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: the communicator is NCCL's on %s; %s is on %s "
                        "(move it there, or use a TCP communicator)",
                        op, em_device_name(comm->nccl_device, want, sizeof want),
                        em__describe(x, &d),
                        em_device_name(x->device, got, sizeof got));
    }
    if (x->device != EM_DEVICE_CPU && !x->row_contiguous)
        return em_contiguous(x, out);
    em_array_retain(x);
    *out = x;
    return EM_OK;
}

em_status em_all_sum(em_array *x, em_comm *comm, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "all_sum: NULL argument");
    em_status st = check_comm("all_sum", comm);
    em_array *in = NULL;
    if (st == EM_OK)
        st = transport_input("all_sum", x, comm, &in);
    if (st != EM_OK)
        return st;
    coll_params p = {0, 0, 0};
    st = build(&all_sum_prim, in, comm, x->dtype, x->shape, x->ndim, &p, out);
    em_array_release(in);
    return st;
}

/* The axis of x for all_gather / reduce_scatter (x must have one). */
static em_status check_axis(const char *op, em_array *x, int axis, int *out) {
    if (x->ndim == 0) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT, "%s: %s has no axis to split or join",
                        op, em__describe(x, &d));
    }
    return em__check_axis(op, axis, x->ndim, out);
}

/* Elements before `axis`: where the axis is the outermost one with more
 * than one element, the ranks' parts are contiguous. */
static int64_t outer_of(const em_array *x, int axis) {
    int64_t outer = 1;
    for (int i = 0; i < axis; i++)
        outer *= x->shape[i];
    return outer;
}

/* reshape(transpose(reshape(a, [d0, d1, d2]), [1, 0, 2])) to `shape`:
 * swaps the two outer blocks of a row-major array (NCCL's flat layouts
 * to and from the axis's). */
static em_status swap_blocks(em_array *a, int64_t d0, int64_t d1, int64_t d2,
                             const int64_t *shape, int ndim, em_array **out) {
    int64_t three[3] = {d0, d1, d2};
    const int perm[3] = {1, 0, 2};
    em_array *r = NULL, *t = NULL, *c = NULL;
    em_status st = em_reshape(a, three, 3, &r);
    if (st == EM_OK)
        st = em_transpose(r, perm, 3, &t);
    if (st == EM_OK)
        st = em_contiguous(t, &c);
    if (st == EM_OK)
        st = em_reshape(c, shape, ndim, out);
    em_array_release(r);
    em_array_release(t);
    em_array_release(c);
    return st;
}

em_status em_all_gather(em_array *x, em_comm *comm, int axis, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "all_gather: NULL argument");
    em_status st = check_comm("all_gather", comm);
    int ax = 0;
    if (st == EM_OK)
        st = check_axis("all_gather", x, axis, &ax);
    if (st != EM_OK)
        return st;
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    if (__builtin_mul_overflow(shape[ax], (int64_t)comm->size, &shape[ax]))
        return em__fail(EM_ERR_ARGUMENT, "all_gather: the result is too large");
    st = em__check_shape("all_gather", shape, x->ndim, x->dtype, NULL);
    em_array *in = NULL;
    if (st == EM_OK)
        st = transport_input("all_gather", x, comm, &in);
    if (st != EM_OK)
        return st;
    const int64_t outer = outer_of(x, ax);
    if (comm->nccl && outer > 1 && x->size > 0) {
        /* NCCL gathers [n][x]: gather x flat, then move the ranks' blocks
         * inside the outer axes. */
        int64_t flat = x->size, gathered_shape = x->size * comm->size;
        em_array *f = NULL, *g = NULL;
        coll_params p = {0, 0, 0};
        st = em_reshape(in, &flat, 1, &f);
        if (st == EM_OK)
            st = build(&all_gather_prim, f, comm, x->dtype, &gathered_shape, 1,
                       &p, &g);
        if (st == EM_OK)
            st = swap_blocks(g, comm->size, outer, x->size / outer, shape,
                             x->ndim, out);
        em_array_release(f);
        em_array_release(g);
    } else {
        coll_params p = {ax, 0, 0};
        st = build(&all_gather_prim, in, comm, x->dtype, shape, x->ndim, &p,
                   out);
    }
    em_array_release(in);
    return st;
}

em_status em_reduce_scatter(em_array *x, em_comm *comm, int axis,
                            em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "reduce_scatter: NULL argument");
    em_status st = check_comm("reduce_scatter", comm);
    int ax = 0;
    if (st == EM_OK)
        st = check_axis("reduce_scatter", x, axis, &ax);
    if (st != EM_OK)
        return st;
    if (x->shape[ax] % comm->size != 0) {
        em_desc d;
        return em__fail(EM_ERR_ARGUMENT,
                        "reduce_scatter: axis %d of %s must be divisible by "
                        "the communicator's size %d",
                        ax, em__describe(x, &d), comm->size);
    }
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[ax] /= comm->size;
    em_array *in = NULL;
    st = transport_input("reduce_scatter", x, comm, &in);
    if (st != EM_OK)
        return st;
    const int64_t outer = outer_of(x, ax);
    if (comm->nccl && outer > 1 && x->size > 0) {
        /* NCCL scatters [n][part]: bring each rank's part together first. */
        const int64_t n = comm->size, part = x->size / n;
        int64_t flat = x->size;
        em_array *parts = NULL, *r = NULL;
        coll_params p = {0, 0, 0};
        st = swap_blocks(in, outer, n, part / outer, &flat, 1, &parts);
        if (st == EM_OK)
            st = build(&reduce_scatter_prim, parts, comm, x->dtype, &part, 1,
                       &p, &r);
        if (st == EM_OK)
            st = em_reshape(r, shape, x->ndim, out);
        em_array_release(parts);
        em_array_release(r);
    } else {
        coll_params p = {ax, 0, 0};
        st = build(&reduce_scatter_prim, in, comm, x->dtype, shape, x->ndim,
                   &p, out);
    }
    em_array_release(in);
    return st;
}

static em_status check_peer(const char *op, em_comm *comm, int peer) {
    if (peer < 0 || peer >= comm->size || peer == comm->rank)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: rank %d is out of range or this rank (%d) in a "
                        "communicator of %d",
                        op, peer, comm->rank, comm->size);
    return EM_OK;
}

em_status em_send(em_array *x, em_comm *comm, int dest, em_array **out) {
    if (out)
        *out = NULL;
    if (!x || !out)
        return em__fail(EM_ERR_ARGUMENT, "send: NULL argument");
    em_status st = check_comm("send", comm);
    if (st == EM_OK)
        st = check_peer("send", comm, dest);
    if (st != EM_OK)
        return st;
    em_array *in = NULL;
    st = transport_input("send", x, comm, &in);
    if (st != EM_OK)
        return st;
    coll_params p = {0, dest, atomic_fetch_add(&transfer_counter, 1) + 1};
    st = build(&send_prim, in, comm, in->dtype, in->shape, in->ndim, &p, out);
    if (st == EM_OK) { /* a view of its input: the same layout */
        memcpy((*out)->strides, in->strides,
               sizeof(int64_t) * (size_t)in->ndim);
        (*out)->offset = in->offset;
        (*out)->row_contiguous = in->row_contiguous;
    }
    em_array_release(in);
    return st;
}

em_status em_recv(em_comm *comm, int source, em_dtype dtype,
                  const int64_t *shape, int ndim, em_array **out) {
    if (out)
        *out = NULL;
    if (!out || (!shape && ndim > 0))
        return em__fail(EM_ERR_ARGUMENT, "recv: NULL argument");
    em_status st = check_comm("recv", comm);
    if (st == EM_OK)
        st = check_peer("recv", comm, source);
    if (st == EM_OK)
        st = em__check_shape("recv", shape, ndim, dtype, NULL);
    if (st != EM_OK)
        return st;
    coll_params p = {0, source, atomic_fetch_add(&transfer_counter, 1) + 1};
    return build(&recv_prim, NULL, comm, dtype, shape, ndim, &p, out);
}

em_status em_barrier(em_comm *comm, em_array **out) {
    if (out)
        *out = NULL;
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "barrier: NULL argument");
    em_status st = check_comm("barrier", comm);
    if (st != EM_OK)
        return st;
    coll_params p = {0, 0, atomic_fetch_add(&transfer_counter, 1) + 1};
    return build(&barrier_prim, NULL, comm, EM_PRED, NULL, 0, &p, out);
}
