/*
 * matmul_bench.c — em_matmul on the CPU in every float dtype, against the
 * memory ceilings measured in the same run.
 *
 *   make -j2 build/matmul_bench && build/matmul_bench
 *
 * Cases, for f32, f64, bf16 and f16:
 *   matvec  1x1024 @ 1024x3072 and 1x4096 @ 4096x4096 (the decode step of a
 *           transformer): GB/s of weights read, and that rate as a share of
 *           the copy rate (2 threads copying a 256 MiB buffer; bytes copied
 *           per second, i.e. bytes read) and of the read rate (2 threads
 *           summing the same buffer). Several copies of the weights are
 *           cycled so that they total >= 128 MiB (4x this machine's L3):
 *           the weights come from memory, as in a decode loop over layers.
 *   gemm    512x1024 @ 1024x1024 and 1024^3: GFLOP/s (2*M*N*K flops);
 *           f32 also MiniLM's (BERT, batch 16 x 128 tokens) projections
 *           2048x384 @ 384x384, 2048x384 @ 384x1536, 2048x1536 @ 1536x384.
 *   sgemm   the f32 GEMM kernels themselves, through the engine's thread
 *           pool (em__gemm_parallel): OpenBLAS against em__gemm_f32 (our
 *           AVX-512 kernel where the CPU has AVX-512F, else OpenBLAS too),
 *           on the MiniLM shapes above and its attention scores, a batch of
 *           192 x (128x32 @ 32x128); GFLOP/s of each and their ratio.
 * Each case in both weight layouts: "x@W" with W stored (K, N) row-major,
 * and "x@W^T" with W stored (N, K) (PyTorch's and safetensors' layout) and
 * passed as a transposed view, which must not be copied.
 *
 * A timed run builds the matmul node, evaluates it and releases it; inputs
 * were evaluated before. Median of the runs after warm-ups. Environment:
 * BENCH_REPS scales the number of runs (default 1.0). An argument runs only
 * the cases whose "dtype shape layout" line contains it ("bf16", "1x4096",
 * "x@W^T").
 */
#include "emily.h"
#include "ops/dot_cpu.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB ((size_t)1 << 20)
#define CEILING_BYTES (256 * MIB)
#define COLD_BYTES (128 * MIB)
#define MAX_COPIES 64

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check_em(em_status st, const char *what) {
    if (st != EM_OK) {
        fprintf(stderr, "matmul_bench: %s failed (status %d): %s\n", what,
                (int)st, em_last_error());
        exit(1);
    }
}

static void *xalloc(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "matmul_bench: out of memory\n");
        exit(1);
    }
    memset(p, 1, bytes); /* fault every page in before any timing */
    return p;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int scaled(int base) {
    const char *env = getenv("BENCH_REPS");
    double s = env ? atof(env) : 1.0;
    int r = (int)(base * (s > 0 ? s : 1.0) + 0.5);
    return r < 3 ? 3 : r;
}

/* Median seconds of `reps` runs of fn after 2 warm-ups. */
static double median_time(void (*fn)(void *), void *ctx, int reps) {
    double t[256];
    if (reps > 256)
        reps = 256;
    fn(ctx);
    fn(ctx);
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        fn(ctx);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
}

/* ------------------------------------------------------------------------ */
/* Memory ceilings: 2 threads copying / reading halves of a big buffer      */
/* ------------------------------------------------------------------------ */

typedef struct half_job {
    const char *src;
    char *dst;
    size_t bytes;
    double sink;
} half_job;

static void *copy_half(void *arg) {
    half_job *j = arg;
    memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

__attribute__((target("avx2"))) static void *read_half(void *arg) {
    half_job *j = arg;
    const float *p = (const float *)j->src;
    size_t n = j->bytes / sizeof(float);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
    }
    float out[8];
    _mm256_storeu_ps(
        out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    j->sink = out[0];
    return NULL;
}

typedef struct ceiling_ctx {
    char *src, *dst;
    void *(*fn)(void *);
} ceiling_ctx;

static void run_ceiling(void *arg) {
    ceiling_ctx *c = arg;
    size_t half = CEILING_BYTES / 2;
    half_job j[2] = {{c->src, c->dst, half, 0},
                     {c->src + half, c->dst + half, half, 0}};
    pthread_t t;
    if (pthread_create(&t, NULL, c->fn, &j[1]) != 0) {
        fprintf(stderr, "matmul_bench: pthread_create failed\n");
        exit(1);
    }
    c->fn(&j[0]);
    pthread_join(t, NULL);
}

/* ------------------------------------------------------------------------ */
/* Matmul cases                                                              */
/* ------------------------------------------------------------------------ */

typedef struct mm_ctx {
    em_array *x;
    em_array *w[MAX_COPIES]; /* operand b as passed (a view for x@W^T) */
    int ncopies, next;
} mm_ctx;

static void run_mm(void *arg) {
    mm_ctx *c = arg;
    em_array *r = NULL;
    check_em(em_matmul(c->x, c->w[c->next], &r), "em_matmul");
    check_em(em_eval(&r, 1), "em_eval");
    em_array_release(r);
    c->next = (c->next + 1) % c->ncopies;
}

/* Deterministic values in [-1, 1) as `dtype`, evaluated. */
static em_array *random_array(const int64_t *shape, int ndim, em_dtype dtype,
                              uint64_t seed) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)shape[i];
    float *v = xalloc(n * sizeof(float));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        uint64_t r = s * 0x2545F4914F6CDD1Dull;
        v[i] = 2.0f * (float)(r >> 40) / (float)(1 << 24) - 1.0f;
    }
    em_array *f = NULL, *out = NULL;
    check_em(em_from_data(v, n * sizeof(float), shape, ndim, EM_F32, &f),
             "em_from_data");
    free(v);
    check_em(em_as_type(f, dtype, &out), "em_as_type");
    check_em(em_eval(&out, 1), "em_eval");
    em_array_release(f);
    return out;
}

