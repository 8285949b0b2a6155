/* Indexing ops: Nx's documented examples, clamping, every dtype, errors. */
#include "test.h"
#include "internal.h"

static em_array *vals(const double *v, const int64_t *shape, int ndim,
                      em_dtype dtype) {
    return t_from_f64(v, shape, ndim, dtype);
}

static bool reads_as(em_array *a, const double *want, size_t n) {
    double got[1024];
    if (!a || n > 1024 || (size_t)em_array_size(a) != n)
        return false;
    t_read_f64(a, got, n);
    for (size_t i = 0; i < n; i++)
        if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
            return false;
    return true;
}

EM_TEST(index_take_nx_examples) {
    int64_t s[2] = {2, 2}, is[1] = {3}, is2[2] = {2, 2};
    double tv[4] = {1, 2, 3, 4}, iv[3] = {1, 0, 1}, iv2[4] = {1, 0, 1, 0};
    em_array *t = vals(tv, s, 2, EM_S64), *i = vals(iv, is, 1, EM_S32),
             *i2 = vals(iv2, is2, 2, EM_U8), *r0 = NULL, *r1 = NULL, *r2 = NULL;
    CHECK_OK(em_take(t, i, 0, &r0));
    CHECK_OK(em_take(t, i, 1, &r1));
    CHECK_OK(em_take(t, i2, -1, &r2));
    double w0[6] = {3, 4, 1, 2, 3, 4}, w1[6] = {2, 1, 2, 4, 3, 4},
           w2[8] = {2, 1, 2, 1, 4, 3, 4, 3};
    CHECK(reads_as(r0, w0, 6) && em_array_shape(r0)[0] == 3);
    CHECK(reads_as(r1, w1, 6) && em_array_shape(r1)[1] == 3);
    CHECK(reads_as(r2, w2, 8) && em_array_ndim(r2) == 3);
    /* a 0-d index drops the axis */
    double one = 1;
    em_array *i0 = vals(&one, NULL, 0, EM_S16), *r3 = NULL;
    CHECK_OK(em_take(t, i0, 0, &r3));
    double w3[2] = {3, 4};
    CHECK(em_array_ndim(r3) == 1 && reads_as(r3, w3, 2));
    em_array_release(t);
    em_array_release(i);
    em_array_release(i2);
    em_array_release(i0);
    em_array_release(r0);
    em_array_release(r1);
    em_array_release(r2);
    em_array_release(r3);
}

EM_TEST(index_gather_nx_examples) {
    int64_t s[2] = {2, 2}, is[2] = {3, 2}, is3[3] = {2, 2, 2}, ia[2] = {2, 1};
    double tv[4] = {1, 2, 3, 4}, iv[6] = {1, 1, 0, 1, 1, 0},
           iv3[8] = {1, 1, 0, 0, 1, 0, 0, 1}, iva[2] = {1, 0};
    em_array *t = vals(tv, s, 2, EM_F32), *i = vals(iv, is, 2, EM_S64),
             *i3 = vals(iv3, is3, 3, EM_U32), *ia1 = vals(iva, ia, 2, EM_S8),
             *r = NULL, *r3 = NULL, *ra = NULL;
    CHECK_OK(em_gather(t, i, NULL, 0, &r));
    double w[3] = {4, 2, 3};
    CHECK(reads_as(r, w, 3));
    CHECK_OK(em_gather(t, i3, NULL, 0, &r3));
    double w3[4] = {4, 1, 3, 2};
    CHECK(reads_as(r3, w3, 4) && em_array_ndim(r3) == 2);
    int axes[1] = {1};
    CHECK_OK(em_gather(t, ia1, axes, 1, &ra));
    double wa[4] = {2, 4, 1, 3};
    CHECK(reads_as(ra, wa, 4));
    em_array *out = NULL;
    int two[2] = {0, 0};
    CHECK_ERR(em_gather(t, i, two, 2, &out), EM_ERR_ARGUMENT,
              "gather: axis 0 is repeated");
    CHECK_ERR(em_gather(t, i, axes, 1, &out), EM_ERR_ARGUMENT,
              "gather: indices s64[3,2] address 2 axes but f32[2,2] has rank 2 "
              "and 1 axes were given");
    CHECK_ERR(em_gather(t, t, NULL, 0, &out), EM_ERR_ARGUMENT,
              "gather: indices f32[2,2] must have an integer dtype");
    em_array_release(t);
    em_array_release(i);
    em_array_release(i3);
    em_array_release(ia1);
    em_array_release(r);
    em_array_release(r3);
    em_array_release(ra);
}

