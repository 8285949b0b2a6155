/*
 * fusion_bench.c — fused against unfused ("eager") evaluation of the same
 * graph, in one process, alternating:
 *
 *   chain8   y = tanh(exp(-(x*a + b)^2) * c - x), 8 elementwise ops over
 *            16M f32 (a, b, c scalars)
 *   cheap8   y = max(|(x*a + b)^2 * c - x|, x) / c, 8 cheap elementwise
 *            ops over 16M f32 (memory-bound unfused)
 *   sumsq    sum((x*a + b)^2) over all 16M f32 (a fused trailing reduction)
 *   softmax  over the last axis of (4096, 4096) f32: max-reduce, subtract,
 *            exp, sum-reduce, divide (5 nodes)
 *   layernorm over the last axis of (4096, 4096) f32 (mean, variance,
 *            rsqrt, scale and shift: 11 nodes)
 *
 * Eager: build the graph, em_eval, release. Fused: build the graph, put it
 * on a tape (em__topo_order), em__fuse_tape, em_eval, release: the pass's
 * cost is inside the timing. Inputs are evaluated before. The first run of
 * each checks that fused equals eager (chain8 bit for bit; softmax within
 * 2 f32 eps). Output lines: R <tab> case <tab> variant <tab> median_s <tab>
 * min_s <tab> reps <tab> median CPU s (all threads) (bench/fusion_bench.sh
 * adds numpy and the ratios).
 *
 * Environment: BENCH_REPS = timed runs per variant (default 7).
 */
#include "emily.h"
#include "compile/tape.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void check(em_status st, const char *what) {
    if (st != EM_OK) {
        fprintf(stderr, "fusion_bench: %s: %s\n", what, em_last_error());
        exit(1);
    }
}

/* CPU time of the whole process (all threads): less sensitive than wall
 * time to other programs sharing the cores. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static em_array *un(em_unary_op op, em_array *a, bool consume) {
    em_array *o;
    check(em_unary(op, a, &o), "unary");
    if (consume)
        em_array_release(a);
    return o;
}
static em_array *bin(em_binary_op op, em_array *a, em_array *b,
                     bool consume_a) {
    em_array *o;
    check(em_binary(op, a, b, &o), "binary");
    if (consume_a)
        em_array_release(a);
    return o;
}

typedef struct inputs {
    em_array *x, *a, *b, *c;
} inputs;

static em_array *chain8(const inputs *in) {
    em_array *t = bin(EM_BINARY_multiply, in->x, in->a, false);
    t = bin(EM_BINARY_add, t, in->b, true);
    em_array *sq = bin(EM_BINARY_multiply, t, t, false);
    em_array_release(t);
    t = un(EM_UNARY_negate, sq, true);
    t = un(EM_UNARY_exp, t, true);
    t = bin(EM_BINARY_multiply, t, in->c, true);
    t = bin(EM_BINARY_subtract, t, in->x, true);
    return un(EM_UNARY_tanh, t, true);
}

/* Eight cheap ops (no transcendental): memory-bound when unfused. */
static em_array *cheap8(const inputs *in) {
    em_array *t = bin(EM_BINARY_multiply, in->x, in->a, false);
    t = bin(EM_BINARY_add, t, in->b, true);
    em_array *sq = bin(EM_BINARY_multiply, t, t, false);
    em_array_release(t);
    t = bin(EM_BINARY_multiply, sq, in->c, true);
    t = bin(EM_BINARY_subtract, t, in->x, true);
    t = un(EM_UNARY_abs, t, true);
    t = bin(EM_BINARY_maximum, t, in->x, true);
    return bin(EM_BINARY_divide, t, in->c, true);
}

/* A trailing full reduction: sum((x*a + b)^2) over all 16M elements. */
static em_array *sumsq(const inputs *in) {
    em_array *t = bin(EM_BINARY_multiply, in->x, in->a, false);
    t = bin(EM_BINARY_add, t, in->b, true);
    em_array *sq = bin(EM_BINARY_multiply, t, t, false), *s;
    em_array_release(t);
    check(em_reduce(EM_REDUCE_sum, sq, NULL, 0, false, &s), "sum");
    em_array_release(sq);
    return s;
}

static em_array *softmax(const inputs *in) {
    int axis = -1;
    em_array *m, *s;
    check(em_reduce(EM_REDUCE_max, in->x, &axis, 1, true, &m), "max");
    em_array *e = bin(EM_BINARY_subtract, in->x, m, false);
    em_array_release(m);
    e = un(EM_UNARY_exp, e, true);
    check(em_reduce(EM_REDUCE_sum, e, &axis, 1, true, &s), "sum");
    em_array *y = bin(EM_BINARY_divide, e, s, true);
    em_array_release(s);
    return y;
}

/* Layer norm over the last axis: (x - mean) * rsqrt(var + 1e-5) * g + b
 * (g = a, b = b: scalars here), 11 nodes with two row sums. */
