/*
 * emily_cuda.h — the interface between libemily and its CUDA backend,
 * libemily_cuda.so. Plain C, shared by both sides.
 *
 * The engine dlopen's the plugin and calls emily_cuda_get_api() once. The
 * plugin knows nothing of nodes or graphs: it receives device pointers,
 * shapes and element strides already worked out by the engine
 * (src/engine/gpu.c), queues the work on the device's CUDA stream and
 * returns. Every call returns an em_status number (0: OK); on failure
 * last_error() gives the calling thread's message.
 *
 * Devices are CUDA ordinals (0-based). All work for one device goes to one
 * CUDA stream, in the order it was submitted, so a buffer freed into the
 * engine's cache after its last use is never overwritten by a later kernel
 * before that use has run.
 */
#ifndef EMILY_CUDA_H
#define EMILY_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EM_CUDA_API_VERSION 5
#define EM_CUDA_MAX_NDIM 8
#define EM_CUDA_MAX_IN 3

/* Elementwise families: each output element from the same element of every
 * input (inputs may be strided or broadcast: stride 0). */
enum em_cuda_ew_family {
    EM_CUDA_UNARY = 0,  /* op: em_unary_op; in: dtype_in; out: dtype_out */
    EM_CUDA_BINARY = 1, /* op: em_binary_op; both inputs dtype_in */
    EM_CUDA_SELECT = 2, /* in0 pred of dtype_pred, in1/in2 dtype_in */
    EM_CUDA_CLIP = 3,   /* min(max(in0, in1), in2), all dtype_in */
    EM_CUDA_CAST = 4,   /* dtype_in -> dtype_out (same dtype: a copy) */
};

typedef struct em_cuda_ew {
    int family, op;
    int dtype_in, dtype_out, dtype_pred;
    int nin;
    int ndim;  /* >= 1, axes collapsed */
    int64_t n; /* elements of the output */
    int64_t shape[EM_CUDA_MAX_NDIM];
    int64_t strides[EM_CUDA_MAX_IN][EM_CUDA_MAX_NDIM]; /* in elements */
    const void *in[EM_CUDA_MAX_IN];                    /* at the offset */
    void *out;                                         /* row-major */
} em_cuda_ew;

/* Reductions: out[o] = fold over the reduced index space of input elements.
 * Kept axes (ko of them) index the row-major output; reduced axes (kr) are
 * folded in row-major order (argmax reports that flat position). */
typedef struct em_cuda_reduce {
    int op;       /* em_reduce_op, or for arg reductions em_argreduce_op */
    int is_arg;   /* 1: argmax/argmin (out: integer dtype_out) */
    int tie_high; /* arg: ties pick the last index */
    int dtype_in, dtype_out;
    int ko, kr;
    int64_t oshape[EM_CUDA_MAX_NDIM], ostride[EM_CUDA_MAX_NDIM];
    int64_t rshape[EM_CUDA_MAX_NDIM], rstride[EM_CUDA_MAX_NDIM];
    int64_t nout, rn;
    const void *in;
    void *out;
} em_cuda_reduce;

/* C[b] = op(A[b]) op(B[b]), row-major [m, n] output, contiguous. An operand
 * is [rows, cols] with leading dimension ld in elements; trans means it is
 * stored as its transpose (column-major). Batch strides may be 0. */
typedef struct em_cuda_gemm {
    int dtype;
    int64_t batch, m, n, k;
    const void *a, *b;
    void *c;
    int trans_a, trans_b;
    int64_t lda, ldb;
    int64_t stride_a, stride_b; /* elements between batches */
} em_cuda_gemm;

/* Indexed reads (gather, take, take_along_axis): output element at
 * coordinates c (row-major over shape) reads a at
 *   sum_d c[d] * a_stride[d] + sum_j clamp(index_j, axis_dim[j]) * axis_stride[j]
 * where index_j is the integer at indices + sum_d c[d] * i_stride[d] +
 * j * entry_stride, clamped into [0, axis_dim[j]). */
typedef struct em_cuda_gather {
    int dtype_index, elem_size, ndim, k;
    int64_t n;
    int64_t shape[EM_CUDA_MAX_NDIM];
    int64_t a_stride[EM_CUDA_MAX_NDIM], i_stride[EM_CUDA_MAX_NDIM];
    int64_t entry_stride;
    int64_t axis_stride[EM_CUDA_MAX_NDIM], axis_dim[EM_CUDA_MAX_NDIM];
    const void *a, *indices;
    void *out;
} em_cuda_gather;

