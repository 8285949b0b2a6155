/*
 * Scaled dot-product attention (include/emily_attention.h): hand-computed
 * values (plain, causal, sinks, both mask kinds, fully masked rows, GQA),
 * a naive double reference on random inputs for every dtype and both
 * schedules (prefill, and the key-split decode of Lq = 1 over thousands of
 * keys), strided views, the vjp against finite differences, and errors.
 */
#include "emily_attention.h"
#include "emily_autodiff.h"
#include "test.h"

#include <stdlib.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return 2.0 * (double)(rng >> 11) / 9007199254740992.0 - 1.0;
}

typedef struct ref_case {
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    double scale;
    bool causal;
    const double *mask; /* full (B, H, Lq, Lk) or NULL */
    bool mask_bool;     /* mask values 0/1 */
    const double *sinks;
} ref_case;

/* The definition, in double, one row at a time. */
static void ref_sdpa(const ref_case *c, const double *q, const double *k,
                     const double *v, double *out) {
    const int64_t G = c->H / c->Hkv;
    double *s = malloc(sizeof(double) * (size_t)(c->Lk ? c->Lk : 1));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->Lq; i++) {
                const int64_t kh = h / G;
                const double *qi = q + ((b * c->H + h) * c->Lq + i) * c->D;
                double m = -INFINITY;
                for (int64_t j = 0; j < c->Lk; j++) {
                    const double *kj =
                        k + ((b * c->Hkv + kh) * c->Lk + j) * c->D;
                    double dot = 0;
                    for (int64_t d = 0; d < c->D; d++)
                        dot += qi[d] * kj[d];
                    s[j] = dot * c->scale;
                    if (c->mask) {
                        double mv =
                            c->mask[((b * c->H + h) * c->Lq + i) * c->Lk + j];
                        if (c->mask_bool)
                            s[j] = mv != 0 ? s[j] : -INFINITY;
                        else
                            s[j] += mv;
                    }
                    if (c->causal && j > i + c->Lk - c->Lq)
                        s[j] = -INFINITY;
                    m = s[j] > m ? s[j] : m;
                }
                double *o = out + ((b * c->H + h) * c->Lq + i) * c->Dv;
                for (int64_t e = 0; e < c->Dv; e++)
                    o[e] = 0;
                if (m == -INFINITY)
                    continue;
                double M = c->sinks && c->sinks[h] > m ? c->sinks[h] : m;
                double den = c->sinks ? exp(c->sinks[h] - M) : 0;
                for (int64_t j = 0; j < c->Lk; j++) {
                    double p = exp(s[j] - M);
                    den += p;
                    const double *vj =
                        v + ((b * c->Hkv + kh) * c->Lk + j) * c->Dv;
                    for (int64_t e = 0; e < c->Dv; e++)
                        o[e] += p * vj[e];
                }
                for (int64_t e = 0; e < c->Dv; e++)
                    o[e] /= den;
            }
    free(s);
}

static double *rnd_values(int64_t n) {
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd();
    return x;
}

/* Run em_sdpa on the case's random inputs in `dtype` and compare with the
 * reference computed on the same (rounded) values. */
