/*
 * bench_engine.c — libemily against its ceilings, measured in one process.
 *
 *   elementwise  em_binary(add) and em_unary(exp) on 64 MiB f32 inputs,
 *                against memcpy and a vector copy loop on 1 and 2 threads
 *   reduce       em_reduce(sum) over 64 MiB f32
 *   matmul       em_matmul f32 n x n (n = 512, 1024, 2048), against
 *                cblas_sgemm called directly
 *
 * Every timing: one checked run, warm-up runs, then the median of N runs.
 * The competitors of one group run in alternation (round-robin, the order
 * rotating each round) so that the noise of this shared machine falls on
 * all of them alike. An Emily run builds the op graph, evaluates it with
 * em_eval and releases the result inside the timed region; its inputs were
 * evaluated before.
 *
 * Output: one line per measurement,
 *   R <tab> key <tab> work <tab> unit <tab> median_s <tab> min_s <tab> reps
 * where work is bytes (read + written) or FLOPs; bench/run.sh merges these
 * lines with bench_numpy.py's into one table. Lines starting with '#'
 * describe the run.
 *
 * Environment: BENCH_REPS scales the number of timed runs (default 1.0).
 */
#include "emily.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB ((size_t)1 << 20)
#define ELEMENTWISE_BYTES (64 * MIB)
#define WARMUP_RUNS 3
#define MAX_CASES 8

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "bench_engine: %s\n", what);
    exit(1);
}

static void check_em(em_status st, const char *what) {
    if (st != EM_OK) {
        fprintf(stderr, "bench_engine: %s failed (status %d): %s\n", what,
                (int)st, em_last_error());
        exit(1);
    }
}

/* 64-byte aligned, written once so that no page fault lands in a timing. */
static float *alloc_floats(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes);
    if (!p)
        die("out of memory");
    memset(p, 0, bytes);
    return p;
}

/* Deterministic uniform floats in [lo, hi) (xorshift64*). */
static void fill_uniform(float *p, size_t n, float lo, float hi,
                         uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        uint64_t r = s * 0x2545F4914F6CDD1Dull;
        float u = (float)(r >> 40) / (float)(1 << 24);
        p[i] = lo + (hi - lo) * u;
    }
}

static em_array *emily_from(const float *data, const int64_t *shape,
                            int ndim) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    em_array *a = NULL;
    check_em(em_from_data(data, n * sizeof(float), shape, ndim, EM_F32, &a),
             "em_from_data");
    return a;
}

static const float *emily_floats(em_array *a) {
    const void *data;
    size_t nbytes;
    check_em(em_array_data(a, &data, &nbytes), "em_array_data");
    return data;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int scaled_reps(int base) {
    const char *env = getenv("BENCH_REPS");
    double scale = env ? atof(env) : 1.0;
    int reps = (int)(base * (scale > 0 ? scale : 1.0) + 0.5);
    return reps < 3 ? 3 : reps;
}

/* ------------------------------------------------------------------------ */
/* Round-robin timing of one group of competitors                           */
/* ------------------------------------------------------------------------ */

typedef struct bench_case {
    const char *key;  /* "add/emily" */
    double work;      /* bytes or FLOPs per run */
    const char *unit; /* "B" or "FLOP" */
    void (*run)(void *ctx);
    void *ctx;
} bench_case;

static void run_group(bench_case *cases, int ncases, int reps) {
    double *times[MAX_CASES];
    for (int c = 0; c < ncases; c++) {
        times[c] = malloc(sizeof(double) * (size_t)reps);
        if (!times[c])
            die("out of memory");
        for (int w = 0; w < WARMUP_RUNS; w++)
            cases[c].run(cases[c].ctx);
    }
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < ncases; k++) {
            int c = (r + k) % ncases; /* rotate who goes first */
            double t0 = now_s();
            cases[c].run(cases[c].ctx);
            times[c][r] = now_s() - t0;
        }
    }
    for (int c = 0; c < ncases; c++) {
        qsort(times[c], (size_t)reps, sizeof(double), cmp_double);
        double median = reps % 2 ? times[c][reps / 2]
                                 : 0.5 * (times[c][reps / 2 - 1] +
                                          times[c][reps / 2]);
        printf("R\t%s\t%.0f\t%s\t%.9f\t%.9f\t%d\n", cases[c].key,
               cases[c].work, cases[c].unit, median, times[c][0], reps);
        fflush(stdout);
        free(times[c]);
    }
}

