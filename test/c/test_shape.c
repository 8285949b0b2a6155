/* Shape, join and creation ops: hand-computed values, views, errors. */
#include "test.h"
#include "internal.h"

#include <stdlib.h>

/* f64 [n] holding 0, 1, 2, ... reshaped to `shape`. */
static em_array *counting(const int64_t *shape, int ndim, em_dtype dtype) {
    double values[4096];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n && i < 4096; i++)
        values[i] = (double)i;
    return t_from_f64(values, shape, ndim, dtype);
}

/* Read as f64 and compare with `want` exactly. */
static bool reads_as(em_array *a, const double *want, size_t n) {
    double got[4096];
    if (!a || n > 4096 || (size_t)em_array_size(a) != n)
        return false;
    t_read_f64(a, got, n);
    for (size_t i = 0; i < n; i++)
        if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
            return false;
    return true;
}

static bool shares_buffer(em_array *view, em_array *base) {
    if (em_eval(&view, 1) != EM_OK || em_eval(&base, 1) != EM_OK)
        return false;
    return view->buffer == base->buffer;
}

EM_TEST(shape_reshape_view_and_copy) {
    int64_t s[3] = {2, 3, 4};
    em_array *a = counting(s, 3, EM_F32), *r = NULL, *t = NULL, *v = NULL,
             *c = NULL;
    int64_t s2[2] = {4, -1};
    CHECK_OK(em_reshape(a, s2, 2, &r));
    CHECK(em_array_shape(r)[1] == 6 && r->row_contiguous);
    CHECK(shares_buffer(r, a));
    double want24[24];
    for (int i = 0; i < 24; i++)
        want24[i] = i;
    CHECK(reads_as(r, want24, 24));

    /* transpose [3,2,4] (strides 4,12,1): splitting the last axis is a view,
     * merging the first two needs a copy. */
    int perm[3] = {1, 0, 2};
    CHECK_OK(em_transpose(a, perm, 3, &t));
    int64_t split[4] = {3, 2, 2, 2};
    CHECK_OK(em_reshape(t, split, 4, &v));
    CHECK(!v->row_contiguous);
    CHECK(shares_buffer(v, a));
    int64_t merged[2] = {6, 4};
    CHECK_OK(em_reshape(t, merged, 2, &c));
    CHECK(c->row_contiguous);
    double want[24];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 4; k++)
                want[(i * 2 + j) * 4 + k] = j * 12 + i * 4 + k;
    CHECK(reads_as(c, want, 24));
    CHECK(reads_as(v, want, 24));
    CHECK(!shares_buffer(c, a));
    em_array *same = NULL;
    CHECK_OK(em_reshape(a, s, 3, &same));
    CHECK(same == a);
    em_array_release(same);
    em_array_release(a);
    em_array_release(r);
    em_array_release(t);
    em_array_release(v);
    em_array_release(c);
}

EM_TEST(shape_reshape_scalars_and_empty) {
    double x = -0.0;
    em_array *s = t_from_f64(&x, NULL, 0, EM_F64), *r = NULL, *back = NULL;
    int64_t ones[3] = {1, 1, 1};
    CHECK_OK(em_reshape(s, ones, 3, &r));
    CHECK(em_array_ndim(r) == 3);
    CHECK_OK(em_reshape(r, NULL, 0, &back));
    double got = 1;
    CHECK_OK(em_read(back, &got, 8));
    CHECK(got == 0 && signbit(got));
    em_array_release(s);
    em_array_release(r);
    em_array_release(back);

    int64_t es[2] = {0, 4}, to[3] = {2, 0, -1};
    em_array *e = NULL, *er = NULL;
    CHECK_OK(em_from_data(NULL, 0, es, 2, EM_C64, &e));
    int64_t to_fixed[3] = {2, 0, 3};
    CHECK_OK(em_reshape(e, to_fixed, 3, &er));
    CHECK(em_array_size(er) == 0);
    CHECK_OK(em_eval(&er, 1));
    /* -1 next to a zero dimension is ambiguous */
    em_array *bad = (em_array *)1;
    CHECK_ERR(em_reshape(e, to, 3, &bad), EM_ERR_ARGUMENT, "cannot infer");
    CHECK(bad == NULL);
    em_array_release(e);
    em_array_release(er);
}

