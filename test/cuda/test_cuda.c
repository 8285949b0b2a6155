/*
 * test_cuda.c — every GPU op against the CPU backend.
 *
 * Each case builds the same graph from the same random inputs twice, once
 * on the CPU and once on gpu:0 (inputs moved with em_to_device, views made
 * on the GPU so that its kernels see the strides), reads both back and
 * compares element by element: integers, pred, copies and conversions
 * exactly; floats within a few units in the last place of their dtype
 * (NaN must match NaN, infinities must match); matrix products by
 * ||gpu - cpu|| / ||cpu|| as METHOD.md gives. Fresh GPU blocks are filled
 * with 0xff (EMILY_CUDA_POISON=1) so an element a kernel forgets to write
 * reads as NaN or -1 and fails. Layouts: contiguous, transposed, broadcast
 * and step-2 slices, sizes with ragged tails.
 *
 * Without a GPU, driver or plugin it prints "skipped: <reason>" and exits 0.
 * Exit status 1 when any case fails. A summary table ends the output.
 */
#include "cuda_test.h"
#include "emily_fft.h"
#include "emily_pad.h"
#include "emily_random.h"
#include "emily_scan.h"
#include "emily_sort.h"

#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_unary(void) {
    for (int op = 0; op < EM_UNARY_COUNT; op++)
        for (int di = 0; di < NDTYPES; di++)
            for (int l = 0; l < LAYOUT_COUNT; l++) {
                em_dtype d = all_dtypes[di];
                if (skip_dtype(d))
                    continue;
                em_array *base = base_for(d, 37, 129, (enum layout)l, true, 0);
                em_array *vc = view_on(base, EM_DEVICE_CPU, (enum layout)l);
                em_array *vg = view_on(base, GPU, (enum layout)l);
                em_array *rc = NULL, *rg = NULL;
                em_status st = em_unary((em_unary_op)op, vc, &rc);
                char what[96];
                snprintf(what, sizeof what, "%s %s %s",
                         em_unary_name((em_unary_op)op), em_dtype_name(d),
                         layout_names[l]);
                if (st == EM_OK) {
                    st = em_unary((em_unary_op)op, vg, &rg);
                    em_dtype od = em_array_dtype(rc);
                    if (st != EM_OK) {
                        printf("  %s: %s\n", what, em_last_error());
                        record("unary", what, false, INFINITY);
                    } else if (od == EM_F64 || od == EM_C128 ||
                               (!em_dtype_is_float(od) &&
                                !em_dtype_is_complex(od))) {
                        /* No wider reference for f64: near the poles of
                         * tan/tanh (condition number |1 -+ f^2| up to 1e5
                         * on these inputs) two correct results differ by
                         * the input's rounding, amplified. */
                        bool poles = op == EM_UNARY_tan || op == EM_UNARY_tanh;
                        double w = compare(rc, rg, what, poles ? 100 : 1);
                        record("unary", what, w <= 1, w);
                    } else {
                        /* float64 reference from the same inputs */
                        em_array *wide = NULL, *ref = NULL;
                        die_on(em_as_type(vc,
                                          em_dtype_is_complex(d) ? EM_C128
                                                                 : EM_F64,
                                          &wide),
                               "as_type");
                        die_on(em_unary((em_unary_op)op, wide, &ref), what);
                        double w =
                            ref ? compare_ref(rc, rg, ref, what) : INFINITY;
                        record("unary", what, w <= 1, w);
                        em_array_release(wide);
                        em_array_release(ref);
                    }
                }
                em_array_release(rc);
                em_array_release(rg);
                em_array_release(vc);
                em_array_release(vg);
                em_array_release(base);
            }
}

static void test_binary(void) {
    for (int op = 0; op < EM_BINARY_COUNT; op++)
        for (int di = 0; di < NDTYPES; di++)
            for (int l = 0; l < LAYOUT_COUNT + 1; l++) {
                em_dtype d = all_dtypes[di];
                if (skip_dtype(d))
                    continue;
                bool bcast = l == LAYOUT_COUNT;
                enum layout la = bcast ? CONTIGUOUS : (enum layout)l;
                /* Shifts and pow on integers: small right operands so the
                 * in-range paths are exercised too. */
                int small =
                    (op == EM_BINARY_left_shift ||
                     op == EM_BINARY_right_shift || op == EM_BINARY_pow) &&
                            em_dtype_is_integer(d)
                        ? 70
                        : 0;
                em_array *ba = base_for(d, 37, 129, la, true, 0);
                em_array *bb =
                    bcast ? random_array(d, (int64_t[]){1, 129}, 2, true, small)
                          : base_for(d, 37, 129, la, true, small);
                em_array *ac = view_on(ba, EM_DEVICE_CPU, la),
                         *ag = view_on(ba, GPU, la);
                em_array *bc = view_on(bb, EM_DEVICE_CPU, CONTIGUOUS),
                         *bg = view_on(bb, GPU, CONTIGUOUS);
                if (!bcast && la != CONTIGUOUS) {
                    em_array_release(bc);
                    em_array_release(bg);
                    bc = view_on(bb, EM_DEVICE_CPU, la);
                    bg = view_on(bb, GPU, la);
                }
                em_array *rc = NULL, *rg = NULL;
                char what[96];
                snprintf(what, sizeof what, "%s %s %s",
                         em_binary_name((em_binary_op)op), em_dtype_name(d),
                         bcast ? "broadcast" : layout_names[la]);
                if (em_binary((em_binary_op)op, ac, bc, &rc) == EM_OK) {
                    if (em_binary((em_binary_op)op, ag, bg, &rg) != EM_OK) {
                        printf("  %s: %s\n", what, em_last_error());
                        record("binary", what, false, INFINITY);
                    } else {
                        /* pow compounds rounding: a little more room. */
                        double w =
                            compare(rc, rg, what, op == EM_BINARY_pow ? 8 : 1);
                        record("binary", what, w <= 1, w);
                    }
                }
                em_array *arr[] = {rc, rg, ac, ag, bc, bg, ba, bb};
                for (int i = 0; i < 8; i++)
                    em_array_release(arr[i]);
            }
}

