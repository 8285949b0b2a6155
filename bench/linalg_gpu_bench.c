/*
 * linalg_gpu_bench.c — em_fft and the linalg ops on the GPU (cuFFT /
 * cuSOLVER through the CUDA plugin) and on the CPU, on random data.
 *
 *   make cuda build/linalg_gpu_bench && build/linalg_gpu_bench [substring...]
 *
 * With arguments, only the cases whose name contains one of them run.
 * GPU: CUDA events around build + eval of each case (the value-failure
 * checks of cholesky and solve synchronise inside), 2 warm-ups, median of
 * 5. CPU: host clock around build + eval, median of 3. Prints a table:
 * case, GPU ms, CPU ms, CPU / GPU.
 */
#include "emily.h"
#include "emily_device.h"
#include "emily_fft.h"
#include "emily_linalg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GPU EM_DEVICE_GPU(0)

static void check(em_status st, const char *what) {
    if (st != EM_OK) {
        fprintf(stderr, "%s: %s\n", what, em_last_error());
        exit(1);
    }
}

static uint64_t rng = 88172645463325252ull;

/* Random [batch, n, n] (or any shape) of dtype d on `device`; spd: plus
 * n on the diagonal of each matrix (positive definite after a Gram-like
 * shift: the op builds a·aᵀ itself below). */
static em_array *random_on(em_device device, const int64_t *shape, int ndim,
                           em_dtype d) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    bool cpx = d == EM_C64 || d == EM_C128;
    int64_t nf = cpx ? 2 * n : n;
    double *buf = malloc((size_t)nf * sizeof(double));
    for (int64_t i = 0; i < nf; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        buf[i] = (double)(rng >> 11) / 9007199254740992.0 * 2 - 1;
    }
    em_array *f = NULL, *c = NULL, *g = NULL;
    int64_t fshape[EM_MAX_NDIM + 1];
    memcpy(fshape, shape, sizeof(int64_t) * (size_t)ndim);
    em_dtype fd = cpx ? EM_C128 : EM_F64;
    check(em_from_data(buf, (size_t)nf * sizeof(double), fshape, ndim, fd, &f),
          "from_data");
    check(em_as_type(f, d, &c), "as_type");
    check(em_to_device(c, device, &g), "to_device");
    check(em_eval(&g, 1), "eval");
    free(buf);
    em_array_release(f);
    em_array_release(c);
    return g;
}

/* a + n·I: diagonally dominant (well conditioned; positive definite once
 * made symmetric, which cholesky does not need: it reads one triangle). */
static em_array *dominant(em_array *a, int64_t n) {
    em_array *eye = NULL, *s = NULL, *sc = NULL, *out = NULL;
    int64_t shape[2] = {n, n};
    em_device old = em_set_default_device(em_array_device(a));
    check(em_eye(shape, 2, 0, em_array_dtype(a), &eye), "eye");
    em_set_default_device(old);
    double v = (double)n;
    em_array *scal = NULL;
    check(em_from_data(&v, sizeof v, NULL, 0, EM_F64, &scal), "scalar");
    check(em_as_type(scal, em_array_dtype(a), &sc), "as_type");
    em_array *scg = NULL;
    check(em_to_device(sc, em_array_device(a), &scg), "to_device");
    check(em_binary(EM_BINARY_multiply, eye, scg, &s), "mul");
    check(em_binary(EM_BINARY_add, a, s, &out), "add");
    check(em_eval(&out, 1), "eval");
    em_array *arr[] = {eye, s, sc, scal, scg};
    for (int i = 0; i < 5; i++)
        em_array_release(arr[i]);
    return out;
}

typedef em_status (*op_fn)(em_array *a, em_array *b, em_array **out);

