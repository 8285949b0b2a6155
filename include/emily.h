/*
 * emily.h — libemily, a lazy array engine in C11.
 *
 * This header is the engine's manual.
 *
 * Model
 * -----
 * An em_array is a reference-counted node of a lazy graph: it knows its
 * dtype, shape, strides and the primitive that will produce it, but holds no
 * data until it is evaluated. Ops only build nodes and return in
 * microseconds; em_eval() (or a stream) runs the graph in topological order
 * and detaches evaluated nodes from their inputs, so intermediate buffers are
 * freed as soon as nothing needs them.
 *
 * Conventions
 * -----------
 * - Every fallible call returns em_status (EM_OK == 0) and writes results
 *   through out-parameters. On failure the out-parameter is left NULL and
 *   em_last_error() returns a message for the calling thread, naming the op,
 *   the input shapes and dtypes, and what was expected.
 * - Every function that returns an em_array* or em_stream* returns a NEW
 *   reference: release it with em_array_release() / em_stream_release().
 *   Inputs are borrowed; an op that needs them takes its own references.
 * - Reference counting is atomic: handles may be shared across threads.
 * - Nothing in the engine aborts or exits on bad input. Failures during
 *   evaluation (out of memory, say) are returned by the eval call, or, for
 *   async evaluation, by the next eval or read of the same array.
 * - Shapes are int64_t arrays of length ndim (0 <= ndim <= EM_MAX_NDIM);
 *   zero-size dimensions and 0-d scalars are allowed. Axes may be negative
 *   (counted from the end) wherever an axis is taken.
 */
#ifndef EMILY_H
#define EMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "emily_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Up to 16 axes: Nx.tile (used by Bumblebee to repeat grouped KV heads)
 * reshapes a rank-r tensor to rank 2r on its way. */
#define EM_MAX_NDIM 16

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum em_status {
    EM_OK = 0,
    EM_ERR_ARGUMENT = 1, /* bad input: wrong shape, dtype, axis, index ... */
    EM_ERR_RUNTIME = 2,  /* failure during evaluation */
    EM_ERR_OOM = 3,      /* allocation failed or memory limit reached */
    EM_ERR_CLOSED = 4,   /* the stream was closed */
    EM_ERR_BUSY = 5,     /* the stream's queue is full */
    EM_ERR_UNSUPPORTED = 6, /* this build or machine cannot (no GPU ...) */
} em_status;

/* Message of the last error on the calling thread ("" when none). The
 * pointer stays valid until the next failing call on the same thread. */
const char *em_last_error(void);

/* ------------------------------------------------------------------------ */
/* Dtypes                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum em_dtype {
    EM_PRED = 0, /* boolean, one byte holding 0 or 1 */
    EM_U8,
    EM_U16,
    EM_U32,
    EM_U64,
    EM_S8,
    EM_S16,
    EM_S32,
    EM_S64,
    EM_F16,
    EM_BF16,
    EM_F32,
    EM_F64,
    EM_C64,  /* two f32: real, imaginary */
    EM_C128, /* two f64 */
    EM_DTYPE_COUNT
} em_dtype;

