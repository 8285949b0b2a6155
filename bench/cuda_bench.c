/*
 * cuda_bench.c — Emily's GPU backend timed from C with CUDA events (through
 * em_device_event_*), after warm-up, on random data.
 *
 *   make cuda build/cuda_bench && build/cuda_bench
 *
 * Prints one "RESULT <name> <median ms> <figure> <unit>" line per case (read
 * by bench/cuda_torch.py, which runs PyTorch on the same cases in the same
 * run and prints the comparison table) and a table of its own.
 *
 * Each timed iteration builds the op's graph, evaluates it (which queues the
 * kernels and returns) and releases the result; events bracket the
 * iteration on the GPU's stream. The launch-overhead case is timed on the
 * host clock instead: it is the host's cost per eager op, then in its
 * phases (build, eval, release), then the plugin's bare launch of the same
 * job, then that launch in parts (eager_probe_*: the plugin's device
 * lookup, cudaGetLastError, and an empty kernel queued by <<<>>>, with the
 * error check, by cudaLaunchKernel and by the driver's cuLaunchKernel, with
 * the launch queue kept short; last, <<<>>> with the queue allowed to
 * fill). `build/cuda_bench --eager` prints only these.
 */
#include "../src/cuda/emily_cuda.h"
#include "cuda_bench_common.h"
#include "emily.h"
#include "emily_compile.h"
#include "emily_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static em_status op_negate(em_array *const *in, em_array **out) {
    return em_unary(EM_UNARY_negate, in[0], out);
}
static em_status op_add(em_array *const *in, em_array **out) {
    return em_binary(EM_BINARY_add, in[0], in[1], out);
}
static em_status op_exp(em_array *const *in, em_array **out) {
    return em_unary(EM_UNARY_exp, in[0], out);
}
static em_status op_sum(em_array *const *in, em_array **out) {
    return em_reduce(EM_REDUCE_sum, in[0], NULL, 0, false, out);
}
static em_status op_matmul(em_array *const *in, em_array **out) {
    return em_matmul(in[0], in[1], out);
}
/* softmax over the last axis: exp(x - max) / sum(exp(x - max)). */
static em_status op_softmax(em_array *const *in, em_array **out) {
    int axis = 1;
    em_array *m = NULL, *d = NULL, *e = NULL, *s = NULL;
    em_status st = em_reduce(EM_REDUCE_max, in[0], &axis, 1, true, &m);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_subtract, in[0], m, &d);
    if (st == EM_OK)
        st = em_unary(EM_UNARY_exp, d, &e);
    if (st == EM_OK)
        st = em_reduce(EM_REDUCE_sum, e, &axis, 1, true, &s);
    if (st == EM_OK)
        st = em_binary(EM_BINARY_divide, e, s, out);
    em_array_release(m);
    em_array_release(d);
    em_array_release(e);
    em_array_release(s);
    return st;
}

/* The chain of 8 elementwise ops (bench/cuda_torch.py runs the same):
 * y = -exp(abs(tanh(x * x + x) * x) - x). */
static em_status op_chain8(em_array *const *in, em_array **out) {
    em_array *x = in[0], *y = NULL, *z = NULL;
    em_status st = em_binary(EM_BINARY_multiply, x, x, &y);
    const struct {
        int unary, op;
    } steps[] = {{0, EM_BINARY_add},      {1, EM_UNARY_tanh},
                 {0, EM_BINARY_multiply}, {1, EM_UNARY_abs},
                 {0, EM_BINARY_subtract}, {1, EM_UNARY_exp},
                 {1, EM_UNARY_negate}};
    for (size_t i = 0; st == EM_OK && i < sizeof steps / sizeof steps[0]; i++) {
        st = steps[i].unary ? em_unary((em_unary_op)steps[i].op, y, &z)
                            : em_binary((em_binary_op)steps[i].op, y, x, &z);
        em_array_release(y);
        y = z;
        z = NULL;
    }
    *out = st == EM_OK ? y : NULL;
    if (st != EM_OK)
        em_array_release(y);
    return st;
}

/* `fn` traced once on a GPU placeholder shaped like x and built as a
 * program with fusion on. */
static em_program *fused_program(build_fn fn, em_array *x) {
    em_device old = em_set_default_device(GPU);
    em_array *ph, *out;
    em_program *p;
    em_program_options opts = {.fuse = true};
    check(em_placeholder(em_array_dtype(x), em_array_shape(x), em_array_ndim(x),
                         &ph),
          "placeholder");
    check(fn(&ph, &out), "trace");
    check(em_program_new(&ph, 1, &out, 1, &opts, &p), "program_new");
    em_array_release(out);
    em_array_release(ph);
    em_set_default_device(old);
    em_program_stats stats;
    em_program_get_stats(p, &stats);
    if (stats.fused_kernels < 1) {
        fprintf(stderr, "fused_program: nothing was fused\n");
        exit(1);
    }
    return p;
}