EM_TEST(shape_reshape_errors) {
    int64_t s[2] = {2, 3};
    em_array *a = counting(s, 2, EM_S32), *out = NULL;
    int64_t five[1] = {5}, two_auto[2] = {-1, -1}, neg[2] = {-2, -3},
            bad_auto[2] = {4, -1};
    CHECK_ERR(em_reshape(a, five, 1, &out), EM_ERR_ARGUMENT,
              "reshape: cannot reshape s32[2,3] (6 elements) to [5]");
    CHECK_ERR(em_reshape(a, two_auto, 2, &out), EM_ERR_ARGUMENT,
              "at most one -1");
    CHECK_ERR(em_reshape(a, neg, 2, &out), EM_ERR_ARGUMENT, "at most one -1");
    CHECK_ERR(em_reshape(a, bad_auto, 2, &out), EM_ERR_ARGUMENT,
              "cannot infer the -1 dimension of [4,-1] for s32[2,3]");
    int64_t too_many[EM_MAX_NDIM + 1] = {2, 3, 1, 1, 1, 1, 1, 1, 1,
                                         1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_ERR(em_reshape(a, too_many, EM_MAX_NDIM + 1, &out), EM_ERR_ARGUMENT,
              "rank 17");
    CHECK(out == NULL);
    em_array_release(a);
}

EM_TEST(shape_transpose_values_and_errors) {
    int64_t s[3] = {2, 3, 4};
    em_array *a = counting(s, 3, EM_S64), *t = NULL;
    int perm[3] = {2, 0, -2};
    CHECK_OK(em_transpose(a, perm, 3, &t));
    CHECK(em_array_shape(t)[0] == 4 && em_array_shape(t)[2] == 3);
    double want[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++)
                want[(i * 2 + j) * 3 + k] = j * 12 + k * 4 + i;
    CHECK(reads_as(t, want, 24));
    CHECK(shares_buffer(t, a));
    em_array *out = NULL;
    int rep[3] = {0, 0, 1}, two[2] = {0, 1}, far[3] = {0, 1, 3};
    CHECK_ERR(em_transpose(a, rep, 3, &out), EM_ERR_ARGUMENT,
              "transpose: axis 0 appears twice in the permutation for s64[2,3,4]");
    CHECK_ERR(em_transpose(a, two, 2, &out), EM_ERR_ARGUMENT,
              "permutation of 2 axes given for s64[2,3,4] (expected 3)");
    CHECK_ERR(em_transpose(a, far, 3, &out), EM_ERR_ARGUMENT,
              "axis 3 is out of range");
    em_array_release(a);
    em_array_release(t);
}

EM_TEST(shape_broadcast_values_and_errors) {
    int64_t s[2] = {2, 1};
    em_array *a = counting(s, 2, EM_F64), *b = NULL, *c = NULL;
    int64_t to[3] = {2, 2, 3};
    CHECK_OK(em_broadcast_to(a, to, 3, &b));
    double want[12] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1};
    CHECK(reads_as(b, want, 12));
    CHECK(!b->row_contiguous && b->strides[0] == 0 && b->strides[2] == 0);
    CHECK_OK(em_contiguous(b, &c));
    CHECK(c != b && reads_as(c, want, 12));
    em_array *out = NULL;
    int64_t bad[2] = {3, 3}, lower[1] = {2};
    CHECK_ERR(em_broadcast_to(a, bad, 2, &out), EM_ERR_ARGUMENT,
              "broadcast_to: cannot broadcast f64[2,1] to [3,3] (axis 0 has "
              "size 2, expected 1 or 3)");
    CHECK_ERR(em_broadcast_to(a, lower, 1, &out), EM_ERR_ARGUMENT,
              "lower rank");
    int64_t empty[3] = {0, 2, 0};
    CHECK_OK(em_broadcast_to(a, empty, 3, &out));
    CHECK(em_array_size(out) == 0);
    CHECK_OK(em_eval(&out, 1));
    em_array_release(out);
    em_array_release(a);
    em_array_release(b);
    em_array_release(c);
}

