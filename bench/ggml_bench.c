/*
 * ggml_bench.c — em_ggml_matmul's decoding path (one row of x) against the
 * memory bandwidth, measured in one process.
 *
 * For every block type: x (M, K) @ W^T with W (N, K) of random blocks, for
 * a 7B-like layer (K = N = 4096) and SmolLM2-135M's shapes: attention
 * q/o (576 -> 576), k/v (576 -> 192), MLP up/gate (576 -> 1536), down
 * (1536 -> 576) and the tied output head (576 -> 49152). The K-quants need
 * K % 256 == 0 and skip K = 576 (llama.cpp stores such rows in another
 * type). Reported: the median time, the block
 * bytes read per second (GB/s), and that rate as a fraction of memcpy's
 * read rate on a 256 MiB buffer measured in the same run. A 4096 x 4096
 * matrix (9 to 17 MB of blocks) may sit partly in the last-level cache;
 * the small layer (0.5 to 1 MB) does, so its rate measures the kernel's
 * arithmetic and threading overhead more than memory. The fastest run
 * (best_us) is printed too: on a machine shared with other jobs it is
 * steadier than the median.
 *
 *   make -j2 build/ggml_bench && build/ggml_bench
 *
 * Environment: BENCH_REPS scales the number of timed runs (default 1.0);
 * BENCH_TYPES (e.g. "q4_1,q8_0") keeps only those types; BENCH_M sets the
 * rows of x (default 1, the decode case; up to 8 take the same path);
 * BENCH_K and BENCH_N run that one shape only.
 */
#include "emily_ggml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB ((size_t)1 << 20)
#define COPY_BYTES (256 * MIB)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what) {
    fprintf(stderr, "%s: %s\n", what, em_last_error());
    exit(1);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return t[n / 2];
}

static int reps_scaled(int base) {
    const char *s = getenv("BENCH_REPS");
    double f = s ? atof(s) : 1.0;
    int r = (int)(base * f);
    return r < 3 ? 3 : r;
}

/* memcpy's read rate (bytes read per second) on COPY_BYTES. */
static double copy_rate(void) {
    char *a = malloc(COPY_BYTES), *b = malloc(COPY_BYTES);
    if (!a || !b)
        die("malloc");
    memset(a, 1, COPY_BYTES);
    memset(b, 2, COPY_BYTES);
    /* Called through a volatile pointer: clang removed the copy into a
     * buffer that is freed unread. */
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;
    int n = reps_scaled(10);
    double t[64];
    for (int i = 0; i < n && i < 64; i++) {
        double t0 = now();
        copy(b, a, COPY_BYTES);
        t[i] = now() - t0;
    }
    volatile char sink = b[COPY_BYTES - 1];
    (void)sink;
    free(a);
    free(b);
    return (double)COPY_BYTES / median(t, n < 64 ? n : 64);
}

/* A xorshift generator: libc's rand() took most of the run filling blocks. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint8_t random_byte(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 32);
}

/* Random blocks with finite half scales (0x2000..0x2fff: small normals). */
static em_array *random_blocks(int type, int64_t n, int64_t k, size_t *nbytes) {
    int64_t be, bb;
    if (em_ggml_type_info(type, &be, &bb))
        die("type");
    const int64_t row = k / be * bb;
    uint8_t *raw = malloc((size_t)(n * row));
    if (!raw)
        die("malloc");
    for (int64_t i = 0; i < n * row; i++)
        raw[i] = random_byte();
    for (int64_t b = 0; b < n * k / be; b++) {
        uint8_t *blk = raw + b * bb;
        int off = type == EM_GGML_Q6_K ? 208 : 0;
        blk[off + 1] = (uint8_t)(0x20 | (blk[off + 1] & 0x0f));
        if (type == EM_GGML_Q4_1 || type == EM_GGML_Q4_K ||
            type == EM_GGML_Q5_1 || type == EM_GGML_Q5_K)
            blk[3] = (uint8_t)(0x20 | (blk[3] & 0x0f));
    }
    const int64_t shape[2] = {n, row};
    em_array *a;
    if (em_from_data(raw, (size_t)(n * row), shape, 2, EM_U8, &a))
        die("from_data");
    free(raw);
    *nbytes = (size_t)(n * row);
    return a;
}

