/*
 * internal.h — what the engine's source files share: the array node, the
 * buffer, the primitive descriptor, dtype tables, errors and the thread pool.
 *
 * How an op is written (see the files under ops/):
 *   1. Validate inputs; on bad input return em__fail(EM_ERR_ARGUMENT, ...)
 *      with a message naming the op, the shapes and dtypes, and what was
 *      expected (use em__describe() for "f32[2,3]").
 *   2. Build the node with em__node_new(&prim, dtype, shape, ndim, inputs, n)
 *      and copy op parameters into node->params (em__node_set_params).
 *   3. The primitive's `eval` runs later on an evaluation thread with every
 *      input evaluated. It must give the node a buffer: em__alloc_output()
 *      (row-major contiguous output, possibly donated from an input) or, for
 *      views, em__share_buffer() (strides/offset were fixed at build time).
 */
#ifndef EMILY_INTERNAL_H
#define EMILY_INTERNAL_H

#include "emily.h"
#include "emily_device.h"

#include <complex.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Record a printf-style message for this thread and return `status`. */
em_status em__fail(em_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Write "f32[2,3]" for `a` into buf (a short, always terminated string).
 * Returns buf so it can be used inline in a message. */
typedef struct em_desc {
    char text[96];
} em_desc;
const char *em__describe(const em_array *a, em_desc *buf);
const char *em__describe_shape(const int64_t *shape, int ndim, em_desc *buf);

/* ------------------------------------------------------------------------ */
/* Buffers and the allocator                                                 */
/* ------------------------------------------------------------------------ */

typedef struct em_buffer {
    atomic_int refcount;
    void *data;
    size_t nbytes;   /* usable bytes */
    size_t capacity; /* allocated bytes (the cache bucket) */
    /* Set when the bytes were read out (to_binary aliases them) or belong
     * to the caller: such a buffer is never donated or written again. */
    atomic_bool pinned;
    void (*release)(void *ctx); /* external memory: how to give it back */
    void *release_ctx;
    em_device device; /* where data points: host memory or a GPU's */
    /* GPU buffers: the CUDA stream (the plugin's opaque handle) of the last
     * work queued on this buffer; see gpu_stream.h. */
    _Atomic(void *) stream;
} em_buffer;

/* A buffer of `nbytes` (64-byte aligned, from the size-bucketed cache). */
em_status em__buffer_new(size_t nbytes, em_buffer **out);
/* The same on `device` (a GPU's memory through the CUDA backend). */
em_status em__buffer_new_on(em_device device, size_t nbytes, em_buffer **out);
em_status em__buffer_external(const void *data, size_t nbytes,
                              void (*release)(void *), void *ctx,
                              em_buffer **out);
void em__buffer_retain(em_buffer *b);
void em__buffer_release(em_buffer *b);

/* The GPU blocks of a captured CUDA graph (alloc.c; program_graph.c uses
 * it). While a pool is bound to a thread, that thread's allocations on the
 * pool's device are recorded in it and the blocks it frees return to it,
 * not to the heap, so the graph's addresses stay its own. em__gpu_pool_free
 * gives every block back to the heap as last used on `stream`. */
typedef struct em__gpu_pool em__gpu_pool;
em_status em__gpu_pool_new(em_device device, em__gpu_pool **out);
void em__gpu_pool_bind(em__gpu_pool *pool); /* NULL unbinds */
size_t em__gpu_pool_bytes(const em__gpu_pool *pool);
void em__gpu_pool_free(em__gpu_pool *pool, void *stream);
/* Take block `data` out of the pool: *out, an ordinary GPU buffer of
 * nbytes last used on `stream`, owns it from now on (the graph's state
 * buffers, program_graph.c). EM_ERR_ARGUMENT when data is not a block of
 * the pool. */
em_status em__gpu_pool_adopt(em__gpu_pool *pool, void *data, size_t nbytes,
                             void *stream, em_buffer **out);

/* ------------------------------------------------------------------------ */
/* Primitives and nodes                                                      */
/* ------------------------------------------------------------------------ */

/* A reverse-mode rule (src/engine/autodiff/): given the node's cotangent
 * (its shape and dtype), build with the ordinary op builders the cotangent
 * of every input i with needs[i] set, as a new reference in
 * input_cotangents[i] (left NULL: a zero cotangent). Nothing is evaluated.
 * The node's inputs, params and output may be used. */
typedef em_status (*em_vjp_fn)(em_array *node, em_array *cotangent,
                               const bool *needs, em_array **input_cotangents);

/* Primitives without a GPU kernel are written {"name", eval, vjp} and leave
 * gpu_eval NULL on purpose: that is the documented "CPU only" marker, not a
 * forgotten field. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct em_prim {
    const char *name;
    /* Compute node->buffer from its (evaluated) inputs. */
    em_status (*eval)(em_array *node);
    /* NULL: no gradient rule (an error when a float gradient must flow
     * through the node). */
    em_vjp_fn vjp;
    /* The eval for a node on a GPU; NULL: the op has no GPU kernel yet
     * (building it on a GPU fails). Views that only share their input's
     * buffer use their `eval` here too. */
    em_status (*gpu_eval)(em_array *node);
    /* NULL for plain parameter bytes; else called when the node is freed,
     * before its params are: for parameters holding references (a CUDA
     * graph run's handed-out buffers). */
    void (*release_params)(em_array *node);
} em_prim;

