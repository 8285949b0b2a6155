/*
 * nif.h — what the NIF's source files share (private to src/nif).
 *
 * The NIF is a thin layer over include/emily.h: it decodes Erlang terms,
 * calls one engine entry point and encodes the result. It has no policy of
 * its own (type promotion, default axes and the like live in Elixir).
 *
 * Every engine handle is a resource whose destructor releases the
 * reference. Evaluation and reads never run on a scheduler: they are jobs on
 * a stream's worker thread, which answers the waiting process with
 * enif_send (see nif_core.c).
 *
 * Errors never surface as a bare badarg: a bad term raises an Elixir
 * ArgumentError naming the op and the argument, an engine failure raises
 * ArgumentError (EM_ERR_ARGUMENT) or RuntimeError with em_last_error().
 */
#ifndef EMILY_NIF_H
#define EMILY_NIF_H

#include <erl_nif.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emily.h"

/* ---- resources ---------------------------------------------------------- */

typedef struct nif_array {
    em_array *array; /* owned reference */
} nif_array;

typedef struct nif_stream {
    em_stream *stream; /* owned reference; the stream is closed on GC */
} nif_stream;

extern ErlNifResourceType *nif_array_type;
extern ErlNifResourceType *nif_stream_type;

/* ---- atoms (made once at load) ------------------------------------------ */

/* A(field, text): atoms.field is the atom `text`. */
#define NIF_ATOMS(A)                                                           \
    A(ok, "ok")                                                                \
    A(error, "error")                                                          \
    A(nil, "nil") A(yes, "true") A(no, "false") A(u, "u") A(s, "s") A(f, "f")  \
        A(bf, "bf") A(c, "c") A(pred, "pred") A(argument, "argument")          \
            A(runtime, "runtime") A(oom, "oom") A(closed, "closed")            \
                A(busy, "busy") A(active, "active") A(peak, "peak")            \
                    A(cache, "cache") A(limit, "limit") A(unary, "unary")      \
                        A(binary, "binary") A(reduce, "reduce")                \
                            A(message, "message") A(struct_key, "__struct__")  \
                                A(exception_key, "__exception__") A(           \
                                    argument_error, "Elixir.ArgumentError")    \
                                    A(runtime_error, "Elixir.RuntimeError")    \
                                        A(template_, "template")

typedef struct nif_atoms {
#define NIF_ATOM_FIELD(field, text) ERL_NIF_TERM field;
    NIF_ATOMS(NIF_ATOM_FIELD)
#undef NIF_ATOM_FIELD
} nif_atoms;

extern nif_atoms atoms;

/* ---- the call context and errors ---------------------------------------- */

/* One NIF call: its env, the op name used in messages, and the exception
 * term to return once a helper has raised one. */
typedef struct nif_call {
    ErlNifEnv *env;
    const char *op;
    ERL_NIF_TERM raised;
} nif_call;

#define NIF_CALL(env_, op_)                                                    \
    { .env = (env_), .op = (op_), .raised = 0 }

/* Raise ArgumentError / RuntimeError with "<op>: <printf-formatted message>"
 * (terms are printed by the decoding helpers). Sets c->raised, returns it. */
ERL_NIF_TERM nif_raise_argument(nif_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
ERL_NIF_TERM nif_raise_runtime(nif_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Raise for an engine status, with em_last_error() as the message. */
/* A copy larger than this leaves the normal scheduler for a dirty one
 * (about a millisecond of memcpy: the BEAM's budget for a NIF call). */
#define DIRTY_COPY_BYTES ((size_t)1 << 20)

/* ArgumentError "argument <arg> must be <expected>, got: <term>". */
ERL_NIF_TERM nif_raise_bad_arg(nif_call *c, const char *arg,
                               const char *expected, ERL_NIF_TERM got);
ERL_NIF_TERM nif_raise_status(nif_call *c, em_status status);
/* The exception struct map for a status and message (usable in any env). */
ERL_NIF_TERM nif_exception(ErlNifEnv *env, em_status status,
                           const char *message);
ERL_NIF_TERM nif_status_atom(em_status status);

/* ---- term decoding: each returns false after raising ------------------- */

bool nif_get_array(nif_call *c, ERL_NIF_TERM term, const char *arg,
                   em_array **out);
/* A list of arrays; *out is enif_alloc'ed (free with enif_free); the arrays
 * are borrowed from their resources. */
bool nif_get_array_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                        em_array ***out, size_t *n);
/* nil means the default stream (a borrowed reference either way). */
bool nif_get_stream(nif_call *c, ERL_NIF_TERM term, const char *arg,
                    em_stream **out);
bool nif_get_dtype(nif_call *c, ERL_NIF_TERM term, const char *arg,
                   em_dtype *out);
bool nif_get_int(nif_call *c, ERL_NIF_TERM term, const char *arg, int *out);
bool nif_get_i64(nif_call *c, ERL_NIF_TERM term, const char *arg, int64_t *out);
bool nif_get_bool(nif_call *c, ERL_NIF_TERM term, const char *arg, bool *out);
/* Lists of at most EM_MAX_NDIM integers (shapes, starts, axes, perms). */
bool nif_get_i64_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                      int64_t out[EM_MAX_NDIM], int *n);
bool nif_get_int_list(nif_call *c, ERL_NIF_TERM term, const char *arg,
                      int out[EM_MAX_NDIM], int *n);