static em_status op_fft(em_array *a, em_array *b, em_array **out) {
    (void)b;
    int64_t n = em_array_shape(a)[em_array_ndim(a) - 1];
    return em_fft(a, -1, n, EM_FFT_FORWARD, 0, out);
}
static em_status op_rfft(em_array *a, em_array *b, em_array **out) {
    (void)b;
    int64_t n = em_array_shape(a)[em_array_ndim(a) - 1];
    return em_fft(a, -1, n, EM_FFT_RFFT, 0, out);
}
static em_status op_chol(em_array *a, em_array *b, em_array **out) {
    (void)b;
    return em_cholesky(a, out);
}
static em_status op_solve(em_array *a, em_array *b, em_array **out) {
    return em_solve(a, b, out);
}
static em_status op_inv(em_array *a, em_array *b, em_array **out) {
    (void)b;
    return em_invert(a, out);
}
static em_status op_det(em_array *a, em_array *b, em_array **out) {
    (void)b;
    return em_determinant(a, out);
}
static em_status op_trsolve(em_array *a, em_array *b, em_array **out) {
    return em_triangular_solve(a, b, true, true, false, out);
}
static em_status op_qr(em_array *a, em_array *b, em_array **out) {
    (void)b;
    em_array *q = NULL, *r = NULL;
    em_status st = em_qr(a, false, &q, &r);
    em_array_release(q);
    *out = r; /* r and q share the factorization node */
    return st;
}
static em_status op_eigh(em_array *a, em_array *b, em_array **out) {
    (void)b;
    em_array *w = NULL, *v = NULL;
    em_status st = em_eigh(a, &w, &v);
    em_array_release(v);
    *out = w;
    return st;
}
static em_status op_svd(em_array *a, em_array *b, em_array **out) {
    (void)b;
    em_array *u = NULL, *s = NULL, *vt = NULL;
    em_status st = em_svd(a, false, &u, &s, &vt);
    em_array_release(u);
    em_array_release(vt);
    *out = s;
    return st;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double time_gpu(op_fn fn, em_array *a, em_array *b) {
    double ms[5];
    for (int it = 0; it < 7; it++) {
        em_device_event *e0, *e1;
        em_array *out = NULL;
        check(em_device_event_record(GPU, &e0), "event");
        check(fn(a, b, &out), "build");
        check(em_eval(&out, 1), "eval");
        check(em_device_event_record(GPU, &e1), "event");
        double t;
        check(em_device_event_elapsed(e0, e1, &t), "elapsed");
        if (it >= 2)
            ms[it - 2] = t;
        em_array_release(out);
        em_device_event_release(e0);
        em_device_event_release(e1);
    }
    qsort(ms, 5, sizeof ms[0], cmp_double);
    return ms[2];
}

static double time_cpu(op_fn fn, em_array *a, em_array *b) {
    double ms[3];
    for (int it = 0; it < 3; it++) {
        em_array *out = NULL;
        double t0 = now_ms();
        check(fn(a, b, &out), "build");
        check(em_eval(&out, 1), "eval");
        ms[it] = now_ms() - t0;
        em_array_release(out);
    }
    qsort(ms, 3, sizeof ms[0], cmp_double);
    return ms[1];
}

typedef struct bcase {
    const char *name;
    op_fn fn;
    em_dtype d;
    int64_t shape[3];
    int ndim;
    bool square; /* a made diagonally dominant; b: [batch, n, 16] */
} bcase;

int main(int argc, char **argv) {
    const char *reason;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason);
        return 0;
    }
    static const bcase cases[] = {
        {"fft c64 [256, 65536]", op_fft, EM_C64, {256, 65536}, 2, false},
        {"fft c128 [256, 65536]", op_fft, EM_C128, {256, 65536}, 2, false},
        {"rfft f32 [256, 65536]", op_rfft, EM_F32, {256, 65536}, 2, false},
        {"fft c64 [4096, 1000]", op_fft, EM_C64, {4096, 1000}, 2, false},
        {"cholesky f64 4096", op_chol, EM_F64, {4096, 4096}, 2, true},
        {"cholesky f32 [64,256,256]", op_chol, EM_F32, {64, 256, 256}, 3, true},
        {"solve f64 4096 (16 rhs)", op_solve, EM_F64, {4096, 4096}, 2, true},
        {"solve f32 [64,256,256]", op_solve, EM_F32, {64, 256, 256}, 3, true},
        {"solve f32 [4096,16,16]", op_solve, EM_F32, {4096, 16, 16}, 3, true},
        {"cholesky f64 [4096,32,32]", op_chol, EM_F64, {4096, 32, 32}, 3, true},
        {"trsolve f32 [64,256,256]", op_trsolve, EM_F32, {64, 256, 256}, 3, true},
        {"invert f64 2048", op_inv, EM_F64, {2048, 2048}, 2, true},
        {"determinant f64 4096", op_det, EM_F64, {4096, 4096}, 2, true},
        {"trsolve f64 4096 (16 rhs)", op_trsolve, EM_F64, {4096, 4096}, 2, true},
        {"qr f64 4096", op_qr, EM_F64, {4096, 4096}, 2, false},
        {"eigh f64 1024", op_eigh, EM_F64, {1024, 1024}, 2, true},
        {"svd f32 1024", op_svd, EM_F32, {1024, 1024}, 2, false},
    };
    printf("%-28s %10s %10s %8s\n", "case", "GPU ms", "CPU ms", "CPU/GPU");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bcase *c = &cases[i];
        bool run = argc < 2;
        for (int a = 1; a < argc && !run; a++)
            run = strstr(c->name, argv[a]) != NULL;
        if (!run)
            continue;
        double t[2];
        for (int dev = 0; dev < 2; dev++) {
            em_device device = dev == 0 ? GPU : EM_DEVICE_CPU;
            em_array *a = random_on(device, c->shape, c->ndim, c->d), *b = NULL;
            if (c->square) {
                int64_t n = c->shape[c->ndim - 1];
                em_array *s = dominant(a, n);
                em_array_release(a);
                a = s;
                int64_t bshape[3];
                memcpy(bshape, c->shape, sizeof bshape);
                bshape[c->ndim - 1] = 16;
                b = random_on(device, bshape, c->ndim, c->d);
            }
            t[dev] = dev == 0 ? time_gpu(c->fn, a, b) : time_cpu(c->fn, a, b);
            em_array_release(a);
            em_array_release(b);
        }
        printf("%-28s %10.3f %10.3f %8.1f\n", c->name, t[0], t[1], t[1] / t[0]);
        fflush(stdout);
    }
    return 0;
}
