/*
 * cuda_conv_bench.c — Emily's GPU conv (im2col + cuBLAS GEMM) timed from C
 * with CUDA events, 3 warm-ups, median of 10, random data in [-1, 1).
 *
 *   make cuda build/cuda_conv_bench && python3 bench/cuda_conv_torch.py
 *
 * Prints "RESULT <name> <median ms> <TFLOP/s> TFLOP/s" per case (read by
 * bench/cuda_conv_torch.py, which times torch.nn.functional.conv2d on the
 * same shapes in the same run). Each timed iteration builds the conv node,
 * evaluates it (im2col into a scratch buffer, then the GEMM) and releases
 * the result. FLOPs: 2 * N * O * (C / groups) * kh * kw * H_out * W_out.
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

int main(void) {
    const char *reason;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason);
        return 0;
    }
    /* (N, C -> O, H x W, kh x kw, pad, groups) */
    struct {
        const char *name;
        int64_t n, c, o, h, k, pad, groups;
    } cases[] = {
        {"conv2d_8x64x56x56_k3", 8, 64, 64, 56, 3, 1, 1},
        {"conv2d_32x128x28x28_k3", 32, 128, 128, 28, 3, 1, 1},
        {"conv2d_8x64x56x56_k3_dw", 8, 64, 64, 56, 3, 1, 64},
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
            double t = time_conv(x, w, &o);
            int64_t hout = cases[ci].h + 2 * cases[ci].pad - cases[ci].k + 1;
            double flops = 2.0 * cases[ci].n * cases[ci].o *
                           (double)(cases[ci].c / cases[ci].groups) *
                           cases[ci].k * cases[ci].k * hout * hout;
            printf("RESULT %s_%s %.4f %.2f TFLOP/s\n", cases[ci].name,
                   em_dtype_name(dtypes[di]), t, flops / (t * 1e-3) / 1e12);
            fflush(stdout);
            em_array_release(x);
            em_array_release(w);
        }
    return 0;
}
