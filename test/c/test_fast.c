/*
 * test_fast.c — em_rms_norm, em_layer_norm, em_softmax and em_rope on
 * hand-computed values, edge cases (D = 1, eps, NaN/Inf, -Inf masks,
 * non-contiguous inputs, every float dtype), validation messages, and
 * their vjp rules against central finite differences in f64.
 */
#include "emily_autodiff.h"
#include "emily_fast.h"
#include "test.h"

#include <stdlib.h>

static em_array *f64_array(const double *v, const int64_t *shape, int ndim) {
    return t_from_f64(v, shape, ndim, EM_F64);
}

static em_array *offset_s32(int32_t v) {
    em_array *a = NULL;
    CHECK_OK(em_scalar_s64(v, EM_S32, &a));
    return a;
}

EM_TEST(fast_rms_norm_values) {
    const double xv[] = {1, 2, 3, 4, 0, 0, 0, 0};
    const double wv[] = {1, 1, 2, 0.5};
    int64_t shape[] = {2, 4}, wshape[] = {4};
    em_array *x = f64_array(xv, shape, 2), *w = f64_array(wv, wshape, 1);
    em_array *y = NULL, *y2 = NULL;
    CHECK_OK(em_rms_norm(x, w, 0.0, &y));
    double out[8];
    t_read_f64(y, out, 8);
    const double r = 1 / sqrt(7.5);
    CHECK_NEAR(out[0], 1 * r, 1e-15);
    CHECK_NEAR(out[1], 2 * r, 1e-15);
    CHECK_NEAR(out[2], 6 * r, 1e-15);
    CHECK_NEAR(out[3], 2 * r, 1e-15);
    CHECK(isnan(out[4])); /* 0 * rsqrt(0) with eps 0 */
    /* eps keeps the zero row finite; no weight */
    CHECK_OK(em_rms_norm(x, NULL, 1e-6, &y2));
    t_read_f64(y2, out, 8);
    CHECK_NEAR(out[3], 4 / sqrt(7.5 + 1e-6), 1e-15);
    CHECK(out[4] == 0 && out[7] == 0);
    em_array_release(x), em_array_release(w), em_array_release(y),
        em_array_release(y2);
}

EM_TEST(fast_layer_norm_values) {
    const double xv[] = {1, 2, 3, 4};
    const double wv[] = {2, 2, 1, 1}, bv[] = {0, 1, 0, -1};
    int64_t shape[] = {1, 4}, wshape[] = {4};
    em_array *x = f64_array(xv, shape, 2), *w = f64_array(wv, wshape, 1),
             *b = f64_array(bv, wshape, 1);
    em_array *y = NULL, *y2 = NULL;
    CHECK_OK(em_layer_norm(x, w, b, 1e-5, &y));
    double out[4];
    t_read_f64(y, out, 4);
    const double r = 1 / sqrt(1.25 + 1e-5);
    CHECK_NEAR(out[0], -1.5 * r * 2, 1e-14);
    CHECK_NEAR(out[1], -0.5 * r * 2 + 1, 1e-14);
    CHECK_NEAR(out[2], 0.5 * r, 1e-14);
    CHECK_NEAR(out[3], 1.5 * r - 1, 1e-14);
    CHECK_OK(em_layer_norm(x, NULL, b, 0.0, &y2)); /* bias only */
    t_read_f64(y2, out, 4);
    CHECK_NEAR(out[1], -0.5 / sqrt(1.25) + 1, 1e-14);
    em_array_release(x), em_array_release(w), em_array_release(b),
        em_array_release(y), em_array_release(y2);
}