static void check_random(const ref_case *c, em_dtype dtype, double tol) {
    const int64_t nq = c->B * c->H * c->Lq * c->D,
                  nk = c->B * c->Hkv * c->Lk * c->D,
                  nv = c->B * c->Hkv * c->Lk * c->Dv,
                  no = c->B * c->H * c->Lq * c->Dv,
                  nm = c->B * c->H * c->Lq * c->Lk;
    double *q = rnd_values(nq), *k = rnd_values(nk), *v = rnd_values(nv);
    double *want = malloc(sizeof(double) * (size_t)(no ? no : 1));
    double *got = malloc(sizeof(double) * (size_t)(no ? no : 1));
    int64_t qs[4] = {c->B, c->H, c->Lq, c->D},
            ks[4] = {c->B, c->Hkv, c->Lk, c->D},
            vs[4] = {c->B, c->Hkv, c->Lk, c->Dv},
            ms[4] = {c->B, c->H, c->Lq, c->Lk}, hs[1] = {c->H};
    em_array *qa = t_from_f64(q, qs, 4, dtype),
             *ka = t_from_f64(k, ks, 4, dtype),
             *va = t_from_f64(v, vs, 4, dtype), *ma = NULL, *sa = NULL,
             *out = NULL;
    /* the reference sees the rounded inputs */
    t_read_f64(qa, q, (size_t)nq);
    t_read_f64(ka, k, (size_t)nk);
    t_read_f64(va, v, (size_t)nv);
    em_sdpa_options o = {c->scale, c->causal, NULL, NULL};
    ref_case rc = *c;
    double *mask = NULL, *sinks = NULL;
    if (c->mask) {
        mask = malloc(sizeof(double) * (size_t)nm);
        memcpy(mask, c->mask, sizeof(double) * (size_t)nm);
        ma = t_from_f64(mask, ms, 4, c->mask_bool ? EM_PRED : dtype);
        if (!c->mask_bool)
            t_read_f64(ma, mask, (size_t)nm);
        o.mask = ma;
        rc.mask = mask;
    }
    if (c->sinks) {
        sinks = malloc(sizeof(double) * (size_t)c->H);
        sa = t_from_f64(c->sinks, hs, 1, dtype);
        t_read_f64(sa, sinks, (size_t)c->H);
        o.sinks = sa;
        rc.sinks = sinks;
    }
    if (rc.scale == 0)
        rc.scale = 1 / sqrt((double)c->D);
    ref_sdpa(&rc, q, k, v, want);
    CHECK_OK(em_sdpa(qa, ka, va, &o, &out));
    if (out) {
        CHECK(em_array_dtype(out) == dtype);
        t_read_f64(out, got, (size_t)no);
        int bad = 0;
        for (int64_t i = 0; i < no && bad < 5; i++)
            if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
                bad++;
                em_test_fail(__FILE__, __LINE__,
                             "dtype %d Lq %lld Lk %lld: out[%lld] = %.9g, "
                             "wanted %.9g",
                             (int)dtype, (long long)c->Lq, (long long)c->Lk,
                             (long long)i, got[i], want[i]);
            }
    }
    em_array_release(out);
    em_array_release(qa);
    em_array_release(ka);
    em_array_release(va);
    em_array_release(ma);
    em_array_release(sa);
    free(q);
    free(k);
    free(v);
    free(want);
    free(got);
    free(mask);
    free(sinks);
}

/* ---- hand-computed -------------------------------------------------------- */

/* q = [1 0], k = [[1 0], [0 1]], v = [[1 2], [3 4]], scale 1: scores [1 0],
 * weights e/(e+1), 1/(e+1). */
static const double hq[2] = {1, 0}, hk[4] = {1, 0, 0, 1}, hv[4] = {1, 2, 3, 4};

static void run_small(const em_sdpa_options *o, int64_t Lq, const double *qv,
                      double *got) {
    int64_t qs[4] = {1, 1, Lq, 2}, ks[4] = {1, 1, 2, 2};
    em_array *q = t_from_f64(qv, qs, 4, EM_F32),
             *k = t_from_f64(hk, ks, 4, EM_F32),
             *v = t_from_f64(hv, ks, 4, EM_F32), *out = NULL;
    CHECK_OK(em_sdpa(q, k, v, o, &out));
    if (out)
        t_read_f64(out, got, (size_t)(2 * Lq));
    em_array_release(out);
    em_array_release(q);
    em_array_release(k);
    em_array_release(v);
}

EM_TEST(sdpa_hand_plain_and_sinks) {
    const double e = exp(1.0);
    em_sdpa_options o = {1, false, NULL, NULL};
    double got[2];
    run_small(&o, 1, hq, got);
    CHECK_NEAR(got[0], (e * 1 + 3) / (e + 1), 1e-6);
    CHECK_NEAR(got[1], (e * 2 + 4) / (e + 1), 1e-6);
    /* sink 0 adds exp(0) = 1 to the denominator only */
    double zero = 0;
    int64_t hs[1] = {1};
    em_array *sink = t_from_f64(&zero, hs, 1, EM_F32);
    o.sinks = sink;
    run_small(&o, 1, hq, got);
    CHECK_NEAR(got[0], (e * 1 + 3) / (e + 2), 1e-6);
    CHECK_NEAR(got[1], (e * 2 + 4) / (e + 2), 1e-6);
    em_array_release(sink);
    /* default scale: 1/sqrt(2) */
    o.sinks = NULL;
    o.scale = 0;
    run_small(&o, 1, hq, got);
    const double w = exp(1 / sqrt(2.0));
    CHECK_NEAR(got[0], (w * 1 + 3) / (w + 1), 1e-6);
}