EM_TEST(shape_squeeze_expand_dims) {
    int64_t s[4] = {1, 3, 1, 2};
    em_array *a = counting(s, 4, EM_U16), *q = NULL, *q1 = NULL, *e = NULL,
             *out = NULL;
    CHECK_OK(em_squeeze(a, NULL, 0, &q));
    CHECK(em_array_ndim(q) == 2 && em_array_shape(q)[0] == 3);
    int ax[1] = {-2};
    CHECK_OK(em_squeeze(a, ax, 1, &q1));
    CHECK(em_array_ndim(q1) == 3 && em_array_shape(q1)[2] == 2);
    CHECK_OK(em_expand_dims(q, -1, &e));
    CHECK(em_array_ndim(e) == 3 && em_array_shape(e)[2] == 1 &&
          e->row_contiguous);
    double want[6] = {0, 1, 2, 3, 4, 5};
    CHECK(reads_as(e, want, 6) && reads_as(q1, want, 6));
    int bad[1] = {1};
    CHECK_ERR(em_squeeze(a, bad, 1, &out), EM_ERR_ARGUMENT,
              "squeeze: cannot remove axis 1 of u16[1,3,1,2]: its size is 3");
    CHECK_ERR(em_expand_dims(a, 5, &out), EM_ERR_ARGUMENT,
              "axis 5 is out of range for rank 5");
    int64_t full[EM_MAX_NDIM] = {1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 1, 1, 1, 1};
    em_array *r8 = NULL;
    em_array *one = counting(full, EM_MAX_NDIM, EM_U8);
    CHECK_ERR(em_expand_dims(one, 0, &r8), EM_ERR_ARGUMENT, "maximum rank 16");
    em_array_release(one);
    em_array_release(a);
    em_array_release(q);
    em_array_release(q1);
    em_array_release(e);
}

EM_TEST(shape_slice_values_and_errors) {
    int64_t s[2] = {4, 5};
    em_array *a = counting(s, 2, EM_S8), *sl = NULL, *sl2 = NULL, *out = NULL;
    int64_t start[2] = {1, 0}, stop[2] = {4, 5}, step[2] = {2, 3};
    CHECK_OK(em_slice(a, start, stop, step, &sl));
    CHECK(em_array_shape(sl)[0] == 2 && em_array_shape(sl)[1] == 2);
    double want[4] = {5, 8, 15, 18};
    CHECK(reads_as(sl, want, 4));
    CHECK(shares_buffer(sl, a));
    /* a row-contiguous slice with an offset reads without a copy */
    int64_t rows_start[2] = {1, 0}, rows_stop[2] = {3, 5};
    CHECK_OK(em_slice(a, rows_start, rows_stop, NULL, &sl2));
    CHECK(sl2->row_contiguous && sl2->offset == 5);
    em_array *c = NULL;
    CHECK_OK(em_contiguous(sl2, &c));
    CHECK(c == sl2);
    CHECK_OK(em_eval(&c, 1));
    const void *data;
    size_t nbytes;
    CHECK_OK(em_array_data(c, &data, &nbytes));
    CHECK(nbytes == 10 && ((const int8_t *)data)[0] == 5);
    em_array_release(c);
    int64_t zero[2] = {0, 0}, bad_step[2] = {1, 0}, over[2] = {5, 5},
            back[2] = {3, 0}, early[2] = {2, 5};
    CHECK_ERR(em_slice(a, zero, stop, bad_step, &out), EM_ERR_ARGUMENT,
              "slice: stride 0 on axis 1 of s8[4,5] must be >= 1");
    CHECK_ERR(em_slice(a, zero, over, NULL, &out), EM_ERR_ARGUMENT,
              "slice: range [0, 5) on axis 0 of s8[4,5] is invalid (expected "
              "0 <= start <= stop <= 4)");
    CHECK_ERR(em_slice(a, back, early, NULL, &out), EM_ERR_ARGUMENT,
              "range [3, 2) on axis 0");
    /* empty slices */
    int64_t at_end[2] = {4, 5};
    CHECK_OK(em_slice(a, at_end, at_end, NULL, &out));
    CHECK(em_array_size(out) == 0);
    CHECK_OK(em_eval(&out, 1));
    em_array_release(out);
    em_array_release(a);
    em_array_release(sl);
    em_array_release(sl2);
}