EM_TEST(fast_softmax_values) {
    /* 70 columns: more than one 64-element chunk of the online pass */
    enum { N = 70 };
    double xv[2 * N];
    for (int i = 0; i < N; i++) {
        xv[i] = 1000.0 + (i % 7); /* large values: stable */
        xv[N + i] = i < 65 ? -INFINITY : (double)i; /* masked first chunk */
    }
    int64_t shape[] = {2, N};
    em_dtype dts[] = {EM_F64, EM_F32, EM_BF16, EM_F16};
    for (int d = 0; d < 4; d++) {
        double in[2 * N];
        for (int i = 0; i < 2 * N; i++)
            in[i] = d >= 2 && i < N ? xv[i] - 1000.0 : xv[i];
        em_array *x = t_from_f64(in, shape, 2, dts[d]), *y = NULL;
        CHECK_OK(em_softmax(x, -1, &y));
        double out[2 * N], s0 = 0, s1 = 0;
        t_read_f64(y, out, 2 * N);
        for (int i = 0; i < 7; i++)
            s0 += exp(i);
        for (int i = 65; i < N; i++)
            s1 += exp(i - (N - 1));
        const double tol = dts[d] == EM_F64 ? 1e-14
                           : dts[d] == EM_F32 ? 1e-6
                                              : 1e-2;
        for (int i = 0; i < N; i++) {
            CHECK_NEAR(out[i], exp(i % 7) / (10 * s0), tol); /* 10 periods */
            double want = i < 65 ? 0.0 : exp(i - (N - 1)) / s1;
            CHECK_NEAR(out[N + i], want, tol);
        }
        em_array_release(x), em_array_release(y);
    }
}

EM_TEST(fast_softmax_special) {
    /* rows: all -Inf -> NaN; a NaN -> NaN; +Inf -> NaN; D = 1 -> 1 */
    const double xv[] = {-INFINITY, -INFINITY, 1, NAN, INFINITY, 2};
    int64_t shape[] = {3, 2};
    em_array *x = f64_array(xv, shape, 2), *y = NULL;
    CHECK_OK(em_softmax(x, 1, &y));
    double out[6];
    t_read_f64(y, out, 6);
    for (int i = 0; i < 6; i++)
        CHECK(isnan(out[i]));
    em_array_release(y);
    int64_t col[] = {6, 1};
    em_array *c = NULL, *yc = NULL;
    CHECK_OK(em_reshape(x, col, 2, &c));
    CHECK_OK(em_softmax(c, -1, &yc));
    t_read_f64(yc, out, 6);
    CHECK(out[2] == 1 && out[5] == 1);
    em_array_release(x), em_array_release(c), em_array_release(yc);
}

EM_TEST(fast_softmax_axis_and_strided) {
    /* softmax over axis 0 of a 2x3 == softmax over the last axis of its
     * transpose (a non-contiguous view) */
    const double xv[] = {1, 2, 3, 3, 1, 0};
    int64_t shape[] = {2, 3};
    em_array *x = f64_array(xv, shape, 2), *y0 = NULL, *xt = NULL,
             *yt = NULL;
    int perm[] = {1, 0};
    CHECK_OK(em_softmax(x, 0, &y0));
    CHECK_OK(em_transpose(x, perm, 2, &xt));
    CHECK_OK(em_softmax(xt, -1, &yt));
    double a[6], b[6];
    t_read_f64(y0, a, 6);
    t_read_f64(yt, b, 6);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double e0 = exp(xv[j]), e1 = exp(xv[3 + j]);
            double want = (i == 0 ? e0 : e1) / (e0 + e1);
            CHECK_NEAR(a[i * 3 + j], want, 1e-15);
            CHECK_NEAR(b[j * 2 + i], want, 1e-15);
        }
    em_array_release(x), em_array_release(y0), em_array_release(xt),
        em_array_release(yt);
}

EM_TEST(fast_norms_edge_cases) {
    /* D = 1: rms_norm gives sign(x) (eps 0), layer_norm gives the bias */
    const double xv[] = {3, -2, NAN};
    const double bv[] = {0.5};
    int64_t shape[] = {3, 1}, bshape[] = {1};
    em_array *x = f64_array(xv, shape, 2), *b = f64_array(bv, bshape, 1);
    em_array *r = NULL, *l = NULL;
    CHECK_OK(em_rms_norm(x, NULL, 0.0, &r));
    CHECK_OK(em_layer_norm(x, NULL, b, 1e-5, &l));
    double out[3];
    t_read_f64(r, out, 3);
    CHECK_NEAR(out[0], 1, 1e-15);
    CHECK_NEAR(out[1], -1, 1e-15);
    CHECK(isnan(out[2]));
    t_read_f64(l, out, 3);
    CHECK_NEAR(out[0], 0.5, 1e-15);
    CHECK_NEAR(out[1], 0.5, 1e-15);
    CHECK(isnan(out[2]));
    em_array_release(r), em_array_release(l);
    /* a NaN or Inf spoils its own row only */
    const double x2[] = {1, NAN, 2, 3, INFINITY, 1, 4, 5, 6};
    int64_t s2[] = {3, 3};
    em_array *x2a = f64_array(x2, s2, 2);
    CHECK_OK(em_rms_norm(x2a, NULL, 1e-6, &r));
    double o2[9];
    t_read_f64(r, o2, 9);
    CHECK(isnan(o2[0]) && isnan(o2[1]) && isnan(o2[2]));
    CHECK(isnan(o2[4])); /* inf * rsqrt(inf) */
    CHECK_NEAR(o2[8], 6 / sqrt(77.0 / 3 + 1e-6), 1e-14);
    em_array_release(r);
    /* empty rows */
    int64_t es[] = {0, 4};
    em_array *e = t_from_f64(NULL, es, 2, EM_F32);
    CHECK_OK(em_rms_norm(e, NULL, 1e-6, &r));
    CHECK_OK(em_eval(&r, 1));
    CHECK(em_array_size(r) == 0);
    em_array_release(r), em_array_release(e);
    em_array_release(x), em_array_release(b), em_array_release(x2a);
}