EM_TEST(sdpa_hand_causal) {
    /* Lq = Lk = 2: row 0 sees key 0 only (v0); row 1 sees both. */
    const double e = exp(1.0), q2[4] = {1, 0, 1, 0};
    em_sdpa_options o = {1, true, NULL, NULL};
    double got[4];
    run_small(&o, 2, q2, got);
    CHECK_NEAR(got[0], 1, 1e-6);
    CHECK_NEAR(got[1], 2, 1e-6);
    CHECK_NEAR(got[2], (e * 1 + 3) / (e + 1), 1e-6);
    /* Lq = 1 < Lk: the query is the last position, it sees both keys */
    run_small(&o, 1, hq, got);
    CHECK_NEAR(got[0], (e * 1 + 3) / (e + 1), 1e-6);
}

EM_TEST(sdpa_hand_masks_and_fully_masked) {
    double got[2];
    int64_t ms[2] = {1, 2};
    /* boolean: key 0 masked out -> v1 */
    double mv[2] = {0, 1};
    em_array *m = t_from_f64(mv, ms, 2, EM_PRED);
    em_sdpa_options o = {1, false, m, NULL};
    run_small(&o, 1, hq, got);
    CHECK_NEAR(got[0], 3, 1e-6);
    CHECK_NEAR(got[1], 4, 1e-6);
    em_array_release(m);
    /* additive: +1 on key 1 makes the scores [1 1]: the mean of v */
    double av[2] = {0, 1};
    m = t_from_f64(av, ms, 2, EM_F32);
    o.mask = m;
    run_small(&o, 1, hq, got);
    CHECK_NEAR(got[0], 2, 1e-6);
    CHECK_NEAR(got[1], 3, 1e-6);
    em_array_release(m);
    /* fully masked, boolean and -inf additive, with and without sinks: 0 */
    double none[2] = {0, 0}, ninf[2] = {-INFINITY, -INFINITY}, zero = 0;
    int64_t hs[1] = {1};
    em_array *sink = t_from_f64(&zero, hs, 1, EM_F32);
    for (int kind = 0; kind < 2; kind++)
        for (int with_sink = 0; with_sink < 2; with_sink++) {
            m = kind ? t_from_f64(ninf, ms, 2, EM_F32)
                     : t_from_f64(none, ms, 2, EM_PRED);
            o.mask = m;
            o.sinks = with_sink ? sink : NULL;
            got[0] = got[1] = NAN;
            run_small(&o, 1, hq, got);
            CHECK(got[0] == 0 && got[1] == 0);
            em_array_release(m);
        }
    em_array_release(sink);
}

EM_TEST(sdpa_hand_gqa) {
    /* H = 2 query heads on one KV head: head 0 q = [1 0], head 1 q =
     * [0 1] (scores [0 1]). */
    const double e = exp(1.0), q2[4] = {1, 0, 0, 1};
    int64_t qs[4] = {1, 2, 1, 2}, ks[4] = {1, 1, 2, 2};
    em_array *q = t_from_f64(q2, qs, 4, EM_F64),
             *k = t_from_f64(hk, ks, 4, EM_F64),
             *v = t_from_f64(hv, ks, 4, EM_F64), *out = NULL;
    em_sdpa_options o = {1, false, NULL, NULL};
    CHECK_OK(em_sdpa(q, k, v, &o, &out));
    double got[4];
    t_read_f64(out, got, 4);
    CHECK_NEAR(got[0], (e + 3) / (e + 1), 1e-12);
    CHECK_NEAR(got[2], (1 + 3 * e) / (e + 1), 1e-12);
    CHECK_NEAR(got[3], (2 + 4 * e) / (e + 1), 1e-12);
    em_array_release(out);
    em_array_release(q);
    em_array_release(k);
    em_array_release(v);
}

/* ---- random, against the reference -------------------------------------- */

static const struct {
    em_dtype dtype;
    double tol;
} dtypes[] = {{EM_F64, 1e-12}, {EM_F32, 2e-5}, {EM_BF16, 3e-2}, {EM_F16, 4e-3}};

EM_TEST(sdpa_random_prefill_every_dtype) {
    ref_case cs[] = {
        {2, 4, 2, 37, 37, 16, 16, 0, false, NULL, false, NULL},
        {1, 4, 1, 70, 130, 20, 24, 0.3, true, NULL, false, NULL},
        {1, 2, 2, 5, 3, 8, 5, 0, true, NULL, false, NULL}, /* Lq > Lk */
        {1, 3, 3, 9, 200, 33, 7, 0, false, NULL, false, NULL},
    };
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++)
        for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
            check_random(&cs[i], dtypes[t].dtype, dtypes[t].tol);
}