/* Whether BENCH_TYPES (a comma-separated list) names `name`, or is unset. */
static int type_selected(const char *name) {
    const char *list = getenv("BENCH_TYPES");
    if (!list || !*list)
        return 1;
    const size_t len = strlen(name);
    for (const char *p = list; p;
         p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == 0))
            return 1;
    return 0;
}

int main(void) {
    static const int types[] = {EM_GGML_Q4_0, EM_GGML_Q4_1, EM_GGML_Q5_0,
                                EM_GGML_Q5_1, EM_GGML_Q8_0, EM_GGML_Q4_K,
                                EM_GGML_Q5_K, EM_GGML_Q6_K};
    int64_t shapes[][2] = {{4096, 4096}, {576, 576},  {576, 192},
                           {576, 1536},  {1536, 576}, {576, 49152}};
    size_t nshapes = sizeof shapes / sizeof shapes[0];
    if (getenv("BENCH_K") && getenv("BENCH_N")) {
        shapes[0][0] = atoll(getenv("BENCH_K"));
        shapes[0][1] = atoll(getenv("BENCH_N"));
        nshapes = 1;
    }
    const int64_t m = getenv("BENCH_M") ? atoll(getenv("BENCH_M")) : 1;
    if (m < 1)
        die("BENCH_M");
    const double copy = copy_rate();
    printf("# memcpy read rate: %.1f GB/s (%zu MiB); x rows M = %lld\n",
           copy / 1e9, COPY_BYTES / MIB, (long long)m);
    printf("%-6s %6s %6s %10s %10s %8s %8s %8s\n", "type", "K", "N",
           "median_us", "GB/s", "of_copy", "best_us", "best_GB/s");
    for (size_t s = 0; s < nshapes; s++) {
        const int64_t k = shapes[s][0], n = shapes[s][1];
        float *xv = malloc((size_t)(m * k) * sizeof(float));
        if (!xv)
            die("malloc");
        for (int64_t i = 0; i < m * k; i++)
            xv[i] = (float)sin((double)i);
        const int64_t xs[2] = {m, k};
        em_array *x;
        if (em_from_data(xv, (size_t)(m * k) * sizeof(float), xs, 2, EM_F32,
                         &x))
            die("from_data");
        free(xv);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            if (!type_selected(em_ggml_type_name(types[t])))
                continue;
            int64_t be, bb;
            if (em_ggml_type_info(types[t], &be, &bb) || k % be != 0) {
                printf("%-6s %6lld %6lld %10s\n", em_ggml_type_name(types[t]),
                       (long long)k, (long long)n, "skipped");
                continue;
            }
            size_t bytes;
            em_array *w = random_blocks(types[t], n, k, &bytes);
            int reps = reps_scaled(k * n > 1000000 ? 50 : 300);
            double *times = malloc((size_t)reps * sizeof(double));
            for (int i = -3; i < reps; i++) {
                double t0 = now();
                em_array *y;
                if (em_ggml_matmul(x, w, types[t], k, &y) || em_eval(&y, 1))
                    die("bench");
                em_array_release(y);
                if (i >= 0)
                    times[i] = now() - t0;
            }
            double med = median(times, reps), best = times[0];
            printf("%-6s %6lld %6lld %10.1f %10.2f %8.2f %8.1f %8.2f\n",
                   em_ggml_type_name(types[t]), (long long)k, (long long)n,
                   med * 1e6, (double)bytes / med / 1e9,
                   (double)bytes / med / copy, best * 1e6,
                   (double)bytes / best / 1e9);
            free(times);
            em_array_release(w);
        }
        em_array_release(x);
    }
    return 0;
}
