/*
 * emily_cuda.h — the interface between libemily and its CUDA backend,
 * libemily_cuda.so. Plain C, shared by both sides.
 *
 * The engine dlopen's the plugin and calls emily_cuda_get_api() once. The
 * plugin knows nothing of nodes or graphs: it receives device pointers,
 * shapes and element strides already worked out by the engine
 * (src/engine/gpu/gpu.c), queues the work on the device's CUDA stream and
 * returns. Every call returns an em_status number (0: OK); on failure
 * last_error() gives the calling thread's message.
 *
 * Devices are CUDA ordinals (0-based). Work goes to the calling thread's
 * current CUDA stream for the device (set_stream: one per engine stream),
 * in the order it was submitted. Ordering across streams is the engine's
 * job (stream_wait; docs/CUDA.md, "Streams").
 */
#ifndef EMILY_CUDA_H
#define EMILY_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 10: em_cuda_heads writes into a KV cache, the depthwise_conv entry */
#define EM_CUDA_API_VERSION 10
#define EM_CUDA_MAX_NDIM 16 /* = EM_MAX_NDIM */
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

/* fft (em_fft, emily_fft.h): every row along the axis (in_len elements
 * in_stride apart, one row per position of the other axes: rows of them,
 * row r unravelled row-major over oshape to offsets istride / ostride) is
 * cut or zero padded to the length the mode reads, transformed by cuFFT in
 * the input's precision and stored (out_len elements out_stride apart) with
 * the inverse's 1/n scale and the CPU's clean-up (parts below eps and -0.0
 * become +0.0). mode is an em_fft_mode; dtypes as em_fft. */
typedef struct em_cuda_fft {
    int mode, dtype_in, dtype_out, nouter;
    int64_t n, rows;
    int64_t in_len, in_stride, out_len, out_stride;
    int64_t oshape[EM_CUDA_MAX_NDIM], istride[EM_CUDA_MAX_NDIM],
        ostride[EM_CUDA_MAX_NDIM];
    double eps;
    const void *in;
    void *out;
} em_cuda_fft;

/* linalg (emily_linalg.h), one op per call over `batch` matrices. */
enum em_cuda_linalg_op {
    EM_CUDA_CHOLESKY = 0,
    EM_CUDA_QR = 1,
    EM_CUDA_LU = 2,
    EM_CUDA_EIGH = 3,
    EM_CUDA_SVD = 4,
    EM_CUDA_TRSOLVE = 5,
    EM_CUDA_SOLVE = 6,
    EM_CUDA_DET = 7,
    EM_CUDA_INV = 8,
};

/* Matrix b of the batch (b row-major over bshape, nbatch_dims axes) of a
 * starts at a + sum coord[d] * a_bstride[d]; its element (i, j) is at
 * i * a_rs + j * a_cs (the same for the right-hand side b: [n, k], or
 * [k, n] for a right-side triangular solve; a vector has b_cs 0 and k 1).
 * The output holds `per` elements per matrix laid out as linalg.c packs
 * them ([q | r], [p | l | u], [w | v], [u | s | vt], or the one result,
 * row-major). flag: qr complete / svd full. On return `failed` is the
 * first matrix whose values the CPU reports as an error (cholesky: not
 * positive definite; solve, triangular_solve: singular), or -1: those
 * ops synchronise to read cuSOLVER's info. */
typedef struct em_cuda_linalg {
    int op, dtype, nbatch_dims;
    int flag, left, lower, trans;
    int64_t batch, m, n, k, per;
    int64_t bshape[EM_CUDA_MAX_NDIM], a_bstride[EM_CUDA_MAX_NDIM],
        b_bstride[EM_CUDA_MAX_NDIM];
    int64_t a_rs, a_cs, b_rs, b_cs;
    const void *a, *b;
    void *out;
    int64_t failed;
} em_cuda_linalg;
/* ---- ggml block formats (ggml.cu) ---- */

/* A ggml matrix (emily_ggml.h): `rows` weight rows of k weights, each row
 * k / block_elems blocks of block_bytes at raw (row-major, contiguous),
 * of ggml type `type`. ggml_dequantize writes (rows, k) in dtype (f32,
 * f16, bf16, f64) bit-exactly as the CPU; ggml_matmul writes out (m, rows)
 * = x (m, k) @ W^T, x and out in dtype (f32, f16, bf16), accumulating in
 * f32: a warp per weight row for m <= 16, else f32 tiles of W decoded into
 * stream-ordered scratch and multiplied by cuBLAS. */