EM_TEST(shape_reverse_values) {
    int64_t s[2] = {2, 3};
    em_array *a = counting(s, 2, EM_F16), *r = NULL, *r2 = NULL, *out = NULL;
    int ax[1] = {1};
    CHECK_OK(em_reverse(a, ax, 1, &r));
    double want[6] = {2, 1, 0, 5, 4, 3};
    CHECK(reads_as(r, want, 6));
    int both[2] = {0, -1};
    CHECK_OK(em_reverse(r, both, 2, &r2)); /* reverses axis 0 only, net */
    double want2[6] = {3, 4, 5, 0, 1, 2};
    CHECK(reads_as(r2, want2, 6));
    int rep[2] = {1, -1};
    CHECK_ERR(em_reverse(a, rep, 2, &out), EM_ERR_ARGUMENT,
              "reverse: axis -1 is repeated");
    em_array_release(a);
    em_array_release(r);
    em_array_release(r2);
}

/* Byte-exact moves for every dtype (so each element size): NaN payloads,
 * -0.0 and bf16 bits survive transposes, reversals and copies. */
EM_TEST(shape_byte_exact_every_dtype) {
    for (int dt = 0; dt < EM_DTYPE_COUNT; dt++) {
        size_t es = em_dtype_size((em_dtype)dt);
        unsigned char src[3 * 4 * 16], got[3 * 4 * 16];
        for (size_t i = 0; i < sizeof src; i++)
            src[i] = (unsigned char)(i * 37 + 11);
        if (dt == EM_PRED)
            for (size_t i = 0; i < sizeof src; i++)
                src[i] &= 1;
        int64_t s[2] = {3, 4};
        em_array *a = NULL, *t = NULL, *r = NULL;
        CHECK_OK(em_from_data(src, 12 * es, s, 2, (em_dtype)dt, &a));
        int perm[2] = {1, 0}, ax[1] = {0};
        CHECK_OK(em_transpose(a, perm, 2, &t));
        CHECK_OK(em_reverse(t, ax, 1, &r));
        CHECK_OK(em_read(r, got, 12 * es));
        /* r[i][j] = a[j][3 - i] */
        bool ok = true;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                ok = ok && !memcmp(got + (size_t)(i * 3 + j) * es,
                                   src + (size_t)(j * 4 + (3 - i)) * es, es);
        CHECK(ok);
        em_array_release(a);
        em_array_release(t);
        em_array_release(r);
    }
}

