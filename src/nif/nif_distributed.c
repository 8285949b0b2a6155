/*
 * nif_distributed.c — the NIFs for include/emily_distributed.h
 * (Emily.Native's "distributed" section; Emily.Distributed is the API).
 *
 *   comm_listen(host)                 {comm, port}: host a binary ("127.0.0.1")
 *   comm_connect(comm, rank, size, [{host, port}], timeout_ms)
 *                                     :ok once the mesh is up (dirty I/O:
 *                                     it waits for the peers)
 *   comm_info(comm)                   {rank, size}
 *   comm_close(comm)                  :ok (peers see the sockets close)
 *   all_sum(x, comm), all_gather(x, comm, axis),
 *   reduce_scatter(x, comm, axis), comm_send(x, comm, dest),
 *   comm_recv(comm, source, dtype, shape), barrier(comm)
 *                                     lazy nodes, as every op
 *   comm_nccl_id(device)              the 128-byte id of a new NCCL clique
 *                                     (device: 1 + the GPU's index)
 *   comm_nccl_new(device, rank, size, id)
 *                                     a communicator through NCCL (dirty
 *                                     I/O: it waits for every rank)
 *
 * The communicator is a resource; nodes built on it hold their own
 * reference (through a holder input), so a program or a pending array
 * keeps it alive after the resource is collected.
 */
#include "emily_distributed.h"
#include "nif.h"

#include <string.h>

typedef struct nif_comm {
    em_comm *comm; /* owned reference */
} nif_comm;

static ErlNifResourceType *nif_comm_type;

static void comm_dtor(ErlNifEnv *env, void *obj) {
    nif_comm *res = obj;
    em_comm_release(res->comm);
    res->comm = NULL;
}

int nif_distributed_open_resources(ErlNifEnv *env) {
    ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    nif_comm_type = enif_open_resource_type(env, NULL, "emily_comm", comm_dtor,
                                            flags, NULL);
    return nif_comm_type ? 0 : -1;
}

static bool get_comm(nif_call *c, ERL_NIF_TERM term, em_comm **out) {
    nif_comm *res;
    if (!enif_get_resource(c->env, term, nif_comm_type, (void **)&res) ||
        !res->comm) {
        nif_raise_bad_arg(c, "comm", "an Emily communicator", term);
        return false;
    }
    *out = res->comm;
    return true;
}

/* A numeric IPv4 address as a binary, at most 63 bytes. */
static bool get_host(nif_call *c, ERL_NIF_TERM term, const char *arg,
                     char host[64]) {
    ErlNifBinary bin;
    if (!enif_inspect_binary(c->env, term, &bin) || bin.size == 0 ||
        bin.size >= 64 || memchr(bin.data, 0, bin.size)) {
        nif_raise_bad_arg(c, arg, "an IPv4 address as a string", term);
        return false;
    }
    memcpy(host, bin.data, bin.size);
    host[bin.size] = 0;
    return true;
}

static ERL_NIF_TERM make_comm(nif_call *c, em_comm *comm) {
    nif_comm *res = enif_alloc_resource(nif_comm_type, sizeof *res);
    if (!res) {
        em_comm_release(comm);
        return nif_raise_runtime(c, "out of memory");
    }
    res->comm = comm;
    ERL_NIF_TERM term = enif_make_resource(c->env, res);
    enif_release_resource(res);
    return term;
}

NIF_DECL(comm_listen) {
    nif_call c = NIF_CALL(env, "comm_listen");
    char host[64];
    if (!get_host(&c, argv[0], "host", host))
        return c.raised;
    em_comm *comm;
    int port;
    em_status st = em_comm_listen(host, &comm, &port);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    ERL_NIF_TERM term = make_comm(&c, comm);
    if (c.raised)
        return c.raised;
    return enif_make_tuple2(env, term, enif_make_int(env, port));
}