static void test_select_clip_cast(void) {
    for (int di = 0; di < NDTYPES; di++) {
        em_dtype d = all_dtypes[di];
        if (skip_dtype(d))
            continue;
        /* select: pred of every dtype, values of d (broadcast on_false) */
        for (int pi = 0; pi < NDTYPES; pi += 3) {
            em_dtype pd = all_dtypes[pi];
            em_array *p = base_for(pd, 37, 129, TRANSPOSED, false, 2);
            em_array *t = base_for(d, 37, 129, CONTIGUOUS, true, 0);
            em_array *f = random_array(d, (int64_t[]){37, 1}, 2, true, 0);
            em_array *pc = view_on(p, EM_DEVICE_CPU, TRANSPOSED),
                     *pg = view_on(p, GPU, TRANSPOSED);
            em_array *tc = view_on(t, EM_DEVICE_CPU, CONTIGUOUS),
                     *tg = view_on(t, GPU, CONTIGUOUS);
            em_array *fc = view_on(f, EM_DEVICE_CPU, CONTIGUOUS),
                     *fg = view_on(f, GPU, CONTIGUOUS);
            em_array *rc = NULL, *rg = NULL;
            char what[64];
            snprintf(what, sizeof what, "select %s on %s", em_dtype_name(d),
                     em_dtype_name(pd));
            die_on(em_select(pc, tc, fc, &rc), what);
            die_on(em_select(pg, tg, fg, &rg), what);
            double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("select", what, w <= 1, w);
            em_array *arr[] = {p, t, f, pc, pg, tc, tg, fc, fg, rc, rg};
            for (int i = 0; i < 11; i++)
                em_array_release(arr[i]);
        }
        /* clip */
        if (!em_dtype_is_complex(d)) {
            em_array *a = base_for(d, 37, 129, SLICED, true, 0);
            em_array *lo = random_array(d, (int64_t[]){1, 129}, 2, false, 0);
            em_array *hi = random_array(d, NULL, 0, false, 0);
            em_array *ac = view_on(a, EM_DEVICE_CPU, SLICED),
                     *ag = view_on(a, GPU, SLICED);
            em_array *lc = view_on(lo, EM_DEVICE_CPU, CONTIGUOUS),
                     *lg = view_on(lo, GPU, CONTIGUOUS);
            em_array *hc = view_on(hi, EM_DEVICE_CPU, CONTIGUOUS),
                     *hg = view_on(hi, GPU, CONTIGUOUS);
            em_array *rc = NULL, *rg = NULL;
            char what[64];
            snprintf(what, sizeof what, "clip %s", em_dtype_name(d));
            die_on(em_clip(ac, lc, hc, &rc), what);
            die_on(em_clip(ag, lg, hg, &rg), what);
            double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("clip", what, w <= 1, w);
            em_array *arr[] = {a, lo, hi, ac, ag, lc, lg, hc, hg, rc, rg};
            for (int i = 0; i < 11; i++)
                em_array_release(arr[i]);
        }
        /* as_type to every dtype, from a strided view: exact (the GPU
         * converts through the same 64-bit classes as the CPU). */
        for (int ti = 0; ti < NDTYPES; ti++) {
            em_dtype to = all_dtypes[ti];
            em_array *a = base_for(d, 37, 129, TRANSPOSED, true, 0);
            em_array *ac = view_on(a, EM_DEVICE_CPU, TRANSPOSED),
                     *ag = view_on(a, GPU, TRANSPOSED);
            em_array *rc = NULL, *rg = NULL;
            char what[64];
            snprintf(what, sizeof what, "as_type %s -> %s", em_dtype_name(d),
                     em_dtype_name(to));
            die_on(em_as_type(ac, to, &rc), what);
            die_on(em_as_type(ag, to, &rg), what);
            double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("as_type", what, w <= 1, w);
            em_array *arr[] = {a, ac, ag, rc, rg};
            for (int i = 0; i < 5; i++)
                em_array_release(arr[i]);
        }
        /* contiguous copy and a copying reshape of a transposed view */
        {
            em_array *a = base_for(d, 37, 129, TRANSPOSED, true, 0);
            em_array *ac = view_on(a, EM_DEVICE_CPU, TRANSPOSED),
                     *ag = view_on(a, GPU, TRANSPOSED);
            em_array *rc = NULL, *rg = NULL;
            int64_t shape[3] = {129, 37, 1};
            die_on(em_reshape(ac, shape, 3, &rc), "reshape");
            die_on(em_reshape(ag, shape, 3, &rg), "reshape");
            char what[64];
            snprintf(what, sizeof what, "reshape copy %s", em_dtype_name(d));
            double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("copy", what, w <= 1, w);
            em_array *arr[] = {a, ac, ag, rc, rg};
            for (int i = 0; i < 5; i++)
                em_array_release(arr[i]);
        }
        /* iota on the GPU (default device) against the CPU */
        {
            int64_t shape[3] = {5, 300, 7};
            em_array *rc = NULL, *rg = NULL;
            die_on(em_iota(shape, 3, 1, d, &rc), "iota");
            em_device old = em_set_default_device(GPU);
            die_on(em_iota(shape, 3, 1, d, &rg), "iota gpu");
            em_set_default_device(old);
            char what[64];
            snprintf(what, sizeof what, "iota %s", em_dtype_name(d));
            double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("iota", what, w <= 1, w);
            em_array_release(rc);
            em_array_release(rg);
        }
    }
}

/* ---- reductions ------------------------------------------------------------ */