typedef struct em_cuda_ggml {
    int type, dtype;
    int64_t rows, k, m;
    int64_t block_elems, block_bytes;
    const void *raw, *x;
    void *out;
} em_cuda_ggml;

/* ---- conv / window family (round 3) ---- */

/* Window reduction (window.c): output element o (row-major over out_shape)
 * folds, in row-major window order, the input elements at positions
 * o[i] * strides[i] + k[i] * dil[i] - low[i] (k over window) that fall
 * inside in_shape (padding is the op's identity, never read). op:
 * em_window_op (sum, product, max, min). Output contiguous. */
typedef struct em_cuda_window {
    int op, dtype, ndim; /* ndim >= 1 */
    int64_t n;           /* output elements */
    int64_t out_shape[EM_CUDA_MAX_NDIM], in_shape[EM_CUDA_MAX_NDIM],
        in_strides[EM_CUDA_MAX_NDIM];
    int64_t window[EM_CUDA_MAX_NDIM], strides[EM_CUDA_MAX_NDIM],
        dil[EM_CUDA_MAX_NDIM], low[EM_CUDA_MAX_NDIM];
    const void *in;
    void *out;
} em_cuda_window;

/* window_scatter_max/min: the window geometry of `win` over the operand
 * (win.in, win.dtype a real dtype; win.op 0 = select max, 1 = min; ties:
 * the last position in row-major window order, as the CPU), win.out_shape
 * the windows' shape. `sel` (one int64 per window, scratch) receives the
 * selected row-major operand index (-1 for an empty window); then every
 * output element (row-major over in_shape, contiguous, dtype src_dtype)
 * is init plus the contiguous `source` values of the windows that
 * selected it, added in window order (the CPU's order: bit-identical). */
typedef struct em_cuda_window_scatter {
    em_cuda_window win;
    int src_dtype;
    int64_t nout; /* operand elements */
    const void *source, *init;
    int64_t *sel;
    void *out;
} em_cuda_window_scatter;

/* im2col for conv (conv.c's patch matrix): for every (batch b < nb, group
 * t < groups) the matrix col[b][t][c * kvol + k][x] (c < cg channels, k
 * over the kernel window row-major, x over the output positions
 * row-major, L of them) holds the input element at batch offset
 * b * batch_stride + t * group_stride, channel c (c_stride) and spatial
 * position q = x * strides + k * kdil - low of the dilated input, when q
 * lands on an input element (q % idil == 0, q / idil < in_sp), else 0.
 * Elements are moved by size (any dtype). */
typedef struct em_cuda_im2col {
    int elem_size, ns; /* ns >= 1 spatial axes */
    int64_t nb, groups, cg, kvol, L;
    int64_t batch_stride, group_stride, c_stride;
    int64_t in_sp[EM_CUDA_MAX_NDIM], in_st[EM_CUDA_MAX_NDIM],
        k_sp[EM_CUDA_MAX_NDIM], out_sp[EM_CUDA_MAX_NDIM];
    int64_t strides[EM_CUDA_MAX_NDIM], low[EM_CUDA_MAX_NDIM],
        idil[EM_CUDA_MAX_NDIM], kdil[EM_CUDA_MAX_NDIM];
    const void *in;
    void *col;
} em_cuda_im2col;
/* Scaled dot-product attention (ops/attention.c's semantics, see
 * include/emily_attention.h): q (B, H, Lq, D), k (B, Hkv, Lk, D), v (B, Hkv,
 * Lk, Dv), out (B, H, Lq, Dv) row-major; strides in elements (the mask's
 * broadcast to (B, H, Lq, Lk): 0 on broadcast axes). dtype f16, bf16, f32
 * or f64 (f32 compute for the halves); an additive mask has that dtype, a
 * boolean one is pred (mask_kind 1 / 2, 0: none); sinks (H) that dtype or
 * NULL. nsplit > 1 splits the keys into that many chunks (decode) whose
 * partial results the plugin combines (its own stream-ordered scratch). */