/* Cumulative op (em_scan_op) along one axis of n steps, one lane per
 * position of the other axes: lane l starts at in + in_off(l), out +
 * out_off(l) (offsets from the lanes' shape and strides) and step t reads
 * in[t * step_in], writes out[t * step_out] (negative when reversed, from
 * the last element). Each step's result is rounded to the dtype before the
 * next, as the CPU does. */
typedef struct em_cuda_scan {
    int op, dtype, nlane_dims;
    int64_t n, nlanes;
    int64_t lane_shape[EM_CUDA_MAX_NDIM];
    int64_t lane_in[EM_CUDA_MAX_NDIM], lane_out[EM_CUDA_MAX_NDIM];
    int64_t step_in, step_out;
    const void *in;
    void *out;
} em_cuda_scan;

/* Strided copy by element size (pad, concatenate, put_slice, the dynamic
 * slices, eye): element at coordinates c (row-major over shape) moves from
 * src + sum c[d] * src_stride[d] to dst + sum c[d] * dst_stride[d] (element
 * strides, possibly 0). With `starts` set (an integer array of dtype
 * dtype_starts, nstarts entries starts_stride elements apart, on the
 * device), one more offset sum_i clamp(starts[i], 0, start_hi[i]) *
 * start_mul[i] is added to the src side (starts_side 1) or the dst side
 * (2): the dynamic slices' clamped starts, read on the GPU. */
typedef struct em_cuda_copy {
    int elem_size, ndim; /* 1, 2, 4, 8 or 16 bytes; ndim >= 1 */
    int64_t n;
    int64_t shape[EM_CUDA_MAX_NDIM];
    int64_t src_stride[EM_CUDA_MAX_NDIM], dst_stride[EM_CUDA_MAX_NDIM];
    const void *src;
    void *dst;
    const void *starts;
    int dtype_starts, starts_side, nstarts;
    int64_t starts_stride;
    int64_t start_hi[EM_CUDA_MAX_NDIM], start_mul[EM_CUDA_MAX_NDIM];
} em_cuda_copy;

/* indexed_add / indexed_put: one thread per element of the updates (ndim
 * axes, coordinates c row-major over shape; the first nrow_dims axes walk
 * the index rows, row number r row-major over them). The element
 * updates[sum c[d] * u_stride[d]] combines into out at
 *   sum c[d] * o_stride[d] + sum_j clamp(index_j, axis_dim[j]) * axis_stride[j]
 * with index_j at indices + sum c[d] * i_stride[d] + j * entry_stride
 * (o_stride is 0 on row axes, i_stride 0 on the others). add: atomically
 * (integers wrap, f16/bf16 round per update; the order of float additions
 * is not fixed). put: the highest row r per target wins, as the CPU's
 * in-order writes: `winner` (one int64 per output element, all -1) takes
 * an atomicMax of r, then only the winning row writes. */
typedef struct em_cuda_scatter {
    int add, dtype, dtype_index, ndim, nrow_dims, k;
    int64_t n;
    int64_t shape[EM_CUDA_MAX_NDIM];
    int64_t u_stride[EM_CUDA_MAX_NDIM], i_stride[EM_CUDA_MAX_NDIM],
        o_stride[EM_CUDA_MAX_NDIM];
    int64_t entry_stride;
    int64_t axis_stride[EM_CUDA_MAX_NDIM], axis_dim[EM_CUDA_MAX_NDIM];
    const void *updates, *indices;
    void *out;
    int64_t *winner;
} em_cuda_scatter;

/* sort / argsort: every row (n elements `in_axis_stride` apart, one per
 * position of the other axes: nouter of them, row r unravelled row-major
 * over oshape to offsets istride / ostride) sorted stably by the CPU's
 * order-preserving keys (sort.c: NaN above +Inf, -0 == +0; descending
 * inverts the keys). Writes the values (dtype) or the indices along the
 * axis (out_dtype, an integer dtype) at out + ostride offset + k *
 * out_axis_stride. */
typedef struct em_cuda_sort {
    int dtype, out_dtype, indices, descending, nouter;
    int64_t n, rows;
    int64_t oshape[EM_CUDA_MAX_NDIM], istride[EM_CUDA_MAX_NDIM],
        ostride[EM_CUDA_MAX_NDIM];
    int64_t in_axis_stride, out_axis_stride;
    const void *in;
    void *out;
} em_cuda_sort;