static void test_reduce(void) {
    int64_t shape[3] = {23, 45, 67};
    static const int axes_sets[][3] = {{0}, {1}, {2}, {0, 2}, {1, 2}};
    static const int axes_counts[] = {1, 1, 1, 2, 2};
    for (int op = 0; op < EM_REDUCE_COUNT; op++)
        for (int di = 0; di < NDTYPES; di++)
            for (int ai = -1; ai < 5; ai++)
                for (int tr = 0; tr < 2; tr++) {
                    em_dtype d = all_dtypes[di];
                    if (skip_dtype(d))
                        continue;
                    /* Products of many values overflow: small integers and
                     * values near 1 keep them meaningful. */
                    em_array *a =
                        random_array(d, shape, 3, op != EM_REDUCE_product,
                                     op == EM_REDUCE_product ? -1 : 0);
                    em_array *ac = NULL, *ag = NULL, *g = NULL;
                    die_on(em_to_device(a, GPU, &g), "to_device");
                    int perm[3] = {2, 0, 1};
                    if (tr) {
                        die_on(em_transpose(a, perm, 3, &ac), "transpose");
                        die_on(em_transpose(g, perm, 3, &ag), "transpose");
                    } else {
                        em_array_retain(a);
                        em_array_retain(g);
                        ac = a;
                        ag = g;
                    }
                    const int *axes = ai < 0 ? NULL : axes_sets[ai];
                    int naxes = ai < 0 ? 0 : axes_counts[ai];
                    em_array *rc = NULL, *rg = NULL;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s axes#%d%s",
                             em_reduce_name((em_reduce_op)op), em_dtype_name(d),
                             ai, tr ? " transposed" : "");
                    if (em_reduce((em_reduce_op)op, ac, axes, naxes, false,
                                  &rc) == EM_OK) {
                        if (em_reduce((em_reduce_op)op, ag, axes, naxes, false,
                                      &rg) != EM_OK) {
                            printf("  %s: %s\n", what, em_last_error());
                            record("reduce", what, false, INFINITY);
                        } else {
                            /* Sums and products fold in another order: the
                             * error bound grows with the terms folded. */
                            int64_t folded =
                                em_array_size(a) /
                                (em_array_size(rc) ? em_array_size(rc) : 1);
                            double w = op <= EM_REDUCE_product
                                           ? compare_floor(rc, rg, what, 4,
                                                           (double)folded)
                                           : compare(rc, rg, what, 0);
                            record("reduce", what, w <= 1, w);
                        }
                    }
                    em_array *arr[] = {a, g, ac, ag, rc, rg};
                    for (int i = 0; i < 6; i++)
                        em_array_release(arr[i]);
                }
    /* argmax/argmin with ties (small integers) and NaNs (floats). */
    for (int op = 0; op < 2; op++)
        for (int di = 0; di < NDTYPES; di++)
            for (int axis = -1; axis < 3; axis++)
                for (int tie = 0; tie < 2; tie++) {
                    em_dtype d = all_dtypes[di];
                    if (skip_dtype(d))
                        continue;
                    if (em_dtype_is_complex(d))
                        continue;
                    em_array *a = random_array(d, shape, 3, true, 4);
                    em_array *g = NULL, *rc = NULL, *rg = NULL;
                    die_on(em_to_device(a, GPU, &g), "to_device");
                    em_argreduce_options o;
                    memset(&o, 0, sizeof o);
                    o.axis = axis < 0 ? 0 : axis;
                    o.all_axes = axis < 0;
                    o.tie_high = tie;
                    o.dtype = axis == 1 ? EM_S32 : EM_S64;
                    char what[96];
                    snprintf(what, sizeof what, "%s %s axis %d tie_high %d",
                             op ? "argmin" : "argmax", em_dtype_name(d), axis,
                             tie);
                    die_on(em_argreduce((em_argreduce_op)op, a, &o, &rc), what);
                    die_on(em_argreduce((em_argreduce_op)op, g, &o, &rg), what);
                    double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
                    record("argreduce", what, w <= 1, w);
                    em_array *arr[] = {a, g, rc, rg};
                    for (int i = 0; i < 4; i++)
                        em_array_release(arr[i]);
                }
    /* One long reduction (split across blocks) of each float dtype. */
    em_dtype long_dtypes[] = {EM_F32, EM_F64, EM_BF16, EM_S32};
    for (int i = 0; i < 4; i++) {
        int64_t n = (int64_t)1 << 22;
        em_array *a = random_array(long_dtypes[i], &n, 1, false, 0);
        em_array *g = NULL, *rc = NULL, *rg = NULL;
        die_on(em_to_device(a, GPU, &g), "to_device");
        die_on(em_reduce(EM_REDUCE_sum, a, NULL, 0, false, &rc), "sum");
        die_on(em_reduce(EM_REDUCE_sum, g, NULL, 0, false, &rg), "sum");
        char what[64];
        snprintf(what, sizeof what, "sum of 2^22 %s",
                 em_dtype_name(long_dtypes[i]));
        /* The sum of 4M values in [-3, 3] is ~O(3000): rounding of the
         * ordering dominates; compare by the sum of magnitudes. */
        double w =
            rc && rg ? compare_floor(rc, rg, what, 4, (double)n) : INFINITY;
        record("reduce", what, w <= 1, w);
        em_array *arr[] = {a, g, rc, rg};
        for (int k = 0; k < 4; k++)
            em_array_release(arr[k]);
    }
}

/* ---- matrix products ------------------------------------------------------- */

