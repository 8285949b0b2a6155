/* Convolution (include/emily_conv.h): hand-computed values for every path
 * (BLAS, halves through f32, integer loop), groups and errors. */
#include "emily_conv.h"
#include "emily_device.h"
#include "test.h"

static em_conv_options copts(int ns, int64_t s, int64_t lo, int64_t hi,
                             int64_t id, int64_t kd, int64_t fg, int64_t bg) {
    em_conv_options o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < ns; i++) {
        o.strides[i] = s;
        o.pad_low[i] = lo;
        o.pad_high[i] = hi;
        o.input_dilation[i] = id;
        o.kernel_dilation[i] = kd;
    }
    o.feature_groups = fg;
    o.batch_groups = bg;
    return o;
}

EM_TEST(conv_1d_every_dtype) {
    /* x = [[0 1 2 3], [4 5 6 7]] (1 batch, 2 channels), kernel [[1 -1], [2 0]]:
     * out[j] = x0[j] - x0[j+1] + 2 x1[j] = 7, 9, 11 */
    double xv[8] = {0, 1, 2, 3, 4, 5, 6, 7}, kv[4] = {1, -1, 2, 0};
    int64_t xs[3] = {1, 2, 4}, ks[3] = {1, 2, 2};
    em_dtype dts[] = {EM_F32, EM_F64, EM_F16, EM_BF16, EM_S32,
                      EM_S8,  EM_S64, EM_C64, EM_C128};
    em_conv_options o = copts(1, 1, 0, 0, 1, 1, 1, 1);
    for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
        em_array *x = t_from_f64(xv, xs, 3, dts[t]);
        em_array *k = t_from_f64(kv, ks, 3, dts[t]), *out = NULL;
        CHECK_OK(em_conv(x, k, &o, &out));
        CHECK(em_array_dtype(out) == dts[t]);
        CHECK(em_array_shape(out)[2] == 3);
        double got[3];
        t_read_f64(out, got, 3);
        CHECK_NEAR(got[0], 7, 0);
        CHECK_NEAR(got[1], 9, 0);
        CHECK_NEAR(got[2], 11, 0);
        em_array_release(out);
        em_array_release(k);
        em_array_release(x);
    }
}

EM_TEST(conv_padding_stride_dilations) {
    /* x = [1 2 3], kernel [1 1], input dilation 2 -> [1 0 2 0 3], kernel
     * dilation 2 (taps j and j+2). */
    double xv[3] = {1, 2, 3}, kv[2] = {1, 1};
    int64_t xs[3] = {1, 1, 3}, ks[3] = {1, 1, 2};
    em_array *x = t_from_f64(xv, xs, 3, EM_F32);
    em_array *k = t_from_f64(kv, ks, 3, EM_F32), *out = NULL;
    /* padding (0, 0): p = [1 0 2 0 3], taps (j, j+2), stride 1:
     * 1+2, 0+0, 2+3 */
    em_conv_options o = copts(1, 1, 0, 0, 2, 2, 1, 1);
    CHECK_OK(em_conv(x, k, &o, &out));
    double got[3];
    CHECK(em_array_shape(out)[2] == 3);
    t_read_f64(out, got, 3);
    CHECK_NEAR(got[0], 3, 0);
    CHECK_NEAR(got[1], 0, 0);
    CHECK_NEAR(got[2], 5, 0);
    em_array_release(out);
    /* padding (1, 1), stride 2: p = [0 1 0 2 0 3 0]: p0+p2, p2+p4, p4+p6 */
    o = copts(1, 2, 1, 1, 2, 2, 1, 1);
    CHECK_OK(em_conv(x, k, &o, &out));
    t_read_f64(out, got, 3);
    CHECK_NEAR(got[0], 0, 0);
    CHECK_NEAR(got[1], 0, 0);
    CHECK_NEAR(got[2], 0, 0);
    em_array_release(out);
    /* negative padding crops: (-1, 0) on [1 2 3], kernel [1 1]: 2+3 */
    o = copts(1, 1, -1, 0, 1, 1, 1, 1);
    CHECK_OK(em_conv(x, k, &o, &out));
    CHECK(em_array_shape(out)[2] == 1);
    t_read_f64(out, got, 1);
    CHECK_NEAR(got[0], 5, 0);
    em_array_release(out);
    em_array_release(k);
    em_array_release(x);
}

