/*
 * nif_core.c — loading, array metadata, from_binary / to_binary, eval on
 * streams, stream handles and memory statistics.
 *
 * The asynchronous protocol (DESIGN §6): a NIF that needs numeric work makes
 * a reference in a process-independent env, hands a job to the stream's
 * worker and returns the reference at once. When the job finishes, the
 * worker sends `{ref, result}` to the caller with enif_send(NULL, ...), where
 * result is `:ok`, `{:ok, binary}` or `{:error, exception}`; Elixir waits
 * with a selective receive (Emily.Native.await/1). A scheduler never blocks
 * on numeric work.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#include "emily_device.h"
#include "nif.h"

#include "emily_info.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* ---- resources ---------------------------------------------------------- */

static void array_dtor(ErlNifEnv *env, void *obj) {
    nif_array *res = obj;
    nif_pointer_forget(res);
    em_array_release(res->array);
    res->array = NULL;
}

static void stream_dtor(ErlNifEnv *env, void *obj) {
    nif_stream *res = obj;
    if (res->stream) {
        /* Nobody can submit to an unreachable stream: let its worker drain
         * and exit. Closing never blocks. */
        em_stream_close(res->stream);
        em_stream_release(res->stream);
        res->stream = NULL;
    }
}

static int open_resources(ErlNifEnv *env) {
    ErlNifResourceFlags flags = ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER;
    nif_array_type = enif_open_resource_type(env, NULL, "emily_array",
                                             array_dtor, flags, NULL);
    nif_stream_type = enif_open_resource_type(env, NULL, "emily_stream",
                                              stream_dtor, flags, NULL);
    if (!nif_array_type || !nif_stream_type ||
        nif_compile_open_resources(env) != 0 ||
        nif_hooks_open_resources(env) != 0 ||
        nif_io_open_resources(env) != 0 ||
        nif_distributed_open_resources(env) != 0)
        return -1;
#define NIF_ATOM_INIT(field, text) atoms.field = enif_make_atom(env, text);
    NIF_ATOMS(NIF_ATOM_INIT)
#undef NIF_ATOM_INIT
    return 0;
}

/* Keep this library mapped for the life of the VM. Worker threads of the
 * engine (the default stream's among them) run code of this library and
 * call back into it; if the BEAM unloaded it when the module's old code is
 * purged (a reload in development), they would jump into unmapped memory.
 * A second, never-closed RTLD_NODELETE reference prevents the unmap. */
static void pin_library(void) {
    Dl_info info;
    if (dladdr((void *)&pin_library, &info) && info.dli_fname)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE);
}

static int on_load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info) {
    pin_library();
    return open_resources(env);
}

/* Reloading the module (hot upgrade, or recompiling Emily.Native in a
 * running VM) takes the resource types over instead of failing. */
static int on_upgrade(ErlNifEnv *env, void **priv, void **old_priv,
                      ERL_NIF_TERM info) {
    return open_resources(env);
}

/* ---- metadata (never evaluates) ---------------------------------------- */

NIF_DECL(shape) {
    nif_call c = NIF_CALL(env, "shape");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_make_shape(env, a);
}

NIF_DECL(dtype) {
    nif_call c = NIF_CALL(env, "dtype");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return nif_make_dtype(env, em_array_dtype(a));
}

NIF_DECL(ndim) {
    nif_call c = NIF_CALL(env, "ndim");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return enif_make_int(env, em_array_ndim(a));
}

NIF_DECL(size) {
    nif_call c = NIF_CALL(env, "size");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return enif_make_int64(env, (ErlNifSInt64)em_array_size(a));
}

NIF_DECL(nbytes) {
    nif_call c = NIF_CALL(env, "nbytes");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return enif_make_uint64(env, (ErlNifUInt64)em_array_nbytes(a));
}

NIF_DECL(is_evaluated) {
    nif_call c = NIF_CALL(env, "is_evaluated");
    em_array *a;
    if (!nif_get_array(&c, argv[0], "tensor", &a))
        return c.raised;
    return em_array_is_evaluated(a) ? atoms.yes : atoms.no;
}

/* ---- from_binary -------------------------------------------------------- */

/* Binaries at least this large are aliased rather than copied when their
 * bytes are suitably aligned. Smaller ones are copied: the copy is cheaper
 * than the bookkeeping, and a small slice of a large binary would otherwise
 * keep the whole of it alive. */
#define ALIAS_MIN_BYTES ((size_t)64 << 10)