static void test_dot(void) {
    static const em_dtype dts[] = {EM_F32,  EM_F64, EM_F16, EM_BF16, EM_C64,
                                   EM_C128, EM_S32, EM_U8,  EM_S64};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++)
        for (int variant = 0; variant < 4; variant++) {
            em_dtype d = dts[di];
            /* 0: batched matmul; 1: b transposed (a view); 2: batch
             * broadcast; 3: em_dot contracting a's axis 0 with b's axis 1
             * (both operands transposed relative to matmul) */
            int64_t sa[3] = {3, 65, 47}, sb[3] = {3, 47, 33};
            if (variant == 1) {
                sb[1] = 33;
                sb[2] = 47;
            }
            if (variant == 2)
                sb[0] = 1;
            em_array *a = random_array(d, sa, 3, false, 5);
            em_array *b = random_array(d, sb, 3, false, 5);
            em_array *ag = NULL, *bg = NULL, *rc = NULL, *rg = NULL;
            die_on(em_to_device(a, GPU, &ag), "to_device");
            die_on(em_to_device(b, GPU, &bg), "to_device");
            char what[64];
            snprintf(what, sizeof what, "dot %s variant %d", em_dtype_name(d),
                     variant);
            if (variant == 1) {
                int perm[3] = {0, 2, 1};
                em_array *bt = NULL, *btg = NULL;
                die_on(em_transpose(b, perm, 3, &bt), "transpose");
                die_on(em_transpose(bg, perm, 3, &btg), "transpose");
                die_on(em_matmul(a, bt, &rc), what);
                die_on(em_matmul(ag, btg, &rg), what);
                em_array_release(bt);
                em_array_release(btg);
            } else if (variant == 3) {
                /* a [3, 65, 47] . b [3, 47, 33] over 47 without batch
                 * axes: [3, 65, 3, 33]; b's free axes (0, 2) do not merge,
                 * so it goes through the packing copy. */
                em_dot_options o;
                memset(&o, 0, sizeof o);
                o.ncontract = 1;
                o.contract_a[0] = 2;
                o.contract_b[0] = 1;
                die_on(em_dot(a, b, &o, &rc), what);
                die_on(em_dot(ag, bg, &o, &rg), what);
            } else {
                die_on(em_matmul(a, b, &rc), what);
                die_on(em_matmul(ag, bg, &rg), what);
            }
            double tol = d == EM_F16                     ? 2e-3
                         : d == EM_BF16                  ? 1e-2
                         : (d == EM_F32 || d == EM_C64)  ? 1e-5
                         : (d == EM_F64 || d == EM_C128) ? 1e-12
                                                         : 1e-300;
            double w = rc && rg ? compare_norm(rc, rg, tol) : INFINITY;
            record("dot", what, w <= 1, w);
            em_array *arr[] = {a, b, ag, bg, rc, rg};
            for (int i = 0; i < 6; i++)
                em_array_release(arr[i]);
        }
}

/* ---- concurrency ------------------------------------------------------------ */

/* Several threads, each with its own engine stream, build and evaluate GPU
 * graphs at once (they share the device's CUDA stream, allocator cache and
 * cuBLAS handle); every result must equal the same graph on the CPU. */
typedef struct thread_case {
    em_array *x, *y;  /* GPU inputs */
    em_array *result; /* GPU result */
    em_status status;
} thread_case;

static em_status chain(em_array *x, em_array *y, int rounds, em_array **out) {
    em_array *acc = NULL;
    em_array_retain(x);
    acc = x;
    em_status st = EM_OK;
    for (int r = 0; r < rounds && st == EM_OK; r++) {
        em_array *t = NULL, *u = NULL, *v = NULL;
        int axis = 1;
        st = em_binary(EM_BINARY_multiply, acc, y, &t);
        if (st == EM_OK)
            st = em_unary(EM_UNARY_tanh, t, &u);
        if (st == EM_OK)
            st = em_matmul(u, y, &v);
        em_array_release(t);
        em_array_release(u);
        em_array_release(acc);
        acc = NULL;
        if (st == EM_OK) {
            em_array *m = NULL;
            st = em_reduce(EM_REDUCE_max, v, &axis, 1, true, &m);
            if (st == EM_OK)
                st = em_binary(EM_BINARY_subtract, v, m, &acc);
            em_array_release(m);
        }
        em_array_release(v);
    }
    *out = acc;
    return st;
}

static void *thread_main(void *arg) {
    thread_case *c = arg;
    em_stream *s = NULL;
    c->status = em_stream_new(NULL, &s);
    for (int it = 0; it < 20 && c->status == EM_OK; it++) {
        em_array_release(c->result);
        c->result = NULL;
        c->status = chain(c->x, c->y, 4, &c->result);
        if (c->status == EM_OK)
            c->status = em_stream_eval(s, &c->result, 1, NULL, NULL);
        if (c->status == EM_OK)
            c->status = em_stream_synchronize(s);
    }
    if (s) {
        em_stream_close(s);
        em_stream_release(s);
    }
    return NULL;
}

static void test_threads(void) {
    enum { NT = 4 };
    thread_case cases[NT];
    em_array *cpu_x[NT], *cpu_y[NT];
    pthread_t tid[NT];
    int64_t shape[2] = {64, 64};
    for (int i = 0; i < NT; i++) {
        memset(&cases[i], 0, sizeof cases[i]);
        cpu_x[i] = random_array(EM_F64, shape, 2, false, 0);
        cpu_y[i] = random_array(EM_F64, shape, 2, false, 0);
        die_on(em_to_device(cpu_x[i], GPU, &cases[i].x), "to_device");
        die_on(em_to_device(cpu_y[i], GPU, &cases[i].y), "to_device");
    }
    for (int i = 0; i < NT; i++)
        pthread_create(&tid[i], NULL, thread_main, &cases[i]);
    for (int i = 0; i < NT; i++)
        pthread_join(tid[i], NULL);
    for (int i = 0; i < NT; i++) {
        char what[64];
        snprintf(what, sizeof what, "thread %d of %d", i, NT);
        em_array *ref = NULL;
        die_on(chain(cpu_x[i], cpu_y[i], 4, &ref), "chain");
        double w = cases[i].status == EM_OK && ref && cases[i].result
                       ? compare_norm(ref, cases[i].result, 1e-12)
                       : INFINITY;
        if (cases[i].status != EM_OK)
            printf("  %s: status %d\n", what, (int)cases[i].status);
        record("threads", what, w <= 1, w);
        em_array *arr[] = {ref,        cases[i].result, cases[i].x,
                           cases[i].y, cpu_x[i],        cpu_y[i]};
        for (int k = 0; k < 6; k++)
            em_array_release(arr[k]);
    }
}

/* ---- scans ------------------------------------------------------------------ */