EM_TEST(index_take_along_axis_nx_example) {
    int64_t s[2] = {2, 3}, is[2] = {2, 6};
    double tv[6] = {1, 2, 3, 4, 5, 6},
           iv[12] = {0, 0, 2, 2, 1, 1, 2, 2, 1, 1, 0, 0};
    em_array *t = vals(tv, s, 2, EM_BF16), *i = vals(iv, is, 2, EM_U16),
             *r = NULL;
    CHECK_OK(em_take_along_axis(t, i, 1, &r));
    double w[12] = {1, 1, 3, 3, 2, 2, 6, 6, 5, 5, 4, 4};
    CHECK(reads_as(r, w, 12));
    em_array *out = NULL;
    int64_t bs[2] = {3, 6};
    double z[18] = {0};
    em_array *bad = vals(z, bs, 2, EM_S32);
    CHECK_ERR(em_take_along_axis(t, bad, 1, &out), EM_ERR_ARGUMENT,
              "take_along_axis: indices s32[3,6] do not broadcast with "
              "bf16[2,3] on axis 0");
    em_array_release(bad);
    em_array_release(t);
    em_array_release(i);
    em_array_release(r);
}

EM_TEST(index_indexed_add_nx_example) {
    int64_t s[3] = {1, 2, 3}, is[2] = {5, 3}, us[1] = {5};
    double iv[15] = {0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 2, 0, 1, 2};
    double uv[5] = {1, 3, 1, -2, 5};
    em_array *t = NULL;
    CHECK_OK(em_iota(s, 3, 2, EM_S32, &t)); /* placeholder, replaced below */
    em_array_release(t);
    double tv[6] = {0, 1, 2, 3, 4, 5};
    t = vals(tv, s, 3, EM_S32);
    em_array *i = vals(iv, is, 2, EM_S64), *u = vals(uv, us, 1, EM_S32),
             *r = NULL;
    CHECK_OK(em_indexed_add(t, i, u, NULL, 0, &r));
    double w[6] = {2, 1, 0, 3, 7, 10};
    CHECK(reads_as(r, w, 6));
    /* the input is untouched (it is held by the test, so it is copied) */
    CHECK(reads_as(t, tv, 6));
    em_array_release(t);
    em_array_release(i);
    em_array_release(u);
    em_array_release(r);
}

EM_TEST(index_indexed_put_last_wins_and_donation) {
    int64_t s[1] = {3}, is[2] = {4, 1}, us[1] = {4};
    double iv[4] = {1, 2, 1, 7}, uv[4] = {2, 4, 9, 5};
    em_array *base = NULL, *i = vals(iv, is, 2, EM_U64),
             *u = vals(uv, us, 1, EM_C128), *r = NULL;
    /* a pending input only the op holds: its buffer becomes the output */
    CHECK_OK(em_iota(s, 1, 0, EM_C128, &base));
    CHECK_OK(em_indexed_put(base, i, u, NULL, 0, &r));
    em_array_release(base);
    double w[3] = {0, 9, 5}; /* 7 clamps to 2; the later 9 wins at 1 */
    CHECK(reads_as(r, w, 3));
    em_array_release(i);
    em_array_release(u);
    em_array_release(r);
}