static const char *dtype_name(em_dtype d) {
    switch (d) {
    case EM_F32:
        return "f32";
    case EM_F64:
        return "f64";
    case EM_BF16:
        return "bf16";
    case EM_F16:
        return "f16";
    default:
        return "?";
    }
}

/* One case: x (m, k) @ W (k, n), W stored (k, n) or, transposed, (n, k). */
static const char *filter;

static void bench_case(em_dtype dtype, int64_t m, int64_t k, int64_t n,
                       int transposed, double copy_rate, double read_rate) {
    char label[96];
    snprintf(label, sizeof label, "%s %lldx%lld@%lldx%lld %s",
             dtype_name(dtype), (long long)m, (long long)k, (long long)k,
             (long long)n, transposed ? "x@W^T" : "x@W");
    if (filter && !strstr(label, filter))
        return;
    size_t wbytes = (size_t)(k * n) * em_dtype_size(dtype);
    int matvec = m <= 4;
    int copies = 1;
    if (matvec) {
        copies = (int)((COLD_BYTES + wbytes - 1) / wbytes);
        if (copies > MAX_COPIES)
            copies = MAX_COPIES;
    }
    mm_ctx c = {0};
    int64_t xs[2] = {m, k};
    c.x = random_array(xs, 2, dtype, 1);
    c.ncopies = copies;
    for (int i = 0; i < copies; i++) {
        if (transposed) {
            int64_t ws[2] = {n, k};
            em_array *w = random_array(ws, 2, dtype, 2 + (uint64_t)i);
            int perm[2] = {1, 0};
            check_em(em_transpose(w, perm, 2, &c.w[i]), "em_transpose");
            em_array_release(w);
        } else {
            int64_t ws[2] = {k, n};
            c.w[i] = random_array(ws, 2, dtype, 2 + (uint64_t)i);
        }
    }
    double flops = 2.0 * (double)m * (double)n * (double)k;
    int reps = scaled(matvec ? 60 : (flops > 1e9 ? 10 : 20));
    double t = median_time(run_mm, &c, reps);
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lld@%lldx%lld", (long long)m,
             (long long)k, (long long)k, (long long)n);
    if (matvec) {
        double gbs = (double)wbytes / t / 1e9;
        printf("%-5s %-20s %-6s %9.3f %9.1f %7.0f%% %7.0f%% %9.1f\n",
               dtype_name(dtype), shape, transposed ? "x@W^T" : "x@W", t * 1e3,
               gbs, 100 * gbs / copy_rate, 100 * gbs / read_rate,
               flops / t / 1e9);
    } else {
        printf("%-5s %-20s %-6s %9.3f %9s %8s %8s %9.1f\n", dtype_name(dtype),
               shape, transposed ? "x@W^T" : "x@W", t * 1e3, "-", "-", "-",
               flops / t / 1e9);
    }
    fflush(stdout);
    for (int i = 0; i < copies; i++)
        em_array_release(c.w[i]);
    em_array_release(c.x);
}

/* ------------------------------------------------------------------------ */
/* f32 GEMM kernels: OpenBLAS against em__gemm_f32                           */
/* ------------------------------------------------------------------------ */

typedef struct sgemm_ctx {
    em_gemm_problem p;
} sgemm_ctx;

static void run_sgemm(void *arg) { em__gemm_parallel(&((sgemm_ctx *)arg)->p); }

