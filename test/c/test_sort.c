/* em_sort / em_argsort: hand-computed values, NaN order, stability,
 * strided inputs, every real dtype, errors. */
#include "test.h"

#include "emily_sort.h"

#include <stdint.h>
#include <stdlib.h>

static const em_dtype real_dtypes[] = {EM_PRED, EM_U8,  EM_U16,  EM_U32,
                                       EM_U64,  EM_S8,  EM_S16,  EM_S32,
                                       EM_S64,  EM_F16, EM_BF16, EM_F32,
                                       EM_F64};
#define NREAL (sizeof real_dtypes / sizeof real_dtypes[0])

static void check_values(em_array *r, const double *want, size_t n) {
    double got[64];
    t_read_f64(r, got, n);
    for (size_t i = 0; i < n; i++)
        if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
            em_test_fail(__FILE__, __LINE__, "value %zu: got %g, wanted %g", i,
                         got[i], want[i]);
}

static void check_s64(em_array *r, const int64_t *want, size_t n) {
    int64_t got[64];
    CHECK(em_array_dtype(r) == EM_S64);
    CHECK_OK(em_read(r, got, n * sizeof(int64_t)));
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            em_test_fail(__FILE__, __LINE__, "index %zu: got %lld, wanted %lld",
                         i, (long long)got[i], (long long)want[i]);
}

EM_TEST(sort_every_real_dtype_both_directions) {
    const double v[6] = {3, 1, 2, 0, 5, 4};
    const double asc[6] = {0, 1, 2, 3, 4, 5}, desc[6] = {5, 4, 3, 2, 1, 0};
    const int64_t ia[6] = {3, 1, 2, 0, 5, 4}, id[6] = {4, 5, 0, 2, 1, 3};
    const int64_t shape[1] = {6};
    for (size_t d = 0; d < NREAL; d++) {
        em_dtype dt = real_dtypes[d];
        if (dt == EM_PRED)
            continue;
        em_array *a = t_from_f64(v, shape, 1, dt), *r = NULL;
        CHECK_OK(em_sort(a, 0, false, &r));
        CHECK(em_array_dtype(r) == dt);
        check_values(r, asc, 6);
        em_array_release(r);
        CHECK_OK(em_sort(a, -1, true, &r));
        check_values(r, desc, 6);
        em_array_release(r);
        CHECK_OK(em_argsort(a, 0, false, EM_S64, &r));
        check_s64(r, ia, 6);
        em_array_release(r);
        CHECK_OK(em_argsort(a, 0, true, 0, &r));
        check_s64(r, id, 6);
        em_array_release(r);
        em_array_release(a);
    }
}