EM_TEST(shape_rank8_views) {
    int64_t s[8] = {2, 1, 3, 2, 1, 2, 2, 2};
    em_array *a = counting(s, 8, EM_S32), *t = NULL, *r = NULL;
    int perm[8] = {7, 6, 5, 4, 3, 2, 1, 0};
    int axes[3] = {0, 2, 7};
    CHECK_OK(em_transpose(a, perm, 8, &t));
    CHECK_OK(em_reverse(t, axes, 3, &r));
    double got[96];
    t_read_f64(r, got, 96);
    /* brute force: r[i0..i7] = a[rev..] */
    int64_t as[8], ts[8];
    em__row_strides(s, 8, as);
    int64_t tshape[8];
    for (int i = 0; i < 8; i++)
        tshape[i] = s[7 - i];
    em__row_strides(tshape, 8, ts);
    bool ok = true;
    for (int64_t f = 0; f < 96; f++) {
        int64_t idx[8], rem = f, src = 0;
        for (int i = 7; i >= 0; i--) {
            idx[i] = rem % tshape[i];
            rem /= tshape[i];
        }
        idx[0] = tshape[0] - 1 - idx[0];
        idx[2] = tshape[2] - 1 - idx[2];
        idx[7] = tshape[7] - 1 - idx[7];
        for (int i = 0; i < 8; i++)
            src += idx[i] * as[7 - i];
        ok = ok && got[f] == (double)src;
    }
    CHECK(ok);
    em_array_release(a);
    em_array_release(t);
    em_array_release(r);
}

EM_TEST(shape_large_threaded_copy) {
    /* 1500 x 1200 f32, transposed and reversed: above the parallel grain. */
    int64_t s[2] = {1500, 1200};
    em_array *a = NULL, *t = NULL, *c = NULL;
    CHECK_OK(em_iota(s, 2, 1, EM_F32, &a));
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(a, perm, 2, &t));
    CHECK_OK(em_contiguous(t, &c));
    float *buf = malloc(sizeof(float) * 1500 * 1200);
    CHECK(buf != NULL);
    if (buf) {
        CHECK_OK(em_read(c, buf, sizeof(float) * 1500 * 1200));
        bool ok = true;
        for (int i = 0; i < 1200; i++)
            for (int j = 0; j < 1500; j += 7)
                ok = ok && buf[i * 1500 + j] == (float)i;
        CHECK(ok);
    }
    free(buf);
    em_array_release(a);
    em_array_release(t);
    em_array_release(c);
}

EM_TEST(join_put_slice_values_and_errors) {
    int64_t s[2] = {3, 4}, us[2] = {2, 2};
    em_array *a = counting(s, 2, EM_F64), *u = NULL, *p = NULL, *ut = NULL,
             *p2 = NULL, *out = NULL;
    double uv[4] = {-1, -2, -3, -4};
    u = t_from_f64(uv, us, 2, EM_F64);
    int64_t start[2] = {1, 2};
    CHECK_OK(em_put_slice(a, start, u, &p));
    double want[12] = {0, 1, 2, 3, 4, 5, -1, -2, 8, 9, -3, -4};
    CHECK(reads_as(p, want, 12));
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(u, perm, 2, &ut)); /* a strided update */
    CHECK_OK(em_put_slice(a, start, ut, &p2));
    double want2[12] = {0, 1, 2, 3, 4, 5, -1, -3, 8, 9, -2, -4};
    CHECK(reads_as(p2, want2, 12));
    /* a pending input nothing else holds: its buffer is reused */
    em_array *io = NULL, *pd = NULL;
    CHECK_OK(em_iota(s, 2, 0, EM_F64, &io));
    CHECK_OK(em_put_slice(io, start, u, &pd));
    em_array_release(io);
    double want3[12] = {0, 0, 0, 0, 1, 1, -1, -2, 2, 2, -3, -4};
    CHECK(reads_as(pd, want3, 12));
    em_array_release(pd);

    int64_t bad[2] = {2, 2}, neg[2] = {-1, 0};
    CHECK_ERR(em_put_slice(a, bad, u, &out), EM_ERR_ARGUMENT,
              "put_slice: start 2 on axis 0 is out of range for update "
              "f64[2,2] in f64[3,4] (expected 0..1; starts are not clamped)");
    CHECK_ERR(em_put_slice(a, neg, u, &out), EM_ERR_ARGUMENT, "start -1");
    em_array *f = counting(us, 2, EM_F32);
    CHECK_ERR(em_put_slice(a, start, f, &out), EM_ERR_ARGUMENT,
              "same dtype and rank");
    em_array *big = counting(s, 2, EM_F64);
    int64_t z[2] = {0, 0};
    CHECK_ERR(em_put_slice(u, z, big, &out), EM_ERR_ARGUMENT, "does not fit");
    em_array_release(f);
    em_array_release(big);
    em_array_release(a);
    em_array_release(u);
    em_array_release(ut);
    em_array_release(p);
    em_array_release(p2);
}