static void test_scan(void) {
    int64_t shape[3] = {23, 45, 67};
    for (int op = 0; op < EM_SCAN_COUNT; op++)
        for (int di = 0; di < NDTYPES; di++)
            for (int axis = 0; axis < 3; axis++)
                for (int rev = 0; rev < 2; rev++) {
                    em_dtype d = all_dtypes[di];
                    if (skip_dtype(d))
                        continue;
                    bool product = op == EM_SCAN_PRODUCT;
                    em_array *a =
                        random_array(d, shape, 3, !product, product ? -1 : 0);
                    em_array *g = NULL, *at = NULL, *gt = NULL, *rc = NULL,
                             *rg = NULL;
                    die_on(em_to_device(a, GPU, &g), "to_device");
                    int perm[3] = {2, 0, 1};
                    die_on(em_transpose(a, perm, 3, &at), "transpose");
                    die_on(em_transpose(g, perm, 3, &gt), "transpose");
                    char what[96];
                    snprintf(what, sizeof what, "scan op %d %s axis %d%s", op,
                             em_dtype_name(d), axis, rev ? " reverse" : "");
                    if (em_scan((em_scan_op)op, at, axis, rev, &rc) == EM_OK) {
                        if (em_scan((em_scan_op)op, gt, axis, rev, &rg) !=
                            EM_OK) {
                            printf("  %s: %s\n", what, em_last_error());
                            record("scan", what, false, INFINITY);
                        } else {
                            double w = compare_floor(rc, rg, what, 4, 67.0);
                            record("scan", what, w <= 1, w);
                        }
                    }
                    em_array *arr[] = {a, g, at, gt, rc, rg};
                    for (int i = 0; i < 6; i++)
                        em_array_release(arr[i]);
                }
}

/* ---- indexed reads -------------------------------------------------------- */

/* Index arrays in [-2, bound + 2): out-of-range values exercise clamping. */
static em_array *index_array(em_dtype d, const int64_t *shape, int ndim,
                             int64_t bound) {
    em_array *r = random_array(EM_S64, shape, ndim, false, (int)bound + 4);
    em_array *m = NULL, *two = NULL, *out = NULL;
    die_on(em_scalar_s64(2, EM_S64, &two), "scalar");
    die_on(em_binary(EM_BINARY_subtract, r, two, &m), "subtract");
    die_on(em_as_type(m, d, &out), "as_type");
    em_array_release(r);
    em_array_release(two);
    em_array_release(m);
    return out;
}

static void test_index(void) {
    em_dtype idx_dtypes[4] = {EM_S32, EM_U8, EM_S64, EM_U64};
    for (int di = 0; di < NDTYPES; di++)
        for (int ii = 0; ii < 4; ii++) {
            em_dtype d = all_dtypes[di];
            if (skip_dtype(d))
                continue;
            int64_t ashape[3] = {7, 9, 5};
            em_array *a = random_array(d, ashape, 3, true, 0), *ag = NULL;
            die_on(em_to_device(a, GPU, &ag), "to_device");
            /* a transposed view on both devices */
            int perm[3] = {1, 0, 2};
            em_array *at = NULL, *agt = NULL;
            die_on(em_transpose(a, perm, 3, &at), "transpose");
            die_on(em_transpose(ag, perm, 3, &agt), "transpose");
            for (int which = 0; which < 3; which++) {
                em_array *idx = NULL, *ig = NULL, *rc = NULL, *rg = NULL;
                char what[96];
                if (which == 0) { /* gather rows of 2 entries: axes (2, 0) */
                    int64_t ishape[3] = {4, 6, 2};
                    idx = index_array(idx_dtypes[ii], ishape, 3, 7);
                    die_on(em_to_device(idx, GPU, &ig), "to_device");
                    int axes[2] = {2, 0};
                    die_on(em_gather(at, idx, axes, 2, &rc), "gather");
                    die_on(em_gather(agt, ig, axes, 2, &rg), "gather");
                } else if (which == 1) { /* take along axis 1 */
                    int64_t ishape[2] = {3, 4};
                    idx = index_array(idx_dtypes[ii], ishape, 2, 7);
                    die_on(em_to_device(idx, GPU, &ig), "to_device");
                    die_on(em_take(at, idx, 1, &rc), "take");
                    die_on(em_take(agt, ig, 1, &rg), "take");
                } else { /* take_along_axis 2, indices broadcast on axis 0 */
                    int64_t ishape[3] = {1, 7, 8};
                    idx = index_array(idx_dtypes[ii], ishape, 3, 5);
                    die_on(em_to_device(idx, GPU, &ig), "to_device");
                    die_on(em_take_along_axis(at, idx, 2, &rc), "along");
                    die_on(em_take_along_axis(agt, ig, 2, &rg), "along");
                }
                snprintf(what, sizeof what, "%s %s by %s",
                         which == 0   ? "gather"
                         : which == 1 ? "take"
                                      : "take_along_axis",
                         em_dtype_name(d), em_dtype_name(idx_dtypes[ii]));
                double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
                record("index", what, w <= 1, w);
                em_array *arr[] = {idx, ig, rc, rg};
                for (int i = 0; i < 4; i++)
                    em_array_release(arr[i]);
            }
            em_array *arr[] = {a, ag, at, agt};
            for (int i = 0; i < 4; i++)
                em_array_release(arr[i]);
        }
}

/* ---- shape ops: pad, concatenate, put_slice, dynamic slices, eye ------- */

/* The inputs of one shape case on one device: x [5, 7] and u [3, 2] in the
 * layout under test, v a scalar, starts a 1-D integer array. */
typedef struct shape_inputs {
    em_array *x, *u, *v, *starts;
} shape_inputs;

enum { SHAPE_PAD, SHAPE_CONCAT, SHAPE_PUT, SHAPE_DSLICE, SHAPE_DPUT, SHAPE_N };
static const char *shape_names[] = {"pad", "concatenate", "put_slice",
                                    "dynamic_slice", "dynamic_put_slice"};