EM_TEST(sort_signed_extremes_and_pred) {
    const int8_t v[5] = {127, -128, 0, -1, 1};
    const int64_t shape[1] = {5};
    em_array *a = NULL, *r = NULL;
    CHECK_OK(em_from_data(v, sizeof v, shape, 1, EM_S8, &a));
    CHECK_OK(em_sort(a, 0, false, &r));
    int8_t got[5];
    CHECK_OK(em_read(r, got, sizeof got));
    const int8_t want[5] = {-128, -1, 0, 1, 127};
    CHECK(!memcmp(got, want, sizeof got));
    em_array_release(r);
    em_array_release(a);

    const uint8_t p[5] = {1, 0, 1, 0, 0};
    CHECK_OK(em_from_data(p, sizeof p, shape, 1, EM_PRED, &a));
    CHECK_OK(em_argsort(a, 0, false, EM_S64, &r));
    const int64_t wi[5] = {1, 3, 4, 0, 2};
    check_s64(r, wi, 5);
    em_array_release(r);
    CHECK_OK(em_argsort(a, 0, true, EM_S64, &r));
    const int64_t wd[5] = {0, 2, 1, 3, 4};
    check_s64(r, wd, 5);
    em_array_release(r);
    em_array_release(a);

    const uint64_t u[3] = {UINT64_MAX, 0, (uint64_t)1 << 63};
    const int64_t s3[1] = {3};
    CHECK_OK(em_from_data(u, sizeof u, s3, 1, EM_U64, &a));
    CHECK_OK(em_sort(a, 0, false, &r));
    uint64_t ug[3];
    CHECK_OK(em_read(r, ug, sizeof ug));
    CHECK(ug[0] == 0 && ug[1] == (uint64_t)1 << 63 && ug[2] == UINT64_MAX);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(sort_nan_is_largest) {
    const double v[7] = {NAN, 1, -INFINITY, INFINITY, 0, NAN, -2};
    const int64_t shape[1] = {7};
    const em_dtype fl[4] = {EM_F16, EM_BF16, EM_F32, EM_F64};
    for (int d = 0; d < 4; d++) {
        em_array *a = t_from_f64(v, shape, 1, fl[d]), *r = NULL;
        CHECK_OK(em_sort(a, 0, false, &r));
        const double asc[7] = {-INFINITY, -2, 0, 1, INFINITY, NAN, NAN};
        check_values(r, asc, 7);
        em_array_release(r);
        CHECK_OK(em_argsort(a, 0, false, EM_S64, &r));
        const int64_t ia[7] = {2, 6, 4, 1, 3, 0, 5};
        check_s64(r, ia, 7);
        em_array_release(r);
        CHECK_OK(em_argsort(a, 0, true, EM_S64, &r));
        const int64_t id[7] = {0, 5, 3, 1, 4, 6, 2};
        check_s64(r, id, 7);
        em_array_release(r);
        em_array_release(a);
    }
}

EM_TEST(sort_signed_zeros_are_equal_and_stable) {
    const double v[4] = {0.0, -0.0, 0.0, -0.0};
    const int64_t shape[1] = {4};
    em_array *a = t_from_f64(v, shape, 1, EM_F64), *r = NULL;
    CHECK_OK(em_sort(a, 0, false, &r));
    double got[4];
    CHECK_OK(em_read(r, got, sizeof got));
    for (int i = 0; i < 4; i++)
        CHECK(signbit(got[i]) == signbit(v[i])); /* original order kept */
    em_array_release(r);
    em_array_release(a);
}

/* Long rows (radix path) with many ties: stable in both directions. */
EM_TEST(sort_long_rows_stable) {
    enum { N = 5000 };
    static int32_t v[N];
    static int64_t got[N];
    for (int i = 0; i < N; i++)
        v[i] = (int32_t)((i * 7919) % 13) - 6;
    const int64_t shape[1] = {N};
    em_array *a = NULL, *r = NULL;
    CHECK_OK(em_from_data(v, sizeof v, shape, 1, EM_S32, &a));
    for (int desc = 0; desc < 2; desc++) {
        CHECK_OK(em_argsort(a, 0, desc, EM_S64, &r));
        CHECK_OK(em_read(r, got, sizeof got));
        for (int k = 1; k < N; k++) {
            int32_t x = v[got[k - 1]], y = v[got[k]];
            bool ordered = desc ? x >= y : x <= y;
            if (!ordered || (x == y && got[k - 1] >= got[k])) {
                em_test_fail(__FILE__, __LINE__, "desc=%d: bad order at %d", desc, k);
                break;
            }
        }
        em_array_release(r);
    }
    em_array_release(a);
}

/* A transposed (strided) input sorted along both axes. */
EM_TEST(sort_strided_axes) {
    /* base [[5, 1, 4], [2, 6, 0]] transposed: [[5, 2], [1, 6], [4, 0]] */
    const double v[6] = {5, 1, 4, 2, 6, 0};
    const int64_t shape[2] = {2, 3};
    em_array *a = t_from_f64(v, shape, 2, EM_F32), *t = NULL, *r = NULL;
    const int perm[2] = {1, 0};
    CHECK_OK(em_transpose(a, perm, 2, &t));
    CHECK_OK(em_sort(t, 0, false, &r));
    const double s0[6] = {1, 0, 4, 2, 5, 6};
    check_values(r, s0, 6);
    em_array_release(r);
    CHECK_OK(em_sort(t, 1, true, &r));
    const double s1[6] = {5, 2, 6, 1, 4, 0};
    check_values(r, s1, 6);
    em_array_release(r);
    CHECK_OK(em_argsort(t, 0, false, EM_S64, &r));
    const int64_t i0[6] = {1, 2, 2, 0, 0, 1};
    check_s64(r, i0, 6);
    em_array_release(r);
    em_array_release(t);
    em_array_release(a);
}

EM_TEST(sort_empty_and_index_dtypes) {
    const int64_t shape[2] = {3, 0};
    em_array *a = NULL, *r = NULL;
    CHECK_OK(em_from_data(NULL, 0, shape, 2, EM_F32, &a));
    CHECK_OK(em_sort(a, 1, false, &r));
    CHECK(em_array_size(r) == 0);
    CHECK_OK(em_eval(&r, 1));
    em_array_release(r);
    CHECK_OK(em_argsort(a, 0, false, EM_S32, &r));
    CHECK(em_array_dtype(r) == EM_S32);
    CHECK_OK(em_eval(&r, 1));
    em_array_release(r);
    em_array_release(a);

    const double v[3] = {2, 0, 1};
    const int64_t s3[1] = {3};
    a = t_from_f64(v, s3, 1, EM_F32);
    CHECK_OK(em_argsort(a, 0, false, EM_U8, &r));
    const double want[3] = {1, 2, 0};
    check_values(r, want, 3);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(sort_errors) {
    em_array *a = NULL, *r = NULL;
    const double v[2] = {1, 2};
    const int64_t s2[1] = {2};
    a = t_from_f64(v, s2, 1, EM_C64);
    CHECK_ERR(em_sort(a, 0, false, &r), EM_ERR_ARGUMENT, "complex");
    CHECK(r == NULL);
    em_array_release(a);
    a = t_from_f64(v, s2, 1, EM_F32);
    CHECK_ERR(em_sort(a, 1, false, &r), EM_ERR_ARGUMENT, "axis 1 is out of range");
    CHECK_ERR(em_argsort(a, 0, false, EM_F32, &r), EM_ERR_ARGUMENT,
              "not an integer dtype");
    em_array_release(a);
    em_array *s = NULL;
    CHECK_OK(em_scalar_f64(1.0, EM_F32, &s));
    CHECK_ERR(em_sort(s, 0, false, &r), EM_ERR_ARGUMENT, "scalar");
    em_array_release(s);
    /* 300 elements do not fit s8 indices. */
    const int64_t s300[1] = {300};
    CHECK_OK(em_iota(s300, 1, 0, EM_F32, &a));
    CHECK_ERR(em_argsort(a, 0, false, EM_S8, &r), EM_ERR_ARGUMENT, "do not fit in s8");
    CHECK_ERR(em_argsort(a, 0, false, EM_U8, &r), EM_ERR_ARGUMENT, "do not fit in u8");
    em_array_release(a);
}