/* Drops the pointers that to_pointer handed out for `owner` (its tensor is
 * being destroyed or deallocated): from_pointer refuses them from then on.
 * Called by the array resource's destructor (nif_pointer.c). */
void nif_pointer_forget(const nif_array *owner);

/* ---- term encoding ------------------------------------------------------ */

/* Wrap a new engine reference in a resource term (takes ownership; raises
 * and releases on allocation failure). */
ERL_NIF_TERM nif_make_array(nif_call *c, em_array *a);
ERL_NIF_TERM nif_make_dtype(ErlNifEnv *env, em_dtype dtype);
ERL_NIF_TERM nif_make_shape(ErlNifEnv *env, const em_array *a);

/* Result of an engine call that wrote `*out`. `out` is a pointer so that
 * nif_result(c, em_op(..., &out), &out) reads it only after the call (the
 * order in which arguments are evaluated is unspecified). */
static inline ERL_NIF_TERM nif_result(nif_call *c, em_status st,
                                      em_array *const *out) {
    if (st != EM_OK)
        return nif_raise_status(c, st);
    return nif_make_array(c, *out);
}

/* ---- the NIF table ------------------------------------------------------ */

/* Every NIF body runs between nif_enter() and nif_leave(): backend_deallocate
 * may free an array only when no NIF that could have read the resource's
 * array pointer before it was cleared is still running (nif_pointer.c). Two
 * atomic operations a call; no lock. */
void nif_enter(void);
void nif_leave(void);

#define NIF_PROTO(name)                                                        \
    ERL_NIF_TERM nif_##name(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
#define NIF_DECL(name)                                                         \
    static ERL_NIF_TERM nif_body_##name(ErlNifEnv *env, int argc,              \
                                        const ERL_NIF_TERM argv[]);            \
    NIF_PROTO(name) {                                                          \
        nif_enter();                                                           \
        ERL_NIF_TERM result = nif_body_##name(env, argc, argv);                \
        nif_leave();                                                           \
        return result;                                                         \
    }                                                                          \
    static ERL_NIF_TERM nif_body_##name(ErlNifEnv *env, int argc,              \
                                        const ERL_NIF_TERM argv[])

/* Hand-written NIFs: F(name, arity). Generated elementwise and
 * reduce NIFs come from emily_ops.h (see nif_ops.c). */
#define NIF_CORE_FUNCS(F)                                                      \
    F(from_binary, 3)                                                          \
    F(to_binary, 2)                                                            \
    F(shape, 1)                                                                \
    F(dtype, 1)                                                                \
    F(ndim, 1)                                                                 \
    F(size, 1)                                                                 \
    F(nbytes, 1)                                                               \
    F(is_evaluated, 1)                                                         \
    F(eval, 2)                                                                 \
    F(async_eval, 2)                                                           \
    F(synchronize, 1)                                                          \
    F(stream_new, 1)                                                           \
    F(stream_close, 1)                                                         \
    F(memory_stats, 0)                                                         \
    F(memory_reset_peak, 0)                                                    \
    F(memory_clear_cache, 0)                                                   \
    F(memory_set_limit, 1)                                                     \
    F(op_names, 0)