static em_program *timed_program;
static em_status op_program(em_array *const *in, em_array **out) {
    return em_program_run(timed_program, in, 1, out);
}

/* Median ms of one run of fn's fused program. */
static double time_fused(build_fn fn, em_array *x) {
    timed_program = fused_program(fn, x);
    double t = time_op(op_program, &x);
    em_program_release(timed_program);
    return t;
}

static void result(const char *name, double ms, double figure,
                   const char *unit) {
    printf("RESULT %s %.4f %.2f %s\n", name, ms, figure, unit);
    fflush(stdout);
}

/* libemily's accessor for the plugin (src/engine/internal.h): lets the
 * eager section time a bare launch, without the engine around it. */
em_status em__gpu_backend(em_device device, const em_cuda_api **api,
                          int *ordinal);

static double elapsed_us(struct timespec a, struct timespec b) {
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3;
}

/* The plugin's own cost for the eager add: the same contiguous f32 job
 * queued straight through em_cuda_api, per call. */
static void bare_launch(int iters) {
    const em_cuda_api *api;
    int ord;
    check(em__gpu_backend(GPU, &api, &ord), "backend");
    void *buf[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++)
        if (api->malloc(ord, 4096, &buf[k]))
            die(api->last_error());
    em_cuda_ew job;
    memset(&job, 0, sizeof job);
    job.family = EM_CUDA_BINARY;
    job.op = EM_BINARY_add;
    job.dtype_in = job.dtype_out = job.dtype_pred = EM_F32;
    job.nin = 2;
    job.ndim = 1;
    job.n = job.shape[0] = 1024;
    job.strides[0][0] = job.strides[1][0] = 1;
    job.in[0] = buf[0];
    job.in[1] = buf[1];
    job.out = buf[2];
    for (int it = 0; it < 1000; it++)
        api->elementwise(ord, &job);
    api->synchronize(ord);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int it = 0; it < iters; it++)
        if (api->elementwise(ord, &job))
            die(api->last_error());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    api->synchronize(ord);
    double us = elapsed_us(t0, t1) / iters;
    result("eager_add_1024_bare_launch", us / 1e3, us, "us");
    for (int k = 0; k < 3; k++)
        api->free(ord, buf[k]);
    /* The bare launch in parts (src/cuda/launch_probe.cu): host cost per
     * call with the launch queue kept short, then with it allowed to fill. */
    em_cuda_launch_probe p;
    if (api->launch_probe(ord, iters, &p))
        die(api->last_error());
    const struct {
        const char *name;
        double us;
    } parts[] = {
        {"eager_probe_device_lookup", p.device_lookup_us},
        {"eager_probe_get_last_error", p.get_last_error_us},
        {"eager_probe_empty_chevron", p.chevron_us},
        {"eager_probe_empty_chevron_checked", p.chevron_checked_us},
        {"eager_probe_empty_cudaLaunchKernel", p.launch_kernel_us},
        {"eager_probe_empty_cuLaunchKernel", p.driver_launch_us},
        {"eager_probe_empty_chevron_full_queue", p.full_queue_us},
    };
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
        result(parts[k].name, parts[k].us / 1e3, parts[k].us, "us");
}

