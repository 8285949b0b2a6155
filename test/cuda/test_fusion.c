/*
 * test_fusion.c — fused GPU kernels (src/engine/gpu/gpu_fusion.c,
 * src/cuda/fusion.cu) against the same programs unfused on the GPU.
 *
 * Each case traces a graph on GPU placeholders, builds it twice as a
 * program (fuse on and off), runs both on the same random GPU inputs and
 * compares: elementwise programs bit for bit (each fused instruction calls
 * its unfused kernel's functor and rounds to its dtype), max/min exactly,
 * sums and the normalisations built on them within a float sum's bound
 * (the fused kernel folds a row in another order). A case also fails when
 * the fused program made no fused kernel, so no case compares unfused
 * with unfused. Strided inputs are views traced inside the graph
 * (transposed, step-2 slices), read by the fused kernel through their
 * strides; broadcast inputs are rows and scalars.
 */
#include "cuda_test.h"
#include "emily_compile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAM "fusion"
#define MAX_IN 4

/* A graph over placeholders (borrowed); returns its output. `ph` holds
 * n placeholders in the order of the case's input shapes. */
typedef em_array *(*graph_fn)(em_array *const *ph);

static em_array *un(em_unary_op op, em_array *a) {
    em_array *o = NULL;
    die_on(em_unary(op, a, &o), "unary");
    em_array_release(a);
    return o;
}
static em_array *bin(em_binary_op op, em_array *a, em_array *b) {
    em_array *o = NULL;
    die_on(em_binary(op, a, b, &o), "binary");
    em_array_release(a);
    em_array_release(b);
    return o;
}
static em_array *ref(em_array *a) {
    em_array_retain(a);
    return a;
}
static em_array *red(em_reduce_op op, em_array *a, bool keep) {
    int axis = -1;
    em_array *o = NULL;
    die_on(em_reduce(op, a, &axis, 1, keep, &o), "reduce");
    em_array_release(a);
    return o;
}
/* A scalar on the GPU, evaluated: the program captures it as a constant. */
static em_array *scalar(double v, em_dtype d) {
    em_array *s = NULL, *o = NULL;
    die_on(em_scalar_f64(v, d, &s), "scalar");
    if (s)
        die_on(em_to_device(s, GPU, &o), "to_device");
    em_array_release(s);
    if (o)
        die_on(em_eval(&o, 1), "eval");
    return o;
}
static em_array *transposed(em_array *a) {
    int perm[2] = {1, 0};
    em_array *o = NULL;
    die_on(em_transpose(a, perm, 2, &o), "transpose");
    return o;
}
static em_array *step2(em_array *a) { /* [2r, 2c + 1] -> [r, c] */
    const int64_t *s = em_array_shape(a);
    int64_t start[2] = {0, 1}, stop[2] = {s[0], s[1]}, step[2] = {2, 2};
    em_array *o = NULL;
    die_on(em_slice(a, start, stop, step, &o), "slice");
    return o;
}
static int64_t last_dim(em_array *a) {
    return em_array_shape(a)[em_array_ndim(a) - 1];
}

/* ---- graphs ---- */

/* Eight elementwise ops over x [r, c], a row b [c], a transposed view of
 * t [c, r] and a step-2 slice of s [2r, 2c + 1]. */
static em_array *chain_graph(em_array *const *ph) {
    em_array *x = ph[0];
    em_array *y = bin(EM_BINARY_multiply, ref(x), ref(x));
    y = bin(EM_BINARY_add, y, ref(ph[1]));
    y = un(EM_UNARY_sin, y);
    y = bin(EM_BINARY_multiply, y, transposed(ph[2]));
    y = un(EM_UNARY_tanh, y);
    y = bin(EM_BINARY_subtract, y, step2(ph[3]));
    y = un(EM_UNARY_abs, y);
    return un(EM_UNARY_sqrt, y);
}

/* Eight ops on one contiguous input and a scalar: the vector path. */
static em_array *chain_contig_graph(em_array *const *ph) {
    em_array *x = ph[0];
    em_dtype d = em_array_dtype(x);
    em_array *y = bin(EM_BINARY_multiply, ref(x), scalar(1.5, d));
    y = un(EM_UNARY_exp, y);
    y = bin(EM_BINARY_add, y, ref(x));
    y = un(EM_UNARY_sin, y);
    y = bin(EM_BINARY_maximum, y, ref(x));
    y = un(EM_UNARY_negate, y);
    y = bin(EM_BINARY_divide, y, scalar(3.0, d));
    return un(EM_UNARY_tanh, y);
}

static em_array *softmax_graph(em_array *const *ph) {
    em_array *x = ph[0];
    em_array *m = red(EM_REDUCE_max, ref(x), true);
    em_array *e = un(EM_UNARY_exp, bin(EM_BINARY_subtract, ref(x), m));
    em_array *s = red(EM_REDUCE_sum, ref(e), true);
    return bin(EM_BINARY_divide, e, s);
}