EM_TEST(index_clamps_out_of_range) {
    int64_t s[1] = {4};
    double tv[4] = {10, 11, 12, 13};
    em_array *t = vals(tv, s, 1, EM_F64);
    /* every index dtype, including values far out of range */
    const em_dtype idts[] = {EM_U8, EM_U16, EM_U32, EM_U64,
                             EM_S8, EM_S16, EM_S32, EM_S64};
    for (size_t k = 0; k < sizeof idts / sizeof idts[0]; k++) {
        em_dtype idt = idts[k];
        bool sign = em_dtype_is_signed(idt);
        double iv[4] = {sign ? -100 : 0, 3, 4, 120};
        int64_t is[1] = {4};
        em_array *i = vals(iv, is, 1, idt), *r = NULL;
        CHECK_OK(em_take(t, i, 0, &r));
        double w[4] = {10, 13, 13, 13};
        CHECK(reads_as(r, w, 4));
        em_array_release(i);
        em_array_release(r);
    }
    /* u64 above INT64_MAX saturates high, not negative */
    uint64_t huge[2] = {UINT64_MAX, (uint64_t)1 << 63};
    int64_t hs[1] = {2};
    em_array *h = NULL, *r = NULL, *ok = NULL;
    CHECK_OK(em_from_data(huge, sizeof huge, hs, 1, EM_U64, &h));
    CHECK_OK(em_take(t, h, 0, &r));
    double w[2] = {13, 13};
    CHECK(reads_as(r, w, 2));
    CHECK_OK(em_indices_in_range(h, INT64_MAX, &ok));
    uint8_t b = 1;
    CHECK_OK(em_read(ok, &b, 1));
    CHECK(b == 0);
    em_array_release(ok);
    em_array_release(h);
    em_array_release(r);
    em_array_release(t);
}

EM_TEST(index_every_dtype_and_strided) {
    /* Every dtype (so every element size) through a transposed view:
     * tt[r][c] = tv[c * 2 + r]. */
    int64_t s[2] = {3, 2}, is[1] = {4}, gs[2] = {2, 2}, ts[2] = {2, 1},
            us[1] = {1}, as[2] = {1, 2};
    double tv[6] = {1, 0, 3, 4, 5, 6}, iv[4] = {2, 0, 2, 1},
           gv[4] = {1, 2, 0, 0}, tav[2] = {2, 0}, aiv[2] = {1, 1}, ten = 10;
    for (int dt = 0; dt < EM_DTYPE_COUNT; dt++) {
        em_dtype d = (em_dtype)dt;
        em_array *t = vals(tv, s, 2, d), *tt = NULL;
        int perm[2] = {1, 0};
        CHECK_OK(em_transpose(t, perm, 2, &tt));
        em_array *i = vals(iv, is, 1, EM_S32), *gi = vals(gv, gs, 2, EM_U8),
                 *ti = vals(tav, ts, 2, EM_S64), *ai = vals(aiv, as, 2, EM_U16),
                 *au = vals(&ten, us, 1, d);
        em_array *r = NULL, *g = NULL, *ta = NULL, *ad = NULL;
        CHECK_OK(em_take(tt, i, 1, &r));
        CHECK_OK(em_gather(tt, gi, NULL, 0, &g));
        CHECK_OK(em_take_along_axis(tt, ti, 1, &ta));
        CHECK_OK(em_indexed_add(tt, ai, au, NULL, 0, &ad));
        double wr[8], wg[2] = {6, 1}, wt[2] = {5, 0},
                      wa[6] = {1, 3, 5, 0, 14, 6};
        for (int row = 0; row < 2; row++)
            for (int k = 0; k < 4; k++)
                wr[row * 4 + k] = tv[(int)iv[k] * 2 + row];
        if (d == EM_PRED) {
            for (int k = 0; k < 8; k++)
                wr[k] = wr[k] != 0;
            wg[0] = 1;
            wt[0] = 1;
            for (int k = 0; k < 6; k++)
                wa[k] = wa[k] != 0;
        }
        CHECK(reads_as(r, wr, 8));
        CHECK(reads_as(g, wg, 2));
        CHECK(reads_as(ta, wt, 2));
        CHECK(reads_as(ad, wa, 6));
        em_array *list[] = {t, tt, i, gi, ti, ai, au, r, g, ta, ad};
        for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
            em_array_release(list[k]);
    }
}