/* Query positions up to which em_sdpa counts as decode (sdpa_decode); the
 * prefill kernels take longer queries. */
#define EM_CUDA_SDPA_DECODE_MAX_LQ 16
typedef struct em_cuda_sdpa {
    int dtype, causal, mask_kind;
    int64_t B, H, Hkv, Lq, Lk, D, Dv, nsplit;
    double scale;
    const void *q, *k, *v, *mask, *sinks;
    int64_t q_st[4], k_st[4], v_st[4], mask_st[4], sinks_st;
    void *out;
} em_cuda_sdpa;

/* A fused kernel (src/engine/gpu/gpu_fusion.c generates it, fusion.cu compiles
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

/* Emily.Fast (fast.cu). Row kernels: rms_norm, layer_norm or softmax over
 * the last axis of a row-contiguous x of rows x D elements, src/engine/ops/
 * fast_norm.c's semantics; float accumulation (double for f64). */
typedef struct em_cuda_fast_rows {
    int kind; /* 0 rms_norm, 1 layer_norm, 2 softmax */
    int dtype;
    int64_t rows, D;
    double eps;
    const void *x, *weight, *bias; /* weight, bias: D elements or NULL */
    void *out;
} em_cuda_fast_rows;

/* RoPE over a row-contiguous x of rows = (batch...) * L rows of D elements:
 * row r has position offset + r % L; fast_rope.c's semantics. */
typedef struct em_cuda_fast_rope {
    int dtype;
    int traditional;
    int offset_dtype; /* EM_S32 or EM_S64: the 0-d offset on the device */
    int64_t rows, L, D, dims;
    double base, scale;
    const void *x, *offset;
    const float *freqs; /* dims/2 periods on the device, or NULL: base */
    void *out;
} em_cuda_fast_rope;

/* Decode-path fused matrix-vector product (decode.cu; ops/fast_decode.c's
 * semantics): out (M, N) = [silu(xn gate^T) *] (xn w^T) [+ residual], xn =
 * x (M, K) or its RMS-normed rows (norm: x * rsqrt(mean(x^2) + eps) *
 * norm_weight, norm_weight NULL for none). w and gate (N, K), residual (M,
 * N); all row-major and contiguous, one dtype: f16, bf16, f32 (f32
 * compute) or f64. */
typedef struct em_cuda_linear {
    int dtype, norm;
    int64_t M, N, K;
    double eps;
    const void *x, *w, *norm_weight, *gate, *residual;
    void *out;
} em_cuda_linear;

/* em_fast_heads (decode.cu; ops/fast_decode.c's semantics): x (B, S, N)
 * contiguous -> out (B, count, L, head_dim) contiguous, head h from x's
 * features [(first + h) * head_dim, ...), RMS-normed (norm; norm_weight
 * NULL: no scaling) and rotated (rope: pairs of the first dims features,
 * half rotation or traditional, angle scale * (offset + s) * base^(-2i/dims)
 * in double) in the compute type, rounded once, stored at row start + s of
 * (b, h). cache_offset NULL: L = S and start = 0 (the heads alone); else
 * out holds a cache already (L >= S), start is cache_offset clamped into
 * [0, L - S], and only those S rows per (b, h) are written. offset and
 * cache_offset: 0-d s32 / s64 on the device (offset_dtype,
 * cache_offset_dtype). head_dim <= 256. */
typedef struct em_cuda_heads {
    int dtype, norm, rope, traditional, offset_dtype, cache_offset_dtype;
    int64_t B, S, N, head_dim, first, count, dims, L;
    double eps, base, scale;
    const void *x, *norm_weight, *offset, *cache_offset;
    void *out;
} em_cuda_heads;
/* Convolution through cuDNN (cudnn_conv.cu; gpu_conv.c fills it). x is
 * [n, c, in_sp...], w [o, c / groups, k_sp...], y [n, o, out_sp...], all
 * row-major contiguous, ns spatial axes (0..3; 0: one of size 1); zero
 * padding `pad` on both sides of each spatial axis, kernel dilation `dil`.
 * dtype: EM_F32, EM_F16 or EM_BF16 (accumulation in f32; f32 without
 * TF32 unless EMILY_CUDA_TF32=1, as the GEMMs). */