/* The work of comm_connect, on a dirty I/O scheduler. */
static ERL_NIF_TERM comm_connect_dirty(ErlNifEnv *env, int argc,
                                       const ERL_NIF_TERM argv[]) {
    nif_enter();
    nif_call c = NIF_CALL(env, "comm_connect");
    em_comm *comm;
    int rank, size;
    int64_t timeout;
    unsigned n;
    ERL_NIF_TERM result = 0;
    char(*hosts)[64] = NULL;
    const char **host_ptrs = NULL;
    int *ports = NULL;
    if (!get_comm(&c, argv[0], &comm) ||
        !nif_get_int(&c, argv[1], "rank", &rank) ||
        !nif_get_int(&c, argv[2], "size", &size) ||
        !nif_get_i64(&c, argv[4], "timeout_ms", &timeout))
        goto out;
    if (!enif_get_list_length(env, argv[3], &n) || n != (unsigned)size ||
        size < 1 || size > 4096) {
        nif_raise_argument(&c,
                           "addresses must be a list of size (%d, at most "
                           "4096) {host, port} tuples",
                           size);
        goto out;
    }
    hosts = enif_alloc(sizeof *hosts * n);
    host_ptrs = enif_alloc(sizeof *host_ptrs * n);
    ports = enif_alloc(sizeof *ports * n);
    if (!hosts || !host_ptrs || !ports) {
        nif_raise_runtime(&c, "out of memory");
        goto out;
    }
    ERL_NIF_TERM head, tail = argv[3];
    for (unsigned i = 0; i < n; i++) {
        enif_get_list_cell(env, tail, &head, &tail);
        int arity;
        const ERL_NIF_TERM *t;
        if (!enif_get_tuple(env, head, &arity, &t) || arity != 2) {
            nif_raise_bad_arg(&c, "addresses", "{host, port} tuples", head);
            goto out;
        }
        if (!get_host(&c, t[0], "host", hosts[i]) ||
            !nif_get_int(&c, t[1], "port", &ports[i]))
            goto out;
        host_ptrs[i] = hosts[i];
    }
    em_comm_options o = {.timeout_ms = timeout};
    em_status st = em_comm_connect(comm, rank, size, host_ptrs, ports, &o);
    result = st == EM_OK ? atoms.ok : nif_raise_status(&c, st);
out:
    if (c.raised)
        result = c.raised;
    enif_free(hosts);
    enif_free(host_ptrs);
    enif_free(ports);
    nif_leave();
    return result;
}

NIF_DECL(comm_connect) {
    /* Check the handle on the caller's scheduler (cheap), then wait for the
     * peers on a dirty one. */
    nif_call c = NIF_CALL(env, "comm_connect");
    em_comm *comm;
    if (!get_comm(&c, argv[0], &comm))
        return c.raised;
    return enif_schedule_nif(env, "comm_connect", ERL_NIF_DIRTY_JOB_IO_BOUND,
                             comm_connect_dirty, argc, argv);
}

NIF_DECL(comm_nccl_id) {
    nif_call c = NIF_CALL(env, "comm_nccl_id");
    int device;
    if (!nif_get_int(&c, argv[0], "device", &device))
        return c.raised;
    uint8_t id[EM_NCCL_ID_BYTES];
    em_status st = em_comm_nccl_unique_id(device, id);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    ERL_NIF_TERM bin;
    unsigned char *dst = enif_make_new_binary(env, sizeof id, &bin);
    if (!dst)
        return nif_raise_runtime(&c, "out of memory");
    memcpy(dst, id, sizeof id);
    return bin;
}