enum em_node_state {
    EM_NODE_PENDING = 0, /* not yet evaluated */
    EM_NODE_RUNNING = 1, /* claimed by an evaluating thread */
    EM_NODE_DONE = 2,    /* buffer valid, inputs detached */
    EM_NODE_FAILED = 3,  /* evaluation failed; error_status/message set */
};

struct em_array {
    atomic_int refcount;
    em_dtype dtype;
    int ndim;
    int64_t shape[EM_MAX_NDIM];
    int64_t strides[EM_MAX_NDIM]; /* in elements; 0 for broadcast axes */
    int64_t offset;               /* in elements, into buffer->data */
    int64_t size;                 /* product(shape) */
    bool row_contiguous;          /* strides are row-major for shape */

    atomic_int state;    /* enum em_node_state */
    em_buffer *buffer;   /* NULL until evaluated */
    const em_prim *prim; /* NULL for arrays created with data */
    int ninputs;
    em_array **inputs;  /* owned references; freed on detach */
    void *params;       /* primitive parameters (plain bytes, freed) */
    size_t params_size; /* bytes at params: clones and CSE compare them */
    /* Creation order (a process-wide counter): tells a node built inside a
     * traced or differentiated function from one that existed before. */
    uint64_t seq;
    em_status error_status;
    char *error_message; /* heap copy when state == FAILED */
    em_device device;    /* inputs' device (see emily_device.h) */
    /* A parameter that the consuming node reads on the host (a program
     * holder): it stays on the CPU beside inputs on any device. */
    bool host_only;
};

/* A new pending node with row-major strides; takes references to inputs.
 * ndim <= EM_MAX_NDIM and the shape must have been validated (use
 * em__check_shape). */
em_status em__node_new(const em_prim *prim, em_dtype dtype,
                       const int64_t *shape, int ndim, em_array *const *inputs,
                       int ninputs, em_array **out);
/* Copy `size` bytes of parameters into the node. */
em_status em__node_set_params(em_array *node, const void *params, size_t size);
/* em__node_new on `device` given by the caller (a transfer's target): no
 * inference from the inputs and nothing moved. */
em_status em__node_new_on(const em_prim *prim, em_device device, em_dtype dtype,
                          const int64_t *shape, int ndim,
                          em_array *const *inputs, int ninputs, em_array **out);
/* em__node_new then em__node_set_params; *out stays NULL on failure (the
 * half-built node is released). The usual last step of an op builder. */
em_status em__node_new_params(const em_prim *prim, em_dtype dtype,
                              const int64_t *shape, int ndim,
                              em_array *const *inputs, int ninputs,
                              const void *params, size_t size, em_array **out);

/* The next value of the creation counter (node->seq). */
uint64_t em__next_seq(void);

/* Row-major strides for shape; returns the element count. */
int64_t em__row_strides(const int64_t *shape, int ndim, int64_t *strides);
bool em__is_row_contiguous(const int64_t *shape, const int64_t *strides,
                           int ndim);

/* Validate a shape: ndim in [0, EM_MAX_NDIM], dims >= 0, element count and
 * byte size fit in int64/size_t. `op` names the caller for the message. */
em_status em__check_shape(const char *op, const int64_t *shape, int ndim,
                          em_dtype dtype, int64_t *size_out);