typedef struct em_cuda_cudnn_conv {
    int dtype;
    int ns;
    int64_t n, c, o, groups;
    int64_t in_sp[3], k_sp[3], out_sp[3];
    int64_t pad[3], strides[3], dil[3];
    const void *x, *w;
    void *y;
    void *workspace; /* cudnn_conv_run: workspace_bytes from the plan */
    size_t workspace_bytes;
} em_cuda_cudnn_conv;

/* Depthwise convolution, direct (conv.cu; gpu_conv.c fills it): feature
 * groups equal to the c input channels, o = c * mult output channels,
 * output channel oc reading input channel oc / mult, no input dilation.
 * Each output element is its window's sum of x * w over the kernel taps
 * that land inside the input (padding adds zeros, so it is never read),
 * in row-major kernel order, accumulated as conv.c's work types (f32 for
 * f16/bf16, wrapping 32/64-bit unsigned for integers) and rounded once.
 * x: [n, c, in_sp...] at element strides (x_batch_stride, x_c_stride,
 * in_st); w: [o, 1, k_sp...] row-major contiguous; y: [n, o, out_sp...]
 * row-major contiguous. ns >= 1 spatial axes (a 0-d problem is one axis of
 * size 1); L = prod(out_sp) < 2^31. Every dtype but pred. */
typedef struct em_cuda_depthwise {
    int dtype, ns;
    int64_t n, c, mult, L;
    int64_t x_batch_stride, x_c_stride;
    int64_t in_sp[EM_CUDA_MAX_NDIM], in_st[EM_CUDA_MAX_NDIM],
        k_sp[EM_CUDA_MAX_NDIM], out_sp[EM_CUDA_MAX_NDIM];
    int64_t strides[EM_CUDA_MAX_NDIM], low[EM_CUDA_MAX_NDIM],
        kdil[EM_CUDA_MAX_NDIM];
    const void *x, *w;
    void *y;
} em_cuda_depthwise;

/* The host cost of one launch, in parts (launch_probe.cu; cuda_bench
 * --eager prints it): microseconds per call of each way to queue an empty
 * kernel <<<1, 32>>> on this thread's stream, timed in batches of
 * `batch` launches with a synchronisation between batches (outside the
 * clock) so that the launch queue never fills; full_queue_us: the
 * triple-chevron launch again without those synchronisations. */
typedef struct em_cuda_launch_probe {
    double device_lookup_us;  /* device(): the plugin's per-call lookup */
    double get_last_error_us; /* cudaGetLastError alone */
    double chevron_us;        /* kernel<<<>>>() */
    double chevron_checked_us; /* kernel<<<>>>() + cudaGetLastError */
    double launch_kernel_us;  /* cudaLaunchKernel, function pointer known */
    double driver_launch_us;  /* cuLaunchKernel, CUfunction known */
    double full_queue_us;     /* kernel<<<>>>() with no pause */
    int batch;
} em_cuda_launch_probe;

/* Affine quantization (quant.cu; formats of include/emily_quant.h). dtype:
 * of w / scales / biases / x / out (f32, f16 or bf16), all row-major.
 *   op 0 quantize:   w (rows, len) -> wq (rows, len*bits/32), scales,
 *                    biases (rows, len/group_size)
 *   op 1 dequantize: wq, scales, biases -> out (rows, len)
 *   op 2 matmul:     out (m, n) = x (m, k) @ D^T (transpose; D (n, k) in
 *                    wq/scales/biases) or x @ D (D (k, n)); f32
 *                    accumulation. Every m: a warp-per-row kernel that
 *                    reads x from shared memory when m <= 16, otherwise
 *                    D in f32 tiles of shared memory.
 */
typedef struct em_cuda_affine {
    int op, dtype, group_size, bits, transpose;
    int64_t rows, len;    /* quantize, dequantize */
    int64_t m, n, k;      /* matmul */
    const void *w, *x;    /* quantize input; matmul x */
    void *wq, *scales, *biases; /* quantize outputs; others' inputs */
    void *out;            /* dequantize, matmul */
} em_cuda_affine;

/* Collectives through NCCL (nccl.cu). `count` is in elements of `dtype`
 * (an em_dtype): of `send` for all_sum, all_gather and send, of `recv` for
 * reduce_scatter and recv. all_gather's recv holds size * count elements
 * in rank order; reduce_scatter's send holds size * count. */