EM_TEST(sdpa_random_decode_many_keys) {
    /* Lq = 1 and 3 over 3000 / 4100 keys: the key-split schedule */
    double sinks[4] = {0.5, -1, 2, 0};
    ref_case cs[] = {
        {1, 4, 2, 1, 3000, 64, 64, 0, false, NULL, false, NULL},
        {2, 4, 1, 3, 4100, 32, 16, 0, true, NULL, false, sinks},
        {1, 1, 1, 1, 600, 128, 128, 0, false, NULL, false, NULL},
    };
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++)
        for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
            check_random(&cs[i], dtypes[t].dtype, dtypes[t].tol);
}

EM_TEST(sdpa_random_masks_and_sinks) {
    const int64_t B = 2, H = 4, Lq = 6, Lk = 300;
    double *add = malloc(sizeof(double) * B * H * Lq * Lk);
    double *keep = malloc(sizeof(double) * B * H * Lq * Lk);
    for (int64_t i = 0; i < B * H * Lq * Lk; i++) {
        add[i] = rnd() > 0.6 ? -INFINITY : rnd();
        keep[i] = rnd() > -0.5;
    }
    /* one fully masked row of each kind */
    for (int64_t j = 0; j < Lk; j++) {
        add[j] = -INFINITY;
        keep[(H * Lq + 2) * Lk + j] = 0;
    }
    double sinks[4] = {0.1, 3, -2, 0};
    ref_case a = {B, H, 2, Lq, Lk, 12, 12, 0, true, add, false, sinks};
    ref_case b = {B, H, 4, Lq, Lk, 12, 10, 0.7, false, keep, true, NULL};
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++) {
        check_random(&a, dtypes[t].dtype, dtypes[t].tol);
        check_random(&b, dtypes[t].dtype, dtypes[t].tol);
    }
    /* the decode schedule with masks: Lq = 1 over 3000 keys */
    double *keep1 = malloc(sizeof(double) * 2 * 3000);
    for (int64_t i = 0; i < 2 * 3000; i++)
        keep1[i] = rnd() > 0;
    ref_case d = {1, 2, 1, 1, 3000, 16, 16, 0, false, keep1, true, sinks};
    check_random(&d, EM_F32, 2e-5);
    free(keep1);
    free(add);
    free(keep);
}

/* q as a transposed view of (B, Lq, H, D) and k, v as a slice of a longer
 * cache: the kernel reads through the strides. */
EM_TEST(sdpa_strided_views) {
    const int64_t B = 1, H = 2, Lq = 3, Lk = 700, cap = 1024, D = 8;
    double *qv = rnd_values(B * Lq * H * D), *kv = rnd_values(B * H * cap * D),
           *vv = rnd_values(B * H * cap * D);
    int64_t qs[4] = {B, Lq, H, D}, cs[4] = {B, H, cap, D};
    int perm[4] = {0, 2, 1, 3};
    int64_t start[4] = {0, 0, 0, 0}, stop[4] = {B, H, Lk, D},
            step[4] = {1, 1, 1, 1};
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++) {
        em_dtype dt = dtypes[t].dtype;
        em_array *q0 = t_from_f64(qv, qs, 4, dt),
                 *k0 = t_from_f64(kv, cs, 4, dt),
                 *v0 = t_from_f64(vv, cs, 4, dt);
        em_array *q = NULL, *k = NULL, *v = NULL, *qc = NULL, *kc = NULL,
                 *vc = NULL, *a = NULL, *b = NULL;
        CHECK_OK(em_transpose(q0, perm, 4, &q));
        CHECK_OK(em_slice(k0, start, stop, step, &k));
        CHECK_OK(em_slice(v0, start, stop, step, &v));
        CHECK_OK(em_contiguous(q, &qc));
        CHECK_OK(em_contiguous(k, &kc));
        CHECK_OK(em_contiguous(v, &vc));
        em_sdpa_options o = {0, true, NULL, NULL};
        CHECK_OK(em_sdpa(q, k, v, &o, &a));
        CHECK_OK(em_sdpa(qc, kc, vc, &o, &b));
        double ga[48], gb[48];
        t_read_f64(a, ga, 48);
        t_read_f64(b, gb, 48);
        for (int i = 0; i < 48; i++)
            CHECK_NEAR(ga[i], gb[i], 1e-6 * (1 + fabs(gb[i])));
        em_array *arrs[] = {q0, k0, v0, q, k, v, qc, kc, vc, a, b};
        for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
            em_array_release(arrs[i]);
    }
    free(qv);
    free(kv);
    free(vv);
}

