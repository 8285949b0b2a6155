/*
 * emily_conv.h — N-d convolution (part of libemily; include after or
 * instead of emily.h). The engine primitive behind Nx.conv.
 *
 * Layout: input (N, C, d_1 .. d_s), kernel (O, C / feature_groups,
 * k_1 .. k_s), output (N / batch_groups, O, o_1 .. o_s), s = ndim - 2 >= 0
 * spatial axes (rank up to EM_MAX_NDIM). Input and kernel share one dtype,
 * which the output keeps. The operation is a cross-correlation (the kernel
 * is neither flipped nor conjugated):
 *
 *   out[n, o, x] = sum_{c, k} in'[n', g*Cg + c, x*stride + k*kdil] *
 *                                 kernel[o, c, k]
 *
 * where in' is the input dilated (input_dilation - 1 zeros between
 * elements) and padded with pad_low/pad_high zeros per spatial axis
 * (negative values crop). Per spatial axis the dilated, padded length is
 * P = (d - 1) * idil + 1 + low + high (d > 0; low + high when d == 0), the
 * dilated kernel K = (k - 1) * kdil + 1 and the output length
 * (P - K) / stride + 1 when P >= K, else 0.
 *
 * Groups (at most one of the two is > 1):
 *   feature_groups F: C and O are split into F equal groups; output
 *     channel o reads input channels of group g = o / (O / F).
 *   batch_groups B: N and O are split into B equal groups; output
 *     channel o of output batch n reads input batch n + g * (N / B) with
 *     g = o / (O / B) (kernel channels equal C).
 *
 * Every dtype but pred. f32/f64/c64/c128 run as im2col + one BLAS GEMM
 * per (batch, group) (OpenBLAS threads the GEMM; the im2col is split over
 * the thread pool); f16/bf16 go through f32 and round once; integer types
 * use a wrapping cache-blocked loop.
 */
#ifndef EMILY_CONV_H
#define EMILY_CONV_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_conv_options {
    int64_t strides[EM_MAX_NDIM]; /* per spatial axis; 0 means 1 */
    int64_t pad_low[EM_MAX_NDIM]; /* per spatial axis */
    int64_t pad_high[EM_MAX_NDIM];
    int64_t input_dilation[EM_MAX_NDIM];  /* 0 means 1 */
    int64_t kernel_dilation[EM_MAX_NDIM]; /* 0 means 1 */
    int64_t feature_groups;               /* 0 means 1 */
    int64_t batch_groups;                 /* 0 means 1 */
} em_conv_options;

em_status em_conv(em_array *input, em_array *kernel,
                  const em_conv_options *opts, em_array **out);

/* ---- GPU convolution paths ------------------------------------------------
 *
 * On a GPU, in this order (the first that applies runs):
 *   1. 1x1 convolutions (1x1 kernel, unit strides, no padding or input
 *      dilation, one group): one GEMM over the batches, the input read in
 *      place when its positions are evenly spaced (row-major or
 *      channels-last), else gathered first; every dtype.
 *   2. depthwise convolutions (feature groups = input channels, no input
 *      dilation or batch groups): a direct kernel; every dtype.
 *   3. cuDNN, when libcudnn.so.9 can be loaded (EMILY_CUDNN_LIB names the
 *      library or its directory; EMILY_CUDNN=0 turns it off): f32/f16/bf16
 *      without input dilation or batch groups, up to 3 spatial axes
 *      (padding it cannot express, asymmetric or negative, is applied to a
 *      copy of the input first). The algorithm is the heuristic's first
 *      (EMILY_CUDNN_AUTOTUNE=1: the fastest of its first candidates, timed
 *      once per shape; slower on the H200's bf16 3x3 cases).
 *   4. im2col + GEMM: everything else; every dtype. */
typedef enum em_gpu_conv_path {
    EM_GPU_CONV_AUTO = 0,   /* the order above */
    EM_GPU_CONV_IM2COL = 1, /* always im2col (tests and benchmarks) */
    EM_GPU_CONV_CUDNN = 2,  /* cuDNN where it applies, else im2col: no
                               1x1 or depthwise paths (benchmarks) */
} em_gpu_conv_path;

/* Choose the path of GPU convolutions evaluated from now on (all threads). */
em_status em_gpu_conv_set_path(em_gpu_conv_path path);

typedef struct em_gpu_conv_stats {
    int64_t cudnn_runs;     /* GPU convolutions cuDNN ran, since start */
    int64_t im2col_runs;    /* and those im2col + GEMM ran */
    int64_t gemm_1x1_runs;  /* 1x1 convolutions run as one GEMM */
    int64_t depthwise_runs; /* depthwise ones the direct kernel ran */
    int cudnn_available;    /* 1 when libcudnn was loaded */
    char cudnn_status[512]; /* its version, or why it is not available */
} em_gpu_conv_stats;

/* Counters of the paths GPU convolutions took, and whether cuDNN loads
 * (this loads the CUDA backend and tries cuDNN on GPU 0 if not done yet;
 * cudnn_available is 0, with the reason, when there is no GPU). */
em_status em_gpu_conv_stats_get(em_gpu_conv_stats *out);

#ifdef __cplusplus
}
#endif

#endif