int main(int argc, char **argv) {
    const char *reason;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason);
        return 0;
    }
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    /* --eager: only the host cost of eager ops (launch overhead);
     * --fusion: only the fused cases and their unfused counterparts. */
    bool eager_only = argc > 1 && !strcmp(argv[1], "--eager");
    bool fusion_only = argc > 1 && !strcmp(argv[1], "--fusion");
    const double gib = 1073741824.0;
    int64_t n1g[1] = {(int64_t)1 << 28}; /* 1 GiB of f32 */

    if (!eager_only && !fusion_only) {
        em_array *x = random_gpu(n1g, 1, EM_F32),
                 *y = random_gpu(n1g, 1, EM_F32);
        em_array *in[2] = {x, y};
        double t = time_op(op_negate, in);
        result("copy_like_negate_1GiB", t, 2 * gib / (t * 1e-3) / 1e9, "GB/s");
        t = time_op(op_add, in);
        result("add_1GiB", t, 3 * gib / (t * 1e-3) / 1e9, "GB/s");
        t = time_op(op_exp, in);
        result("exp_1GiB", t, 2 * gib / (t * 1e-3) / 1e9, "GB/s");
        t = time_op(op_sum, in);
        result("sum_1GiB", t, gib / (t * 1e-3) / 1e9, "GB/s");
        em_array_release(x);
        em_array_release(y);
    }
    if (!eager_only) {
        int64_t shape[2] = {4096, 32768};
        em_array *x = random_gpu(shape, 2, EM_F32);
        double t = time_op(op_softmax, &x);
        result("softmax_4096x32768", t,
               2.0 * 4096 * 32768 * 4 / (t * 1e-3) / 1e9, "GB/s");
        t = time_fused(op_softmax, x);
        result("softmax_fused_4096x32768", t,
               2.0 * 4096 * 32768 * 4 / (t * 1e-3) / 1e9, "GB/s");
        em_array_release(x);
    }
    if (!eager_only) {
        /* Figures count the fused kernel's traffic (x read, y written)
         * for both, so that they compare times. */
        em_array *x = random_gpu(n1g, 1, EM_F32);
        double t = time_op(op_chain8, &x);
        result("chain8_1GiB_unfused", t, 2 * gib / (t * 1e-3) / 1e9, "GB/s");
        t = time_fused(op_chain8, x);
        result("chain8_1GiB_fused", t, 2 * gib / (t * 1e-3) / 1e9, "GB/s");
        em_array_release(x);
    }
    if (fusion_only)
        return 0;
    int sizes[2] = {4096, 8192};
    em_dtype gemm_dtypes[2] = {EM_F32, EM_BF16};
    for (int di = 0; di < (eager_only ? 0 : 2); di++)
        for (int si = 0; si < (quick ? 1 : 2); si++) {
            int64_t n = sizes[si];
            int64_t shape[2] = {n, n};
            em_array *a = random_gpu(shape, 2, gemm_dtypes[di]);
            em_array *b = random_gpu(shape, 2, gemm_dtypes[di]);
            em_array *in[2] = {a, b};
            double t = time_op(op_matmul, in);
            char name[64];
            snprintf(name, sizeof name, "gemm_%s_%lld",
                     em_dtype_name(gemm_dtypes[di]), (long long)n);
            result(name, t, 2.0 * n * n * n / (t * 1e-3) / 1e12, "TFLOP/s");
            em_array_release(a);
            em_array_release(b);
        }
    {
        /* Host cost of one eager op: build, eval (queue), release. */
        int64_t shape[1] = {1024};
        em_array *x = random_gpu(shape, 1, EM_F32),
                 *y = random_gpu(shape, 1, EM_F32);
        int iters = 20000;
        struct timespec t0, t1;
        for (int it = 0; it < 1000; it++) {
            em_array *z;
            check(em_binary(EM_BINARY_add, x, y, &z), "add");
            check(em_eval(&z, 1), "eval");
            em_array_release(z);
        }
        check(em_device_synchronize(GPU), "sync");
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int it = 0; it < iters; it++) {
            em_array *z;
            check(em_binary(EM_BINARY_add, x, y, &z), "add");
            check(em_eval(&z, 1), "eval");
            em_array_release(z);
        }
        check(em_device_synchronize(GPU), "sync");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us =
            ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 /
            iters;
        result("eager_add_1024_per_op", us / 1e3, us, "us");
        /* The same op in its three host phases (clock read around each;
         * ~20 ns of each phase is the clock itself). */
        double phase[3] = {0, 0, 0};
        for (int it = 0; it < iters; it++) {
            em_array *z;
            struct timespec a, b, c, d;
            clock_gettime(CLOCK_MONOTONIC, &a);
            check(em_binary(EM_BINARY_add, x, y, &z), "add");
            clock_gettime(CLOCK_MONOTONIC, &b);
            check(em_eval(&z, 1), "eval");
            clock_gettime(CLOCK_MONOTONIC, &c);
            em_array_release(z);
            clock_gettime(CLOCK_MONOTONIC, &d);
            phase[0] += (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
            phase[1] += (c.tv_sec - b.tv_sec) * 1e9 + (c.tv_nsec - b.tv_nsec);
            phase[2] += (d.tv_sec - c.tv_sec) * 1e9 + (d.tv_nsec - c.tv_nsec);
        }
        check(em_device_synchronize(GPU), "sync");
        bare_launch(iters);
        const char *names[3] = {"build", "eval", "release"};
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "eager_add_1024_%s", names[k]);
            result(name, phase[k] / iters / 1e6, phase[k] / iters / 1e3, "us");
        }
        em_array_release(x);
        em_array_release(y);
    }
    em_memory_stats ms;
    em_memory_get_device_stats(GPU, &ms);
    printf("GPU memory: peak %.2f GiB, cache %.2f GiB\n", ms.peak / gib,
           ms.cache / gib);
    return 0;
}