/* ---- gradients ------------------------------------------------------------ */

typedef struct grad_setup {
    int64_t shape[5][4];
    int ndim[5];
    int n; /* q, k, v, [additive mask], [sinks] */
    bool causal, has_mask, has_sinks;
} grad_setup;

static em_status grad_f(const grad_setup *g, em_array *const *x,
                        em_array **out) {
    em_sdpa_options o = {0.6, g->causal, NULL, NULL};
    int next = 3;
    if (g->has_mask)
        o.mask = x[next++];
    if (g->has_sinks)
        o.sinks = x[next++];
    return em_sdpa(x[0], x[1], x[2], &o, out);
}

static double grad_loss(const grad_setup *g, double *const *vals,
                        const double *w, int64_t nout) {
    em_array *x[5] = {NULL}, *y = NULL;
    for (int i = 0; i < g->n; i++)
        x[i] = t_from_f64(vals[i], g->shape[i], g->ndim[i], EM_F64);
    double total = NAN;
    if (grad_f(g, x, &y) == EM_OK) {
        double *yv = malloc(sizeof(double) * (size_t)nout);
        t_read_f64(y, yv, (size_t)nout);
        total = 0;
        for (int64_t j = 0; j < nout; j++)
            total += yv[j] * w[j];
        free(yv);
    }
    em_array_release(y);
    for (int i = 0; i < g->n; i++)
        em_array_release(x[i]);
    return total;
}

static void check_grad(const grad_setup *g) {
    double *vals[5];
    int64_t count[5];
    em_array *x[5] = {NULL}, *wrap[5] = {NULL}, *grads[5] = {NULL};
    for (int i = 0; i < g->n; i++) {
        count[i] = 1;
        for (int d = 0; d < g->ndim[i]; d++)
            count[i] *= g->shape[i][d];
        vals[i] = rnd_values(count[i]);
        x[i] = t_from_f64(vals[i], g->shape[i], g->ndim[i], EM_F64);
        CHECK_OK(em_identity(x[i], &wrap[i]));
    }
    em_array *y = NULL, *w = NULL;
    CHECK_OK(grad_f(g, wrap, &y));
    int64_t nout = em_array_size(y);
    double *wv = rnd_values(nout);
    w = t_from_f64(wv, em_array_shape(y), 4, EM_F64);
    CHECK_OK(em_vjp(&y, &w, 1, wrap, (size_t)g->n, grads));
    for (int i = 0; i < g->n && grads[i]; i++) {
        double *gv = malloc(sizeof(double) * (size_t)count[i]);
        t_read_f64(grads[i], gv, (size_t)count[i]);
        for (int64_t j = 0; j < count[i]; j++) {
            const double h = 1e-6, keep = vals[i][j];
            vals[i][j] = keep + h;
            double up = grad_loss(g, vals, wv, nout);
            vals[i][j] = keep - h;
            double down = grad_loss(g, vals, wv, nout);
            vals[i][j] = keep;
            double fd = (up - down) / (2 * h);
            if (!(fabs(fd - gv[j]) <= 1e-6 * (1 + fabs(fd))))
                em_test_fail(__FILE__, __LINE__,
                             "d/dx%d[%lld] = %.10g, finite difference %.10g", i,
                             (long long)j, gv[j], fd);
        }
        free(gv);
    }
    free(wv);
    em_array_release(y);
    em_array_release(w);
    for (int i = 0; i < g->n; i++) {
        em_array_release(grads[i]);
        em_array_release(wrap[i]);
        em_array_release(x[i]);
        free(vals[i]);
    }
}

EM_TEST(sdpa_vjp_finite_differences) {
    /* GQA (H 4, Hkv 2), causal with Lq < Lk, additive mask (1, H, Lq, 1)
     * broadcast over batch and keys, sinks */
    grad_setup g = {
        {{2, 4, 3, 5}, {2, 2, 4, 5}, {2, 2, 4, 3}, {1, 4, 3, 1}, {4}},
        {4, 4, 4, 4, 1},
        5,
        true,
        true,
        true};
    check_grad(&g);
    grad_setup plain = {{{1, 2, 4, 3}, {1, 2, 4, 3}, {1, 2, 4, 2}},
                        {4, 4, 4},
                        3,
                        false,
                        false,
                        false};
    check_grad(&plain);
}