/* nbatch x ((m, k) @ (k, n)), op(B) stored (k, n) or, transposed, (n, k). */
static void bench_sgemm(int64_t nbatch, int64_t m, int64_t k, int64_t n,
                        bool tb) {
    char label[96];
    snprintf(label, sizeof label, "sgemm %lldx(%lldx%lld@%lldx%lld) %s",
             (long long)nbatch, (long long)m, (long long)k, (long long)k,
             (long long)n, tb ? "x@W^T" : "x@W");
    if (filter && !strstr(label, filter))
        return;
    size_t asz = (size_t)(m * k), bsz = (size_t)(k * n), csz = (size_t)(m * n);
    float *a = xalloc(nbatch * asz * sizeof(float));
    float *b = xalloc(nbatch * bsz * sizeof(float));
    float *c = xalloc(nbatch * csz * sizeof(float));
    for (size_t i = 0; i < nbatch * asz; i++)
        a[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    for (size_t i = 0; i < nbatch * bsz; i++)
        b[i] = (float)((i * 104729) % 2001) / 1000.0f - 1.0f;
    const char **as = malloc((size_t)nbatch * sizeof *as);
    const char **bs = malloc((size_t)nbatch * sizeof *bs);
    char **cs = malloc((size_t)nbatch * sizeof *cs);
    if (!as || !bs || !cs) {
        fprintf(stderr, "matmul_bench: out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < nbatch; i++) {
        as[i] = (const char *)(a + i * asz);
        bs[i] = (const char *)(b + i * bsz);
        cs[i] = (char *)(c + i * csz);
    }
    sgemm_ctx ctx = {{.gemm = em__gemm_f32_blas,
                      .esz = sizeof(float),
                      .ta = false,
                      .tb = tb,
                      .accumulate = false,
                      .m = m,
                      .n = n,
                      .k = k,
                      .lda = k,
                      .ldb = tb ? k : n,
                      .ldc = n,
                      .nbatch = nbatch,
                      .a = as,
                      .b = bs,
                      .c = cs}};
    double flops = 2.0 * (double)(nbatch * m * n * k);
    int reps = scaled(flops > 1e9 ? 10 : 20);
    double t_blas = median_time(run_sgemm, &ctx, reps);
    ctx.p.gemm = em__gemm_f32;
    double t_ours = median_time(run_sgemm, &ctx, reps);
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx(%lldx%lld@%lldx%lld)",
             (long long)nbatch, (long long)m, (long long)k, (long long)k,
             (long long)n);
    printf("%-24s %-6s %9.1f %9.1f %6.2fx\n", shape, tb ? "x@W^T" : "x@W",
           flops / t_blas / 1e9, flops / t_ours / 1e9, t_blas / t_ours);
    fflush(stdout);
    free(as);
    free(bs);
    free(cs);
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    filter = argc > 1 ? argv[1] : NULL;
    ceiling_ctx cc = {xalloc(CEILING_BYTES), xalloc(CEILING_BYTES), copy_half};
    int creps = scaled(9);
    double copy_rate =
        CEILING_BYTES / median_time(run_ceiling, &cc, creps) / 1e9;
    cc.fn = read_half;
    double read_rate =
        CEILING_BYTES / median_time(run_ceiling, &cc, creps) / 1e9;
    free(cc.src);
    free(cc.dst);
    printf("# copy rate %.1f GB/s (memcpy of 256 MiB on 2 threads, bytes "
           "copied), read rate %.1f GB/s (2 threads summing)\n",
           copy_rate, read_rate);
    printf("# matvec weights: >= 128 MiB of copies cycled (read from "
           "memory, not cache)\n");
    printf("%-5s %-20s %-6s %9s %9s %8s %8s %9s\n", "dtype", "shape", "layout",
           "ms", "GB/s", "%copy", "%read", "GFLOP/s");
    static const em_dtype dtypes[4] = {EM_F32, EM_F64, EM_BF16, EM_F16};
    /* m, k, n; the MiniLM ones in f32 only. */
    static const int64_t shapes[7][3] = {{1, 1024, 3072},   {1, 4096, 4096},
                                         {512, 1024, 1024}, {1024, 1024, 1024},
                                         {2048, 384, 384},  {2048, 384, 1536},
                                         {2048, 1536, 384}};
    for (int s = 0; s < 7; s++)
        for (int d = 0; d < (s < 4 ? 4 : 1); d++)
            for (int t = 0; t < 2; t++)
                bench_case(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2],
                           t, copy_rate, read_rate);
    printf("# f32 GEMM through the thread pool: OpenBLAS vs em__gemm_f32 "
           "(AVX-512 kernel: %s)\n",
           em__sgemm_avx512_available() ? "yes" : "no, OpenBLAS");
    printf("%-24s %-6s %9s %9s %7s\n", "batch x (shape)", "layout", "OpenBLAS",
           "emily", "speedup");
    static const int64_t sgemm_shapes[7][4] = {
        {1, 512, 1024, 1024}, {1, 1024, 1024, 1024}, {1, 2048, 384, 384},
        {1, 2048, 384, 1536}, {1, 2048, 1536, 384},  {192, 128, 32, 128},
        {192, 128, 128, 32}};
    for (int s = 0; s < 7; s++)
        for (int t = 0; t < 2; t++)
            bench_sgemm(sgemm_shapes[s][0], sgemm_shapes[s][1],
                        sgemm_shapes[s][2], sgemm_shapes[s][3], t);
    return 0;
}