/* ------------------------------------------------------------------------ */
/* Copy ceilings                                                             */
/* ------------------------------------------------------------------------ */

typedef struct copy_ctx {
    const float *src;
    float *dst;
    size_t n; /* floats */
} copy_ctx;

/* A copy loop with ordinary (cached) vector stores, as an elementwise
 * kernel writes: the ceiling such a kernel can reach. memcpy, measured
 * beside it, streams large copies with non-temporal stores, which skip
 * reading the destination first. Written with intrinsics so the compiler
 * neither leaves it scalar (-O2) nor turns it into a memcpy call. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_MEMCPY_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_MEMCPY_IDIOM
#endif

NO_MEMCPY_IDIOM __attribute__((target("avx2")))
static void copy_loop_avx2(float *restrict dst, const float *restrict src,
                           size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_loadu_ps(src + i), v1 = _mm256_loadu_ps(src + i + 8);
        __m256 v2 = _mm256_loadu_ps(src + i + 16);
        __m256 v3 = _mm256_loadu_ps(src + i + 24);
        _mm256_storeu_ps(dst + i, v0);
        _mm256_storeu_ps(dst + i + 8, v1);
        _mm256_storeu_ps(dst + i + 16, v2);
        _mm256_storeu_ps(dst + i + 24, v3);
    }
    for (; i < n; i++)
        dst[i] = src[i];
}

NO_MEMCPY_IDIOM
static void copy_loop_sse2(float *restrict dst, const float *restrict src,
                           size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128 v0 = _mm_loadu_ps(src + i), v1 = _mm_loadu_ps(src + i + 4);
        _mm_storeu_ps(dst + i, v0);
        _mm_storeu_ps(dst + i + 4, v1);
    }
    for (; i < n; i++)
        dst[i] = src[i];
}

static void copy_loop(float *restrict dst, const float *restrict src,
                      size_t n) {
    if (__builtin_cpu_supports("avx2"))
        copy_loop_avx2(dst, src, n);
    else
        copy_loop_sse2(dst, src, n);
}

/* A second thread that runs half of a copy; woken by a barrier so that no
 * thread creation lands in a timing (Emily's pool is persistent too). */
static struct {
    pthread_t thread;
    pthread_barrier_t start, done;
    void (*fn)(copy_ctx *ctx, int part);
    copy_ctx *ctx;
    int quit;
} helper;

static void *helper_main(void *arg) {
    (void)arg;
    for (;;) {
        pthread_barrier_wait(&helper.start);
        if (helper.quit)
            return NULL;
        helper.fn(helper.ctx, 1);
        pthread_barrier_wait(&helper.done);
    }
}

static void helper_start(void) {
    if (pthread_barrier_init(&helper.start, NULL, 2) ||
        pthread_barrier_init(&helper.done, NULL, 2) ||
        pthread_create(&helper.thread, NULL, helper_main, NULL))
        die("cannot start the copy helper thread");
}

static void helper_stop(void) {
    helper.quit = 1;
    pthread_barrier_wait(&helper.start);
    pthread_join(helper.thread, NULL);
    pthread_barrier_destroy(&helper.start);
    pthread_barrier_destroy(&helper.done);
}

static void run_on_two_threads(void (*fn)(copy_ctx *, int), copy_ctx *ctx) {
    helper.fn = fn;
    helper.ctx = ctx;
    pthread_barrier_wait(&helper.start);
    fn(ctx, 0);
    pthread_barrier_wait(&helper.done);
}

/* Halves split on a cache line (16 floats). */
static void half_range(const copy_ctx *c, int part, size_t *begin,
                       size_t *end) {
    size_t mid = (c->n / 2) & ~(size_t)15;
    *begin = part ? mid : 0;
    *end = part ? c->n : mid;
}

static void memcpy_part(copy_ctx *c, int part) {
    size_t b, e;
    half_range(c, part, &b, &e);
    memcpy(c->dst + b, c->src + b, (e - b) * sizeof(float));
}

static void loop_part(copy_ctx *c, int part) {
    size_t b, e;
    half_range(c, part, &b, &e);
    copy_loop(c->dst + b, c->src + b, e - b);
}

