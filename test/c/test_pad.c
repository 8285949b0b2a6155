/* em_pad, em_dynamic_slice, em_dynamic_put_slice: hand-computed values,
 * clamping, views and errors. */
#include "emily_pad.h"
#include "internal.h"
#include "test.h"

static em_array *values(const double *v, const int64_t *shape, int ndim,
                        em_dtype dtype) {
    return t_from_f64(v, shape, ndim, dtype);
}

static bool reads(em_array *a, const double *want, size_t n) {
    double got[256];
    if (!a || n > 256 || (size_t)em_array_size(a) != n)
        return false;
    t_read_f64(a, got, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return false;
    return true;
}

static em_array *scalar(double v, em_dtype dtype) {
    em_array *s = NULL;
    em_scalar_f64(v, dtype, &s);
    return s;
}

EM_TEST(pad_edges_and_interior) {
    /* [[1,2,3],[4,5,6]] with {0,0,1},{0,0,1} and value 0 (Nx's example). */
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3};
    em_dtype dtypes[5] = {EM_U8, EM_S16, EM_F32, EM_F64, EM_C128};
    for (int k = 0; k < 5; k++) {
        em_array *a = values(v, s, 2, dtypes[k]), *z = scalar(0, dtypes[k]),
                 *out = NULL;
        int64_t lo[2] = {0, 0}, hi[2] = {0, 0}, in[2] = {1, 1};
        CHECK_OK(em_pad(a, z, lo, hi, in, &out));
        CHECK(em_array_shape(out)[0] == 3 && em_array_shape(out)[1] == 5);
        double want[15] = {1, 0, 2, 0, 3, 0, 0, 0, 0, 0, 4, 0, 5, 0, 6};
        CHECK(reads(out, want, 15));
        em_array_release(out);
        /* {1, 1, 0} on both axes with value 9. */
        em_array *nine = scalar(9, dtypes[k]);
        int64_t lo2[2] = {1, 1}, hi2[2] = {1, 1}, in2[2] = {0, 0};
        CHECK_OK(em_pad(a, nine, lo2, hi2, in2, &out));
        double want2[20] = {9, 9, 9, 9, 9, 9, 1, 2, 3, 9,
                            9, 4, 5, 6, 9, 9, 9, 9, 9, 9};
        CHECK(reads(out, want2, 20));
        em_array_release(out);
        em_array_release(nine);
        em_array_release(a);
        em_array_release(z);
    }
}

EM_TEST(pad_negative_crops) {
    /* [0,1,2,3,0] with {-1,-1,0}: a view [1,2,3]. */
    double v[5] = {0, 1, 2, 3, 0};
    int64_t s[1] = {5};
    em_array *a = values(v, s, 1, EM_S32), *z = scalar(0, EM_S32), *out = NULL;
    int64_t lo[1] = {-1}, hi[1] = {-1}, in[1] = {0};
    CHECK_OK(em_pad(a, z, lo, hi, in, &out));
    double want[3] = {1, 2, 3};
    CHECK(reads(out, want, 3));
    CHECK(em_eval(&out, 1) == EM_OK && out->buffer == a->buffer);
    em_array_release(out);
    /* Crop after interior padding: [1,2,3] {-1, 0, 1} -> [0,2,0,3]. */
    double w[3] = {1, 2, 3};
    int64_t s3[1] = {3};
    em_array *b = values(w, s3, 1, EM_F32);
    em_array *zf = scalar(0, EM_F32);
    int64_t lo2[1] = {-1}, hi2[1] = {0}, in2[1] = {1};
    CHECK_OK(em_pad(b, zf, lo2, hi2, in2, &out));
    double want2[4] = {0, 2, 0, 3};
    CHECK(reads(out, want2, 4));
    em_array_release(out);
    /* Mixed: [[0,1,2],[3,4,5]] with {-1,2,0},{1,-1,0} (Nx's example). */
    double m[6] = {0, 1, 2, 3, 4, 5};
    int64_t s23[2] = {2, 3};
    em_array *c = values(m, s23, 2, EM_F32);
    int64_t lo3[2] = {-1, 1}, hi3[2] = {2, -1}, in3[2] = {0, 0};
    CHECK_OK(em_pad(c, zf, lo3, hi3, in3, &out));
    CHECK(em_array_shape(out)[0] == 3 && em_array_shape(out)[1] == 3);
    double want3[9] = {0, 3, 4, 0, 0, 0, 0, 0, 0};
    CHECK(reads(out, want3, 9));
    em_array_release(out);
    /* Everything cropped away but padding left: size 2 of pad values. */
    int64_t lo4[1] = {-5}, hi4[1] = {4}, in4[1] = {0};
    CHECK_OK(em_pad(b, zf, lo4, hi4, in4, &out));
    double want4[2] = {0, 0};
    CHECK(reads(out, want4, 2));
    em_array_release(out);
    em_array_release(a);
    em_array_release(b);
    em_array_release(c);
    em_array_release(z);
    em_array_release(zf);
}

EM_TEST(pad_strided_input_and_scalar) {
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3};
    em_array *a = values(v, s, 2, EM_F64), *t = NULL, *out = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(a, perm, 2, &t)); /* [[1,4],[2,5],[3,6]] */
    em_array *z = scalar(-1, EM_F64);
    int64_t lo[2] = {0, 1}, hi[2] = {-1, 0}, in[2] = {0, 1};
    CHECK_OK(em_pad(t, z, lo, hi, in, &out));
    CHECK(em_array_shape(out)[0] == 2 && em_array_shape(out)[1] == 4);
    double want[8] = {-1, 1, -1, 4, -1, 2, -1, 5};
    CHECK(reads(out, want, 8));
    em_array_release(out);
    em_array *sc = scalar(7, EM_F64);
    CHECK_OK(em_pad(sc, z, NULL, NULL, NULL, &out));
    CHECK(out == sc);
    em_array_release(out);
    em_array_release(sc);
    em_array_release(t);
    em_array_release(a);
    em_array_release(z);
}