static em_status shape_case(int which, const shape_inputs *in, em_array **out) {
    switch (which) {
    case SHAPE_PAD: { /* negative, positive and interior padding */
        int64_t low[2] = {2, -3}, high[2] = {-2, 3}, interior[2] = {1, 2};
        return em_pad(in->x, in->v, low, high, interior, out);
    }
    case SHAPE_CONCAT: {
        em_array *parts[3] = {in->x, in->x, in->x};
        em_array *rows = NULL;
        em_status st = em_concatenate(parts, 3, 1, &rows);
        em_array *both[2] = {rows, rows};
        if (st == EM_OK)
            st = em_concatenate(both, 2, 0, out);
        em_array_release(rows);
        return st;
    }
    case SHAPE_PUT:
    case SHAPE_DPUT: {
        /* A fresh contiguous copy held only by the node: its buffer may be
         * donated to the output (the in-place path). */
        em_array *a = NULL;
        em_status st = em_contiguous(in->x, &a);
        int64_t start[2] = {1, 4};
        if (st == EM_OK)
            st = which == SHAPE_PUT
                     ? em_put_slice(a, start, in->u, out)
                     : em_dynamic_put_slice(a, in->starts, in->u, out);
        em_array_release(a);
        return st;
    }
    default: {
        int64_t sizes[2] = {3, 5}, strides[2] = {1, 2};
        return em_dynamic_slice(in->x, in->starts, sizes, strides, out);
    }
    }
}

static void test_shape(void) {
    static const int64_t start_sets[3][2] = {{-3, 100}, {2, 1}, {1, 3}};
    em_dtype idx_dtypes[3] = {EM_S32, EM_U8, EM_U64};
    for (int di = 0; di < NDTYPES; di++) {
        em_dtype d = all_dtypes[di];
        if (skip_dtype(d))
            continue;
        for (int l = 0; l < LAYOUT_COUNT; l++) {
            em_array *xb = base_for(d, 5, 7, (enum layout)l, true, 0);
            em_array *ub = base_for(d, 3, 2, (enum layout)l, true, 0);
            int64_t one = 1;
            em_array *v1 = random_array(d, &one, 1, true, 0), *v = NULL;
            die_on(em_reshape(v1, NULL, 0, &v), "reshape");
            for (int si = 0; si < 3; si++) {
                em_array *s64 = NULL, *starts = NULL;
                int64_t two = 2;
                die_on(em_from_data(start_sets[si], sizeof start_sets[si], &two,
                                    1, EM_S64, &s64),
                       "starts");
                die_on(em_as_type(s64, idx_dtypes[si], &starts), "as_type");
                shape_inputs on[2];
                for (int k = 0; k < 2; k++) {
                    em_device dev = k ? GPU : EM_DEVICE_CPU;
                    on[k].x = view_on(xb, dev, (enum layout)l);
                    on[k].u = view_on(ub, dev, (enum layout)l);
                    die_on(em_to_device(v, dev, &on[k].v), "to_device");
                    die_on(em_to_device(starts, dev, &on[k].starts),
                           "to_device");
                }
                for (int w = 0; w < SHAPE_N; w++) {
                    /* the static ops do not read the starts */
                    if (si > 0 && w != SHAPE_DSLICE && w != SHAPE_DPUT)
                        continue;
                    em_array *rc = NULL, *rg = NULL;
                    char what[128];
                    snprintf(what, sizeof what, "%s %s %s starts %s",
                             shape_names[w], em_dtype_name(d), layout_names[l],
                             em_dtype_name(idx_dtypes[si]));
                    die_on(shape_case(w, &on[0], &rc), what);
                    die_on(shape_case(w, &on[1], &rg), what);
                    double e = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
                    record("shape", what, e <= 1, e);
                    em_array_release(rc);
                    em_array_release(rg);
                }
                for (int k = 0; k < 2; k++) {
                    em_array *arr[] = {on[k].x, on[k].u, on[k].v, on[k].starts};
                    for (int i = 0; i < 4; i++)
                        em_array_release(arr[i]);
                }
                em_array_release(s64);
                em_array_release(starts);
            }
            em_array *arr[] = {xb, ub, v1, v};
            for (int i = 0; i < 4; i++)
                em_array_release(arr[i]);
        }
        /* eye: batched, diagonals below, on, above and outside */
        int64_t eshape[3] = {2, 4, 5};
        int64_t ks[5] = {-3, 0, 2, 9, INT64_MIN};
        for (int ki = 0; ki < 5; ki++) {
            em_array *rc = NULL, *rg = NULL;
            char what[96];
            snprintf(what, sizeof what, "eye %s k=%lld", em_dtype_name(d),
                     (long long)ks[ki]);
            die_on(em_eye(eshape, 3, ks[ki], d, &rc), what);
            em_device old = em_set_default_device(GPU);
            die_on(em_eye(eshape, 3, ks[ki], d, &rg), what);
            em_set_default_device(old);
            double e = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("shape", what, e <= 1, e);
            em_array_release(rc);
            em_array_release(rg);
        }
    }
}

/* ---- indexed_add / indexed_put ----------------------------------------- */

/* Few distinct targets, so duplicates are common: add must accumulate them
 * all, put must keep the last row's value (the CPU applies rows in order).
 * Float sums may add in another order on the GPU: compared with a bound of
 * a few roundings of the terms' magnitude (3); everything else exactly. */