/* Normalise an axis (negative counts from the end) or fail. */
em_status em__check_axis(const char *op, int axis, int ndim, int *out);
/* Normalise a set of distinct axes into a bitmask (bit i = axis i). */
em_status em__check_axes(const char *op, const int *axes, int naxes, int ndim,
                         unsigned *mask_out);
/* Broadcast two shapes (right-aligned) or fail naming `op` and both arrays. */
em_status em__broadcast_shapes(const char *op, const int64_t *sa, int na,
                               const int64_t *sb, int nb, int64_t *out,
                               int *nout);

/* ---- used inside a primitive's eval ---------------------------------- */

/* Give `node` a row-major buffer. When one of the listed inputs is held by
 * nothing but this node, is row-contiguous, unpinned, covers its whole
 * buffer and has the same element size and count, its buffer is donated
 * instead of allocating (elementwise ops pass their inputs). */
em_status em__alloc_output(em_array *node, em_array *const *donors,
                           int ndonors);
/* Views: share input `src`'s buffer; node's strides/offset already describe
 * the view relative to that buffer. */
void em__share_buffer(em_array *node, const em_array *src);

/* ---- devices (device.c, gpu.c) ----------------------------------------- */

struct em_cuda_api;
/* The CUDA backend for a GPU device (loading it on first use), or
 * EM_ERR_UNSUPPORTED with the reason. *ordinal is the CUDA device number. */
em_status em__gpu_backend(em_device device, const struct em_cuda_api **api,
                          int *ordinal);
/* The start of most GPU evals: the node's backend and a fresh output
 * buffer (no donated input). Callers then return early when node->size is
 * 0 or the status is not EM_OK. */
em_status em__gpu_prepare(em_array *node, const struct em_cuda_api **api,
                          int *ordinal);
/* Fail with the backend's last error message and its status. */
em_status em__gpu_fail(const struct em_cuda_api *api, int status,
                       const char *op);
/* Copy an evaluated, row-contiguous array's bytes to host memory. */
em_status em__read_device(const em_array *a, void *dst, size_t nbytes);
/* GPU evals shared by op families (gpu.c). */
em_status em__gpu_unary_eval(em_array *node);
em_status em__gpu_binary_eval(em_array *node);
em_status em__gpu_select_eval(em_array *node);
em_status em__gpu_clip_eval(em_array *node);
em_status em__gpu_cast_eval(em_array *node); /* as_type and copies */
em_status em__gpu_iota_eval(em_array *node);
em_status em__gpu_reduce_eval(em_array *node);
em_status em__gpu_argreduce_eval(em_array *node);
em_status em__gpu_dot_eval(em_array *node);
em_status em__gpu_random_bits_eval(em_array *node);
em_status em__gpu_threefry_eval(em_array *node);
em_status em__gpu_gather_eval(em_array *node);
em_status em__gpu_take_eval(em_array *node);
em_status em__gpu_take_along_eval(em_array *node);
em_status em__gpu_scan_eval(em_array *node);
/* Shape ops (gpu_shape.c); eye's GPU eval is in creation.c. */
em_status em__gpu_pad_eval(em_array *node);
em_status em__gpu_concat_eval(em_array *node);
em_status em__gpu_put_slice_eval(em_array *node);
em_status em__gpu_dynamic_slice_eval(em_array *node);
em_status em__gpu_dynamic_put_slice_eval(em_array *node);
em_status em__gpu_scatter_eval(em_array *node); /* indexed_add/put */
em_status em__gpu_sort_eval(em_array *node);    /* sort and argsort */
em_status em__gpu_fft_eval(em_array *node);     /* gpu_fft.c */
em_status em__gpu_linalg_eval(em_array *node);  /* gpu_linalg.c */
/* conv / window family (gpu_window.c, gpu_conv.c) */
em_status em__gpu_window_eval(em_array *node);         /* window_reduce */
em_status em__gpu_window_scatter_eval(em_array *node); /* window_scatter */
em_status em__gpu_erf_inv_eval(em_array *node);        /* random_erf_inv */
em_status em__gpu_conv_eval(em_array *node);
/* eye's GPU eval: the k-th diagonal set to `one` (the dtype's 1 as stored). */
em_status em__gpu_eye_eval_with(em_array *node, int64_t k, const void *one);
/* Queue a strided element copy on `device` (a GPU), as em__copy_strided:
 * strides in elements, dst_strides NULL for row-major. */