/* The same norms on every float dtype, read against f64 */
EM_TEST(fast_norms_dtypes) {
    enum { R = 5, D = 37 };
    double xv[R * D], wv[D], bv[D];
    for (int i = 0; i < R * D; i++)
        xv[i] = sin(i * 0.7) * 3;
    for (int i = 0; i < D; i++)
        wv[i] = 1 + 0.1 * i, bv[i] = -0.05 * i;
    int64_t shape[] = {R, D}, ws[] = {D};
    double ref[3][R * D];
    em_dtype dts[] = {EM_F64, EM_F32, EM_BF16, EM_F16};
    for (int d = 0; d < 4; d++) {
        em_array *x = t_from_f64(xv, shape, 2, dts[d]);
        em_array *w = t_from_f64(wv, ws, 1, dts[d]);
        em_array *b = t_from_f64(bv, ws, 1, dts[d]);
        em_array *y[3] = {NULL, NULL, NULL};
        CHECK_OK(em_rms_norm(x, w, 1e-6, &y[0]));
        CHECK_OK(em_layer_norm(x, w, b, 1e-5, &y[1]));
        CHECK_OK(em_softmax(x, -1, &y[2]));
        const double tol = dts[d] == EM_F64 ? 0
                           : dts[d] == EM_F32 ? 1e-5
                                              : 3e-2;
        for (int k = 0; k < 3; k++) {
            CHECK(em_array_dtype(y[k]) == dts[d]);
            double out[R * D];
            t_read_f64(y[k], out, R * D);
            for (int i = 0; i < R * D; i++) {
                if (d == 0)
                    ref[k][i] = out[i];
                else
                    CHECK_NEAR(out[i], ref[k][i], tol * (1 + fabs(ref[k][i])));
            }
            em_array_release(y[k]);
        }
        em_array_release(x), em_array_release(w), em_array_release(b);
    }
}

/* x (1, 1, 2, 4), positions offset + {0, 1} */
static void rope_expect(const double *x, int64_t dims, bool traditional,
                        double base, double scale, const double *freqs,
                        int64_t offset, double *out) {
    const int64_t D = 4, half = dims / 2;
    for (int l = 0; l < 2; l++) {
        const double *xr = x + l * D;
        double *yr = out + l * D;
        for (int64_t i = 0; i < D; i++)
            yr[i] = xr[i];
        for (int64_t i = 0; i < half; i++) {
            double inv = freqs ? 1 / freqs[i] : pow(base, -2.0 * i / dims);
            double t = scale * (offset + l) * inv;
            int64_t ia = traditional ? 2 * i : i;
            int64_t ib = traditional ? 2 * i + 1 : i + half;
            yr[ia] = xr[ia] * cos(t) - xr[ib] * sin(t);
            yr[ib] = xr[ia] * sin(t) + xr[ib] * cos(t);
        }
    }
}