EM_TEST(conv_groups) {
    /* 2 channels [1 2] and [3 4] (length 2), depthwise (2 groups) kernel
     * [[[10]], [[100]]]: out channel 0 = 10*[1 2], channel 1 = 100*[3 4] */
    double xv[4] = {1, 2, 3, 4}, kv[2] = {10, 100};
    int64_t xs[3] = {1, 2, 2}, ks[3] = {2, 1, 1};
    em_array *x = t_from_f64(xv, xs, 3, EM_F64);
    em_array *k = t_from_f64(kv, ks, 3, EM_F64), *out = NULL;
    em_conv_options o = copts(1, 1, 0, 0, 1, 1, 2, 1);
    CHECK_OK(em_conv(x, k, &o, &out));
    double got[4];
    t_read_f64(out, got, 4);
    CHECK_NEAR(got[0], 10, 0);
    CHECK_NEAR(got[1], 20, 0);
    CHECK_NEAR(got[2], 300, 0);
    CHECK_NEAR(got[3], 400, 0);
    em_array_release(out);
    em_array_release(k);
    em_array_release(x);
    /* batch groups: batch of 2 one-channel signals [1 2], [3 4]; 2 groups,
     * kernel {2, 1, 1} = [10, 100]: out {1, 2, 2} = [10 20], [300 400] */
    int64_t xs2[3] = {2, 1, 2};
    x = t_from_f64(xv, xs2, 3, EM_F32);
    k = t_from_f64(kv, ks, 3, EM_F32);
    o = copts(1, 1, 0, 0, 1, 1, 1, 2);
    CHECK_OK(em_conv(x, k, &o, &out));
    CHECK(em_array_shape(out)[0] == 1 && em_array_shape(out)[1] == 2);
    t_read_f64(out, got, 4);
    CHECK_NEAR(got[0], 10, 0);
    CHECK_NEAR(got[3], 400, 0);
    em_array_release(out);
    em_array_release(k);
    em_array_release(x);
}

EM_TEST(conv_errors) {
    double v[8] = {0};
    int64_t xs[3] = {1, 2, 4}, ks[3] = {1, 3, 2}, ks2[3] = {1, 2, 2};
    em_array *x = t_from_f64(v, xs, 3, EM_F32),
             *k = t_from_f64(v, ks, 3, EM_F32);
    em_array *k64 = t_from_f64(v, ks2, 3, EM_F64), *out = NULL;
    em_conv_options o = copts(1, 1, 0, 0, 1, 1, 1, 1);
    CHECK_ERR(em_conv(x, k, &o, &out), EM_ERR_ARGUMENT, "conv");
    CHECK_ERR(em_conv(x, k64, &o, &out), EM_ERR_ARGUMENT, "dtype");
    o = copts(1, 1, 0, 0, 1, 1, 2, 2);
    CHECK_ERR(em_conv(x, k, &o, &out), EM_ERR_ARGUMENT, "at most one");
    o = copts(1, 1, -9, 0, 1, 1, 1, 1);
    CHECK_ERR(em_conv(x, k64, &o, &out), EM_ERR_ARGUMENT, "conv");
    CHECK(out == NULL);
    em_array_release(k64);
    em_array_release(k);
    em_array_release(x);
}

/* The GPU path switch and counters (gpu_conv.c): an unknown path is
 * rejected and leaves the current one; the stats always say whether cuDNN
 * is there and why not (on a machine without a GPU: no CUDA backend). */
EM_TEST(conv_gpu_path_and_stats) {
    CHECK_ERR(em_gpu_conv_set_path((em_gpu_conv_path)7), EM_ERR_ARGUMENT,
              "gpu_conv_set_path");
    CHECK_ERR(em_gpu_conv_stats_get(NULL), EM_ERR_ARGUMENT, "gpu_conv_stats");
    CHECK_OK(em_gpu_conv_set_path(EM_GPU_CONV_IM2COL));
    CHECK_OK(em_gpu_conv_set_path(EM_GPU_CONV_CUDNN));
    CHECK_OK(em_gpu_conv_set_path(EM_GPU_CONV_AUTO));
    em_gpu_conv_stats s;
    memset(&s, 0xff, sizeof s);
    CHECK_OK(em_gpu_conv_stats_get(&s));
    CHECK(s.cudnn_runs >= 0 && s.im2col_runs >= 0 && s.gemm_1x1_runs >= 0 &&
          s.depthwise_runs >= 0);
    CHECK(s.cudnn_available == 0 || s.cudnn_available == 1);
    CHECK(s.cudnn_status[0] != '\0');
    CHECK(memchr(s.cudnn_status, '\0', sizeof s.cudnn_status) != NULL);
    if (!em_device_available(EM_DEVICE_GPU(0), NULL)) {
        CHECK(s.cudnn_available == 0);
        CHECK(s.cudnn_runs == 0 && s.im2col_runs == 0 && s.gemm_1x1_runs == 0 &&
              s.depthwise_runs == 0);
    }
}