/* A fused kernel (src/engine/gpu_fusion.c generates it, fusion.cu compiles
 * it with NVRTC, cached by source text). `source` defines
 * `extern "C" __global__ void emily_fused(emc::FzParams)` (fusion_rt.cuh)
 * and depends on the program's structure only; the shapes, strides and
 * pointers below are its arguments. The space W has ndim axes; flat mode:
 * one pass over W, row mode (rows_mode 1): one block per row, a row being
 * W's last nred axes. Load j reads load[j] through strides[j] (elements,
 * over W, 0 where broadcast); in row mode a load that is not wide is read
 * once per row. cache_wanted: the kernel reads its wide loads more than
 * once per row, so they are worth keeping in shared memory when a row
 * fits. The output is row-major: W (out_wide) or one element per row. */
#define EM_CUDA_FUSED_MAX_LOADS 16
typedef struct em_cuda_fused {
    const char *source;
    int rows_mode, ndim, nred, nloads, cache_wanted;
    int64_t shape[EM_CUDA_MAX_NDIM];
    const void *load[EM_CUDA_FUSED_MAX_LOADS];
    int load_esize[EM_CUDA_FUSED_MAX_LOADS];
    int load_wide[EM_CUDA_FUSED_MAX_LOADS];
    int64_t strides[EM_CUDA_FUSED_MAX_LOADS][EM_CUDA_MAX_NDIM];
    void *out;
    int out_esize, out_wide;
} em_cuda_fused;

typedef struct em_cuda_api {
    int version; /* EM_CUDA_API_VERSION */
    const char *(*last_error)(void);
    /* Number of usable devices (0 with a reason in last_error). */
    int (*device_count)(void);

    /* Memory: plain cudaMalloc (never managed memory). */
    int (*malloc)(int dev, size_t nbytes, void **out);
    void (*free)(int dev, void *p);
    int (*memset)(int dev, void *p, int value, size_t nbytes);
    /* Copies through pinned staging buffers; they return when the host
     * side is done (the bytes are on the device, or in dst). */
    int (*copy_to_device)(int dev, void *dst, const void *src, size_t n);
    int (*copy_to_host)(int dev, void *dst, const void *src, size_t n);
    int (*synchronize)(int dev);

    /* Kernels (queued; they return before the GPU finishes). */
    int (*elementwise)(int dev, const em_cuda_ew *job);
    int (*iota)(int dev, int dtype, void *out, int64_t n, int64_t dim,
                int64_t inner);
    int (*reduce)(int dev, const em_cuda_reduce *job);
    int (*gemm)(int dev, const em_cuda_gemm *job);

    /* Threefry-2x32 (src/engine/ops/threefry.h), bit-identical to the CPU.
     * key: two u32 words `key_stride` elements apart, on the device.
     * random_bits: pair i hashes (i, i + half) (or (i, 0) past m); dtype
     * u8/u16/u32 store x0 at i and x1 at half + i (when < m); u64 stores
     * (x0 << 32 | x1) at i (count pairs). pairs: out[2i..] = hash(in[2i..]). */
    int (*random_bits)(int dev, const uint32_t *key, int64_t key_stride,
                       void *out, int dtype, int64_t m, int64_t half,
                       int64_t count);
    int (*threefry_pairs)(int dev, const uint32_t *key, int64_t key_stride,
                          const uint32_t *in, uint32_t *out, int64_t npairs);

    int (*gather)(int dev, const em_cuda_gather *job);
    int (*scan)(int dev, const em_cuda_scan *job);
    int (*copy)(int dev, const em_cuda_copy *job);
    int (*scatter)(int dev, const em_cuda_scatter *job);
    int (*sort)(int dev, const em_cuda_sort *job);

    /* Events for timing. */
    int (*event_record)(int dev, void **out);
    int (*event_elapsed)(void *start, void *end, double *ms);
    void (*event_destroy)(void *e);

    /* fusion (fusion.cu): queue a fused kernel, compiling it first (NVRTC)
     * when its source is new for this device; fused_compiles: how many
     * sources were compiled so far, all devices. */
    int (*fused)(int dev, const em_cuda_fused *job);
    int64_t (*fused_compiles)(void);
} em_cuda_api;

/* The one symbol the plugin exports. */
typedef const em_cuda_api *(*em_cuda_get_api_fn)(void);
const em_cuda_api *emily_cuda_get_api(void);

#ifdef __cplusplus
}
#endif

#endif