static void test_scatter(void) {
    em_dtype idx_dtypes[3] = {EM_S32, EM_U8, EM_S64};
    for (int di = 0; di < NDTYPES; di++)
        for (int ii = 0; ii < 3; ii++)
            for (int which = 0; which < 4; which++) {
                em_dtype d = all_dtypes[di];
                if (skip_dtype(d))
                    continue;
                bool add = which & 1, two_axes = which < 2;
                /* a [6, 5, 4], seen transposed as [5, 6, 4] */
                int64_t ashape[3] = {6, 5, 4};
                em_array *a = random_array(d, ashape, 3, true, 0);
                em_array *idx, *upd;
                int axes[2] = {2, 0};
                int naxes;
                if (two_axes) { /* rows of (axis 2, axis 0): updates [7, 6] */
                    int64_t ishape[2] = {7, 2}, ushape[2] = {7, 6};
                    idx = index_array(idx_dtypes[ii], ishape, 2, 4);
                    upd = random_array(d, ushape, 2, true, 0);
                    naxes = 2;
                } else { /* axis 1 of the view: updates [3, 3, 5, 4],
                          * read through a transpose of [3, 3, 4, 5] */
                    int64_t ishape[3] = {3, 3, 1}, ushape[4] = {3, 3, 4, 5};
                    idx = index_array(idx_dtypes[ii], ishape, 3, 4);
                    upd = random_array(d, ushape, 4, true, 0);
                    axes[0] = 1;
                    naxes = 1;
                }
                em_array *res[2] = {NULL, NULL};
                for (int k = 0; k < 2; k++) {
                    em_device dev = k ? GPU : EM_DEVICE_CPU;
                    em_array *ad = NULL, *at = NULL, *id = NULL, *ud = NULL,
                             *ut = NULL;
                    int perm[3] = {1, 0, 2};
                    die_on(em_to_device(a, dev, &ad), "to_device");
                    die_on(em_transpose(ad, perm, 3, &at), "transpose");
                    die_on(em_to_device(idx, dev, &id), "to_device");
                    die_on(em_to_device(upd, dev, &ud), "to_device");
                    if (two_axes) {
                        ut = ud;
                        em_array_retain(ut);
                    } else {
                        int uperm[4] = {0, 1, 3, 2};
                        die_on(em_transpose(ud, uperm, 4, &ut), "transpose");
                    }
                    die_on((add ? em_indexed_add : em_indexed_put)(
                               at, id, ut, axes, naxes, &res[k]),
                           "scatter");
                    em_array *arr[] = {ad, at, id, ud, ut};
                    for (int i = 0; i < 5; i++)
                        em_array_release(arr[i]);
                }
                char what[96];
                snprintf(what, sizeof what, "indexed_%s %s by %s on %s",
                         add ? "add" : "put", em_dtype_name(d),
                         em_dtype_name(idx_dtypes[ii]),
                         two_axes ? "axes (2, 0)" : "axis 1");
                bool fuzzy =
                    add && (em_dtype_is_float(d) || em_dtype_is_complex(d));
                double e =
                    res[0] && res[1]
                        ? (fuzzy ? compare_floor(res[0], res[1], what, 8, 3)
                                 : compare(res[0], res[1], what, 0))
                        : INFINITY;
                record("scatter", what, e <= 1, e);
                em_array *arr[] = {a, idx, upd, res[0], res[1]};
                for (int i = 0; i < 5; i++)
                    em_array_release(arr[i]);
            }
}

/* ---- sort / argsort ------------------------------------------------------ */

/* Every real dtype, both axes of [5, 300] inputs in each layout, both
 * directions; full-range values with the edge values (NaN, ±Inf, ±0) and
 * values in [0, 5) whose many ties check stability. Exact: values are
 * moved by bytes and the order is fully determined. */
static void test_sort(void) {
    for (int di = 0; di < NDTYPES; di++) {
        em_dtype d = all_dtypes[di];
        if (skip_dtype(d) || em_dtype_is_complex(d))
            continue;
        for (int l = 0; l < LAYOUT_COUNT; l++)
            for (int ties = 0; ties < 2; ties++) {
                em_array *base =
                    base_for(d, 5, 300, (enum layout)l, !ties, ties ? 5 : 0);
                em_array *xc = view_on(base, EM_DEVICE_CPU, (enum layout)l);
                em_array *xg = view_on(base, GPU, (enum layout)l);
                for (int c = 0; c < 8; c++) {
                    int axis = c & 1;
                    bool desc = c & 2, arg = c & 4;
                    em_dtype idt = axis ? EM_S64 : EM_U8;
                    em_array *rc = NULL, *rg = NULL;
                    char what[128];
                    snprintf(what, sizeof what, "%s %s %s axis %d %s%s",
                             arg ? "argsort" : "sort", em_dtype_name(d),
                             layout_names[l], axis,
                             desc ? "descending" : "ascending",
                             ties ? " ties" : "");
                    if (arg) {
                        die_on(em_argsort(xc, axis, desc, idt, &rc), what);
                        die_on(em_argsort(xg, axis, desc, idt, &rg), what);
                    } else {
                        die_on(em_sort(xc, axis, desc, &rc), what);
                        die_on(em_sort(xg, axis, desc, &rg), what);
                    }
                    double e = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
                    record("sort", what, e <= 1, e);
                    em_array_release(rc);
                    em_array_release(rg);
                }
                em_array_release(base);
                em_array_release(xc);
                em_array_release(xg);
            }
    }
}

/* ---- random bits: bit-identical to the CPU ------------------------------ */

static void test_random(void) {
    uint32_t key_words[2] = {0x12345678u, 0x9abcdef0u};
    int64_t two = 2;
    em_array *key = NULL, *gkey = NULL;
    die_on(em_from_data(key_words, 8, &two, 1, EM_U32, &key), "key");
    die_on(em_to_device(key, GPU, &gkey), "to_device");
    em_dtype dts[4] = {EM_U8, EM_U16, EM_U32, EM_U64};
    int64_t sizes[3] = {1, 1001, 65537};
    for (int di = 0; di < 4; di++)
        for (int si = 0; si < 3; si++) {
            em_array *rc = NULL, *rg = NULL;
            char what[64];
            snprintf(what, sizeof what, "random_bits %s[%lld]",
                     em_dtype_name(dts[di]), (long long)sizes[si]);
            die_on(em_random_bits(key, &sizes[si], 1, dts[di], &rc), what);
            die_on(em_random_bits(gkey, &sizes[si], 1, dts[di], &rg), what);
            double w = rc && rg ? compare(rc, rg, what, 0) : INFINITY;
            record("random", what, w <= 1, w);
            em_array_release(rc);
            em_array_release(rg);
        }
    int64_t cshape[2] = {777, 2};
    em_array *counters = random_array(EM_U32, cshape, 2, false, 0);
    em_array *gc = NULL, *rc = NULL, *rg = NULL;
    die_on(em_to_device(counters, GPU, &gc), "to_device");
    die_on(em_threefry2x32(key, counters, &rc), "threefry");
    die_on(em_threefry2x32(gkey, gc, &rg), "threefry");
    double w = rc && rg ? compare(rc, rg, "threefry2x32", 0) : INFINITY;
    record("random", "threefry2x32 u32[777,2]", w <= 1, w);
    em_array *arr[] = {key, gkey, counters, gc, rc, rg};
    for (int i = 0; i < 6; i++)
        em_array_release(arr[i]);
}