static void run_memcpy_1t(void *p) {
    copy_ctx *c = p;
    memcpy(c->dst, c->src, c->n * sizeof(float));
}
static void run_loop_1t(void *p) {
    copy_ctx *c = p;
    copy_loop(c->dst, c->src, c->n);
}
static void run_memcpy_2t(void *p) { run_on_two_threads(memcpy_part, p); }
static void run_loop_2t(void *p) { run_on_two_threads(loop_part, p); }

/* ------------------------------------------------------------------------ */
/* Emily runs                                                                */
/* ------------------------------------------------------------------------ */

typedef struct emily_ctx {
    em_array *a, *b;
} emily_ctx;

static void eval_and_release(em_array *out, const char *what) {
    check_em(em_eval(&out, 1), what);
    em_array_release(out);
}

static void run_emily_add(void *p) {
    emily_ctx *c = p;
    em_array *out = NULL;
    check_em(em_binary(EM_BINARY_add, c->a, c->b, &out), "em_binary(add)");
    eval_and_release(out, "em_eval(add)");
}

static void run_emily_exp(void *p) {
    emily_ctx *c = p;
    em_array *out = NULL;
    check_em(em_unary(EM_UNARY_exp, c->a, &out), "em_unary(exp)");
    eval_and_release(out, "em_eval(exp)");
}

static void run_emily_sum(void *p) {
    emily_ctx *c = p;
    em_array *out = NULL;
    check_em(em_reduce(EM_REDUCE_sum, c->a, NULL, 0, false, &out),
             "em_reduce(sum)");
    eval_and_release(out, "em_eval(sum)");
}

static void run_emily_matmul(void *p) {
    emily_ctx *c = p;
    em_array *out = NULL;
    check_em(em_matmul(c->a, c->b, &out), "em_matmul");
    eval_and_release(out, "em_eval(matmul)");
}

typedef struct sgemm_ctx {
    const float *a, *b;
    float *c;
    int n;
} sgemm_ctx;

static void run_sgemm(void *p) {
    sgemm_ctx *s = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->n, s->n, s->n,
                1.0f, s->a, s->n, s->b, s->n, 0.0f, s->c, s->n);
}

/* ------------------------------------------------------------------------ */
/* Groups. Each first checks Emily's answer once (outside any timing), so   */
/* a fast wrong kernel cannot pass for a fast one.                           */
/* ------------------------------------------------------------------------ */

static void bench_elementwise(void) {
    const size_t n = ELEMENTWISE_BYTES / sizeof(float);
    const int64_t shape[2] = {4096, (int64_t)(n / 4096)};
    float *x = alloc_floats(n), *y = alloc_floats(n), *dst = alloc_floats(n);
    fill_uniform(x, n, -10.0f, 10.0f, 1);
    fill_uniform(y, n, -10.0f, 10.0f, 2);
    emily_ctx em = {emily_from(x, shape, 2), emily_from(y, shape, 2)};

    /* Check add (exact) and exp (relative 1e-5, f32's error budget with
     * room) at a stride of samples plus both ends. */
    em_array *out = NULL;
    check_em(em_binary(EM_BINARY_add, em.a, em.b, &out), "em_binary(add)");
    check_em(em_eval(&out, 1), "em_eval(add)");
    const float *r = emily_floats(out);
    for (size_t i = 0; i < n; i += 4099)
        if (r[i] != x[i] + y[i])
            die("em_binary(add) gave a wrong value");
    if (r[n - 1] != x[n - 1] + y[n - 1])
        die("em_binary(add) gave a wrong last value");
    em_array_release(out);
    check_em(em_unary(EM_UNARY_exp, em.a, &out), "em_unary(exp)");
    check_em(em_eval(&out, 1), "em_eval(exp)");
    r = emily_floats(out);
    for (size_t i = 0; i < n; i += 997) {
        double want = exp((double)x[i]);
        if (fabs((double)r[i] - want) > 1e-5 * want)
            die("em_unary(exp) gave a wrong value");
    }
    em_array_release(out);

    copy_ctx copy = {x, dst, n};
    int reps = scaled_reps(21);
    double copy_bytes = 2.0 * (double)ELEMENTWISE_BYTES;

    bench_case add_group[] = {
        {"add/emily", 3.0 * ELEMENTWISE_BYTES, "B", run_emily_add, &em},
        {"copy/loop_2t", copy_bytes, "B", run_loop_2t, &copy},
        {"copy/memcpy_1t", copy_bytes, "B", run_memcpy_1t, &copy},
        {"copy/loop_1t", copy_bytes, "B", run_loop_1t, &copy},
        {"copy/memcpy_2t", copy_bytes, "B", run_memcpy_2t, &copy},
    };
    run_group(add_group, 5, reps);

    /* exp alternates with the 2-thread copy loop again: its own ceiling
     * measured under the same noise. */
    bench_case exp_group[] = {
        {"exp/emily", 2.0 * ELEMENTWISE_BYTES, "B", run_emily_exp, &em},
        {"exp/copy_loop_2t", copy_bytes, "B", run_loop_2t, &copy},
    };
    run_group(exp_group, 2, reps);

    /* sum reads 64 MiB and writes one float. */
    check_em(em_reduce(EM_REDUCE_sum, em.a, NULL, 0, false, &out),
             "em_reduce(sum)");
    float got;
    check_em(em_read(out, &got, sizeof got), "em_read(sum)");
    em_array_release(out);
    double want = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        want += x[i];
        mag += fabs(x[i]);
    }
    if (fabs((double)got - want) > 1e-5 * mag)
        die("em_reduce(sum) gave a wrong value");
    bench_case sum_group[] = {
        {"sum/emily", (double)ELEMENTWISE_BYTES + 4, "B", run_emily_sum, &em},
        {"sum/copy_loop_2t", copy_bytes, "B", run_loop_2t, &copy},
    };
    run_group(sum_group, 2, reps);

    em_array_release(em.a);
    em_array_release(em.b);
    free(x);
    free(y);
    free(dst);
}