EM_TEST(pad_errors) {
    double v[3] = {1, 2, 3};
    int64_t s[1] = {3};
    em_array *a = values(v, s, 1, EM_F32), *zi = scalar(0, EM_S32),
             *zf = scalar(0, EM_F32), *out = NULL;
    int64_t lo[1] = {0}, hi[1] = {0}, in[1] = {0}, neg[1] = {-1}, big[1] = {-9};
    CHECK_ERR(em_pad(a, zi, lo, hi, in, &out), EM_ERR_ARGUMENT, "pad value");
    CHECK_ERR(em_pad(a, zf, lo, hi, neg, &out), EM_ERR_ARGUMENT, "interior");
    CHECK_ERR(em_pad(a, zf, big, hi, in, &out), EM_ERR_ARGUMENT, "negative");
    CHECK_ERR(em_pad(a, zf, lo, hi, in, NULL), EM_ERR_ARGUMENT, "NULL");
    CHECK(out == NULL);
    em_array_release(a);
    em_array_release(zi);
    em_array_release(zf);
}

static em_array *starts_of(const double *v, int n, em_dtype dtype) {
    int64_t s[1] = {n};
    return t_from_f64(v, s, 1, dtype);
}

EM_TEST(dynamic_slice_clamps) {
    /* iota {3, 3}; starts [2, 2], sizes [2, 2] clamp to [1, 1]. */
    double v[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    int64_t s[2] = {3, 3};
    em_dtype idx_types[4] = {EM_S32, EM_U8, EM_S64, EM_U64};
    for (int k = 0; k < 4; k++) {
        em_array *a = values(v, s, 2, EM_S32), *out = NULL;
        double st[2] = {2, 2};
        em_array *starts = starts_of(st, 2, idx_types[k]);
        int64_t sizes[2] = {2, 2};
        CHECK_OK(em_dynamic_slice(a, starts, sizes, NULL, &out));
        double want[4] = {4, 5, 7, 8};
        CHECK(reads(out, want, 4));
        em_array_release(out);
        em_array_release(starts);
        em_array_release(a);
    }
    /* Negative starts clamp to 0; strides. */
    em_array *a = values(v, s, 2, EM_F64), *out = NULL;
    double st[2] = {-4, 0};
    em_array *starts = starts_of(st, 2, EM_S8);
    int64_t sizes[2] = {3, 3}, strides[2] = {2, 2};
    CHECK_OK(em_dynamic_slice(a, starts, sizes, strides, &out));
    double want[4] = {0, 2, 6, 8};
    CHECK(reads(out, want, 4));
    em_array_release(out);
    /* On a transposed view. */
    em_array *t = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(a, perm, 2, &t));
    double st2[2] = {1, 5};
    em_array *starts2 = starts_of(st2, 2, EM_S32);
    int64_t sizes2[2] = {2, 1};
    CHECK_OK(em_dynamic_slice(t, starts2, sizes2, NULL, &out));
    double want2[2] = {7, 8}; /* t[1..2][2] = a[2][1..2] */
    CHECK(reads(out, want2, 2));
    em_array_release(out);
    em_array_release(t);
    /* Errors. */
    double bad[1] = {0};
    em_array *short_starts = starts_of(bad, 1, EM_S32);
    CHECK_ERR(em_dynamic_slice(a, short_starts, sizes, NULL, &out),
              EM_ERR_ARGUMENT, "one entry per axis");
    em_array *fstarts = starts_of(st, 2, EM_F32);
    CHECK_ERR(em_dynamic_slice(a, fstarts, sizes, NULL, &out),
              EM_ERR_ARGUMENT, "integer");
    int64_t too_big[2] = {4, 1};
    CHECK_ERR(em_dynamic_slice(a, starts, too_big, NULL, &out),
              EM_ERR_ARGUMENT, "size 4");
    em_array_release(short_starts);
    em_array_release(fstarts);
    em_array_release(starts);
    em_array_release(starts2);
    em_array_release(a);
}

EM_TEST(dynamic_put_slice_clamps) {
    double v[6] = {1, 2, 3, 4, 5, 6};
    int64_t s[2] = {2, 3};
    double u[4] = {7, 8, 9, 10};
    int64_t su[2] = {2, 2};
    em_dtype dtypes[3] = {EM_S32, EM_BF16, EM_C64};
    for (int k = 0; k < 3; k++) {
        em_array *a = values(v, s, 2, dtypes[k]), *up = values(u, su, 2, dtypes[k]);
        double st[2] = {1, 1}; /* clamps to [0, 1] */
        em_array *starts = starts_of(st, 2, EM_S64), *out = NULL;
        CHECK_OK(em_dynamic_put_slice(a, starts, up, &out));
        double want[6] = {1, 7, 8, 4, 9, 10};
        CHECK(reads(out, want, 6));
        CHECK(reads(a, v, 6)); /* the input is unchanged */
        em_array_release(out);
        em_array_release(starts);
        em_array_release(up);
        em_array_release(a);
    }
    em_array *a = values(v, s, 2, EM_F32), *up = values(u, su, 2, EM_F64),
             *out = NULL;
    double st[2] = {0, 0};
    em_array *starts = starts_of(st, 2, EM_S32);
    CHECK_ERR(em_dynamic_put_slice(a, starts, up, &out), EM_ERR_ARGUMENT,
              "does not fit");
    em_array_release(starts);
    em_array_release(up);
    em_array_release(a);
}