#define NIF_OP_FUNCS(F)                                                        \
    F(scalar, 2)                                                               \
    F(scalar_f64, 2)                                                           \
    F(scalar_s64, 2)                                                           \
    F(select, 3)                                                               \
    F(clip, 3)                                                                 \
    F(as_type, 2)                                                              \
    F(bitcast, 2)                                                              \
    F(iota, 3)                                                                 \
    F(eye, 3)                                                                  \
    F(full, 3)                                                                 \
    F(reshape, 2)                                                              \
    F(transpose, 2)                                                            \
    F(broadcast_to, 2)                                                         \
    F(squeeze, 2)                                                              \
    F(expand_dims, 2)                                                          \
    F(slice, 4)                                                                \
    F(put_slice, 3)                                                            \
    F(concatenate, 2)                                                          \
    F(reverse, 2)                                                              \
    F(pad, 5) /* nif_shape2.c */                                               \
    F(dynamic_slice, 4)                                                        \
    F(dynamic_put_slice, 3)                                                    \
    F(contiguous, 1)                                                           \
    F(argmax, 5)                                                               \
    F(argmin, 5)                                                               \
    F(dot, 6)                                                                  \
    F(matmul, 2)                                                               \
    F(gather, 3)                                                               \
    F(take, 3)                                                                 \
    F(take_along_axis, 3)                                                      \
    F(indexed_add, 4)                                                          \
    F(indexed_put, 4)                                                          \
    F(indices_in_range, 2)                                                     \
    F(sort, 3) /* nif_sort.c */                                                \
    F(argsort, 4)                                                              \
    F(cholesky, 1) /* nif_linalg.c */                                          \
    F(invert, 1)                                                               \
    F(determinant, 1)                                                          \
    F(qr, 2)                                                                   \
    F(lu, 1)                                                                   \
    F(eigh, 1)                                                                 \
    F(svd, 2)                                                                  \
    F(solve, 2)                                                                \
    F(triangular_solve, 5)                                                     \
    F(fft, 5)         /* nif_fft.c */                                          \
    F(random_bits, 3) /* nif_random.c */                                       \
    F(threefry2x32, 2)                                                         \
    F(random_erf_inv, 1)                                                       \
    F(scan, 4)          /* nif_scan.c */                                       \
    F(window_reduce, 7) /* nif_window.c */                                     \
    F(window_scatter, 8)                                                       \
    F(conv, 9)     /* nif_conv.c */                                            \
    F(identity, 1) /* nif_autodiff.c */                                        \
    F(stop_gradient, 1)                                                        \
    F(vjp, 3)                                                                  \
    F(to_device, 2) /* nif_device.c */                                         \
    F(array_device, 1)                                                         \
    F(array_devices, 1)                                                        \
    F(device_available, 1)                                                     \
    F(device_memory_stats, 1)

/* nif_pointer.c: releasing a tensor early and raw pointers to its bytes. */
#define NIF_POINTER_FUNCS(F)                                                   \
    F(deallocate, 1)                                                           \
    F(is_deallocated, 1)                                                       \
    F(to_pointer, 2)                                                           \
    F(from_pointer, 3)                                                         \
    F(copy, 1)

/* nif_fast.c: Emily.Fast norms, softmax and RoPE. */
#define NIF_FAST_FUNCS(F)                                                      \
    F(fast_rms_norm, 3)                                                        \
    F(fast_layer_norm, 4)                                                      \
    F(fast_softmax, 2)                                                         \
    F(fast_rope, 7)                                                            \
    F(fast_linear, 7)                                                          \
    F(fast_heads, 14)

/* nif_attention.c: scaled dot-product attention. */
#define NIF_ATTENTION_FUNCS(F) F(sdpa, 7)

/* nif_quant.c: affine quantization. */
#define NIF_QUANT_FUNCS(F)                                                     \
    F(quantize, 3)                                                             \
    F(dequantize, 6)                                                           \
    F(quantized_matmul, 7)

/* nif_ggml.c: ggml block formats. */
#define NIF_GGML_FUNCS(F)                                                      \
    F(ggml_dequantize, 4)                                                      \
    F(ggml_matmul, 4)

