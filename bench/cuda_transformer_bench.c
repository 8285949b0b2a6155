/*
 * cuda_transformer_bench.c — the transformer kernels on the GPU (Emily.Fast
 * norms, softmax and attention; matrix-vector products in bf16 and on
 * quantized weights), timed from C with CUDA events after warm-up.
 *
 *   make cuda build/cuda_transformer_bench
 *   python3 bench/cuda_transformer_torch.py build/cuda_transformer_bench
 *
 * Prints "RESULT <name> <median ms> <figure> <unit>" lines; the Python
 * script runs the same cases in PyTorch in the same run and prints both
 * with their ratio. Bandwidth figures count each input read once and the
 * output written once.
 */
#include "cuda_bench_common.h"
#include "emily.h"
#include "emily_attention.h"
#include "emily_device.h"
#include "emily_fast.h"
#include "emily_ggml.h"
#include "emily_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void result(const char *name, double ms, double figure,
                   const char *unit) {
    printf("RESULT %s %.4f %.2f %s\n", name, ms, figure, unit);
    fflush(stdout);
}

static double gbs(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

static em_status op_rms(em_array *const *in, em_array **out) {
    return em_rms_norm(in[0], in[1], 1e-6, out);
}
static em_status op_layer(em_array *const *in, em_array **out) {
    return em_layer_norm(in[0], in[1], in[2], 1e-5, out);
}
static em_status op_softmax(em_array *const *in, em_array **out) {
    return em_softmax(in[0], -1, out);
}
static em_status op_sdpa(em_array *const *in, em_array **out) {
    return em_sdpa(in[0], in[1], in[2], NULL, out);
}
static em_status op_sdpa_causal(em_array *const *in, em_array **out) {
    em_sdpa_options o = {.causal = true};
    return em_sdpa(in[0], in[1], in[2], &o, out);
}
/* x (1, K) @ w^T with w stored (N, K): the layout of checkpoints. */
static em_status op_matvec_t(em_array *const *in, em_array **out) {
    em_array *wt;
    int perm[2] = {1, 0};
    em_status st = em_transpose(in[1], perm, 2, &wt);
    if (st == EM_OK)
        st = em_matmul(in[0], wt, out);
    em_array_release(wt);
    return st;
}

static const char *dtype_name(em_dtype d) {
    return d == EM_BF16 ? "bf16" : d == EM_F16 ? "f16" : "f32";
}

static void norms(em_dtype dt) {
    int64_t rows = 4096, d = 4096;
    int64_t xs[2] = {rows, d}, ws[1] = {d};
    em_array *in[3] = {random_gpu(xs, 2, dt), random_gpu(ws, 1, dt),
                       random_gpu(ws, 1, dt)};
    double bytes = 2.0 * rows * d * em_dtype_size(dt);
    char name[64];
    double t = time_op(op_rms, in);
    snprintf(name, sizeof name, "rms_norm_%s_4096x4096", dtype_name(dt));
    result(name, t, gbs(bytes, t), "GB/s");
    t = time_op(op_layer, in);
    snprintf(name, sizeof name, "layer_norm_%s_4096x4096", dtype_name(dt));
    result(name, t, gbs(bytes, t), "GB/s");
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
    /* Softmax rows of every kernel shape: several rows per block (1024),
     * a row in a block's registers (32768), streamed twice (131072). */
    const int64_t shapes[3][2] = {{4096, 32768}, {32768, 1024}, {256, 131072}};
    for (int k = 0; k < 3; k++) {
        em_array *s = random_gpu(shapes[k], 2, dt);
        t = time_op(op_softmax, &s);
        snprintf(name, sizeof name, "softmax_%s_%lldx%lld", dtype_name(dt),
                 (long long)shapes[k][0], (long long)shapes[k][1]);
        result(name, t,
               gbs(2.0 * shapes[k][0] * shapes[k][1] * em_dtype_size(dt), t),
               "GB/s");
        em_array_release(s);
    }
}

/* Attention: decode (one query over `keys` cached tokens) and prefill
 * (causal, L x L), B=1, 16 query heads over 8 KV heads of 128. */
static void attention(em_dtype dt, int64_t lq, int64_t lk, bool causal) {
    int64_t qs[4] = {1, 16, lq, 128}, ks[4] = {1, 8, lk, 128};
    em_array *in[3] = {random_gpu(qs, 4, dt), random_gpu(ks, 4, dt),
                       random_gpu(ks, 4, dt)};
    double t = time_op(causal ? op_sdpa_causal : op_sdpa, in);
    char name[64];
    size_t es = em_dtype_size(dt);
    if (lq == 1) {
        snprintf(name, sizeof name, "sdpa_decode_%s_kv%lld", dtype_name(dt),
                 (long long)lk);
        result(name, t, gbs((2.0 * 8 * lk * 128 + 2.0 * 16 * 128) * es, t),
               "GB/s");
    } else {
        /* causal: half of the L x L scores are computed */
        double flops = 4.0 * 16 * lq * lk * 128 * (causal ? 0.5 : 1.0);
        snprintf(name, sizeof name, "sdpa_prefill_%s_%lld", dtype_name(dt),
                 (long long)lq);
        result(name, t, flops / (t * 1e-3) / 1e12, "TFLOP/s");
    }
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
}

/* Prefill attention of other shapes (the tensor-core kernel's head dims
 * and batches: MiniLM is 32 x 12 heads of 32 over 128 tokens). Rows named
 * as in cuda_transformer_torch.py's PREFILL_SHAPES. */
static void attention_shape(const char *name, em_dtype dt, int64_t b, int64_t h,
                            int64_t hkv, int64_t l, int64_t d, bool causal) {
    int64_t qs[4] = {b, h, l, d}, ks[4] = {b, hkv, l, d};
    em_array *in[3] = {random_gpu(qs, 4, dt), random_gpu(ks, 4, dt),
                       random_gpu(ks, 4, dt)};
    double t = time_op(causal ? op_sdpa_causal : op_sdpa, in);
    double flops = 4.0 * b * h * l * l * d * (causal ? 0.5 : 1.0);
    result(name, t, flops / (t * 1e-3) / 1e12, "TFLOP/s");
    for (int i = 0; i < 3; i++)
        em_array_release(in[i]);
}

static void matvec(em_dtype dt, int64_t n, int64_t k) {
    int64_t xs[2] = {1, k}, ws[2] = {n, k};
    em_array *in[2] = {random_gpu(xs, 2, dt), random_gpu(ws, 2, dt)};
    double t = time_op(op_matvec_t, in);
    char name[64];
    snprintf(name, sizeof name, "matvec_%s_%lldx%lld", dtype_name(dt),
             (long long)n, (long long)k);
    result(name, t, gbs((double)n * k * em_dtype_size(dt), t), "GB/s");
    em_array_release(in[0]);
    em_array_release(in[1]);
}

static int qbits, qgroup;
static em_status op_qmatvec(em_array *const *in, em_array **out) {
    return em_quantized_matmul(in[0], in[1], in[2], in[3], true, qgroup,
                               qbits, out);
}

/* Affine-quantized matrix-vector product: x (1, K) bf16 @ w^T, w (N, K)
 * quantized on the GPU in groups of `group` with `bits`. Bytes: the packed
 * weights plus the scales and biases. */
static void qmatvec(int bits, int group, int64_t n, int64_t k) {
    int64_t xs[2] = {1, k}, ws[2] = {n, k};
    em_array *w = random_gpu(ws, 2, EM_BF16), *in[4];
    in[0] = random_gpu(xs, 2, EM_BF16);
    check(em_quantize(w, group, bits, &in[1], &in[2], &in[3]), "quantize");
    check(em_eval(&in[1], 3), "eval");
    em_array_release(w);
    qbits = bits;
    qgroup = group;
    double t = time_op(op_qmatvec, in);
    double bytes = (double)n * k * bits / 8 + 2.0 * n * (k / group) * 2;
    char name[64];
    snprintf(name, sizeof name, "qmatvec_q%d_g%d_%lldx%lld", bits, group,
             (long long)n, (long long)k);
    result(name, t, gbs(bytes, t), "GB/s");
    for (int i = 0; i < 4; i++)
        em_array_release(in[i]);
}

static int gtype;
static int64_t gk;
static em_status op_ggml(em_array *const *in, em_array **out) {
    return em_ggml_matmul(in[0], in[1], gtype, gk, out);
}

/* ggml block-format matrix-vector product: random blocks whose f16 scale
 * fields hold small numbers (every block type keeps its d/dmin at the
 * front but q6_k, whose d is last: random bytes there stay finite because
 * the exponent bits are masked). */
static void ggml_matvec(int type, int64_t n, int64_t k) {
    int64_t be, bb;
    check(em_ggml_type_info(type, &be, &bb), "type_info");
    int64_t row = k / be * bb, total = n * row;
    uint8_t *bytes = malloc((size_t)total);
    if (!bytes)
        die("out of host memory");
    for (int64_t i = 0; i < total; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        bytes[i] = (uint8_t)(rng >> 32);
    }
    /* f16 scales: clear the top exponent bit of every byte pair so no
     * scale is Inf or NaN (values stay below 2). */
    for (int64_t i = 1; i < total; i += 2)
        bytes[i] &= 0x3b;
    int64_t rs[2] = {n, row}, xs[2] = {1, k};
    em_array *host, *in[2];
    check(em_from_data(bytes, (size_t)total, rs, 2, EM_U8, &host), "from_data");
    free(bytes);
    check(em_to_device(host, GPU, &in[1]), "to_device");
    check(em_eval(&in[1], 1), "eval");
    em_array_release(host);
    in[0] = random_gpu(xs, 2, EM_BF16);
    gtype = type;
    gk = k;
    double t = time_op(op_ggml, in);
    char name[64];
    snprintf(name, sizeof name, "ggml_%s_%lldx%lld", em_ggml_type_name(type),
             (long long)n, (long long)k);
    result(name, t, gbs((double)total, t), "GB/s");
    em_array_release(in[0]);
    em_array_release(in[1]);
}

int main(void) {
    const char *reason = NULL;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason ? reason : "no GPU");
        return 0;
    }
    norms(EM_F32);
    norms(EM_BF16);
    norms(EM_F16);
    attention(EM_BF16, 1, 4096, false);
    attention(EM_F32, 1, 4096, false);
    attention(EM_BF16, 1, 32768, false);
    attention(EM_BF16, 512, 512, true);
    attention(EM_BF16, 2048, 2048, true);
    attention_shape("sdpa_prefill_bf16_4096", EM_BF16, 1, 16, 8, 4096, 128,
                    true);
    attention_shape("sdpa_prefill_f16_2048", EM_F16, 1, 16, 8, 2048, 128, true);
    attention_shape("sdpa_prefill_bf16_d64_b4_1024", EM_BF16, 4, 16, 16, 1024,
                    64, false);
    attention_shape("sdpa_prefill_bf16_minilm_32x128", EM_BF16, 32, 12, 12, 128,
                    32, false);
    matvec(EM_BF16, 4096, 4096);
    matvec(EM_BF16, 151936, 1024);
    qmatvec(4, 64, 4096, 4096);
    qmatvec(4, 64, 151936, 1024);
    qmatvec(8, 64, 4096, 4096);
    ggml_matvec(EM_GGML_Q4_0, 4096, 4096);
    ggml_matvec(EM_GGML_Q4_1, 4096, 4096);
    ggml_matvec(EM_GGML_Q8_0, 4096, 4096);
    ggml_matvec(EM_GGML_Q4_K, 4096, 4096);
    ggml_matvec(EM_GGML_Q6_K, 4096, 4096);
    return 0;
}