static ERL_NIF_TERM comm_nccl_new_dirty(ErlNifEnv *env, int argc,
                                        const ERL_NIF_TERM argv[]) {
    nif_enter();
    nif_call c = NIF_CALL(env, "comm_nccl_new");
    int device, rank, size;
    ErlNifBinary id;
    ERL_NIF_TERM result;
    if (!nif_get_int(&c, argv[0], "device", &device) ||
        !nif_get_int(&c, argv[1], "rank", &rank) ||
        !nif_get_int(&c, argv[2], "size", &size)) {
        result = c.raised;
    } else if (!enif_inspect_binary(env, argv[3], &id) ||
               id.size != EM_NCCL_ID_BYTES) {
        result = nif_raise_bad_arg(&c, "id", "a 128-byte NCCL id", argv[3]);
    } else {
        em_comm *comm = NULL;
        em_status st = em_comm_nccl_new(device, rank, size, id.data, &comm);
        result = st == EM_OK ? make_comm(&c, comm) : nif_raise_status(&c, st);
    }
    nif_leave();
    return result;
}

NIF_DECL(comm_nccl_new) {
    nif_call c = NIF_CALL(env, "comm_nccl_new");
    int device;
    if (!nif_get_int(&c, argv[0], "device", &device))
        return c.raised;
    return enif_schedule_nif(env, "comm_nccl_new", ERL_NIF_DIRTY_JOB_IO_BOUND,
                             comm_nccl_new_dirty, argc, argv);
}

NIF_DECL(comm_info) {
    nif_call c = NIF_CALL(env, "comm_info");
    em_comm *comm;
    if (!get_comm(&c, argv[0], &comm))
        return c.raised;
    return enif_make_tuple2(env, enif_make_int(env, em_comm_rank(comm)),
                            enif_make_int(env, em_comm_size(comm)));
}

NIF_DECL(comm_close) {
    nif_call c = NIF_CALL(env, "comm_close");
    em_comm *comm;
    if (!get_comm(&c, argv[0], &comm))
        return c.raised;
    em_comm_close(comm);
    return atoms.ok;
}

NIF_DECL(all_sum) {
    nif_call c = NIF_CALL(env, "all_sum");
    em_array *x, *out;
    em_comm *comm;
    if (!nif_get_array(&c, argv[0], "tensor", &x) ||
        !get_comm(&c, argv[1], &comm))
        return c.raised;
    return nif_result(&c, em_all_sum(x, comm, &out), &out);
}

/* The collectives taking (tensor, comm, an int argument named `what`). */
#define NIF_TENSOR_COMM_INT(name, what, fn)                                    \
    NIF_DECL(name) {                                                           \
        nif_call c = NIF_CALL(env, #name);                                     \
        em_array *x, *out;                                                     \
        em_comm *comm;                                                         \
        int value;                                                             \
        if (!nif_get_array(&c, argv[0], "tensor", &x) ||                       \
            !get_comm(&c, argv[1], &comm) ||                                   \
            !nif_get_int(&c, argv[2], what, &value))                           \
            return c.raised;                                                   \
        return nif_result(&c, fn(x, comm, value, &out), &out);                 \
    }

NIF_TENSOR_COMM_INT(all_gather, "axis", em_all_gather)
NIF_TENSOR_COMM_INT(reduce_scatter, "axis", em_reduce_scatter)
NIF_TENSOR_COMM_INT(comm_send, "dest", em_send)

NIF_DECL(comm_recv) {
    nif_call c = NIF_CALL(env, "comm_recv");
    em_array *out;
    em_comm *comm;
    int source, ndim;
    em_dtype dtype;
    int64_t shape[EM_MAX_NDIM];
    if (!get_comm(&c, argv[0], &comm) ||
        !nif_get_int(&c, argv[1], "source", &source) ||
        !nif_get_dtype(&c, argv[2], "dtype", &dtype) ||
        !nif_get_i64_list(&c, argv[3], "shape", shape, &ndim))
        return c.raised;
    return nif_result(&c, em_recv(comm, source, dtype, shape, ndim, &out),
                      &out);
}

NIF_DECL(barrier) {
    nif_call c = NIF_CALL(env, "barrier");
    em_array *out;
    em_comm *comm;
    if (!get_comm(&c, argv[0], &comm))
        return c.raised;
    return nif_result(&c, em_barrier(comm, &out), &out);
}