/* nif_io.c: safetensors and GGUF files. */
#define NIF_IO_FUNCS(F)                                                        \
    F(safetensors_open, 1)                                                     \
    F(safetensors_info, 1)                                                     \
    F(safetensors_get, 2)                                                      \
    F(safetensors_get_bytes, 2)                                                \
    F(safetensors_save, 3)                                                     \
    F(safetensors_index, 1)                                                    \
    F(gguf_open, 1)                                                            \
    F(gguf_info, 1)                                                            \
    F(gguf_get, 2)
/* Opens the weight-file resource types (called on load and upgrade). */
int nif_io_open_resources(ErlNifEnv *env);

/* nif_distributed.c: communicators and collectives (Emily.Distributed). */
#define NIF_DIST_FUNCS(F)                                                      \
    F(comm_listen, 1)                                                          \
    F(comm_connect, 5)                                                         \
    F(comm_info, 1)                                                            \
    F(comm_close, 1)                                                           \
    F(all_sum, 2)                                                              \
    F(all_gather, 3)                                                           \
    F(reduce_scatter, 3)                                                       \
    F(comm_send, 3)                                                            \
    F(comm_recv, 4)                                                            \
    F(barrier, 1)                                                              \
    F(comm_nccl_id, 1)                                                         \
    F(comm_nccl_new, 4)
/* Opens the communicator resource type (called on load and upgrade). */
int nif_distributed_open_resources(ErlNifEnv *env);

/* Programs (nif_compile.c). */
#define NIF_COMPILE_FUNCS(F)                                                   \
    F(placeholder, 3)                                                          \
    F(program_new, 4)                                                          \
    F(program_run, 2)                                                          \
    F(program_stats, 1)                                                        \
    F(while_loop, 3)                                                           \
    F(while_loop_tapped, 5)                                                    \
    F(hook_channel_open, 0)                                                    \
    F(hook_channel_close, 1)
/* Opens the program resource type (called on load and upgrade). */
int nif_compile_open_resources(ErlNifEnv *env);
/* Opens the hook channel resource type (nif_hooks.c). */
int nif_hooks_open_resources(ErlNifEnv *env);
/* The tap callback of loops made by while_loop_tapped (nif_hooks.c). */
void nif_hook_tap(uint64_t site, em_array *const *taps, size_t ntaps);

#define NIF_DECLARE(name, arity) NIF_PROTO(name);
NIF_CORE_FUNCS(NIF_DECLARE)
NIF_OP_FUNCS(NIF_DECLARE)
NIF_POINTER_FUNCS(NIF_DECLARE)
NIF_COMPILE_FUNCS(NIF_DECLARE)
NIF_FAST_FUNCS(NIF_DECLARE)
NIF_ATTENTION_FUNCS(NIF_DECLARE)
NIF_QUANT_FUNCS(NIF_DECLARE)
NIF_GGML_FUNCS(NIF_DECLARE)
NIF_IO_FUNCS(NIF_DECLARE)
NIF_DIST_FUNCS(NIF_DECLARE)
#undef NIF_DECLARE

/* Generated NIFs (nif_ops.c): one per entry of emily_ops.h's lists, named
 * as the op (Emily.Native.add/2, exp/1, sum/3). */
#define NIF_UNARY_DECLARE(name, accepts) NIF_PROTO(unary_##name);
#define NIF_BINARY_DECLARE(name, accepts) NIF_PROTO(binary_##name);
#define NIF_REDUCE_DECLARE(name, accepts) NIF_PROTO(reduce_##name);
EM_UNARY_OPS(NIF_UNARY_DECLARE)
EM_BINARY_OPS(NIF_BINARY_DECLARE)
EM_REDUCE_OPS(NIF_REDUCE_DECLARE)
#undef NIF_UNARY_DECLARE
#undef NIF_BINARY_DECLARE
#undef NIF_REDUCE_DECLARE

#define NIF_UNARY_ROW(name, accepts) {#name, 1, nif_unary_##name, 0},
#define NIF_BINARY_ROW(name, accepts) {#name, 2, nif_binary_##name, 0},
#define NIF_REDUCE_ROW(name, accepts) {#name, 3, nif_reduce_##name, 0},
#define NIF_GENERATED_FUNCS                                                    \
    EM_UNARY_OPS(NIF_UNARY_ROW)                                                \
    EM_BINARY_OPS(NIF_BINARY_ROW) EM_REDUCE_OPS(NIF_REDUCE_ROW)

#endif