static void bench_matmul(int n, int base_reps) {
    size_t nn = (size_t)n * (size_t)n;
    const int64_t shape[2] = {n, n};
    float *a = alloc_floats(nn), *b = alloc_floats(nn), *c = alloc_floats(nn);
    fill_uniform(a, nn, -1.0f, 1.0f, 3);
    fill_uniform(b, nn, -1.0f, 1.0f, 4);
    emily_ctx em = {emily_from(a, shape, 2), emily_from(b, shape, 2)};
    sgemm_ctx blas = {a, b, c, n};

    /* Emily against OpenBLAS's own answer: the same sums, perhaps in
     * another order, so agreement to a few ulps of the row scale. */
    run_sgemm(&blas);
    em_array *out = NULL;
    check_em(em_matmul(em.a, em.b, &out), "em_matmul");
    check_em(em_eval(&out, 1), "em_eval(matmul)");
    const float *r = emily_floats(out);
    double tol = 1e-5 * sqrt((double)n) * 4.0;
    for (size_t i = 0; i < nn; i++)
        if (fabs((double)r[i] - (double)c[i]) > tol)
            die("em_matmul disagrees with cblas_sgemm");
    em_array_release(out);

    char key_emily[32], key_blas[32];
    snprintf(key_emily, sizeof key_emily, "matmul%d/emily", n);
    snprintf(key_blas, sizeof key_blas, "matmul%d/openblas", n);
    double flops = 2.0 * (double)n * (double)n * (double)n;
    bench_case group[] = {
        {key_emily, flops, "FLOP", run_emily_matmul, &em},
        {key_blas, flops, "FLOP", run_sgemm, &blas},
    };
    run_group(group, 2, scaled_reps(base_reps));

    em_array_release(em.a);
    em_array_release(em.b);
    free(a);
    free(b);
    free(c);
}

int main(void) {
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    const char *threads = getenv("EMILY_NUM_THREADS");
    printf("# OPENBLAS_CORETYPE=%s\n", coretype ? coretype : "(unset)");
    printf("# openblas: %s; core %s; %d threads\n", openblas_get_config(),
           openblas_get_corename(), openblas_get_num_threads());
    printf("# EMILY_NUM_THREADS=%s\n", threads ? threads : "(unset)");
    fflush(stdout);

    helper_start();
    /* Elementwise first: OpenBLAS's threads spin for a while after a GEMM
     * and would take a core from whatever runs next. */
    bench_elementwise();
    bench_matmul(512, 31);
    bench_matmul(1024, 15);
    bench_matmul(2048, 9);
    helper_stop();
    return 0;
}