EM_TEST(fast_rope_values) {
    const double xv[] = {1, 2, 3, 4, -1, 0.5, 2, -3};
    int64_t shape[] = {1, 1, 2, 4};
    em_array *x = f64_array(xv, shape, 4), *off = offset_s32(3);
    const double fv[] = {2.0, 50.0};
    int64_t fs[] = {2};
    em_array *freqs = t_from_f64(fv, fs, 1, EM_F32);
    struct {
        int64_t dims;
        bool trad;
        double base, scale;
        bool use_freqs;
    } cases[] = {{4, false, 10000, 1, false}, {4, true, 10000, 1, false},
                 {2, false, 100, 0.5, false}, {4, false, 0, 2, true},
                 {4, true, 0, 1, true}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        em_rope_options o = {cases[k].dims, cases[k].trad, cases[k].base,
                             cases[k].scale,
                             cases[k].use_freqs ? freqs : NULL};
        em_array *y = NULL;
        CHECK_OK(em_rope(x, off, &o, &y));
        double out[8], want[8];
        t_read_f64(y, out, 8);
        rope_expect(xv, cases[k].dims, cases[k].trad,
                    cases[k].base ? cases[k].base : 10000, cases[k].scale,
                    cases[k].use_freqs ? fv : NULL, 3, want);
        for (int i = 0; i < 8; i++)
            CHECK_NEAR(out[i], want[i], 1e-14);
        em_array_release(y);
    }
    /* an s64 offset, and offset 0 at position 0 is the identity */
    em_array *off0 = NULL, *y = NULL;
    CHECK_OK(em_scalar_s64(0, EM_S64, &off0));
    em_rope_options o = {4, false, 10000, 1, NULL};
    CHECK_OK(em_rope(x, off0, &o, &y));
    double out[8];
    t_read_f64(y, out, 8);
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == xv[i]);
    em_array_release(y), em_array_release(off0);
    em_array_release(x), em_array_release(off), em_array_release(freqs);
}

EM_TEST(fast_rope_strided_and_dtypes) {
    /* (2, 3, 8) built transposed from (3, 2, 8): a non-contiguous input */
    double xv[48];
    for (int i = 0; i < 48; i++)
        xv[i] = cos(i * 1.3);
    int64_t shape[] = {3, 2, 8};
    int perm[] = {1, 0, 2};
    em_dtype dts[] = {EM_F64, EM_F32, EM_BF16, EM_F16};
    double ref[48];
    for (int d = 0; d < 4; d++) {
        em_array *x = t_from_f64(xv, shape, 3, dts[d]), *xt = NULL, *y = NULL;
        em_array *off = offset_s32(7);
        CHECK_OK(em_transpose(x, perm, 3, &xt));
        em_rope_options o = {6, d % 2 == 1, 10000, 1, NULL};
        o.traditional = false;
        CHECK_OK(em_rope(xt, off, &o, &y));
        double out[48];
        t_read_f64(y, out, 48);
        if (d == 0) {
            /* row (b, l) of the transposed view is xv row (l, b) */
            for (int b = 0; b < 2; b++)
                for (int l = 0; l < 3; l++) {
                    const double *xr = xv + (l * 2 + b) * 8;
                    double *want = ref + (b * 3 + l) * 8;
                    for (int i = 0; i < 8; i++)
                        want[i] = xr[i];
                    for (int i = 0; i < 3; i++) {
                        double t = (7 + l) * pow(10000, -2.0 * i / 6);
                        want[i] = xr[i] * cos(t) - xr[i + 3] * sin(t);
                        want[i + 3] = xr[i] * sin(t) + xr[i + 3] * cos(t);
                    }
                }
        }
        const double tol = d == 0 ? 1e-14 : d == 1 ? 1e-6 : 2e-2;
        for (int i = 0; i < 48; i++)
            CHECK_NEAR(out[i], ref[i], tol);
        em_array_release(x), em_array_release(xt), em_array_release(y),
            em_array_release(off);
    }
}