static void format_shape(char *buf, size_t size, const int64_t *shape,
                         int ndim) {
    size_t pos = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && pos < size; i++)
        pos += (size_t)snprintf(buf + pos, size - pos, i ? ", %lld" : "%lld",
                                (long long)shape[i]);
    if (pos < size)
        snprintf(buf + pos, size - pos, "]");
}

/* The process-independent env that keeps an aliased binary alive. */
static void free_kept_env(void *ctx) { enif_free_env(ctx); }

static ERL_NIF_TERM from_binary_dirty(ErlNifEnv *env, int argc,
                                      const ERL_NIF_TERM argv[]);

static ERL_NIF_TERM from_binary(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                                bool dirty) {
    nif_call c = NIF_CALL(env, "from_binary");
    ErlNifBinary bin;
    int64_t shape[EM_MAX_NDIM];
    int ndim;
    em_dtype dtype;
    if (!enif_inspect_binary(env, argv[0], &bin))
        return nif_raise_bad_arg(&c, "binary", "a binary", argv[0]);
    if (!nif_get_i64_list(&c, argv[1], "shape", shape, &ndim) ||
        !nif_get_dtype(&c, argv[2], "dtype", &dtype))
        return c.raised;

    char shape_text[256];
    format_shape(shape_text, sizeof shape_text, shape, ndim);
    /* Element count and byte size with overflow checks: a zero dimension
     * makes the tensor empty whatever the others are. */
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return nif_raise_argument(&c, "negative dimension %lld in shape %s",
                                      (long long)shape[i], shape_text);
        if (shape[i] == 0)
            empty = true;
    }
    size_t elem = em_dtype_size(dtype);
    uint64_t expected = 0;
    if (!empty) {
        uint64_t count = 1;
        for (int i = 0; i < ndim; i++) {
            if ((uint64_t)shape[i] > (uint64_t)INT64_MAX / count)
                return nif_raise_argument(
                    &c,
                    "byte size overflow: shape %s has more than 2^63 elements",
                    shape_text);
            count *= (uint64_t)shape[i];
        }
        if (count > (uint64_t)INT64_MAX / elem)
            return nif_raise_argument(
                &c,
                "byte size overflow: shape %s of %s needs more than 2^63 bytes",
                shape_text, em_dtype_name(dtype));
        expected = count * elem;
    }
    if ((uint64_t)bin.size != expected)
        return nif_raise_argument(
            &c,
            "binary size mismatch: shape %s of %s needs %llu bytes, got %zu",
            shape_text, em_dtype_name(dtype), (unsigned long long)expected,
            bin.size);

    em_array *out;
    em_status st;
    if (bin.size >= ALIAS_MIN_BYTES && ((uintptr_t)bin.data % elem) == 0) {
        /* Zero copy: a copy of the term in a private env holds a reference
         * to the (immutable, reference-counted) binary until the engine
         * releases the buffer, from whatever thread that happens on. */
        ErlNifEnv *kept = enif_alloc_env();
        if (!kept)
            return nif_raise_runtime(&c, "out of memory");
        ERL_NIF_TERM copy = enif_make_copy(kept, argv[0]);
        ErlNifBinary kept_bin;
        if (enif_inspect_binary(kept, copy, &kept_bin) &&
            kept_bin.size == bin.size &&
            ((uintptr_t)kept_bin.data % elem) == 0) {
            st = em_from_external(kept_bin.data, kept_bin.size, shape, ndim,
                                  dtype, free_kept_env, kept, &out);
            if (st != EM_OK)
                enif_free_env(kept);
            return nif_result(&c, st, &out);
        }
        enif_free_env(kept);
        /* Copying the term may have reallocated a writable binary (the VM
         * shrinks it to make it immutable): inspect it again. */
        if (!enif_inspect_binary(env, argv[0], &bin))
            return nif_raise_runtime(&c, "the binary could not be read");
    }
    if (!dirty && bin.size > DIRTY_COPY_BYTES)
        return enif_schedule_nif(env, "from_binary",
                                 ERL_NIF_DIRTY_JOB_CPU_BOUND, from_binary_dirty,
                                 3, argv);
    st = em_from_data(bin.data, bin.size, shape, ndim, dtype, &out);
    return nif_result(&c, st, &out);
}

NIF_DECL(from_binary) { return from_binary(env, argv, false); }

