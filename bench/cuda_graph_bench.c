/*
 * cuda_graph_bench.c — one decode step of a Qwen3-0.6B-shaped decoder
 * (28 pre-norm layers, d_model 1024, 16 heads of 64, SiLU MLP of 3072, bf16
 * weights; one token, attention over itself: no KV cache) written from
 * primitives and run as one engine program, replayed:
 *
 *   program      the ordinary replay (one launch per node)
 *   fused        fuse = true
 *   fused+graph  fuse = true, cuda_graph = true (one cudaGraphLaunch)
 *
 *   make cuda build/cuda_graph_bench && build/cuda_graph_bench
 *
 * Host wall clock per step (run + eval + device synchronize), median of
 * 30 after 5 warm-up steps. Prints "RESULT <name> <median ms> <ms> ms"
 * lines and the programs' graph state.
 */
#include "cuda_bench_common.h"
#include "emily_attention.h"
#include "emily_compile.h"
#include "emily_fast.h"

#include <string.h>
#include <time.h>

enum { LAYERS = 28, D = 1024, H = 16, HD = 64, F = 3072, STEPS = 30 };

typedef struct layer_weights {
    em_array *norm1, *wq, *wk, *wv, *wo, *norm2, *w1, *w3, *w2;
} layer_weights;

static layer_weights layers[LAYERS];

static em_array *weight(int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols};
    return random_gpu(shape, cols ? 2 : 1, EM_BF16);
}

static em_array *track(em_array **pool, int *n, em_array *a) {
    pool[(*n)++] = a;
    return a;
}

/* x (1, 1, D) bf16 -> the next hidden state, pending. */
static em_array *decoder(em_array *x) {
    em_array *pool[64 * LAYERS];
    int n = 0;
    int64_t split[4] = {1, 1, H, HD}, joined[3] = {1, 1, D};
    int perm[4] = {0, 2, 1, 3};
    em_array *h = x;
    for (int l = 0; l < LAYERS; l++) {
        layer_weights *w = &layers[l];
        em_array *t, *q, *k, *v, *a;
        check(em_rms_norm(h, w->norm1, 1e-6, &t), "rms_norm");
        track(pool, &n, t);
        em_array *proj[3] = {w->wq, w->wk, w->wv}, **dst[3] = {&q, &k, &v};
        for (int j = 0; j < 3; j++) {
            em_array *m, *r, *tr;
            check(em_matmul(t, proj[j], &m), "matmul");
            check(em_reshape(track(pool, &n, m), split, 4, &r), "reshape");
            check(em_transpose(track(pool, &n, r), perm, 4, &tr), "transpose");
            *dst[j] = track(pool, &n, tr);
        }
        check(em_sdpa(q, k, v, NULL, &a), "sdpa");
        em_array *back, *flat, *o, *res, *t2, *g, *u, *sg, *act, *gu, *down,
            *res2;
        check(em_transpose(track(pool, &n, a), perm, 4, &back), "transpose");
        check(em_reshape(track(pool, &n, back), joined, 3, &flat), "reshape");
        check(em_matmul(track(pool, &n, flat), w->wo, &o), "matmul");
        check(em_binary(EM_BINARY_add, h, track(pool, &n, o), &res), "add");
        track(pool, &n, res);
        check(em_rms_norm(res, w->norm2, 1e-6, &t2), "rms_norm");
        track(pool, &n, t2);
        check(em_matmul(t2, w->w1, &g), "matmul");
        check(em_matmul(t2, w->w3, &u), "matmul");
        track(pool, &n, g);
        track(pool, &n, u);
        check(em_unary(EM_UNARY_sigmoid, g, &sg), "sigmoid");
        check(em_binary(EM_BINARY_multiply, g, track(pool, &n, sg), &act),
              "multiply");
        check(em_binary(EM_BINARY_multiply, track(pool, &n, act), u, &gu),
              "multiply");
        check(em_matmul(track(pool, &n, gu), w->w2, &down), "matmul");
        check(em_binary(EM_BINARY_add, res, track(pool, &n, down), &res2),
              "add");
        h = track(pool, &n, res2);
    }
    em_array_retain(h);
    for (int i = 0; i < n; i++)
        em_array_release(pool[i]);
    return h;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_mode(const char *name, bool fuse, bool graph) {
    int64_t shape[3] = {1, 1, D};
    em_device old = em_set_default_device(GPU);
    em_array *ph, *out;
    check(em_placeholder(EM_BF16, shape, 3, &ph), "placeholder");
    out = decoder(ph);
    em_set_default_device(old);
    em_program_options o = {.fuse = fuse, .cuda_graph = graph};
    em_program *p;
    check(em_program_new(&ph, 1, &out, 1, &o, &p), "program_new");
    em_array_release(out);
    em_array_release(ph);
    em_array *x = random_gpu(shape, 3, EM_BF16);
    double times[STEPS];
    for (int s = -5; s < STEPS; s++) {
        double t0 = now_ms();
        em_array *y;
        check(em_program_run(p, &x, 1, &y), "program_run");
        check(em_eval(&y, 1), "eval");
        check(em_device_synchronize(GPU), "synchronize");
        double t = now_ms() - t0;
        if (s >= 0)
            times[s] = t;
        em_array_release(y);
    }
    qsort(times, STEPS, sizeof times[0], by_value);
    printf("RESULT decoder_step_%s %.4f %.4f ms\n", name, times[STEPS / 2],
           times[STEPS / 2]);
    em_program_stats st;
    em_program_get_stats(p, &st);
    printf("  %s: %zu nodes, %d fused kernels, cuda graph state %d (%lld "
           "graph nodes, %lld replays)%s%s\n",
           name, st.nodes_after, st.fused_kernels, st.cuda_graph,
           (long long)st.cuda_graph_nodes, (long long)st.cuda_graph_replays,
           st.cuda_graph_reason[0] ? ": " : "", st.cuda_graph_reason);
    fflush(stdout);
    em_array_release(x);
    em_program_release(p);
}

int main(void) {
    const char *reason = NULL;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason ? reason : "no GPU");
        return 0;
    }
    for (int l = 0; l < LAYERS; l++) {
        layer_weights *w = &layers[l];
        w->norm1 = weight(D, 0);
        w->norm2 = weight(D, 0);
        w->wq = weight(D, D);
        w->wk = weight(D, D);
        w->wv = weight(D, D);
        w->wo = weight(D, D);
        w->w1 = weight(D, F);
        w->w3 = weight(D, F);
        w->w2 = weight(F, D);
    }
    run_mode("program", false, false);
    run_mode("fused", true, false);
    run_mode("fused+graph", true, true);
    run_mode("graph", false, true);
    return 0;
}