static em_array *layer_norm_graph(em_array *const *ph) {
    em_array *x = ph[0];
    em_dtype d = em_array_dtype(x);
    double n = (double)last_dim(x);
    em_array *mu = bin(EM_BINARY_divide, red(EM_REDUCE_sum, ref(x), true),
                       scalar(n, d));
    em_array *xc = bin(EM_BINARY_subtract, ref(x), mu);
    em_array *sq = bin(EM_BINARY_multiply, ref(xc), ref(xc));
    em_array *var =
        bin(EM_BINARY_divide, red(EM_REDUCE_sum, sq, true), scalar(n, d));
    em_array *inv =
        un(EM_UNARY_rsqrt, bin(EM_BINARY_add, var, scalar(1e-5, d)));
    em_array *y = bin(EM_BINARY_multiply, xc, inv);
    y = bin(EM_BINARY_multiply, y, ref(ph[1]));
    return bin(EM_BINARY_add, y, ref(ph[2]));
}

static em_array *rms_norm_graph(em_array *const *ph) {
    em_array *x = ph[0];
    em_dtype d = em_array_dtype(x);
    double n = (double)last_dim(x);
    em_array *ms =
        bin(EM_BINARY_divide,
            red(EM_REDUCE_sum, bin(EM_BINARY_multiply, ref(x), ref(x)), true),
            scalar(n, d));
    em_array *inv =
        un(EM_UNARY_rsqrt, bin(EM_BINARY_add, ms, scalar(1e-6, d)));
    em_array *y = bin(EM_BINARY_multiply, ref(x), inv);
    return bin(EM_BINARY_multiply, y, ref(ph[1]));
}

/* max / min over the last axis (dropped) of x * x + b. */
static em_array *max_graph(em_array *const *ph) {
    em_array *y = bin(EM_BINARY_multiply, ref(ph[0]), ref(ph[0]));
    return red(EM_REDUCE_max, bin(EM_BINARY_add, y, ref(ph[1])), false);
}
static em_array *min_graph(em_array *const *ph) {
    em_array *y = bin(EM_BINARY_multiply, ref(ph[0]), ref(ph[0]));
    return red(EM_REDUCE_min, bin(EM_BINARY_subtract, y, ref(ph[1])), false);
}

/* ---- running a case ---- */

typedef struct fz_case {
    const char *name;
    graph_fn graph;
    int nin;
    int ndim[MAX_IN];
    int64_t shape[MAX_IN][2];
} fz_case;

/* The program of `c` on GPU placeholders, fused or not (NULL on failure). */
static em_program *build(const fz_case *c, em_dtype d, bool fuse) {
    em_device old = em_set_default_device(GPU);
    em_array *ph[MAX_IN] = {0};
    em_program *p = NULL;
    bool ok = true;
    for (int i = 0; i < c->nin; i++) {
        em_status st = em_placeholder(d, c->shape[i], c->ndim[i], &ph[i]);
        die_on(st, "placeholder");
        ok = ok && st == EM_OK;
    }
    if (ok) {
        em_array *out = c->graph(ph);
        em_program_options opts = {.fuse = fuse};
        if (out)
            die_on(em_program_new(ph, (size_t)c->nin, &out, 1, &opts, &p),
                   "program_new");
        em_array_release(out);
    }
    for (int i = 0; i < c->nin; i++)
        em_array_release(ph[i]);
    em_set_default_device(old);
    return p;
}

static em_array *run(em_program *p, em_array *const *in, int nin) {
    em_array *out = NULL;
    em_status st = em_program_run(p, in, (size_t)nin, &out);
    if (st == EM_OK)
        st = em_eval(&out, 1);
    if (st != EM_OK) {
        printf("  run: %s\n", em_last_error());
        em_array_release(out);
        return NULL;
    }
    return out;
}

/* Bit-for-bit equality; prints the first difference. */
static bool same_bytes(em_array *a, em_array *b, const char *what) {
    size_t n = em_array_nbytes(a);
    if (em_array_nbytes(b) != n || em_array_dtype(a) != em_array_dtype(b))
        return false;
    unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
    bool ok = em_read(a, x, n) == EM_OK && em_read(b, y, n) == EM_OK;
    if (ok && memcmp(x, y, n) != 0) {
        size_t es = em_dtype_size(em_array_dtype(a));
        for (size_t i = 0; i < n / es; i++)
            if (memcmp(x + i * es, y + i * es, es)) {
                printf("  %s: element %zu differs (%g vs %g)\n", what, i,
                       load_real(em_array_dtype(a), x, (int64_t)i, 0),
                       load_real(em_array_dtype(a), y, (int64_t)i, 0));
                break;
            }
        ok = false;
    }
    free(x);
    free(y);
    return ok;
}

/* Runs case c for dtype d on random inputs; tol < 0: bit-identical, else
 * compare() with that tolerance scale. */
