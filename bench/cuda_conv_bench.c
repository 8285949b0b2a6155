/*
 * cuda_conv_bench.c — Emily's GPU conv timed from C with CUDA events, 3
 * warm-ups, median of 10, random data in [-1, 1); each case three times
 * (em_gpu_conv_set_path): the default order (1x1 GEMM, depthwise kernel,
 * cuDNN when it loads, im2col), cuDNN forced where it applies (the order
 * before the 1x1 and depthwise paths) and im2col + cuBLAS GEMM forced.
 *
 *   make cuda build/cuda_conv_bench && python3 bench/cuda_conv_torch.py
 *
 * Prints "RESULT <name> <median ms> <TFLOP/s> TFLOP/s" per case, the name
 * ending in _cudnn or _im2col for the forced paths, and "PATH <name>
 * gemm_1x1|depthwise|cudnn|im2col" for the path the default took (read by
 * bench/cuda_conv_torch.py, which times torch.nn.functional.conv2d on the
 * same shapes in the same run). Each timed iteration builds the conv node,
 * evaluates it and releases the result. FLOPs: 2 * N * O * (C / groups) *
 * kh * kw * H_out * W_out.
 */
#include "cuda_bench_common.h"
#include "emily.h"
#include "emily_conv.h"
#include "emily_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const em_conv_options *conv_options;

static em_status op_conv(em_array *const *in, em_array **out) {
    return em_conv(in[0], in[1], conv_options, out);
}

static double time_conv(em_array *x, em_array *w, const em_conv_options *o) {
    conv_options = o;
    em_array *in[2] = {x, w};
    return time_op(op_conv, in);
}

/* The path whose counter moved between two stats. */
static const char *path_taken(const em_gpu_conv_stats *a,
                              const em_gpu_conv_stats *b) {
    return b->gemm_1x1_runs > a->gemm_1x1_runs     ? "gemm_1x1"
           : b->depthwise_runs > a->depthwise_runs ? "depthwise"
           : b->cudnn_runs > a->cudnn_runs         ? "cudnn"
                                                   : "im2col";
}

int main(void) {
    const char *reason;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason);
        return 0;
    }
    em_gpu_conv_stats stats;
    if (em_gpu_conv_stats_get(&stats) == EM_OK)
        printf("conv: %s\n", stats.cudnn_status);
    /* (N, C -> O, H x W, kh x kw, pad, groups) */
    struct {
        const char *name;
        int64_t n, c, o, h, k, pad, groups;
    } cases[] = {
        {"conv2d_8x64x56x56_k3", 8, 64, 64, 56, 3, 1, 1},
        {"conv2d_32x128x28x28_k3", 32, 128, 128, 28, 3, 1, 1},
        {"conv2d_8x64x56x56_k3_dw", 8, 64, 64, 56, 3, 1, 64},
        {"conv2d_32x256x14x14_k1", 32, 256, 256, 14, 1, 0, 1},
    };
    em_dtype dtypes[2] = {EM_F32, EM_BF16};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int di = 0; di < 2; di++) {
            int64_t xs[4] = {cases[ci].n, cases[ci].c, cases[ci].h,
                             cases[ci].h};
            int64_t ws[4] = {cases[ci].o, cases[ci].c / cases[ci].groups,
                             cases[ci].k, cases[ci].k};
            em_array *x = random_gpu(xs, 4, dtypes[di]);
            em_array *w = random_gpu(ws, 4, dtypes[di]);
            em_conv_options o;
            memset(&o, 0, sizeof o);
            o.pad_low[0] = o.pad_low[1] = o.pad_high[0] = o.pad_high[1] =
                cases[ci].pad;
            o.feature_groups = cases[ci].groups;
            int64_t hout = cases[ci].h + 2 * cases[ci].pad - cases[ci].k + 1;
            double flops = 2.0 * cases[ci].n * cases[ci].o *
                           (double)(cases[ci].c / cases[ci].groups) *
                           cases[ci].k * cases[ci].k * hout * hout;
            const em_gpu_conv_path paths[3] = {
                EM_GPU_CONV_AUTO, EM_GPU_CONV_CUDNN, EM_GPU_CONV_IM2COL};
            const char *suffix[3] = {"", "_cudnn", "_im2col"};
            for (int pi = 0; pi < 3; pi++) {
                em_gpu_conv_stats before, after;
                em_gpu_conv_set_path(paths[pi]);
                em_gpu_conv_stats_get(&before);
                double t = time_conv(x, w, &o);
                em_gpu_conv_stats_get(&after);
                printf("RESULT %s_%s%s %.4f %.2f TFLOP/s\n", cases[ci].name,
                       em_dtype_name(dtypes[di]), suffix[pi], t,
                       flops / (t * 1e-3) / 1e12);
                if (pi == 0)
                    printf("PATH %s_%s %s\n", cases[ci].name,
                           em_dtype_name(dtypes[di]),
                           path_taken(&before, &after));
                fflush(stdout);
            }
            em_gpu_conv_set_path(EM_GPU_CONV_AUTO);
            em_array_release(x);
            em_array_release(w);
        }
    return 0;
}