EM_TEST(sdpa_vjp_fully_masked_rows_are_zero) {
    /* causal with Lq > Lk: the first row sees nothing; its gradients are
     * 0, never NaN */
    const int64_t qs[4] = {1, 1, 3, 2}, ks[4] = {1, 1, 2, 2};
    double qv[6] = {1, 2, 3, 4, 5, 6}, kv[4] = {1, 0, 0, 1};
    em_array *q = t_from_f64(qv, qs, 4, EM_F32),
             *k = t_from_f64(kv, ks, 4, EM_F32);
    em_array *v = t_from_f64(kv, ks, 4, EM_F32), *wq = NULL, *y = NULL,
             *ct = NULL, *gq = NULL;
    CHECK_OK(em_identity(q, &wq));
    em_sdpa_options o = {0, true, NULL, NULL};
    CHECK_OK(em_sdpa(wq, k, v, &o, &y));
    double ones[6] = {1, 1, 1, 1, 1, 1};
    int64_t os[4] = {1, 1, 3, 2};
    ct = t_from_f64(ones, os, 4, EM_F32);
    CHECK_OK(em_vjp(&y, &ct, 1, &wq, 1, &gq));
    double got[6];
    t_read_f64(gq, got, 6);
    CHECK(got[0] == 0 && got[1] == 0);
    for (int i = 2; i < 6; i++)
        CHECK(isfinite(got[i]));
    em_array *arrs[] = {q, k, v, wq, y, ct, gq};
    for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
        em_array_release(arrs[i]);
}

/* ---- errors --------------------------------------------------------------- */

EM_TEST(sdpa_errors) {
    double z[64] = {0};
    int64_t q4[4] = {1, 4, 2, 8}, k4[4] = {1, 3, 2, 8}, ok4[4] = {1, 2, 2, 8},
            d3[3] = {4, 2, 8};
    em_array *q = t_from_f64(z, q4, 4, EM_F32),
             *k3h = t_from_f64(z, k4, 4, EM_F32),
             *k = t_from_f64(z, ok4, 4, EM_F32),
             *r3 = t_from_f64(z, d3, 3, EM_F32),
             *ki = t_from_f64(z, ok4, 4, EM_S32),
             *kd = t_from_f64(z, ok4, 4, EM_F64), *out = NULL;
    CHECK_ERR(em_sdpa(q, k3h, k3h, NULL, &out), EM_ERR_ARGUMENT,
              "f32[1,3,2,8]");
    CHECK_ERR(em_sdpa(r3, k, k, NULL, &out), EM_ERR_ARGUMENT, "rank 4");
    CHECK_ERR(em_sdpa(q, ki, ki, NULL, &out), EM_ERR_ARGUMENT, "one dtype");
    CHECK_ERR(em_sdpa(q, kd, kd, NULL, &out), EM_ERR_ARGUMENT, "one dtype");
    int64_t m_bad[2] = {3, 2}, s_bad[1] = {3};
    em_array *mb = t_from_f64(z, m_bad, 2, EM_F32),
             *sb = t_from_f64(z, s_bad, 1, EM_F32),
             *mi = t_from_f64(z, q4, 2, EM_S32);
    em_sdpa_options o = {0, false, mb, NULL};
    CHECK_ERR(em_sdpa(q, k, k, &o, &out), EM_ERR_ARGUMENT, "mask f32[3,2]");
    o.mask = mi;
    CHECK_ERR(em_sdpa(q, k, k, &o, &out), EM_ERR_ARGUMENT, "mask s32");
    o.mask = NULL;
    o.sinks = sb;
    CHECK_ERR(em_sdpa(q, k, k, &o, &out), EM_ERR_ARGUMENT, "sinks f32[3]");
    o.sinks = NULL;
    o.scale = NAN;
    CHECK_ERR(em_sdpa(q, k, k, &o, &out), EM_ERR_ARGUMENT, "scale");
    CHECK(out == NULL);
    em_array *arrs[] = {q, k3h, k, r3, ki, kd, mb, sb, mi};
    for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
        em_array_release(arrs[i]);
}