static void check_case(const fz_case *c, em_dtype d, double tol, bool edges) {
    char what[128];
    snprintf(what, sizeof what, "%s %s [%lld, %lld]", c->name,
             em_dtype_name(d), (long long)c->shape[0][0],
             (long long)c->shape[0][1]);
    em_program *pf = build(c, d, true), *pu = build(c, d, false);
    em_array *in[MAX_IN] = {0};
    for (int i = 0; i < c->nin; i++) {
        em_array *host = random_array(d, c->shape[i], c->ndim[i], edges, 0);
        if (host)
            die_on(em_to_device(host, GPU, &in[i]), "to_device");
        em_array_release(host);
    }
    em_array *rf = NULL, *ru = NULL;
    if (pf && pu) {
        rf = run(pf, in, c->nin);
        ru = run(pu, in, c->nin);
    }
    em_program_stats stats = {0};
    if (pf)
        em_program_get_stats(pf, &stats);
    if (!rf || !ru) {
        record(FAM, what, false, INFINITY);
    } else if (stats.fused_kernels < 1) {
        printf("  %s: nothing was fused\n", what);
        record(FAM, what, false, INFINITY);
    } else if (tol < 0) {
        bool ok = same_bytes(ru, rf, what);
        record(FAM, what, ok, ok ? 0 : INFINITY);
    } else {
        double worst = compare(ru, rf, what, tol);
        record(FAM, what, worst <= 1, worst);
    }
    em_array_release(rf);
    em_array_release(ru);
    for (int i = 0; i < c->nin; i++)
        em_array_release(in[i]);
    em_program_release(pf);
    em_program_release(pu);
    fflush(stdout); /* the log shows how far a crashed run got */
}

static fz_case rows_case(const char *name, graph_fn g, int nin, int64_t rows,
                         int64_t len) {
    fz_case c = {name, g, nin, {2, 1, 1}, {{rows, len}, {len}, {len}}};
    return c;
}

void test_fusion(void) {
    const em_dtype floats[] = {EM_F32, EM_F16, EM_BF16, EM_F64};
    const int64_t sizes[][2] = {{37, 129}, {64, 256}};
    for (size_t di = 0; di < sizeof floats / sizeof floats[0]; di++) {
        em_dtype d = floats[di];
        for (size_t si = 0; si < 2; si++) {
            int64_t r = sizes[si][0], cols = sizes[si][1];
            fz_case chain = {"chain8 strided+broadcast",
                             chain_graph,
                             4,
                             {2, 1, 2, 2},
                             {{r, cols}, {cols}, {cols, r}, {2 * r, 2 * cols + 1}}};
            check_case(&chain, d, -1, true);
            fz_case contig = {"chain8 contiguous", chain_contig_graph, 1, {2},
                              {{r, cols}}};
            check_case(&contig, d, -1, true);
        }
    }

    /* Rows: one block per row, cached in shared memory up to 32768 f32,
     * read again per stage beyond. */
    const int64_t lens[] = {1, 7, 1000, 32768, 100000};
    const int64_t nrows[] = {33, 33, 33, 5, 3};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t len = lens[li], rows = nrows[li];
        /* A float sum's bound grows with the terms folded: a few ulp per
         * level of the block's tree plus the per-thread runs. */
        double tol = 8 + log2((double)len + 1);
        em_dtype ds[] = {EM_F32, EM_BF16};
        for (int k = 0; k < 2; k++) {
            em_dtype d = ds[k];
            fz_case sm = rows_case("softmax", softmax_graph, 1, rows, len);
            check_case(&sm, d, tol, false);
            fz_case ln = rows_case("layer norm", layer_norm_graph, 3, rows, len);
            /* Variance cancels: (x - mu)^2 sums carry the mean's error. */
            check_case(&ln, d, 4 * tol, false);
            fz_case rn = rows_case("rms norm", rms_norm_graph, 2, rows, len);
            check_case(&rn, d, tol, false);
            fz_case mx = rows_case("max", max_graph, 2, rows, len);
            check_case(&mx, d, -1, true);
            fz_case mn = rows_case("min", min_graph, 2, rows, len);
            check_case(&mn, d, -1, true);
        }
    }
    /* NaN / Inf rows: NaN where the unfused result has NaN. */
    fz_case sme = rows_case("softmax edges", softmax_graph, 1, 33, 1000);
    check_case(&sme, EM_F32, 16, true);

    /* Kernels are cached by structure: the same softmax on other shapes
     * compiles nothing new. */
    fz_case a = rows_case("softmax cache", softmax_graph, 1, 9, 300);
    check_case(&a, EM_F32, 16, false);
    int64_t before = em_fused_kernels_compiled();
    fz_case b = rows_case("softmax cache", softmax_graph, 1, 17, 5000);
    check_case(&b, EM_F32, 16, false);
    int64_t after = em_fused_kernels_compiled();
    char what[96];
    snprintf(what, sizeof what,
             "cache: another shape compiles nothing (%lld then %lld kernels)",
             (long long)before, (long long)after);
    record(FAM, what, before > 0 && after == before, after == before ? 0 : 1e9);
}