EM_TEST(index_indexed_add_wraps_and_rounds) {
    int64_t s[1] = {2}, is[2] = {3, 1}, us[1] = {3};
    int32_t tv[2] = {INT32_MAX, INT32_MIN};
    int32_t uv[3] = {1, 1, -1};
    double iv[3] = {0, 0, 1};
    em_array *t = NULL, *u = NULL, *i = vals(iv, is, 2, EM_S8), *r = NULL;
    CHECK_OK(em_from_data(tv, sizeof tv, s, 1, EM_S32, &t));
    CHECK_OK(em_from_data(uv, sizeof uv, us, 1, EM_S32, &u));
    CHECK_OK(em_indexed_add(t, i, u, NULL, 0, &r));
    int32_t got[2];
    CHECK_OK(em_read(r, got, sizeof got));
    CHECK(got[0] == INT32_MIN + 1 && got[1] == INT32_MAX);
    em_array_release(r);
    em_array_release(t);
    em_array_release(u);
    /* f16: 2048 + 1 rounds back to 2048 once per update */
    double fv[2] = {2048, 0}, fu[3] = {1, 1, 1};
    em_array *f = vals(fv, s, 1, EM_F16), *fuu = vals(fu, us, 1, EM_F16),
             *fr = NULL;
    CHECK_OK(em_indexed_add(f, i, fuu, NULL, 0, &fr));
    double want[2] = {2048, 1};
    CHECK(reads_as(fr, want, 2));
    /* pred: sums saturate at true */
    em_array *p = vals(fv, s, 1, EM_PRED), *pu = vals(fu, us, 1, EM_PRED),
             *pr = NULL;
    CHECK_OK(em_indexed_add(p, i, pu, NULL, 0, &pr));
    uint8_t pb[2];
    CHECK_OK(em_read(pr, pb, 2));
    CHECK(pb[0] == 1 && pb[1] == 1);
    em_array_release(p);
    em_array_release(pu);
    em_array_release(pr);
    em_array_release(f);
    em_array_release(fuu);
    em_array_release(fr);
    em_array_release(i);
}

EM_TEST(index_indexed_update_axes_and_errors) {
    /* indexed_put into columns: axes [1], updates [n, rows] */
    int64_t s[2] = {2, 3}, is[2] = {2, 1}, us[2] = {2, 2};
    double tv[6] = {0}, iv[2] = {2, 0}, uv[4] = {1, 2, 3, 4};
    em_array *t = vals(tv, s, 2, EM_S16), *i = vals(iv, is, 2, EM_S32),
             *u = vals(uv, us, 2, EM_S16), *r = NULL, *out = NULL;
    int axes[1] = {-1};
    CHECK_OK(em_indexed_put(t, i, u, axes, 1, &r));
    double w[6] = {3, 0, 1, 4, 0, 2};
    CHECK(reads_as(r, w, 6));
    int64_t bus[2] = {2, 3};
    double bz[6] = {0};
    em_array *bu = vals(bz, bus, 2, EM_S16);
    CHECK_ERR(em_indexed_put(t, i, bu, axes, 1, &out), EM_ERR_ARGUMENT,
              "indexed_put: updates s16[2,3] do not match indices s32[2,1] "
              "into s16[2,3] (expected updates of shape [2,2])");
    em_array *fu = vals(uv, us, 2, EM_F32);
    CHECK_ERR(em_indexed_add(t, i, fu, axes, 1, &out), EM_ERR_ARGUMENT,
              "indexed_add: updates f32[2,2] must have the dtype of s16[2,3]");
    int64_t es[2] = {0, 3}, eis[2] = {1, 1}, eus[2] = {1, 3};
    em_array *e = NULL, *ei = vals(iv, eis, 2, EM_S32),
             *eu = vals(bz, eus, 2, EM_S16);
    CHECK_OK(em_from_data(NULL, 0, es, 2, EM_S16, &e));
    CHECK_ERR(em_indexed_add(e, ei, eu, NULL, 0, &out), EM_ERR_ARGUMENT,
              "indexed_add: cannot index axis 0 of s16[0,3]: it is empty");
    /* no index rows: a copy of a */
    int64_t nis[2] = {0, 1}, nus[2] = {0, 3};
    em_array *ni = NULL, *nu = NULL;
    CHECK_OK(em_from_data(NULL, 0, nis, 2, EM_S32, &ni));
    CHECK_OK(em_from_data(NULL, 0, nus, 2, EM_S16, &nu));
    CHECK_OK(em_indexed_add(t, ni, nu, NULL, 0, &out));
    CHECK(reads_as(out, tv, 6));
    em_array_release(out);
    em_array_release(ni);
    em_array_release(nu);
    em_array_release(e);
    em_array_release(ei);
    em_array_release(eu);
    em_array_release(fu);
    em_array_release(bu);
    em_array_release(t);
    em_array_release(i);
    em_array_release(u);
    em_array_release(r);
}

