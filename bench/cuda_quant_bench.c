/*
 * cuda_quant_bench.c — the quantized matrix-vector products on the GPU
 * (ggml blocks: em_ggml_matmul; Emily's affine format:
 * em_quantized_matmul with transposed weights) against the GPU's memory
 * copy rate measured in the same run.
 *
 *   make cuda build/cuda_quant_bench && build/cuda_quant_bench
 *
 * Each case prints "RESULT <name> <ms> <GB/s> GB/s <fraction of copy>":
 *   - "single": the median of one build + eval (CUDA events, 3 warm-ups,
 *     median of 10), launch overhead included, weights warm in L2 when
 *     they fit (50 MB on an H200);
 *   - "stream": `copies` weight matrices of the shape in distinct memory
 *     (192 MB together, or 1024 of them: more than the L2 holds, so they
 *     come from HBM as in a model's decode step), one product each, in one
 *     program replayed as a CUDA graph (results concatenated into one
 *     output); the time per product. This is the kernels' own rate: no
 *     host launch overhead between them.
 * Bytes: the weights (blocks, or packed codes + scales + biases) + x + out.
 * Copy: a negation of a 1 GiB f32 array (read + write), the elementwise
 * kernels' rate, and the goal's denominator (>= 85% on the large shapes).
 */
#include "cuda_bench_common.h"
#include "emily.h"
#include "emily_compile.h"
#include "emily_device.h"
#include "emily_ggml.h"
#include "emily_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_BYTES ((double)(192 << 20))
#define MAX_COPIES 1024

static double copy_rate; /* GB/s */