em_status em__gpu_copy_strided(em_device device, void *dst,
                               const int64_t *dst_strides, const void *src,
                               const int64_t *src_strides, const int64_t *shape,
                               int ndim, size_t elem_size);

/* Typed element pointer of an evaluated array at its offset. */
static inline void *em__data(const em_array *a) {
    return (char *)a->buffer->data +
           (size_t)a->offset * em_dtype_size(a->dtype);
}

/* ------------------------------------------------------------------------ */
/* Evaluation internals                                                      */
/* ------------------------------------------------------------------------ */

/* Evaluate, returning the first failure. Thread-safe; nodes shared by
 * concurrent evaluations run once. */
em_status em__eval_arrays(em_array *const *arrays, size_t n);

/* Hash of a pointer for open-addressing sets and maps (a 64-bit finaliser
 * mix: node addresses differ in their low bits only by allocation size). */
static inline size_t em__hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* Pointer -> index map (ptr_map.c) for graph passes: the compiler's and
 * autodiff's. Zero-initialise; keys are non-NULL node pointers. */
typedef struct em__ptr_map {
    const void **keys;
    size_t *values;
    size_t cap, len;
} em__ptr_map;

/* Insert or overwrite; false when out of memory. */
bool em__ptr_map_put(em__ptr_map *m, const void *key, size_t value);
/* The value for key, or false when absent. */
bool em__ptr_map_get(const em__ptr_map *m, const void *key, size_t *value);
void em__ptr_map_free(em__ptr_map *m);

/* Every pending node reachable from roots, inputs before their consumers
 * (evaluated nodes are leaves and not listed). Each listed node is retained;
 * *out is malloc'd (NULL when empty). The compiler's tape and autodiff walk
 * graphs with it. */
em_status em__topo_order(em_array *const *roots, size_t n, em_array ***out,
                         size_t *len);

/* A pending node's inputs, read under the evaluator's lock (another thread
 * may evaluate the node and drop them at any time): *out is a malloc'd
 * copy, each input retained, *n their count. *n is -1 (and *out NULL) when
 * the node is evaluated already. */
em_status em__node_inputs(em_array *node, em_array ***out, int *n);

/* ------------------------------------------------------------------------ */
/* Reverse-mode rules (src/engine/autodiff/), set in the prims of ops/       */
/* ------------------------------------------------------------------------ */