static em_array *layer_norm(const inputs *in) {
    int axis = -1;
    double n = (double)in->x->shape[in->x->ndim - 1];
    em_array *s, *v, *nn, *eps;
    check(em_scalar_f64(n, EM_F32, &nn), "scalar");
    check(em_scalar_f64(1e-5, EM_F32, &eps), "scalar");
    check(em_reduce(EM_REDUCE_sum, in->x, &axis, 1, true, &s), "sum");
    em_array *mu = bin(EM_BINARY_divide, s, nn, true);
    em_array *xc = bin(EM_BINARY_subtract, in->x, mu, false);
    em_array_release(mu);
    em_array *sq = bin(EM_BINARY_multiply, xc, xc, false);
    check(em_reduce(EM_REDUCE_sum, sq, &axis, 1, true, &v), "sum");
    em_array_release(sq);
    em_array *var = bin(EM_BINARY_divide, v, nn, true);
    em_array *r = un(EM_UNARY_rsqrt, bin(EM_BINARY_add, var, eps, true), true);
    em_array *y = bin(EM_BINARY_multiply, xc, r, true);
    em_array_release(r);
    y = bin(EM_BINARY_multiply, y, in->a, true);
    y = bin(EM_BINARY_add, y, in->b, true);
    em_array_release(nn);
    em_array_release(eps);
    return y;
}

/* One run; returns the (evaluated) result. */
static em_array *run(em_array *(*graph)(const inputs *), const inputs *in,
                     bool fused) {
    em_array *y = graph(in);
    if (fused) {
        em__tape tape;
        memset(&tape, 0, sizeof tape);
        check(em__topo_order(&y, 1, &tape.nodes, &tape.len), "topo");
        tape.outputs = &y;
        tape.noutputs = 1;
        int nf;
        check(em__fuse_tape(&tape, &nf), "fuse");
        if (nf != 1) {
            fprintf(stderr, "fusion_bench: %d fused kernels, expected 1\n", nf);
            exit(1);
        }
        for (size_t i = 0; i < tape.len; i++)
            em_array_release(tape.nodes[i]);
        free(tape.nodes);
    }
    check(em_eval(&y, 1), "eval");
    return y;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_case(const char *name, em_array *(*graph)(const inputs *),
                       const inputs *in, double tol, int reps) {
    /* tol: 0 = bit for bit, else |fused - eager| <= tol * (1 + |eager|). */
    /* Check once. */
    em_array *ye = run(graph, in, false), *yf = run(graph, in, true);
    size_t n = em_array_nbytes(ye) / sizeof(float);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    check(em_read(ye, a, n * sizeof(float)), "read");
    check(em_read(yf, b, n * sizeof(float)), "read");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (tol == 0 ? memcmp(&a[i], &b[i], 4) != 0
                     : !(fabsf(a[i] - b[i]) <= tol * (1 + fabsf(a[i]))))
            bad++;
    if (bad) {
        fprintf(stderr, "fusion_bench: %s: %zu elements differ\n", name, bad);
        exit(1);
    }
    free(a);
    free(b);
    em_array_release(ye);
    em_array_release(yf);

    double *t[2], *c[2];
    for (int v = 0; v < 2; v++) {
        t[v] = malloc(sizeof(double) * (size_t)reps);
        c[v] = malloc(sizeof(double) * (size_t)reps);
    }
    for (int w = 0; w < 2; w++) /* warm-up */
        for (int v = 0; v < 2; v++)
            em_array_release(run(graph, in, v == 1));
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            int v = (r + k) % 2; /* alternate which goes first */
            double t0 = now_s(), c0 = cpu_s();
            em_array_release(run(graph, in, v == 1));
            t[v][r] = now_s() - t0;
            c[v][r] = cpu_s() - c0;
        }
    const char *variant[2] = {"eager", "fused"};
    for (int v = 0; v < 2; v++) {
        qsort(t[v], (size_t)reps, sizeof(double), cmp_double);
        qsort(c[v], (size_t)reps, sizeof(double), cmp_double);
        printf("R\t%s\t%s\t%.6f\t%.6f\t%d\t%.6f\n", name, variant[v],
               t[v][reps / 2], t[v][0], reps, c[v][reps / 2]);
        free(t[v]);
        free(c[v]);
    }
    fflush(stdout);
}

static em_array *random_f32(const int64_t *shape, int nd, float lo, float hi,
                            unsigned seed) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)n);
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = lo + (hi - lo) * (float)((double)(s >> 40) / 16777216.0);
    }
    em_array *a;
    check(em_from_data(v, sizeof(float) * (size_t)n, shape, nd, EM_F32, &a),
          "from_data");
    free(v);
    return a;
}

static em_array *scalar(double v) {
    em_array *a;
    check(em_scalar_f64(v, EM_F32, &a), "scalar");
    check(em_eval(&a, 1), "eval");
    return a;
}

int main(void) {
    const char *r = getenv("BENCH_REPS");
    int reps = r ? atoi(r) : 7;
    if (reps < 1)
        reps = 1;
    printf("# fusion_bench: median of %d runs per variant, alternating\n",
           reps);

    int64_t n16m = 16 << 20;
    inputs in = {random_f32(&n16m, 1, -2, 2, 1), scalar(0.7), scalar(0.1),
                 scalar(1.3)};
    bench_case("chain8_16M_f32", chain8, &in, 0, reps);
    bench_case("cheap8_16M_f32", cheap8, &in, 0, reps);
    /* Sums reassociate: bound n eps relative (all terms positive). */
    bench_case("sumsq_16M_f32", sumsq, &in, (double)n16m * FLT_EPSILON, reps);
    em_array_release(in.x);

    int64_t sq[2] = {4096, 4096};
    in.x = random_f32(sq, 2, -8, 8, 2);
    bench_case("softmax_4096x4096_f32", softmax, &in, 2 * FLT_EPSILON, reps);
    bench_case("layernorm_4096x4096_f32", layer_norm, &in, 16 * FLT_EPSILON,
               reps);
    em_array_release(in.x);
    em_array_release(in.a);
    em_array_release(in.b);
    em_array_release(in.c);
    return 0;
}
