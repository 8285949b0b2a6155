/*
 * quant_bench.c — 4-bit affine quantized_matmul at M = 1 (decoding) on the
 * CPU, against the machine's memory-copy rate measured in the same run and
 * against the dense f32 matrix-vector product of the same weights.
 *
 *   build/quant_bench            (make build/quant_bench)
 *
 * Rows: case, shape (N x K, w as [out, in]), median time, GB/s of the
 * weights read (packed words + scales + biases for the quantized op, the
 * f32 matrix for the dense one), and that rate as a share of the copy
 * rate. The copy rate is STREAM's "copy" (bytes read + bytes written per
 * second) of a 256 MiB buffer split over the engine's threads. Every case
 * cycles through enough copies of its weights to exceed 256 MiB, so the
 * weights come from memory, not the last-level cache.
 *
 * Environment: BENCH_REPS = timed runs per case (default 30);
 * BENCH_IN_CACHE=1 uses one copy of the weights (cache-resident where they
 * fit: the kernels' compute rate rather than memory's).
 */
#include "emily.h"
#include "emily_quant.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(em_status st, const char *what) {
    if (st != EM_OK) {
        fprintf(stderr, "quant_bench: %s: %s\n", what, em_last_error());
        exit(1);
    }
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct copy_part {
    char *dst;
    const char *src;
    size_t n;
} copy_part;

static void *copy_thread(void *p) {
    copy_part *c = p;
    memcpy(c->dst, c->src, c->n);
    return NULL;
}

/* STREAM-style copy rate (read + write bytes / s), median of reps. */
static double copy_rate(int threads, int reps) {
    const size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        exit(1);
    memset(a, 1, n);
    memset(b, 2, n);
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        pthread_t th[64];
        copy_part parts[64];
        double t0 = now_s();
        for (int i = 0; i < threads; i++) {
            parts[i] = (copy_part){b + n / threads * i, a + n / threads * i,
                                   n / threads};
            pthread_create(&th[i], NULL, copy_thread, &parts[i]);
        }
        for (int i = 0; i < threads; i++)
            pthread_join(th[i], NULL);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double rate = 2.0 * (double)n / t[reps / 2];
    free(a), free(b), free(t);
    return rate;
}

static em_array *random_f32(int64_t rows, int64_t cols, unsigned seed) {
    float *v = malloc(sizeof(float) * (size_t)(rows * cols));
    srand(seed);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    const int64_t shape[] = {rows, cols};
    em_array *a;
    check(em_from_data(v, sizeof(float) * (size_t)(rows * cols), shape, 2,
                       EM_F32, &a),
          "from_data");
    free(v);
    return a;
}

/* Median seconds of `reps` runs of x @ w^T over the weight copies. */
static double time_case(bool quant, em_array *x, em_array **w, em_array **s,
                        em_array **b, int copies, int reps) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = -2; r < reps; r++) {
        const int c = (r + 2) % copies;
        em_array *out = NULL, *wt = NULL;
        double t0 = now_s();
        if (quant) {
            check(em_quantized_matmul(x, w[c], s[c], b[c], true, 64, 4, &out),
                  "quantized_matmul");
        } else {
            const int perm[] = {1, 0};
            check(em_transpose(w[c], perm, 2, &wt), "transpose");
            check(em_matmul(x, wt, &out), "matmul");
        }
        check(em_eval(&out, 1), "eval");
        double dt = now_s() - t0;
        if (r >= 0)
            t[r] = dt;
        em_array_release(out);
        em_array_release(wt);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double med = t[reps / 2];
    free(t);
    return med;
}

int main(void) {
    const char *env = getenv("BENCH_REPS");
    const int reps = env ? atoi(env) : 30;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    threads = threads < 1 ? 1 : (threads > 64 ? 64 : threads);
    const double copy = copy_rate(threads, 7);
    printf("copy rate (STREAM copy, %d threads): %.2f GB/s\n\n", threads,
           copy / 1e9);
    printf("%-22s %-12s %10s %9s %8s\n", "case", "N x K", "median_ms", "GB/s",
           "of_copy");
    const int64_t shapes[][2] = {{4096, 4096}, {1024, 3072}};
    for (int si = 0; si < 2; si++) {
        const int64_t N = shapes[si][0], K = shapes[si][1];
        const double dense_bytes = 4.0 * (double)(N * K);
        const double q_bytes = (double)(N * K) / 2 + 2 * 4.0 * (double)(N * K / 64);
        int copies = (int)((256 << 20) / (int64_t)q_bytes) + 1;
        int dcopies = (int)((256 << 20) / (int64_t)dense_bytes) + 1;
        if (getenv("BENCH_IN_CACHE")) /* the kernels' compute rate */
            copies = dcopies = 1;
        em_array *x = random_f32(1, K, 7);
        em_array **w = calloc((size_t)copies, sizeof *w);
        em_array **s = calloc((size_t)copies, sizeof *s);
        em_array **b = calloc((size_t)copies, sizeof *b);
        em_array **dw = calloc((size_t)dcopies, sizeof *dw);
        for (int c = 0; c < copies; c++) {
            em_array *f = random_f32(N, K, (unsigned)c + 1);
            check(em_quantize(f, 64, 4, &w[c], &s[c], &b[c]), "quantize");
            em_array *outs[3] = {w[c], s[c], b[c]};
            check(em_eval(outs, 3), "eval");
            em_array_release(f);
        }
        for (int c = 0; c < dcopies; c++) {
            dw[c] = random_f32(N, K, (unsigned)c + 100);
            check(em_eval(&dw[c], 1), "eval");
        }
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)N, (long long)K);
        double tq = time_case(true, x, w, s, b, copies, reps);
        double td = time_case(false, x, dw, NULL, NULL, dcopies, reps);
        printf("%-22s %-12s %10.3f %9.2f %7.0f%%\n", "q4 g64 matvec (M=1)",
               shape, tq * 1e3, q_bytes / tq / 1e9, 100 * q_bytes / tq / copy);
        printf("%-22s %-12s %10.3f %9.2f %7.0f%%\n", "f32 dense matvec", shape,
               td * 1e3, dense_bytes / td / 1e9,
               100 * dense_bytes / td / copy);
        printf("%-22s %-12s %9.2fx faster than dense f32\n", "", "", td / tq);
        for (int c = 0; c < copies; c++)
            em_array_release(w[c]), em_array_release(s[c]), em_array_release(b[c]);
        for (int c = 0; c < dcopies; c++)
            em_array_release(dw[c]);
        free(w), free(s), free(b), free(dw);
        em_array_release(x);
    }
    return 0;
}