EM_TEST(fast_validation) {
    int64_t shape[] = {2, 4}, bad[] = {3}, s0[] = {4};
    const double v[8] = {0};
    em_array *x = f64_array(v, shape, 2), *w3 = f64_array(v, bad, 1);
    em_array *w32 = t_from_f64(v, s0, 1, EM_F32);
    em_array *xi = t_from_f64(v, shape, 2, EM_S32), *y = NULL;
    CHECK_ERR(em_rms_norm(x, w3, 1e-6, &y), EM_ERR_ARGUMENT,
              "rms_norm: weight f64[3]");
    CHECK_ERR(em_rms_norm(x, w32, 1e-6, &y), EM_ERR_ARGUMENT, "f64[2,4]");
    CHECK_ERR(em_rms_norm(xi, NULL, 1e-6, &y), EM_ERR_ARGUMENT,
              "real float dtype");
    CHECK_ERR(em_rms_norm(x, NULL, -1, &y), EM_ERR_ARGUMENT, "eps");
    CHECK_ERR(em_layer_norm(x, NULL, w3, 1e-6, &y), EM_ERR_ARGUMENT,
              "layer_norm: bias f64[3]");
    CHECK_ERR(em_softmax(x, 2, &y), EM_ERR_ARGUMENT, "softmax");
    CHECK_ERR(em_softmax(xi, -1, &y), EM_ERR_ARGUMENT, "softmax: x s32[2,4]");
    em_array *off = offset_s32(0), *offf = NULL;
    CHECK_OK(em_scalar_f64(0, EM_F32, &offf));
    em_rope_options o = {3, false, 10000, 1, NULL};
    CHECK_ERR(em_rope(x, off, &o, &y), EM_ERR_ARGUMENT, "dims 3");
    o.dims = 6;
    CHECK_ERR(em_rope(x, off, &o, &y), EM_ERR_ARGUMENT, "dims 6");
    o.dims = 4;
    CHECK_ERR(em_rope(x, offf, &o, &y), EM_ERR_ARGUMENT, "offset f32[]");
    o.freqs = w32; /* 4 elements, wants 2 */
    CHECK_ERR(em_rope(x, off, &o, &y), EM_ERR_ARGUMENT, "freqs f32[4]");
    o.freqs = NULL;
    CHECK_ERR(em_rope(w32, off, &o, &y), EM_ERR_ARGUMENT, "rank >= 2");
    CHECK(y == NULL);
    em_array_release(x), em_array_release(w3), em_array_release(w32),
        em_array_release(xi), em_array_release(off), em_array_release(offf);
}

/* ---- gradients -------------------------------------------------------- */

enum { GR = 3, GD = 5 };

typedef em_status (*gfn)(em_array *const *in, em_array **out);

static em_status g_rms(em_array *const *in, em_array **out) {
    return em_rms_norm(in[0], in[1], 1e-3, out);
}
static em_status g_rms_nw(em_array *const *in, em_array **out) {
    return em_rms_norm(in[0], NULL, 1e-3, out);
}
static em_status g_layer(em_array *const *in, em_array **out) {
    return em_layer_norm(in[0], in[1], in[2], 1e-3, out);
}
static em_status g_softmax(em_array *const *in, em_array **out) {
    return em_softmax(in[0], -1, out);
}
static em_status g_softmax0(em_array *const *in, em_array **out) {
    return em_softmax(in[0], 0, out);
}
static em_status g_rope(em_array *const *in, em_array **out) {
    em_array *off = NULL;
    em_status st = em_scalar_s64(5, EM_S64, &off);
    em_rope_options o = {4, false, 100, 0.7, NULL};
    if (st == EM_OK)
        st = em_rope(in[0], off, &o, out);
    em_array_release(off);
    return st;
}
static em_status g_rope_trad(em_array *const *in, em_array **out) {
    em_array *off = NULL;
    em_status st = em_scalar_s64(2, EM_S64, &off);
    em_rope_options o = {4, true, 10, 1, NULL};
    if (st == EM_OK)
        st = em_rope(in[0], off, &o, out);
    em_array_release(off);
    return st;
}

/* sum(f(in) * wv), inputs: x (GR, GD), then vectors (GD) */
static double g_loss(gfn f, int nin, double (*vals)[GR * GD],
                     const double *wv) {
    int64_t xs[] = {GR, GD}, vs[] = {GD};
    em_array *in[3] = {NULL, NULL, NULL}, *y = NULL;
    for (int i = 0; i < nin; i++)
        in[i] = f64_array(vals[i], i ? vs : xs, i ? 1 : 2);
    double total = NAN, out[GR * GD];
    if (f(in, &y) == EM_OK) {
        t_read_f64(y, out, GR * GD);
        total = 0;
        for (int j = 0; j < GR * GD; j++)
            total += out[j] * wv[j];
    }
    em_array_release(y);
    for (int i = 0; i < nin; i++)
        em_array_release(in[i]);
    return total;
}