EM_TEST(join_concatenate_values_and_errors) {
    int64_t s1[2] = {2, 1}, s2[2] = {2, 3}, s0[2] = {2, 0};
    em_array *a = counting(s1, 2, EM_C64), *b = counting(s2, 2, EM_C64),
             *e = NULL, *c = NULL, *out = NULL, *bt = NULL;
    CHECK_OK(em_from_data(NULL, 0, s0, 2, EM_C64, &e));
    em_array *list[3] = {b, e, a};
    CHECK_OK(em_concatenate(list, 3, -1, &c));
    CHECK(em_array_shape(c)[1] == 4);
    double want[8] = {0, 1, 2, 0, 3, 4, 5, 1};
    CHECK(reads_as(c, want, 8));
    em_array *one = NULL;
    CHECK_OK(em_concatenate(list, 1, 0, &one));
    CHECK(one == b);
    em_array_release(one);
    /* along axis 0 with a transposed input */
    int perm[2] = {1, 0};
    int64_t s3[2] = {3, 2};
    em_array *b3 = counting(s3, 2, EM_C64), *c0 = NULL;
    CHECK_OK(em_transpose(b3, perm, 2, &bt)); /* [2,3]: 0 2 4 / 1 3 5 */
    em_array *list0[2] = {bt, b};
    CHECK_OK(em_concatenate(list0, 2, 0, &c0));
    double want0[12] = {0, 2, 4, 1, 3, 5, 0, 1, 2, 3, 4, 5};
    CHECK(reads_as(c0, want0, 12));

    em_array *f = counting(s1, 2, EM_F32);
    em_array *mixed[2] = {a, f};
    CHECK_ERR(em_concatenate(mixed, 2, 1, &out), EM_ERR_ARGUMENT,
              "concatenate: array 1 is f32[2,1] but array 0 is c64[2,1]");
    em_array *shapes[2] = {a, b3};
    CHECK_ERR(em_concatenate(shapes, 2, 1, &out), EM_ERR_ARGUMENT,
              "except axis 1");
    CHECK_ERR(em_concatenate(list, 0, 0, &out), EM_ERR_ARGUMENT,
              "no arrays given");
    CHECK_ERR(em_concatenate(list, 2, 2, &out), EM_ERR_ARGUMENT,
              "axis 2 is out of range for rank 2");
    double x = 1;
    em_array *sc = t_from_f64(&x, NULL, 0, EM_F64);
    em_array *scalars[2] = {sc, sc};
    CHECK_ERR(em_concatenate(scalars, 2, 0, &out), EM_ERR_ARGUMENT,
              "cannot join 0-d arrays");
    em_array_release(sc);
    em_array_release(f);
    em_array_release(a);
    em_array_release(b);
    em_array_release(b3);
    em_array_release(e);
    em_array_release(c);
    em_array_release(c0);
    em_array_release(bt);
}