size_t em_dtype_size(em_dtype dtype);      /* bytes per element; 0 if invalid */
const char *em_dtype_name(em_dtype dtype); /* "f32", "pred", ... */
bool em_dtype_is_valid(int dtype);
bool em_dtype_is_integer(em_dtype dtype); /* pred and u/s ints */
bool em_dtype_is_signed(em_dtype dtype);  /* s ints and all floats */
bool em_dtype_is_float(em_dtype dtype);   /* f16 bf16 f32 f64 */
bool em_dtype_is_complex(em_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Arrays                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct em_array em_array;

void em_array_retain(em_array *a);
void em_array_release(em_array *a); /* NULL is allowed */

em_dtype em_array_dtype(const em_array *a);
int em_array_ndim(const em_array *a);
const int64_t *em_array_shape(const em_array *a); /* ndim entries */
int64_t em_array_size(const em_array *a);         /* number of elements */
size_t em_array_nbytes(const em_array *a);        /* size * dtype size */
bool em_array_is_evaluated(const em_array *a);

/* Copy `nbytes` bytes of row-major data into a new evaluated array.
 * nbytes must equal product(shape) * em_dtype_size(dtype). */
em_status em_from_data(const void *data, size_t nbytes, const int64_t *shape,
                       int ndim, em_dtype dtype, em_array **out);

/* Alias caller memory without copying. `release(ctx)` is called once the
 * engine no longer needs `data`. The memory is never written by the engine
 * (it is never donated to an op's output). data must be aligned to the
 * dtype's element size. */
em_status em_from_external(const void *data, size_t nbytes,
                           const int64_t *shape, int ndim, em_dtype dtype,
                           void (*release)(void *ctx), void *ctx,
                           em_array **out);

/* A 0-d array holding one element whose bytes are `value`
 * (em_dtype_size(dtype) bytes). */
em_status em_scalar(const void *value, em_dtype dtype, em_array **out);

/* Convenience scalars: the value converted to `dtype` (wrapping for
 * integers, rounding for floats, imaginary part 0 for complex). */
em_status em_scalar_f64(double value, em_dtype dtype, em_array **out);
em_status em_scalar_s64(int64_t value, em_dtype dtype, em_array **out);

/* ------------------------------------------------------------------------ */
/* Evaluation and reading                                                    */
/* ------------------------------------------------------------------------ */

/* Evaluate `arrays` (and everything they depend on) on the calling thread. */
em_status em_eval(em_array *const *arrays, size_t n);

/* The row-major contiguous bytes of an evaluated array. Fails with
 * EM_ERR_ARGUMENT when the array is not evaluated or not row-contiguous
 * (use em_contiguous first). The memory stays valid while `a` is held, and
 * is never written again: reading pins the buffer against donation. */
em_status em_array_data(em_array *a, const void **data, size_t *nbytes);

/* Evaluate `a`, make it row-contiguous and copy its bytes out. */
em_status em_read(em_array *a, void *dst, size_t nbytes);

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

/* A stream is a worker thread with a bounded queue. Work submitted to one
 * stream runs in order; different streams run concurrently. A stream handle
 * may be used from any OS thread. */
typedef struct em_stream em_stream;

typedef struct em_stream_options {
    int queue_limit; /* maximum queued jobs; 0 means 8192 */
} em_stream_options;

em_status em_stream_new(const em_stream_options *opts, em_stream **out);
void em_stream_retain(em_stream *s);
void em_stream_release(em_stream *s); /* does not close the stream */

/* The process-wide default stream (a borrowed reference; never NULL after
 * the first successful call). */
em_status em_default_stream(em_stream **out);

/* Stop accepting work; queued jobs complete with EM_ERR_CLOSED; the job in
 * flight finishes. Idempotent. The worker thread exits once idle. */
void em_stream_close(em_stream *s);

/* Called on the stream's worker thread when a job finishes. `message` is
 * the error text for a failed job ("" on success). */
typedef void (*em_done_fn)(em_status status, const char *message, void *ctx);

/* Enqueue evaluation of `arrays` on `s`. `done` (may be NULL) is called on
 * the worker when it finishes. Returns EM_ERR_BUSY when the queue is full
 * and EM_ERR_CLOSED when the stream is closed; `done` is then not called.
 * When `done` is NULL a failure is remembered by the stream and returned by
 * the next job that evaluates or reads through it (async_eval). */
em_status em_stream_eval(em_stream *s, em_array *const *arrays, size_t n,
                         em_done_fn done, void *ctx);

/* Run an arbitrary job on the stream's worker: `job(ctx)` returns a status
 * and `done` receives it (message from em_last_error on the worker). */
typedef em_status (*em_job_fn)(void *ctx);
em_status em_stream_submit(em_stream *s, em_job_fn job, em_done_fn done,
                           void *ctx);

/* Block the caller until every job queued so far on `s` has run. Returns
 * the pending asynchronous failure, if any, and clears it. */
em_status em_stream_synchronize(em_stream *s);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct em_memory_stats {
    size_t active; /* bytes held by live buffers */
    size_t peak;   /* highest `active` since start or the last reset */
    size_t cache;  /* bytes held in the allocator's free-list cache */
    size_t limit;  /* active + cache may not exceed this (0: no limit) */
} em_memory_stats;

void em_memory_get_stats(em_memory_stats *out);
void em_memory_reset_peak(void);
void em_memory_clear_cache(void); /* frees cached blocks, never live ones */
void em_memory_set_limit(size_t bytes);

/* ------------------------------------------------------------------------ */
/* Elementwise ops (the lists are in emily_ops.h)                            */
/* ------------------------------------------------------------------------ */

typedef enum em_unary_op {
#define EM_X(name, accepts) EM_UNARY_##name,
    EM_UNARY_OPS(EM_X)
#undef EM_X
        EM_UNARY_COUNT
} em_unary_op;

typedef enum em_binary_op {
#define EM_X(name, accepts) EM_BINARY_##name,
    EM_BINARY_OPS(EM_X)
#undef EM_X
        EM_BINARY_COUNT
} em_binary_op;

const char *em_unary_name(em_unary_op op);
const char *em_binary_name(em_binary_op op);

/* out = op(a). Output dtype is a's, except: is_nan, is_infinity and
 * logical_not give pred; abs, real and imag of a complex give the real
 * dtype. */
em_status em_unary(em_unary_op op, em_array *a, em_array **out);

/* out = op(a, b) with numpy/Nx broadcasting (shapes aligned from the
 * right). a and b must share one dtype. Integer semantics follow Nx:
 * overflow wraps; quotient truncates toward zero; remainder has the sign of
 * the dividend; integer division or remainder by zero gives 0 (never a
 * trap); shifts by a negative or too-large count give 0 (or -1 for an
 * arithmetic right shift of a negative value). Float max/min propagate NaN. */
em_status em_binary(em_binary_op op, em_array *a, em_array *b, em_array **out);

/* out = pred ? on_true : on_false, broadcasting all three. on_true and
 * on_false share a dtype; pred may have any dtype (nonzero is true). */
em_status em_select(em_array *pred, em_array *on_true, em_array *on_false,
                    em_array **out);

/* out = min(max(a, lo), hi); lo and hi broadcast to a and share its dtype. */
em_status em_clip(em_array *a, em_array *lo, em_array *hi, em_array **out);

/* Value conversion. Float to int truncates; NaN gives 0, +Inf the type's
 * max and -Inf its min; finite out-of-range values saturate. Complex to
 * real keeps the real part. To pred: nonzero gives 1. */
em_status em_as_type(em_array *a, em_dtype dtype, em_array **out);

/* Reinterpret the bytes. The dtypes must have the same size. A view. */
em_status em_bitcast(em_array *a, em_dtype dtype, em_array **out);

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

/* Counting 0, 1, 2, ... along `axis` of `shape`, constant along the others. */
em_status em_iota(const int64_t *shape, int ndim, int axis, em_dtype dtype,
                  em_array **out);

/* Ones on the diagonal of the last two axes (offset k: k > 0 above). ndim
 * must be >= 2. */
em_status em_eye(const int64_t *shape, int ndim, int64_t k, em_dtype dtype,
                 em_array **out);

/* `value` (a 0-d array, or any array broadcastable to shape) broadcast and
 * materialised to `shape`, converted to `dtype`. */
em_status em_full(em_array *value, const int64_t *shape, int ndim,
                  em_dtype dtype, em_array **out);

/* ------------------------------------------------------------------------ */
/* Shape ops. Views share the input's buffer when the layout allows.        */
/* ------------------------------------------------------------------------ */

/* New shape with the same element count; one entry may be -1 (inferred). */
em_status em_reshape(em_array *a, const int64_t *shape, int ndim,
                     em_array **out);
/* Permute axes: out axis i is a's axis perm[i]. A view. */
em_status em_transpose(em_array *a, const int *perm, int ndim, em_array **out);
/* Broadcast to `shape` (aligned from the right). A view (zero strides). */
em_status em_broadcast_to(em_array *a, const int64_t *shape, int ndim,
                          em_array **out);
/* Remove the given size-1 axes (all size-1 axes when naxes == 0). A view. */
em_status em_squeeze(em_array *a, const int *axes, int naxes, em_array **out);
/* Insert a size-1 axis at `axis` of the result. A view. */
em_status em_expand_dims(em_array *a, int axis, em_array **out);

/* out[i] = a[start + i*stride] per axis, for i < ceil((stop-start)/stride).
 * Strides are >= 1; start <= stop, both within [0, dim]. A view. */
em_status em_slice(em_array *a, const int64_t *start, const int64_t *stop,
                   const int64_t *strides, em_array **out);

/* A copy of `a` with `update` written at `start` (update's rank equals a's;
 * start + update.shape <= a.shape). */
em_status em_put_slice(em_array *a, const int64_t *start, em_array *update,
                       em_array **out);

/* Join along `axis`; all inputs share dtype and every other dimension. */
em_status em_concatenate(em_array *const *arrays, size_t n, int axis,
                         em_array **out);

/* Reverse the order of elements along the given axes. A view. */
em_status em_reverse(em_array *a, const int *axes, int naxes, em_array **out);

/* Row-major contiguous copy (returns a new reference to `a` itself when it
 * is already row-contiguous). */
em_status em_contiguous(em_array *a, em_array **out);

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

typedef enum em_reduce_op {
#define EM_X(name, accepts) EM_REDUCE_##name,
    EM_REDUCE_OPS(EM_X)
#undef EM_X
        EM_REDUCE_COUNT
} em_reduce_op;

const char *em_reduce_name(em_reduce_op op);

/* Reduce over `axes`. axes == NULL reduces every axis; a non-NULL list with
 * naxes == 0 reduces none (the op is then a dtype-preserving copy). The output
 * keeps a's dtype (all/any give pred); sums wrap for integers. Float max/min
 * propagate NaN. Reducing an empty axis gives the identity (0, 1, the
 * lowest/highest value, true, false). keep_axes keeps reduced axes as 1. */
em_status em_reduce(em_reduce_op op, em_array *a, const int *axes, int naxes,
                    bool keep_axes, em_array **out);

typedef enum em_argreduce_op { EM_ARGMAX = 0, EM_ARGMIN = 1 } em_argreduce_op;

typedef struct em_argreduce_options {
    int axis;       /* used when all_axes is false */
    bool all_axes;  /* index into the flattened array */
    bool keep_axis; /* keep the reduced axis as size 1 */
    bool tie_high;  /* ties: last index (true) or first (false, default) */
    em_dtype dtype; /* index dtype; 0 (EM_PRED) means EM_S64 */
} em_argreduce_options;

/* Index of the max/min. A NaN counts as the extreme (the first NaN wins).
 * The reduced axis must not be empty. */
em_status em_argreduce(em_argreduce_op op, em_array *a,
                       const em_argreduce_options *opts, em_array **out);

/* ------------------------------------------------------------------------ */
/* Linear algebra                                                            */
/* ------------------------------------------------------------------------ */

typedef struct em_dot_options {
    int ncontract; /* pairs of contracted axes */
    int contract_a[EM_MAX_NDIM];
    int contract_b[EM_MAX_NDIM];
    int nbatch; /* pairs of batch axes */
    int batch_a[EM_MAX_NDIM];
    int batch_b[EM_MAX_NDIM];
} em_dot_options;

/* General tensor contraction, as Nx.dot/6. a and b share a dtype. Output
 * axes: batch axes (in the given order), then a's free axes, then b's free
 * axes. A zero em_dot_options contracts nothing (an outer product). */
em_status em_dot(em_array *a, em_array *b, const em_dot_options *opts,
                 em_array **out);

/* Matrix product over the last two axes with broadcast batch axes
 * (numpy's matmul for ndim >= 2). */
em_status em_matmul(em_array *a, em_array *b, em_array **out);

/* ------------------------------------------------------------------------ */
/* Indexing. Index arrays have an integer dtype. Out-of-range indices at    */
/* run time are clamped into range (never a wild read or write); callers    */
/* that want an error check first (Emily's :debug_bounds_check).            */
/* ------------------------------------------------------------------------ */

/* Nx.gather: indices has shape [..., k]; each row indexes a's `axes` (k of
 * them); the result has shape indices.shape[:-1] ++ (a's shape without
 * `axes`). */
em_status em_gather(em_array *a, em_array *indices, const int *axes, int naxes,
                    em_array **out);

/* Nx.take: select along `axis` by indices of any shape; the result replaces
 * that axis by indices' shape. */
em_status em_take(em_array *a, em_array *indices, int axis, em_array **out);

/* Nx.take_along_axis: indices has a's rank and broadcasts with a except
 * along `axis`. */
em_status em_take_along_axis(em_array *a, em_array *indices, int axis,
                             em_array **out);

/* Nx.indexed_add / indexed_put: indices [..., k] address a's `axes`
 * (naxes == 0: the first k axes); updates has shape indices.shape[:-1] ++
 * (a's shape without those axes). Duplicate indices accumulate (add) or
 * the last one wins (put). */
em_status em_indexed_add(em_array *a, em_array *indices, em_array *updates,
                         const int *axes, int naxes, em_array **out);
em_status em_indexed_put(em_array *a, em_array *indices, em_array *updates,
                         const int *axes, int naxes, em_array **out);

/* ------------------------------------------------------------------------ */
/* Checks used by Emily's debug flags                                        */
/* ------------------------------------------------------------------------ */

/* pred scalar: true when every element of the integer array `indices` lies
 * in [0, bound). */
em_status em_indices_in_range(em_array *indices, int64_t bound, em_array **out);

#ifdef __cplusplus
}
#endif

#endif