em_status em__vjp_unary(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_binary(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_select(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_clip(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_reduce(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_as_type(em_array *, em_array *, const bool *, em_array **);
/* reshape, squeeze, expand_dims: the cotangent reshaped back */
em_status em__vjp_reshape(em_array *, em_array *, const bool *, em_array **);
/* contiguous, identity: the cotangent itself */
em_status em__vjp_identity(em_array *, em_array *, const bool *, em_array **);
/* stop_gradient: no cotangent */
em_status em__vjp_zero(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_broadcast(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_transpose(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_slice(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_reverse(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_dot(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_gather(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_take(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_take_along(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_indexed(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_put_slice(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_concatenate(em_array *, em_array *, const bool *,
                              em_array **);
em_status em__vjp_pad(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_dynamic_slice(em_array *, em_array *, const bool *,
                                em_array **);
em_status em__vjp_dynamic_put_slice(em_array *, em_array *, const bool *,
                                    em_array **);
em_status em__vjp_scan(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_sort(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_window(em_array *, em_array *, const bool *, em_array **);
em_status em__vjp_conv(em_array *, em_array *, const bool *, em_array **);

/* ------------------------------------------------------------------------ */
/* Layout helpers for kernels                                                */
/* ------------------------------------------------------------------------ */

/* The stride of the innermost axis of a group of n axes that merge into one
 * row-major run (size-1 axes ignored; an empty group has stride 0), or
 * false when they do not merge: how the CPU and GPU GEMMs decide whether an
 * operand's batch, row and column axes can be read in place. */
bool em__group_stride(const int64_t *shape, const int64_t *stride, int n,
                      int64_t *out);

/* Collapse adjacent axes that are contiguous for every one of `k` operands
 * (strides_k[i] == strides_k[i+1] * shape[i+1]) and drop size-1 axes.
 * Writes the collapsed shape and per-operand strides; returns new ndim
 * (0 means a single element). strides is an array of k pointers. */
int em__collapse(int ndim, const int64_t *shape, int k,
                 const int64_t *const *strides_in, int64_t *shape_out,
                 int64_t (*strides_out)[EM_MAX_NDIM]);

/* Split `in`'s axes into kept ones (bit clear in mask) and reduced ones
 * (bit set), with their shapes and strides, in order; returns the number of
 * reduced elements (0 for an empty input). Reductions on both backends. */
int64_t em__split_axes(const em_array *in, unsigned mask, int64_t *kept_shape,
                       int64_t *kept_strides, int *nkept, int64_t *red_shape,
                       int64_t *red_strides, int *nred);

/* ------------------------------------------------------------------------ */
/* Thread pool                                                               */
/* ------------------------------------------------------------------------ */

/* Run fn(ctx, begin, end) over [0, n) split into chunks across the pool
 * (the calling thread takes part). Runs inline when n < grain or the pool
 * is busy with another caller. fn must not fail. */
typedef void (*em_range_fn)(void *ctx, int64_t begin, int64_t end);
void em__parallel_for(int64_t n, int64_t grain, em_range_fn fn, void *ctx);
int em__num_threads(void);
/* Makes OpenBLAS single-threaded (once, when the pool starts): the pool
 * splits BLAS products itself (ops/gemm.c). */
void em__blas_single_threaded(void);
/* parallel_for over `nunits` independent units costing about `work`
 * elements each: a handful of heavy units (GEMM rows, long reductions) still
 * spread over threads, and many light ones are grouped. */
void em__parallel_units(int64_t nunits, int64_t work, em_range_fn fn,
                        void *ctx);

/* Hot loops are compiled three times and picked at load time by the CPU's
 * level: x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA: FMA matters for the
 * polynomial math), and the baseline. Never compiled for the build machine
 * only.
 *
 * EM_SIMD_BASELINE (`make SIMD=baseline`, built into build/baseline) keeps
 * only the baseline clone, so that tests can check that results do not
 * depend on the clone a CPU gets. It is a build switch, not an environment
 * variable: the clones are picked by GCC's ifunc resolvers while the
 * library is relocated (before any constructor or getenv of ours runs, in
 * the static test binary and in the dlopen'ed NIF alike), and those
 * resolvers ask the CPU, not the environment. */
#if defined(__x86_64__) && !defined(EM_SIMD_BASELINE)
#define EM_TARGET_CLONES                                                       \
    __attribute__((                                                            \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define EM_TARGET_CLONES
#endif

/* EM_TARGET_CLONES for the hot contiguous loops (elementwise kernels, dot,
 * reduce). GCC at -O2 only vectorises loops without a scalar epilogue or
 * alias check (its "very cheap" cost model); the dynamic model lets it
 * vectorise these. Clang vectorises at -O2. */
#if !defined(__x86_64__)
#define EM_CLONES
#elif defined(__clang__)
#define EM_CLONES EM_TARGET_CLONES
#else
#define EM_CLONES                                                              \
    EM_TARGET_CLONES __attribute__((optimize("vect-cost-model=dynamic")))
#endif

/* Elements below which an elementwise op runs on one thread. */
#define EM_PARALLEL_GRAIN 65536

/* ------------------------------------------------------------------------ */
/* Half precision                                                            */
/* ------------------------------------------------------------------------ */

static inline float em_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) |
                   ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t em_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absx < 0x38800000u) { /* result is subnormal or zero */
        float af;
        memcpy(&af, &absx, 4);
        /* Adding 0.5 (2^-1) aligns the subnormal bits with round-to-even. */
        float r = af + 0.5f;
        uint32_t rb;
        memcpy(&rb, &r, 4);
        return (uint16_t)(sign | ((rb - 0x3f000000u) & 0x3ffu));
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd; /* rebias exponent, round to even */
    return (uint16_t)(sign | (absx >> 13));
}

static inline float em_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t em_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);          /* round to nearest even */
    return (uint16_t)(x >> 16);
}

/* ------------------------------------------------------------------------ */
/* Dtype tables for kernels                                                  */
/* ------------------------------------------------------------------------ */

typedef uint16_t em_f16_t;  /* storage of f16 */
typedef uint16_t em_bf16_t; /* storage of bf16 */
typedef float complex em_c64_t;
typedef double complex em_c128_t;

/*
 * X(ENUM, suffix, storage type, compute type, load, store)
 * Kernels are written once against the compute type and instantiated for
 * every dtype from these tables. f16/bf16 compute in float; pred computes
 * in uint8_t (0/1). Loads and stores convert between storage and compute.
 */
#define EM_LOAD_ID(x) (x)
#define EM_STORE_ID(x) (x)
#define EM_STORE_PRED(x) ((uint8_t)((x) != 0))

#define EM_DTYPES_INT(X)                                                       \
    X(EM_PRED, pred, uint8_t, uint8_t, EM_LOAD_ID, EM_STORE_PRED)              \
    X(EM_U8, u8, uint8_t, uint8_t, EM_LOAD_ID, EM_STORE_ID)                    \
    X(EM_U16, u16, uint16_t, uint16_t, EM_LOAD_ID, EM_STORE_ID)                \
    X(EM_U32, u32, uint32_t, uint32_t, EM_LOAD_ID, EM_STORE_ID)                \
    X(EM_U64, u64, uint64_t, uint64_t, EM_LOAD_ID, EM_STORE_ID)                \
    X(EM_S8, s8, int8_t, int8_t, EM_LOAD_ID, EM_STORE_ID)                      \
    X(EM_S16, s16, int16_t, int16_t, EM_LOAD_ID, EM_STORE_ID)                  \
    X(EM_S32, s32, int32_t, int32_t, EM_LOAD_ID, EM_STORE_ID)                  \
    X(EM_S64, s64, int64_t, int64_t, EM_LOAD_ID, EM_STORE_ID)

#define EM_DTYPES_REALFLOAT(X)                                                 \
    X(EM_F16, f16, em_f16_t, float, em_f16_to_f32, em_f32_to_f16)              \
    X(EM_BF16, bf16, em_bf16_t, float, em_bf16_to_f32, em_f32_to_bf16)         \
    X(EM_F32, f32, float, float, EM_LOAD_ID, EM_STORE_ID)                      \
    X(EM_F64, f64, double, double, EM_LOAD_ID, EM_STORE_ID)

#define EM_DTYPES_COMPLEX(X)                                                   \
    X(EM_C64, c64, em_c64_t, em_c64_t, EM_LOAD_ID, EM_STORE_ID)                \
    X(EM_C128, c128, em_c128_t, em_c128_t, EM_LOAD_ID, EM_STORE_ID)

#define EM_DTYPES_REAL(X) EM_DTYPES_INT(X) EM_DTYPES_REALFLOAT(X)
#define EM_DTYPES_FLOATING(X) EM_DTYPES_REALFLOAT(X) EM_DTYPES_COMPLEX(X)
#define EM_DTYPES_ALL(X) EM_DTYPES_REAL(X) EM_DTYPES_COMPLEX(X)

/* Unsigned counterpart of an integer type, for wrapping arithmetic
 * (signed overflow is undefined in C). */
#define EM_UNSIGNED_OF(T)                                                      \
    __typeof__(_Generic((T)0, int8_t                                           \
                        : (uint8_t)0, int16_t                                  \
                        : (uint16_t)0, int32_t                                 \
                        : (uint32_t)0, int64_t                                 \
                        : (uint64_t)0, default                                 \
                        : (T)0))

/* Dtype class checks used by op validation (the `accepts` column). */
bool em__dtype_accepts(const char *accepts, em_dtype dtype);
#define EM_ACCEPTS_NUMERIC(d) ((d) != EM_PRED)
#define EM_ACCEPTS_REAL(d) (!em_dtype_is_complex(d))
#define EM_ACCEPTS_FLOATING(d) (em_dtype_is_float(d) || em_dtype_is_complex(d))
#define EM_ACCEPTS_REALFLOAT(d) (em_dtype_is_float(d))
#define EM_ACCEPTS_INTEGER(d) (em_dtype_is_integer(d))
#define EM_ACCEPTS_ANY(d) ((void)(d), true)

/* Complex values from parts, keeping infinities and NaNs in their part
 * (re + im*I would not). C11's CMPLX is missing from some compilers (clang
 * 14 with glibc); C guarantees a complex is laid out as two reals. */
static inline em_c128_t em_make_c128(double re, double im) {
    em_c128_t z;
    double parts[2] = {re, im};
    memcpy(&z, parts, sizeof z);
    return z;
}
static inline em_c64_t em_make_c64(float re, float im) {
    em_c64_t z;
    float parts[2] = {re, im};
    memcpy(&z, parts, sizeof z);
    return z;
}

/* Real counterpart: c64 -> f32, c128 -> f64, others unchanged. */
em_dtype em__real_dtype(em_dtype d);

#endif