/* ---- error paths ------------------------------------------------------------- */

static void expect(const char *what, em_status got, em_status want,
                   const char *needle) {
    bool ok = got == want && strstr(em_last_error(), needle);
    if (!ok)
        printf("  %s: status %d (%s), wanted %d with \"%s\"\n", what, (int)got,
               em_last_error(), (int)want, needle);
    record("errors", what, ok, ok ? 0 : INFINITY);
}

static void test_errors(void) {
    int64_t shape[1] = {10};
    em_array *a = random_array(EM_F32, shape, 1, false, 0), *g = NULL,
             *out = NULL;
    die_on(em_to_device(a, GPU, &g), "to_device");
    expect("mixed devices", em_binary(EM_BINARY_add, a, g, &out),
           EM_ERR_ARGUMENT, "different devices");
    /* A rank-0 CPU array (a number from Elixir) follows a GPU input. */
    em_array *scalar = random_array(EM_F32, NULL, 0, false, 0), *sum_cpu = NULL;
    die_on(em_binary(EM_BINARY_add, a, scalar, &sum_cpu), "add on the CPU");
    em_status st_scalar = em_binary(EM_BINARY_add, g, scalar, &out);
    bool on_gpu = st_scalar == EM_OK && em_array_device(out) == GPU;
    record("placement", "CPU scalar beside a GPU array", on_gpu,
           on_gpu ? 0 : INFINITY);
    if (on_gpu) {
        double worst = compare(sum_cpu, out, "scalar add", 1);
        record("placement", "CPU scalar beside a GPU array: values", worst <= 1,
               worst);
    }
    em_array_release(out);
    em_array_release(sum_cpu);
    em_array_release(scalar);
    out = NULL;
    expect("fft length 0 on the GPU", em_fft(g, 0, 0, EM_FFT_RFFT, 0, &out),
           EM_ERR_ARGUMENT, "length must be positive");
    expect("to unknown device", em_to_device(a, 99, &out), EM_ERR_ARGUMENT,
           "unknown device");
    expect("missing GPU", em_to_device(a, EM_DEVICE_GPU(7), &out),
           EM_ERR_UNSUPPORTED, "CUDA backend not available");
    const void *data;
    size_t nbytes;
    die_on(em_eval(&g, 1), "eval");
    expect("array_data of a GPU array", em_array_data(g, &data, &nbytes),
           EM_ERR_ARGUMENT, "lives on gpu:0");
    /* Out of GPU memory: an error on eval, never a crash. */
    int64_t huge[1] = {(int64_t)1 << 40}; /* 4 TiB of f32 */
    em_device old = em_set_default_device(GPU);
    em_array *big = NULL;
    em_status st = em_iota(huge, 1, 0, EM_F32, &big);
    em_set_default_device(old);
    if (st == EM_OK)
        expect("out of GPU memory", em_eval(&big, 1), EM_ERR_OOM, "GPU memory");
    em_array_release(big);
    em_array_release(a);
    em_array_release(g);
}

/* TEST_CUDA_ONLY: a comma-separated list of the family functions to run
 * (all when unset). */
static const char *only;

static bool selected(const char *name) {
    if (!only || !*only)
        return true;
    const size_t n = strlen(name);
    for (const char *p = only; (p = strstr(p, name)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

#define RUN(family)                                                            \
    do {                                                                       \
        if (selected(#family))                                                 \
            family();                                                          \
    } while (0)

int main(void) {
    /* Line-buffered: a crash leaves the last family's lines in a log. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("EMILY_CUDA_POISON", "1", 1);
    const char *q = getenv("TEST_CUDA_QUICK");
    quick = q && *q && *q != '0';
    /* TEST_CUDA_SEED picks other random inputs (same cases). */
    const char *seed = getenv("TEST_CUDA_SEED");
    if (seed && *seed)
        rng ^= strtoull(seed, NULL, 10) * 0x9e3779b97f4a7c15ull + 1;
    const char *reason;
    if (!em_device_available(GPU, &reason)) {
        printf("skipped: %s\n", reason);
        return 0;
    }
    /* TEST_CUDA_ONLY=test_cuda_graph,test_fast runs only those families
     * (the function names below). */
    only = getenv("TEST_CUDA_ONLY");
    RUN(test_errors);
    RUN(test_unary);
    RUN(test_binary);
    RUN(test_select_clip_cast);
    RUN(test_reduce);
    RUN(test_dot);
    RUN(test_random);
    RUN(test_index);
    RUN(test_scan);
    RUN(test_shape);
    RUN(test_scatter);
    RUN(test_sort);
    RUN(test_fft);
    RUN(test_linalg);
    RUN(test_erf_inv);
    RUN(test_window);
    RUN(test_conv);
    RUN(test_top_k);
    RUN(test_fast);
    RUN(test_quant);
    RUN(test_fusion);
    RUN(test_attention);
    RUN(test_attention_prefill);
    RUN(test_attention_decode);
    RUN(test_decode);
    RUN(test_threads);
    RUN(test_while);
    RUN(test_in_range);
    RUN(test_streams);
    RUN(test_ggml);
    RUN(test_cuda_graph);
    RUN(test_distributed);
    em_memory_clear_device_cache(GPU);
    em_memory_stats ms;
    em_memory_get_device_stats(GPU, &ms);
    record("memory", "GPU bytes active after releasing everything",
           ms.active == 0, ms.active ? INFINITY : 0);
    printf("\n%-10s %7s %7s %14s\n", "family", "cases", "failed", "worst/tol");
    for (int i = 0; i < nfamilies; i++)
        printf("%-10s %7d %7d %14.3g\n", families[i].name, families[i].cases,
               families[i].failed, families[i].worst);
    printf("%s: %d failed\n", total_failed ? "FAILED" : "PASSED", total_failed);
    return total_failed ? 1 : 0;
}