enum em_cuda_nccl_op {
    EM_CUDA_NCCL_ALL_SUM = 0,
    EM_CUDA_NCCL_ALL_GATHER = 1,
    EM_CUDA_NCCL_REDUCE_SCATTER = 2,
    EM_CUDA_NCCL_SEND = 3,
    EM_CUDA_NCCL_RECV = 4,
};

typedef struct em_cuda_nccl {
    int op, dtype, peer; /* peer: send's destination, recv's source */
    int64_t count;
    void *comm; /* from nccl_comm_init */
    const void *send;
    void *recv;
} em_cuda_nccl;

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

    /* ---- streams (issue #6 round 3: one CUDA stream per engine stream) ----
     * The calling thread's work goes to the CUDA stream of (device, engine
     * stream id) bound by set_stream: id 0 (the default for every thread)
     * is each device's shared stream; other ids get their own non-blocking
     * CUDA stream, created on first use and given back to a pool by
     * stream_retire. Stream handles are opaque and stay valid for the
     * process's life (retired streams are reused, never destroyed), so the
     * engine may keep one per buffer as "the stream of its last use". */
    int (*set_stream)(uint64_t stream_id);
    /* The handle of this thread's current stream on dev, or NULL (error). */
    void *(*current_stream)(int dev);
    /* Order this thread's current stream on dev after all work queued so
     * far on `producer` (a pooled event; nothing when they are the same). */
    int (*stream_wait)(int dev, void *producer);
    /* *pending = 1 when work queued on `stream` has not finished yet. */
    int (*stream_pending)(int dev, void *stream, int *pending);
    /* The engine stream `stream_id` is gone: its CUDA streams return to
     * the pool (work still queued on them runs to completion). */
    void (*stream_retire)(uint64_t stream_id);
    /* fft and linalg (src/cuda/fft.cu, src/cuda/linalg.cu): queued, except
     * the linalg ops that report value failures (see em_cuda_linalg). */
    int (*fft)(int dev, const em_cuda_fft *job);
    int (*linalg)(int dev, em_cuda_linalg *job);
    /* conv / window family (round 3) */
    /* random_erf_inv: out[i] = erfinv(in[i]) by random.c's formula (in
     * double), n contiguous elements of a real float dtype. */
    int (*erf_inv)(int dev, int dtype, const void *in, void *out, int64_t n);
    int (*window_reduce)(int dev, const em_cuda_window *job);
    int (*window_scatter)(int dev, const em_cuda_window_scatter *job);
    int (*im2col)(int dev, const em_cuda_im2col *job);
    /* fusion (fusion.cu): queue a fused kernel, compiling it first (NVRTC)
     * when its source is new for this device; fused_compiles: how many
     * sources were compiled so far, all devices. */
    int (*fused)(int dev, const em_cuda_fused *job);
    int64_t (*fused_compiles)(void);
    /* Transformer kernels (version 7). Emily.Fast norms, softmax and RoPE
     * (fast.cu) */
    int (*fast_rows)(int dev, const em_cuda_fast_rows *job);
    int (*fast_rope)(int dev, const em_cuda_fast_rope *job);
    /* scaled dot-product attention (attention.cu) */
    int (*sdpa)(int dev, const em_cuda_sdpa *job);
    /* affine quantization (quant.cu) */
    int (*affine)(int dev, const em_cuda_affine *job);
    /* ggml block formats (ggml.cu) */
    int (*ggml_dequantize)(int dev, const em_cuda_ggml *job);
    int (*ggml_matmul)(int dev, const em_cuda_ggml *job);
    /* CUDA graphs of replayed programs (graph.cu). graph_begin starts a
     * capture (cudaStreamCaptureModeThreadLocal) of this thread's current
     * stream on dev; graph_end ends it: keep 0 discards the recording,
     * otherwise it is instantiated into *exec (*nodes: its node count). A
     * capture invalidated by an operation that cannot be captured fails in
     * graph_end with the reason; the stream is no longer capturing after
     * graph_end in every case. graph_launch queues *exec on this thread's
     * current stream; graph_destroy waits for `stream` (where the launches
     * were queued; NULL: no wait) and frees it. */
    int (*graph_begin)(int dev);
    int (*graph_end)(int dev, int keep, void **exec, int64_t *nodes);
    int (*graph_launch)(int dev, void *exec);
    void (*graph_destroy)(int dev, void *exec, void *stream);
    /* ---- distributed: NCCL (nccl.cu) ----
     * libnccl.so.2 is opened on first use: $EMILY_NCCL_LIB, else the
     * loader's search path, else the lib dir of the nvidia-nccl pip
     * package; absent, these fail with EM_ERR_RUNTIME naming the paths
     * tried. nccl_unique_id makes the 128-byte id of a new clique (rank 0
     * does, and sends it to the others); nccl_comm_init joins it as `rank`
     * of `size` on dev (it blocks until every rank has joined);
     * nccl_collective queues one operation on the calling thread's current
     * stream of dev. */
    int (*nccl_unique_id)(unsigned char id[128]);
    int (*nccl_comm_init)(int dev, int size, int rank,
                          const unsigned char id[128], void **comm);
    void (*nccl_comm_destroy)(void *comm);
    int (*nccl_collective)(int dev, const em_cuda_nccl *job);
    /* prefill attention on the tensor cores (attention_prefill.cu): an
     * em_cuda_sdpa job of f16 or bf16 with D == Dv in {32, 64, 96, 128},
     * nsplit 1,
     * rows dense (last stride 1, the others multiples of 8 elements) and
     * q, k, v, out 16-byte aligned; anything else fails with
     * EM_ERR_UNSUPPORTED (gpu_attention.c sends only such jobs). */
    int (*sdpa_prefill)(int dev, const em_cuda_sdpa *job);
    /* ---- decode path (issue 16 item 2, attention_decode.cu) ---- */
    /* em_sdpa for Lq <= EM_CUDA_SDPA_DECODE_MAX_LQ: flash-decoding over
     * grouped heads. Takes f16, bf16, f32; D == Dv in {64, 128, 256}; K and
     * V with unit stride along the head dimension and 16-byte aligned rows
     * (the engine routes anything else to sdpa, and this fails with
     * EM_ERR_UNSUPPORTED naming the reason). Chooses its own key split
     * (job->nsplit is ignored) and combines the chunks itself. */
    int (*sdpa_decode)(int dev, const em_cuda_sdpa *job);
    /* em_fast_linear (decode.cu). */
    int (*fast_linear)(int dev, const em_cuda_linear *job);
    /* em_fast_heads (decode.cu). */
    int (*fast_heads)(int dev, const em_cuda_heads *job);
    /* gpukern (issue 16): convolution through cuDNN (cudnn_conv.cu),
     * loaded with dlopen on first use (EMILY_CUDNN_LIB names the library
     * or its directory). cudnn_conv_plan: *supported = 0 when cuDNN is
     * absent or rejects the case (the caller then uses im2col), else 1 and
     * the workspace the run needs (the plan is cached per shape);
     * nonzero only for real failures. cudnn_conv_run queues the
     * convolution of a supported job; *declined = 1 (and 0 returned, and
     * nothing queued) when cuDNN rejects its parameters at the run after
     * all: the shape is then declined by later plans too, and the caller
     * uses im2col. cudnn_info: 1 when cuDNN is loaded (its version in
     * msg), 0 when not (why, in msg). */
    int (*cudnn_conv_plan)(int dev, const em_cuda_cudnn_conv *job,
                           int *supported, size_t *workspace_bytes);
    int (*cudnn_conv_run)(int dev, const em_cuda_cudnn_conv *job,
                          int *declined);
    int (*cudnn_info)(char *msg, size_t len);
    /* gpukern (issue 16): the parts of a launch's host cost, `iters`
     * launches per part (launch_probe.cu). */
    int (*launch_probe)(int dev, int iters, em_cuda_launch_probe *out);
    /* gpukern (issue 16, version 10): depthwise convolution, direct
     * (conv.cu; em_cuda_depthwise says what it computes). */
    int (*depthwise_conv)(int dev, const em_cuda_depthwise *job);
} em_cuda_api;

/* The one symbol the plugin exports. */
typedef const em_cuda_api *(*em_cuda_get_api_fn)(void);
const em_cuda_api *emily_cuda_get_api(void);

#ifdef __cplusplus
}
#endif

#endif