static void check_grad(const char *name, gfn f, int nin) {
    double vals[3][GR * GD], wv[GR * GD];
    for (int j = 0; j < GR * GD; j++) {
        vals[0][j] = sin(j * 1.7 + 0.3) * 2;
        vals[1][j] = 1 + 0.3 * cos(j);
        vals[2][j] = 0.2 * sin(j * 0.9);
        wv[j] = cos(j * 2.3);
    }
    int64_t xs[] = {GR, GD}, vs[] = {GD};
    em_array *in[3] = {NULL, NULL, NULL}, *wrap[3] = {NULL, NULL, NULL};
    em_array *grads[3] = {NULL, NULL, NULL}, *y = NULL;
    for (int i = 0; i < nin; i++) {
        in[i] = f64_array(vals[i], i ? vs : xs, i ? 1 : 2);
        CHECK_OK(em_identity(in[i], &wrap[i]));
    }
    CHECK_OK(f(wrap, &y));
    em_array *w = f64_array(wv, xs, 2);
    CHECK_OK(em_vjp(&y, &w, 1, wrap, (size_t)nin, grads));
    for (int i = 0; i < nin && grads[i]; i++) {
        const int n = i ? GD : GR * GD;
        double g[GR * GD];
        t_read_f64(grads[i], g, (size_t)n);
        for (int j = 0; j < n; j++) {
            const double h = 1e-6, keep = vals[i][j];
            vals[i][j] = keep + h;
            double up = g_loss(f, nin, vals, wv);
            vals[i][j] = keep - h;
            double down = g_loss(f, nin, vals, wv);
            vals[i][j] = keep;
            double fd = (up - down) / (2 * h);
            if (!(fabs(fd - g[j]) <= 1e-6 * (1 + fabs(fd))))
                em_test_fail(__FILE__, __LINE__,
                             "%s: d/din%d[%d] = %.10g, finite difference "
                             "%.10g",
                             name, i, j, g[j], fd);
        }
    }
    em_array_release(y), em_array_release(w);
    for (int i = 0; i < nin; i++)
        em_array_release(in[i]), em_array_release(wrap[i]),
            em_array_release(grads[i]);
}

EM_TEST(fast_vjp) {
    check_grad("rms_norm", g_rms, 2);
    check_grad("rms_norm no weight", g_rms_nw, 1);
    check_grad("layer_norm", g_layer, 3);
    check_grad("softmax", g_softmax, 1);
    check_grad("softmax axis 0", g_softmax0, 1);
}

/* rope on (GR, GD) would need an even D: (3, 4) views of the same data */
EM_TEST(fast_vjp_rope) {
    enum { L = 3, D = 4 };
    gfn fns[] = {g_rope, g_rope_trad};
    for (int k = 0; k < 2; k++) {
        double xv[L * D], wv[L * D];
        for (int j = 0; j < L * D; j++)
            xv[j] = sin(j * 1.1), wv[j] = cos(j * 0.4);
        int64_t s[] = {L, D};
        em_array *x = f64_array(xv, s, 2), *wrap = NULL, *y = NULL,
                 *g = NULL;
        CHECK_OK(em_identity(x, &wrap));
        CHECK_OK(fns[k](&wrap, &y));
        em_array *w = f64_array(wv, s, 2);
        CHECK_OK(em_vjp(&y, &w, 1, &wrap, 1, &g));
        double gv[L * D];
        t_read_f64(g, gv, L * D);
        for (int j = 0; j < L * D; j++) {
            double up = 0, down = 0, keep = xv[j], out[L * D];
            for (int sgn = 0; sgn < 2; sgn++) {
                xv[j] = keep + (sgn ? -1e-6 : 1e-6);
                em_array *xa = f64_array(xv, s, 2), *ya = NULL;
                CHECK_OK(fns[k](&xa, &ya));
                t_read_f64(ya, out, L * D);
                double tot = 0;
                for (int q = 0; q < L * D; q++)
                    tot += out[q] * wv[q];
                if (sgn)
                    down = tot;
                else
                    up = tot;
                em_array_release(xa), em_array_release(ya);
            }
            xv[j] = keep;
            CHECK_NEAR(gv[j], (up - down) / 2e-6, 1e-6);
        }
        em_array_release(x), em_array_release(wrap), em_array_release(y),
            em_array_release(w), em_array_release(g);
    }
}