static ERL_NIF_TERM from_binary_dirty(ErlNifEnv *env, int argc,
                                      const ERL_NIF_TERM argv[]) {
    /* A dirty continuation is a NIF call of its own. */
    nif_enter();
    ERL_NIF_TERM result = from_binary(env, argv, true);
    nif_leave();
    return result;
}

/* ---- asynchronous jobs -------------------------------------------------- */

typedef struct async_req {
    const char *op; /* the NIF's name, for messages */
    ErlNifPid pid;
    ErlNifEnv *msg_env;
    ERL_NIF_TERM ref;
    em_array *read; /* to_binary: the contiguous array to answer with */
} async_req;

static void req_free(async_req *r) {
    if (r->msg_env)
        enif_free_env(r->msg_env);
    em_array_release(r->read);
    enif_free(r);
}

static async_req *req_new(nif_call *c) {
    async_req *r = enif_alloc(sizeof *r);
    if (!r) {
        nif_raise_runtime(c, "out of memory");
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->msg_env = enif_alloc_env();
    if (!r->msg_env || !enif_self(c->env, &r->pid)) {
        req_free(r);
        nif_raise_runtime(c, "cannot start an asynchronous job here");
        return NULL;
    }
    r->ref = enif_make_ref(r->msg_env);
    r->op = c->op;
    return r;
}

/* The bytes of the evaluated array as a resource binary aliasing the
 * engine's buffer (no copy). The resource keeps the array, hence the buffer,
 * alive; em_array_data pins the buffer so it is never donated or written. */
static ERL_NIF_TERM read_result(async_req *r, em_status *st) {
    ErlNifEnv *env = r->msg_env;
    const void *data;
    size_t nbytes;
    *st = em_array_data(r->read, &data, &nbytes);
    if (*st != EM_OK)
        return 0;
    ERL_NIF_TERM bin;
    if (nbytes == 0) {
        enif_make_new_binary(env, 0, &bin);
        return enif_make_tuple2(env, atoms.ok, bin);
    }
    nif_array *res = enif_alloc_resource(nif_array_type, sizeof *res);
    if (!res) {
        *st = EM_ERR_OOM;
        return 0;
    }
    res->array = r->read;
    r->read = NULL; /* now owned by the resource */
    bin = enif_make_resource_binary(env, res, data, nbytes);
    enif_release_resource(res);
    return enif_make_tuple2(env, atoms.ok, bin);
}

/* "<op>: <engine message>", the stream's own "stream: " prefix dropped
 * so that the message names the function the caller called. */
static void stream_message(char *buf, size_t size, const char *op,
                           const char *message) {
    if (!message || !*message)
        message = "job failed";
    if (strncmp(message, "stream: ", 8) == 0)
        message += 8;
    snprintf(buf, size, "%s: %s", op, message);
}

/* Raise for a failed submission (closed stream, full queue). */
static ERL_NIF_TERM raise_stream_status(nif_call *c, em_status st) {
    char text[1024];
    stream_message(text, sizeof text, c->op, em_last_error());
    c->raised = enif_raise_exception(c->env, nif_exception(c->env, st, text));
    return c->raised;
}

/* Runs on the stream's worker thread. */
static void on_done(em_status st, const char *message, void *ctx) {
    async_req *r = ctx;
    ErlNifEnv *env = r->msg_env;
    ERL_NIF_TERM result = atoms.ok;
    if (st == EM_OK && r->read) {
        result = read_result(r, &st);
        if (st != EM_OK)
            message = st == EM_ERR_OOM ? "out of memory" : em_last_error();
    }
    if (st != EM_OK) {
        char text[1024];
        stream_message(text, sizeof text, r->op, message);
        result =
            enif_make_tuple2(env, atoms.error, nif_exception(env, st, text));
    }
    /* A dead caller is fine: the message is dropped. */
    enif_send(NULL, &r->pid, env, enif_make_tuple2(env, r->ref, result));
    req_free(r);
}

/* After a synchronous failure (closed stream, full queue) the job will
 * never run: free it and raise. On success the worker may already have
 * freed `r`, so the reference term is copied out before submitting. */
static ERL_NIF_TERM not_submitted(nif_call *c, async_req *r, em_status st) {
    req_free(r);
    return raise_stream_status(c, st);
}

NIF_DECL(eval) {
    nif_call c = NIF_CALL(env, "eval");
    em_stream *s;
    em_array **arrays;
    size_t n;
    if (!nif_get_stream(&c, argv[0], "stream", &s) ||
        !nif_get_array_list(&c, argv[1], "tensors", &arrays, &n))
        return c.raised;
    async_req *r = req_new(&c);
    if (!r) {
        enif_free(arrays);
        return c.raised;
    }
    ERL_NIF_TERM ref = enif_make_copy(env, r->ref);
    em_status st = em_stream_eval(s, arrays, n, on_done, r);
    enif_free(arrays);
    return st == EM_OK ? ref : not_submitted(&c, r, st);
}

NIF_DECL(async_eval) {
    nif_call c = NIF_CALL(env, "async_eval");
    em_stream *s;
    em_array **arrays;
    size_t n;
    if (!nif_get_stream(&c, argv[0], "stream", &s) ||
        !nif_get_array_list(&c, argv[1], "tensors", &arrays, &n))
        return c.raised;
    /* No callback: the stream keeps a failure and reports it to the next
     * job that is waited for on it. */
    em_status st = em_stream_eval(s, arrays, n, NULL, NULL);
    enif_free(arrays);
    if (st != EM_OK)
        return raise_stream_status(&c, st);
    return atoms.ok;
}

NIF_DECL(to_binary) {
    nif_call c = NIF_CALL(env, "to_binary");
    em_stream *s;
    em_array *a;
    if (!nif_get_stream(&c, argv[0], "stream", &s) ||
        !nif_get_array(&c, argv[1], "tensor", &a))
        return c.raised;
    /* A GPU tensor's viewed bytes come back to host memory first. */
    em_array *contiguous;
    em_status st = em_array_device(a) == EM_DEVICE_CPU
                       ? em_contiguous(a, &contiguous)
                       : em_to_device(a, EM_DEVICE_CPU, &contiguous);
    if (st != EM_OK)
        return nif_raise_status(&c, st);
    async_req *r = req_new(&c);
    if (!r) {
        em_array_release(contiguous);
        return c.raised;
    }
    r->read = contiguous;
    ERL_NIF_TERM ref = enif_make_copy(env, r->ref);
    st = em_stream_eval(s, &contiguous, 1, on_done, r);
    return st == EM_OK ? ref : not_submitted(&c, r, st);
}

static em_status noop_job(void *ctx) { return EM_OK; }

/* A barrier: answers once every job queued before it has run, with the
 * stream's pending asynchronous failure if there is one. */
NIF_DECL(synchronize) {
    nif_call c = NIF_CALL(env, "synchronize");
    em_stream *s;
    if (!nif_get_stream(&c, argv[0], "stream", &s))
        return c.raised;
    async_req *r = req_new(&c);
    if (!r)
        return c.raised;
    ERL_NIF_TERM ref = enif_make_copy(env, r->ref);
    em_status st = em_stream_submit(s, noop_job, on_done, r);
    return st == EM_OK ? ref : not_submitted(&c, r, st);
}

/* ---- streams ------------------------------------------------------------ */

NIF_DECL(stream_new) {
    nif_call c = NIF_CALL(env, "stream_new");
    int limit;
    if (!nif_get_int(&c, argv[0], "queue_limit", &limit))
        return c.raised;
    if (limit < 0)
        return nif_raise_argument(
            &c, "queue_limit must be >= 0 (0: the default), got: %d", limit);
    nif_stream *res = enif_alloc_resource(nif_stream_type, sizeof *res);
    if (!res)
        return nif_raise_runtime(&c, "out of memory");
    res->stream = NULL;
    em_stream_options opts = {.queue_limit = limit};
    em_status st = em_stream_new(&opts, &res->stream);
    if (st != EM_OK) {
        enif_release_resource(res);
        return nif_raise_status(&c, st);
    }
    ERL_NIF_TERM term = enif_make_resource(env, res);
    enif_release_resource(res);
    return term;
}

NIF_DECL(stream_close) {
    nif_call c = NIF_CALL(env, "stream_close");
    if (enif_is_identical(argv[0], atoms.nil))
        return nif_raise_argument(&c, "the default stream cannot be closed");
    em_stream *s;
    if (!nif_get_stream(&c, argv[0], "stream", &s))
        return c.raised;
    em_stream_close(s);
    return atoms.ok;
}

/* ---- memory ------------------------------------------------------------- */

NIF_DECL(memory_stats) {
    em_memory_stats m;
    em_memory_get_stats(&m);
    ERL_NIF_TERM keys[4] = {atoms.active, atoms.peak, atoms.cache, atoms.limit};
    ERL_NIF_TERM values[4] = {enif_make_uint64(env, (ErlNifUInt64)m.active),
                              enif_make_uint64(env, (ErlNifUInt64)m.peak),
                              enif_make_uint64(env, (ErlNifUInt64)m.cache),
                              enif_make_uint64(env, (ErlNifUInt64)m.limit)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, values, 4, &map);
    return map;
}

NIF_DECL(memory_reset_peak) {
    em_memory_reset_peak();
    return atoms.ok;
}

NIF_DECL(memory_clear_cache) {
    em_memory_clear_cache();
    return atoms.ok;
}

NIF_DECL(memory_set_limit) {
    nif_call c = NIF_CALL(env, "memory_set_limit");
    ErlNifUInt64 bytes;
    if (!enif_get_uint64(env, argv[0], &bytes))
        return nif_raise_bad_arg(
            &c, "bytes", "a non-negative integer (0: no limit)", argv[0]);
    em_memory_set_limit((size_t)bytes);
    return atoms.ok;
}

/* ---- build facts, for `mix emily.doctor` -------------------------------- */

static ERL_NIF_TERM make_text(ErlNifEnv *env, const char *text) {
    ERL_NIF_TERM bin;
    size_t len = text ? strlen(text) : 0;
    unsigned char *data = enif_make_new_binary(env, len, &bin);
    if (len)
        memcpy(data, text, len);
    return bin;
}

NIF_DECL(build_info) {
    em_build_info info;
    em_get_build_info(&info);
    ERL_NIF_TERM keys[9] = {enif_make_atom(env, "compiler"),
                            enif_make_atom(env, "blas_config"),
                            enif_make_atom(env, "blas_core"),
                            enif_make_atom(env, "blas_threads"),
                            enif_make_atom(env, "engine_threads"),
                            enif_make_atom(env, "cpu_features"),
                            enif_make_atom(env, "cuda"),
                            enif_make_atom(env, "sanitized"),
                            enif_make_atom(env, "simd")};
    ERL_NIF_TERM values[9] = {make_text(env, info.compiler),
                              make_text(env, info.blas_config),
                              make_text(env, info.blas_core),
                              enif_make_int(env, info.blas_threads),
                              enif_make_int(env, info.engine_threads),
                              make_text(env, info.cpu_features),
                              info.cuda ? atoms.yes : atoms.no,
                              info.sanitized ? atoms.yes : atoms.no,
                              make_text(env, info.simd)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, values, 9, &map);
    return map;
}

/* ---- the op registry, as the engine names it ---------------------------- */

static ERL_NIF_TERM name_list(ErlNifEnv *env, int count,
                              const char *(*name)(int)) {
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (int i = count - 1; i >= 0; i--)
        list = enif_make_list_cell(env, enif_make_atom(env, name(i)), list);
    return list;
}

static const char *unary_name(int i) { return em_unary_name((em_unary_op)i); }
static const char *binary_name(int i) {
    return em_binary_name((em_binary_op)i);
}
static const char *reduce_name(int i) {
    return em_reduce_name((em_reduce_op)i);
}

NIF_DECL(op_names) {
    ERL_NIF_TERM keys[3] = {atoms.unary, atoms.binary, atoms.reduce};
    ERL_NIF_TERM values[3] = {name_list(env, EM_UNARY_COUNT, unary_name),
                              name_list(env, EM_BINARY_COUNT, binary_name),
                              name_list(env, EM_REDUCE_COUNT, reduce_name)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, values, 3, &map);
    return map;
}

/* ---- the table ---------------------------------------------------------- */

#define NIF_ROW(name, arity) {#name, arity, nif_##name, 0},
static ErlNifFunc nif_funcs[] = {
    NIF_CORE_FUNCS(NIF_ROW) NIF_OP_FUNCS(NIF_ROW) NIF_POINTER_FUNCS(NIF_ROW)
        NIF_COMPILE_FUNCS(NIF_ROW) NIF_FAST_FUNCS(NIF_ROW)
            NIF_ATTENTION_FUNCS(NIF_ROW) NIF_QUANT_FUNCS(NIF_ROW)
                NIF_GGML_FUNCS(NIF_ROW) NIF_IO_FUNCS(NIF_ROW)
                    NIF_DIST_FUNCS(NIF_ROW)
            NIF_GENERATED_FUNCS{"build_info", 0, nif_build_info, 0}};
#undef NIF_ROW

ERL_NIF_INIT(Elixir.Emily.Native, nif_funcs, on_load, NULL, on_upgrade, NULL)