EM_TEST(creation_iota_every_dtype) {
    int64_t s[2] = {2, 3};
    for (int dt = 0; dt < EM_DTYPE_COUNT; dt++) {
        em_array *a0 = NULL, *a1 = NULL;
        CHECK_OK(em_iota(s, 2, 0, (em_dtype)dt, &a0));
        CHECK_OK(em_iota(s, 2, -1, (em_dtype)dt, &a1));
        double w0[6] = {0, 0, 0, 1, 1, 1}, w1[6] = {0, 1, 2, 0, 1, 2};
        if (dt == EM_PRED)
            w1[2] = w1[5] = 1;
        CHECK(reads_as(a0, w0, 6));
        CHECK(reads_as(a1, w1, 6));
        em_array_release(a0);
        em_array_release(a1);
    }
    em_array *out = NULL;
    CHECK_ERR(em_iota(s, 2, 2, EM_F32, &out), EM_ERR_ARGUMENT,
              "iota: axis 2 is out of range for rank 2");
    CHECK_ERR(em_iota(NULL, 0, 0, EM_F32, &out), EM_ERR_ARGUMENT, "iota");
    int64_t u8s[1] = {300};
    CHECK_OK(em_iota(u8s, 1, 0, EM_U8, &out)); /* counts wrap */
    uint8_t bytes[300];
    CHECK_OK(em_read(out, bytes, 300));
    CHECK(bytes[255] == 255 && bytes[256] == 0 && bytes[299] == 43);
    em_array_release(out);
}

EM_TEST(creation_eye_every_dtype) {
    int64_t s[3] = {2, 2, 3};
    for (int dt = 0; dt < EM_DTYPE_COUNT; dt++) {
        em_array *e = NULL, *e1 = NULL;
        CHECK_OK(em_eye(s, 3, 0, (em_dtype)dt, &e));
        CHECK_OK(em_eye(s, 3, -1, (em_dtype)dt, &e1));
        double w[12] = {1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0};
        double w1[12] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0};
        CHECK(reads_as(e, w, 12));
        CHECK(reads_as(e1, w1, 12));
        em_array_release(e);
        em_array_release(e1);
    }
    em_array *out = NULL;
    CHECK_ERR(em_eye(s, 1, 0, EM_F32, &out), EM_ERR_ARGUMENT,
              "eye: shape [2] has rank 1, expected rank >= 2");
    int64_t sq[2] = {2, 2};
    CHECK_OK(em_eye(sq, 2, INT64_MIN, EM_F32, &out)); /* no diagonal: zeros */
    double z[4] = {0, 0, 0, 0};
    CHECK(reads_as(out, z, 4));
    em_array_release(out);
}

EM_TEST(creation_full) {
    double v = 2.5;
    em_array *x = t_from_f64(&v, NULL, 0, EM_F64), *f = NULL, *g = NULL,
             *out = NULL;
    int64_t s[2] = {2, 3};
    CHECK_OK(em_full(x, s, 2, EM_S32, &f));
    CHECK(em_array_dtype(f) == EM_S32 && f->row_contiguous);
    double w[6] = {2, 2, 2, 2, 2, 2};
    CHECK(reads_as(f, w, 6));
    int64_t rs[1] = {3};
    em_array *row = counting(rs, 1, EM_BF16);
    CHECK_OK(em_full(row, s, 2, EM_BF16, &g));
    double wr[6] = {0, 1, 2, 0, 1, 2};
    CHECK(reads_as(g, wr, 6));
    int64_t bad[2] = {2, 4};
    CHECK_ERR(em_full(row, bad, 2, EM_F32, &out), EM_ERR_ARGUMENT,
              "full: value bf16[3] cannot be broadcast to shape [2,4]");
    em_array_release(row);
    em_array_release(x);
    em_array_release(f);
    em_array_release(g);
}

EM_TEST(shape_null_arguments) {
    em_array *out = (em_array *)1;
    CHECK_ERR(em_contiguous(NULL, &out), EM_ERR_ARGUMENT, "contiguous: NULL");
    CHECK(out == NULL);
    CHECK_ERR(em_reshape(NULL, NULL, 0, &out), EM_ERR_ARGUMENT, "reshape");
    CHECK_ERR(em_full(NULL, NULL, 0, EM_F32, &out), EM_ERR_ARGUMENT, "full");
}
