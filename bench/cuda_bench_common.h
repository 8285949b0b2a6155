/*
 * cuda_bench_common.h — what the GPU benchmarks share (cuda_bench.c,
 * cuda_conv_bench.c): random inputs on the GPU and the CUDA-event timing
 * of one build + eval (3 warm-ups, median of 10).
 */
#ifndef EMILY_CUDA_BENCH_COMMON_H
#define EMILY_CUDA_BENCH_COMMON_H

#include "emily.h"
#include "emily_device.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define GPU EM_DEVICE_GPU(0)
#define WARMUP 3
#define REPEAT 10

static inline void check(em_status st, const char *what) {
    if (st != EM_OK) {
        fprintf(stderr, "%s: %s\n", what, em_last_error());
        exit(1);
    }
}

static inline void die(const char *why) {
    fprintf(stderr, "%s\n", why);
    exit(1);
}

static uint64_t rng = 88172645463325252ull;

/* A random f32 (or bf16 when bf16) array of `n` elements on the GPU. */
static inline em_array *random_gpu(const int64_t *shape, int ndim,
                                   em_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *buf = malloc((size_t)n * sizeof(float));
    if (!buf) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        buf[i] = (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
    em_array *host, *conv, *gpu;
    check(em_from_data(buf, (size_t)n * 4, shape, ndim, EM_F32, &host),
          "from_data");
    free(buf);
    check(em_as_type(host, dtype, &conv), "as_type");
    check(em_to_device(conv, GPU, &gpu), "to_device");
    check(em_eval(&gpu, 1), "eval");
    em_array_release(host);
    em_array_release(conv);
    return gpu;
}

typedef em_status (*build_fn)(em_array *const *in, em_array **out);

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median GPU milliseconds of one build + eval of `fn`; with a filler,
 * queued behind a negate of it (so that the events time the GPU work, not
 * the host's build and launch). */
static inline double time_op_behind(build_fn fn, em_array *const *in,
                                    em_array *filler) {
    double ms[REPEAT];
    for (int it = 0; it < WARMUP + REPEAT; it++) {
        em_device_event *e0, *e1;
        em_array *busy = NULL, *out;
        if (filler) {
            check(em_unary(EM_UNARY_negate, filler, &busy), "filler");
            check(em_eval(&busy, 1), "filler eval");
        }
        check(em_device_event_record(GPU, &e0), "event");
        check(fn(in, &out), "build");
        check(em_eval(&out, 1), "eval");
        check(em_device_event_record(GPU, &e1), "event");
        double t;
        check(em_device_event_elapsed(e0, e1, &t), "elapsed");
        if (it >= WARMUP)
            ms[it - WARMUP] = t;
        em_array_release(busy);
        em_array_release(out);
        em_device_event_release(e0);
        em_device_event_release(e1);
    }
    qsort(ms, REPEAT, sizeof ms[0], cmp_double);
    return ms[REPEAT / 2];
}

/* Median GPU milliseconds of one build + eval of `fn`. */
static inline double time_op(build_fn fn, em_array *const *in) {
    return time_op_behind(fn, in, NULL);
}

#endif