static double gbs(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

static void result(const char *name, double ms, double bytes) {
    const double rate = gbs(bytes, ms);
    printf("RESULT %-44s %9.4f %8.1f GB/s %5.2f of copy\n", name, ms, rate,
           copy_rate > 0 ? rate / copy_rate : 0.0);
    fflush(stdout);
}

static em_status op_negate(em_array *const *in, em_array **out) {
    return em_unary(EM_UNARY_negate, in[0], out);
}

static void measure_copy(void) {
    const int64_t n = (int64_t)1 << 28, shape[1] = {n};
    em_array *a = random_gpu(shape, 1, EM_F32);
    const double ms = time_op(op_negate, &a);
    copy_rate = gbs(2.0 * 4 * n, ms);
    printf("RESULT %-44s %9.4f %8.1f GB/s\n", "copy_negate_f32_1GiB", ms, copy_rate);
    em_array_release(a);
}

/* A case: `copies` weight matrices (n, k) in distinct memory (row slices
 * of one big array: 8 random sets repeated), x (m, k) bf16. */
typedef struct qcase {
    int ggml_type; /* ggml type, or -1: affine */
    int bits, group;
    int64_t m, n, k;
    int copies;
    em_array *big[3];            /* ggml: raw; affine: codes, scales, biases */
    em_array *w[MAX_COPIES][3];  /* the slices */
    em_array *x;
} qcase;

static em_status product(const qcase *c, em_array *x, int i, em_array **out) {
    if (c->ggml_type >= 0)
        return em_ggml_matmul(x, c->w[i][0], c->ggml_type, c->k, out);
    return em_quantized_matmul(x, c->w[i][0], c->w[i][1], c->w[i][2], true, c->group,
                               c->bits, out);
}

/* Random blocks (n, k) of `type` with finite half-float scales (the top
 * exponent bit of every byte pair cleared: values below 2). */
static em_array *random_blocks(int type, int64_t n, int64_t k) {
    int64_t be, bb;
    check(em_ggml_type_info(type, &be, &bb), "type_info");
    const int64_t row = k / be * bb, total = n * row;
    uint8_t *bytes = malloc((size_t)total);
    if (!bytes)
        die("out of host memory");
    for (int64_t i = 0; i < total; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        bytes[i] = (uint8_t)(rng >> 32);
    }
    for (int64_t i = 1; i < total; i += 2)
        bytes[i] &= 0x3b;
    const int64_t rs[2] = {n, row};
    em_array *host, *gpu;
    check(em_from_data(bytes, (size_t)total, rs, 2, EM_U8, &host), "from_data");
    free(bytes);
    check(em_to_device(host, GPU, &gpu), "to_device");
    check(em_eval(&gpu, 1), "eval");
    em_array_release(host);
    return gpu;
}

static double weight_bytes(const qcase *c) {
    if (c->ggml_type >= 0) {
        int64_t be, bb;
        check(em_ggml_type_info(c->ggml_type, &be, &bb), "type_info");
        return (double)c->n * (c->k / be * bb);
    }
    return (double)c->n * c->k * c->bits / 8 + 2.0 * c->n * (c->k / c->group) * 2;
}

static void make_weights(qcase *c) {
    const int parts = c->ggml_type >= 0 ? 1 : 3;
    const int sets = c->copies < 8 ? c->copies : 8;
    em_array *base[8][3] = {{0}};
    for (int s = 0; s < sets; s++) {
        if (c->ggml_type >= 0) {
            base[s][0] = random_blocks(c->ggml_type, c->n, c->k);
        } else {
            const int64_t ws[2] = {c->n, c->k};
            em_array *w = random_gpu(ws, 2, EM_BF16);
            check(em_quantize(w, c->group, c->bits, &base[s][0], &base[s][1], &base[s][2]),
                  "quantize");
            check(em_eval(base[s], 3), "eval");
            em_array_release(w);
        }
    }
    em_array **list = malloc((size_t)c->copies * sizeof *list);
    if (!list)
        die("out of host memory");
    for (int j = 0; j < parts; j++) {
        for (int i = 0; i < c->copies; i++)
            list[i] = base[i % sets][j];
        check(em_concatenate(list, (size_t)c->copies, 0, &c->big[j]), "concatenate");
        check(em_eval(&c->big[j], 1), "eval");
        const int64_t cols = em_array_shape(c->big[j])[1];
        for (int i = 0; i < c->copies; i++) {
            const int64_t start[2] = {i * c->n, 0}, stop[2] = {(i + 1) * c->n, cols},
                          step[2] = {1, 1};
            check(em_slice(c->big[j], start, stop, step, &c->w[i][j]), "slice");
            check(em_eval(&c->w[i][j], 1), "eval");
        }
    }
    free(list);
    for (int s = 0; s < sets; s++)
        for (int j = 0; j < 3; j++)
            em_array_release(base[s][j]);
}

static const qcase *current;
static em_status op_single(em_array *const *in, em_array **out) {
    (void)in;
    return product(current, current->x, 0, out);
}

/* The stream figure: one program (x a placeholder, the weights constants)
 * computing every copy's product, their results concatenated into one
 * output, replayed as a CUDA graph; milliseconds per product. */
static double stream_ms(const qcase *c) {
    const int64_t xs[2] = {c->m, c->k};
    em_array *ph = NULL, *out = NULL, *y = NULL;
    /* Placeholders live on the default device: the GPU, like the weights. */
    em_device old = em_set_default_device(GPU);
    check(em_placeholder(EM_BF16, xs, 2, &ph), "placeholder");
    em_array **prods = malloc((size_t)c->copies * sizeof *prods);
    if (!prods)
        die("out of host memory");
    for (int i = 0; i < c->copies; i++)
        check(product(c, ph, i, &prods[i]), "build");
    check(em_concatenate(prods, (size_t)c->copies, 1, &out), "concatenate");
    em_set_default_device(old);
    for (int i = 0; i < c->copies; i++)
        em_array_release(prods[i]);
    free(prods);
    em_program_options o = {.cuda_graph = true};
    em_program *p = NULL;
    check(em_program_new(&ph, 1, &out, 1, &o, &p), "program_new");
    em_array_release(out);
    em_array_release(ph);
    double ms[8];
    for (int it = 0; it < 3 + 5; it++) {
        em_device_event *e0, *e1;
        check(em_device_event_record(GPU, &e0), "event");
        check(em_program_run(p, &c->x, 1, &y), "program_run");
        check(em_eval(&y, 1), "eval");
        check(em_device_event_record(GPU, &e1), "event");
        check(em_device_event_elapsed(e0, e1, &ms[it]), "elapsed");
        em_array_release(y);
        em_device_event_release(e0);
        em_device_event_release(e1);
    }
    em_program_stats st;
    em_program_get_stats(p, &st);
    if (st.cuda_graph != EM_CUDA_GRAPH_CAPTURED)
        printf("# not replayed as a CUDA graph (state %d): %s\n", st.cuda_graph,
               st.cuda_graph_reason);
    em_program_release(p);
    qsort(ms + 3, 5, sizeof ms[0], cmp_double);
    return ms[5] / c->copies;
}

static void run_case(const char *label, int ggml_type, int bits, int group,
                     int64_t m, int64_t n, int64_t k) {
    qcase *c = calloc(1, sizeof *c);
    if (!c)
        die("out of host memory");
    c->ggml_type = ggml_type;
    c->bits = bits;
    c->group = group;
    c->m = m;
    c->n = n;
    c->k = k;
    const int64_t xs[2] = {m, k};
    c->x = random_gpu(xs, 2, EM_BF16);
    const double wb = weight_bytes(c);
    c->copies = (int)(STREAM_BYTES / wb) + 1;
    if (c->copies > MAX_COPIES)
        c->copies = MAX_COPIES;
    make_weights(c);
    const double io = (double)m * k * 2 + (double)m * n * 2;
    current = c;
    char name[96];
    snprintf(name, sizeof name, "%s_m%lld_%lldx%lld_single", label, (long long)m,
             (long long)n, (long long)k);
    result(name, time_op(op_single, NULL), wb + io);
    snprintf(name, sizeof name, "%s_m%lld_%lldx%lld_stream%d", label, (long long)m,
             (long long)n, (long long)k, c->copies);
    result(name, stream_ms(c), wb + io);
    for (int i = 0; i < c->copies; i++)
        for (int j = 0; j < 3; j++)
            em_array_release(c->w[i][j]);
    for (int j = 0; j < 3; j++)
        em_array_release(c->big[j]);
    em_array_release(c->x);
    free(c);
}

int main(void) {
    const char *reason = NULL;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason ? reason : "no GPU");
        return 0;
    }
    measure_copy();
    /* The large shapes of the goal (x bf16, m = 1, then 4 and 16). */
    static const int64_t large[][2] = {{4096, 4096}, {151936, 1024}};
    for (int s = 0; s < 2; s++) {
        const int64_t n = large[s][0], k = large[s][1];
        run_case("affine_q4_g64", -1, 4, 64, 1, n, k);
        run_case("affine_q8_g64", -1, 8, 64, 1, n, k);
        run_case("ggml_q4_0", EM_GGML_Q4_0, 0, 0, 1, n, k);
        run_case("ggml_q4_1", EM_GGML_Q4_1, 0, 0, 1, n, k);
        run_case("ggml_q8_0", EM_GGML_Q8_0, 0, 0, 1, n, k);
        run_case("ggml_q4_k", EM_GGML_Q4_K, 0, 0, 1, n, k);
        run_case("ggml_q6_k", EM_GGML_Q6_K, 0, 0, 1, n, k);
    }
    run_case("ggml_q5_0", EM_GGML_Q5_0, 0, 0, 1, 4096, 4096);
    run_case("ggml_q5_1", EM_GGML_Q5_1, 0, 0, 1, 4096, 4096);
    run_case("ggml_q5_k", EM_GGML_Q5_K, 0, 0, 1, 4096, 4096);
    run_case("affine_q4_g64", -1, 4, 64, 4, 4096, 4096);
    run_case("affine_q4_g64", -1, 4, 64, 16, 4096, 4096);
    run_case("ggml_q4_1", EM_GGML_Q4_1, 0, 0, 4, 4096, 4096);
    run_case("ggml_q4_1", EM_GGML_Q4_1, 0, 0, 16, 4096, 4096);
    /* SmolLM2-135M's layers (hidden 576, 9 query / 3 KV heads of 64, MLP
     * 1536, vocab 49152): its Q4_1 file holds every projection in q4_1
     * (q/o, k/v, gate/up, down) and the tied head (the embedding table)
     * in q8_0; the affine format on the same shapes for comparison. */
    static const int64_t smol[][2] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}};
    for (int s = 0; s < 4; s++) {
        run_case("smollm2_q4_1", EM_GGML_Q4_1, 0, 0, 1, smol[s][0], smol[s][1]);
        run_case("smollm2_affine_q4_g64", -1, 4, 64, 1, smol[s][0], smol[s][1]);
    }
    run_case("smollm2_head_q8_0", EM_GGML_Q8_0, 0, 0, 1, 49152, 576);
    return 0;
}