EM_TEST(index_rank8_gather_and_empty) {
    int64_t s[8] = {2, 2, 1, 2, 1, 2, 1, 2};
    em_array *t = NULL, *g = NULL, *i = NULL;
    CHECK_OK(em_iota(s, 8, 7, EM_S64, &t));
    int64_t is[2] = {1, 8};
    double iv[8] = {1, 1, 0, 1, 0, 1, 0, 1};
    i = vals(iv, is, 2, EM_U8);
    CHECK_OK(em_gather(t, i, NULL, 0, &g));
    double w[1] = {1};
    CHECK(em_array_ndim(g) == 1 && reads_as(g, w, 1));
    em_array_release(g);
    /* empty indices give an empty result */
    int64_t es[1] = {0};
    em_array *ei = NULL, *et = NULL;
    CHECK_OK(em_from_data(NULL, 0, es, 1, EM_S32, &ei));
    CHECK_OK(em_take(t, ei, 3, &et));
    CHECK(em_array_size(et) == 0 && em_array_ndim(et) == 8);
    CHECK_OK(em_eval(&et, 1));
    em_array *out = NULL;
    CHECK_OK(em_reshape(ei, es, 1, &out));
    em_array_release(out);
    /* rank overflow: 8 - 1 + 10 indices axes */
    em_array *i2 = NULL;
    double z[2] = {0, 0};
    int64_t ten[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    i2 = vals(z, ten, 10, EM_S32);
    CHECK_ERR(em_take(t, i2, 0, &out), EM_ERR_ARGUMENT, "gives rank 17");
    em_array_release(i2);
    em_array_release(ei);
    em_array_release(et);
    em_array_release(t);
    em_array_release(i);
}

EM_TEST(index_indices_in_range) {
    int64_t s[2] = {2, 2};
    double v[4] = {0, 3, 2, 1};
    em_array *i = vals(v, s, 2, EM_S8), *t = NULL, *a = NULL, *b = NULL,
             *out = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(i, perm, 2, &t));
    CHECK_OK(em_indices_in_range(t, 4, &a));
    CHECK_OK(em_indices_in_range(t, 3, &b));
    CHECK(em_array_dtype(a) == EM_PRED && em_array_ndim(a) == 0);
    uint8_t ra = 0, rb = 1;
    CHECK_OK(em_read(a, &ra, 1));
    CHECK_OK(em_read(b, &rb, 1));
    CHECK(ra == 1 && rb == 0);
    em_array *f = vals(v, s, 2, EM_F32);
    CHECK_ERR(em_indices_in_range(f, 3, &out), EM_ERR_ARGUMENT,
              "indices_in_range: indices f32[2,2] must have an integer dtype");
    em_array_release(f);
    em_array_release(i);
    em_array_release(t);
    em_array_release(a);
    em_array_release(b);
}
