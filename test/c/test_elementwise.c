/* Tests of the elementwise family: em_unary, em_binary, em_select, em_clip,
 * em_as_type, em_bitcast, em_scalar_f64/s64. Hand-computed values. */
#include "test.h"

#include "internal.h" /* only for the donation test (buffer identity) */

#include <complex.h>
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const em_dtype FLOAT_DTYPES[] = {EM_F16, EM_BF16, EM_F32, EM_F64};

static em_array *vec(const double *v, int64_t n, em_dtype dtype) {
    return t_from_f64(v, &n, 1, dtype);
}

static em_array *mat(const double *v, int64_t r, int64_t c, em_dtype dtype) {
    int64_t shape[2] = {r, c};
    return t_from_f64(v, shape, 2, dtype);
}

/* Read `a` as doubles and compare with `want` exactly (NaN matches NaN and
 * the sign of zero must match). */
static void expect_values(int line, em_array *a, const double *want, size_t n) {
    double got[64];
    if (!a || n > N_OF(got)) {
        em_test_fail(__FILE__, line, "expect_values: no array or too long");
        return;
    }
    t_read_f64(a, got, n);
    for (size_t i = 0; i < n; i++) {
        bool same = (isnan(got[i]) && isnan(want[i])) ||
                    (got[i] == want[i] && signbit(got[i]) == signbit(want[i]));
        if (!same)
            em_test_fail(__FILE__, line, "element %zu = %.17g, wanted %.17g", i,
                         got[i], want[i]);
    }
}
#define EXPECT_VALUES(a, ...)                                                  \
    do {                                                                       \
        const double want_[] = {__VA_ARGS__};                                  \
        expect_values(__LINE__, (a), want_, N_OF(want_));                      \
    } while (0)

static em_array *un(em_unary_op op, em_array *a) {
    em_array *out = NULL;
    CHECK_OK(em_unary(op, a, &out));
    return out;
}

static em_array *bin(em_binary_op op, em_array *a, em_array *b) {
    em_array *out = NULL;
    CHECK_OK(em_binary(op, a, b, &out));
    return out;
}

/* Run `op` on a and compare; releases the result. */
#define CHECK_UNARY(op, a, ...)                                                \
    do {                                                                       \
        em_array *r_ = un(op, a);                                              \
        EXPECT_VALUES(r_, __VA_ARGS__);                                        \
        em_array_release(r_);                                                  \
    } while (0)
#define CHECK_BINARY(op, a, b, ...)                                            \
    do {                                                                       \
        em_array *r_ = bin(op, a, b);                                          \
        EXPECT_VALUES(r_, __VA_ARGS__);                                        \
        em_array_release(r_);                                                  \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Unary                                                                     */
/* ------------------------------------------------------------------------ */

EM_TEST(elementwise_unary_float_rounding_and_sign) {
    const double x[] = {-2.5, -0.5, -0.0, 0.0, 0.5, 2.5, NAN, INFINITY, -INFINITY};
    for (size_t d = 0; d < N_OF(FLOAT_DTYPES); d++) {
        em_array *a = vec(x, N_OF(x), FLOAT_DTYPES[d]);
        CHECK(a != NULL);
        CHECK_UNARY(EM_UNARY_round, a, -3, -1, -0.0, 0, 1, 3, NAN, INFINITY,
                    -INFINITY);
        CHECK_UNARY(EM_UNARY_floor, a, -3, -1, -0.0, 0, 0, 2, NAN, INFINITY,
                    -INFINITY);
        CHECK_UNARY(EM_UNARY_ceil, a, -2, -0.0, -0.0, 0, 1, 3, NAN, INFINITY,
                    -INFINITY);
        CHECK_UNARY(EM_UNARY_sign, a, -1, -1, -0.0, 0, 1, 1, NAN, 1, -1);
        CHECK_UNARY(EM_UNARY_abs, a, 2.5, 0.5, 0, 0, 0.5, 2.5, NAN, INFINITY,
                    INFINITY);
        CHECK_UNARY(EM_UNARY_negate, a, 2.5, 0.5, 0, -0.0, -0.5, -2.5, NAN,
                    -INFINITY, INFINITY);
        CHECK_UNARY(EM_UNARY_is_nan, a, 0, 0, 0, 0, 0, 0, 1, 0, 0);
        CHECK_UNARY(EM_UNARY_is_infinity, a, 0, 0, 0, 0, 0, 0, 0, 1, 1);
        CHECK_UNARY(EM_UNARY_logical_not, a, 0, 0, 1, 1, 0, 0, 0, 0, 0);
        em_array *p = un(EM_UNARY_is_nan, a);
        CHECK(p && em_array_dtype(p) == EM_PRED);
        em_array_release(p);
        em_array_release(a);
    }
}

EM_TEST(elementwise_unary_float_math) {
    const double x[] = {0.0, 1.0, 4.0, INFINITY, -1.0};
    for (size_t d = 0; d < N_OF(FLOAT_DTYPES); d++) {
        em_array *a = vec(x, N_OF(x), FLOAT_DTYPES[d]);
        CHECK_UNARY(EM_UNARY_sqrt, a, 0, 1, 2, INFINITY, NAN);
        CHECK_UNARY(EM_UNARY_rsqrt, a, INFINITY, 1, 0.5, 0, NAN);
        em_array *l = un(EM_UNARY_log, a);
        double got[5];
        t_read_f64(l, got, 5);
        CHECK(got[0] == -INFINITY && got[1] == 0 && got[3] == INFINITY &&
              isnan(got[4]));
        CHECK_NEAR(got[2], log(4.0), 1e-2);
        em_array_release(l);
        em_array_release(a);
    }
    /* Values checked with tolerances (f32/f64). */
    const double y[] = {-0.5, 0.0, 0.5, 2.0};
    const em_dtype dts[] = {EM_F32, EM_F64};
    for (size_t d = 0; d < 2; d++) {
        double tol = dts[d] == EM_F32 ? 1e-6 : 1e-15;
        em_array *a = vec(y, 4, dts[d]);
        double got[4];
        const struct { em_unary_op op; double (*fn)(double); } cases[] = {
            {EM_UNARY_exp, exp},   {EM_UNARY_expm1, expm1}, {EM_UNARY_sin, sin},
            {EM_UNARY_cos, cos},   {EM_UNARY_tanh, tanh},   {EM_UNARY_erf, erf},
            {EM_UNARY_log1p, log1p},
        };
        for (size_t c = 0; c < N_OF(cases); c++) {
            em_array *r = un(cases[c].op, a);
            t_read_f64(r, got, 4);
            for (int i = 0; i < 4; i++)
                CHECK_NEAR(got[i], cases[c].fn(y[i]),
                           tol * (1 + fabs(cases[c].fn(y[i]))));
            em_array_release(r);
        }
        em_array *r = un(EM_UNARY_sigmoid, a);
        t_read_f64(r, got, 4);
        for (int i = 0; i < 4; i++)
            CHECK_NEAR(got[i], 1 / (1 + exp(-y[i])), tol);
        em_array_release(r);
        em_array_release(a);
    }
    /* exp at its edges: overflow, underflow to subnormals and 0, NaN. */
    const double e[] = {89.0, 88.0, -87.0, -100.0, -110.0, NAN, -INFINITY};
    em_array *a = vec(e, N_OF(e), EM_F32);
    em_array *r = un(EM_UNARY_exp, a);
    double got[N_OF(e)];
    t_read_f64(r, got, N_OF(e));
    CHECK(isinf(got[0]));
    CHECK_NEAR(got[1], (double)expf(88.0f), 2e-7 * (double)expf(88.0f));
    CHECK_NEAR(got[2], (double)expf(-87.0f), 2e-7 * (double)expf(-87.0f));
    CHECK_NEAR(got[3], (double)expf(-100.0f), 3e-45);
    CHECK(got[4] == 0);
    CHECK(isnan(got[5]));
    CHECK(got[6] == 0);
    r = (em_array_release(r), un(EM_UNARY_sigmoid, a));
    t_read_f64(r, got, N_OF(e));
    CHECK(got[0] == 1 && got[4] == 0 && isnan(got[5]) && got[6] == 0);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(elementwise_unary_integers) {
    const struct { em_dtype dt; double min, max; } ints[] = {
        {EM_S8, -128, 127},
        {EM_S16, -32768, 32767},
        {EM_S32, -2147483648.0, 2147483647.0},
        {EM_S64, -9223372036854775808.0, 0},
    };
    for (size_t d = 0; d < N_OF(ints); d++) {
        const double x[] = {ints[d].min, -1, 0, 1, 5};
        em_array *a = vec(x, 5, ints[d].dt);
        /* -MIN and |MIN| wrap to MIN. */
        CHECK_UNARY(EM_UNARY_negate, a, ints[d].min, 1, 0, -1, -5);
        CHECK_UNARY(EM_UNARY_abs, a, ints[d].min, 1, 0, 1, 5);
        CHECK_UNARY(EM_UNARY_sign, a, -1, -1, 0, 1, 1);
        CHECK_UNARY(EM_UNARY_floor, a, ints[d].min, -1, 0, 1, 5);
        CHECK_UNARY(EM_UNARY_round, a, ints[d].min, -1, 0, 1, 5);
        CHECK_UNARY(EM_UNARY_bitwise_not, a, -ints[d].min - 1, 0, -1, -2, -6);
        CHECK_UNARY(EM_UNARY_logical_not, a, 0, 0, 1, 0, 0);
        CHECK_UNARY(EM_UNARY_is_nan, a, 0, 0, 0, 0, 0);
        CHECK_UNARY(EM_UNARY_is_infinity, a, 0, 0, 0, 0, 0);
        em_array_release(a);
    }
    const double u[] = {0, 1, 255};
    em_array *a = vec(u, 3, EM_U8);
    CHECK_UNARY(EM_UNARY_negate, a, 0, 255, 1);
    CHECK_UNARY(EM_UNARY_abs, a, 0, 1, 255);
    CHECK_UNARY(EM_UNARY_sign, a, 0, 1, 1);
    CHECK_UNARY(EM_UNARY_bitwise_not, a, 255, 254, 0);
    em_array_release(a);
    const double u64v[] = {0, 1};
    a = vec(u64v, 2, EM_U64);
    CHECK_UNARY(EM_UNARY_negate, a, 0, 18446744073709551615.0);
    em_array_release(a);
    const double p[] = {0, 1};
    a = vec(p, 2, EM_PRED);
    CHECK_UNARY(EM_UNARY_bitwise_not, a, 1, 0);
    CHECK_UNARY(EM_UNARY_logical_not, a, 1, 0);
    em_array_release(a);
}

static void read_c128(em_array *a, double complex *out, size_t n) {
    em_array *c = NULL;
    CHECK_OK(em_as_type(a, EM_C128, &c));
    CHECK_OK(em_read(c, out, n * sizeof(double complex)));
    em_array_release(c);
}

EM_TEST(elementwise_unary_complex) {
    const em_dtype cdts[] = {EM_C64, EM_C128};
    for (size_t d = 0; d < 2; d++) {
        double tol = cdts[d] == EM_C64 ? 1e-6 : 1e-15;
        double complex v[] = {3 + 4 * I, -4, 0, NAN + 1 * I, 1 * I};
        em_array *a = NULL;
        int64_t n = 5;
        em_array *src = NULL;
        CHECK_OK(em_from_data(v, sizeof v, &n, 1, EM_C128, &src));
        CHECK_OK(em_as_type(src, cdts[d], &a));
        em_array_release(src);

        em_array *r = un(EM_UNARY_abs, a);
        CHECK(em_array_dtype(r) == (cdts[d] == EM_C64 ? EM_F32 : EM_F64));
        EXPECT_VALUES(r, 5, 4, 0, NAN, 1);
        em_array_release(r);
        CHECK_UNARY(EM_UNARY_is_nan, a, 0, 0, 0, 1, 0);
        CHECK_UNARY(EM_UNARY_logical_not, a, 0, 0, 1, 0, 0);

        double complex got[5];
        r = un(EM_UNARY_sign, a);
        read_c128(r, got, 5);
        CHECK_NEAR(creal(got[0]), 0.6, tol);
        CHECK_NEAR(cimag(got[0]), 0.8, tol);
        CHECK(creal(got[1]) == -1 && cimag(got[1]) == 0);
        CHECK(got[2] == 0);
        em_array_release(r);
        r = un(EM_UNARY_sqrt, a);
        read_c128(r, got, 5);
        CHECK_NEAR(creal(got[0]), 2, tol);
        CHECK_NEAR(cimag(got[0]), 1, tol);
        CHECK_NEAR(creal(got[1]), 0, tol);
        CHECK_NEAR(cimag(got[1]), 2, tol);
        em_array_release(r);
        r = un(EM_UNARY_exp, a);
        read_c128(r, got, 5);
        CHECK_NEAR(creal(got[4]), cos(1.0), tol);
        CHECK_NEAR(cimag(got[4]), sin(1.0), tol);
        em_array_release(r);
        r = un(EM_UNARY_expm1, a);
        read_c128(r, got, 5);
        CHECK_NEAR(creal(got[4]), cos(1.0) - 1, tol);
        CHECK(got[2] == 0);
        em_array_release(r);
        r = un(EM_UNARY_negate, a);
        read_c128(r, got, 5);
        CHECK(got[0] == -3 - 4 * I);
        em_array_release(r);
        em_array_release(a);
    }
}

EM_TEST(elementwise_unary_trig_hyperbolic_and_cbrt) {
    const double x[] = {0.0, -0.0, 0.5, -1.0, INFINITY, NAN};
    for (size_t d = 0; d < N_OF(FLOAT_DTYPES); d++) {
        em_dtype dt = FLOAT_DTYPES[d];
        double tol = dt == EM_F64 ? 1e-15 : dt == EM_F32 ? 1e-6 : 1e-2;
        em_array *a = vec(x, N_OF(x), dt);
        double got[6];
        struct {
            em_unary_op op;
            double (*ref)(double);
        } cases[] = {{EM_UNARY_tan, tan},     {EM_UNARY_atan, atan},
                     {EM_UNARY_sinh, sinh},   {EM_UNARY_cosh, cosh},
                     {EM_UNARY_asinh, asinh}, {EM_UNARY_cbrt, cbrt},
                     {EM_UNARY_erfc, erfc}};
        for (size_t c = 0; c < N_OF(cases); c++) {
            em_array *r = un(cases[c].op, a);
            CHECK(r && em_array_dtype(r) == dt);
            t_read_f64(r, got, 6);
            for (int i = 0; i < 4; i++)
                CHECK_NEAR(got[i], cases[c].ref(x[i]), tol);
            CHECK(isnan(got[5]));
            /* Infinities map exactly; -0.0 stays -0.0 through the odd
             * functions (all but cosh and erfc). */
            double inf_ref = cases[c].ref(INFINITY);
            if (isnan(inf_ref) || isinf(inf_ref))
                CHECK(isnan(inf_ref) ? isnan(got[4]) : got[4] == inf_ref);
            else
                CHECK_NEAR(got[4], inf_ref, tol);
            bool odd = cases[c].op != EM_UNARY_cosh && cases[c].op != EM_UNARY_erfc;
            CHECK(!odd || signbit(got[1]));
            em_array_release(r);
        }
        em_array_release(a);

        /* Domain [-1, 1] (and [1, Inf) for acosh): NaN outside. */
        const double y[] = {-1.0, 0.0, 0.5, 1.0, 2.0, -0.0};
        a = vec(y, N_OF(y), dt);
        em_array *r = un(EM_UNARY_asin, a);
        t_read_f64(r, got, 6);
        CHECK_NEAR(got[0], -M_PI / 2, tol * 2);
        CHECK(got[1] == 0 && isnan(got[4]) && signbit(got[5]));
        em_array_release(r);
        r = un(EM_UNARY_acos, a);
        t_read_f64(r, got, 6);
        CHECK_NEAR(got[0], M_PI, tol * 4);
        CHECK(got[3] == 0 && isnan(got[4]));
        em_array_release(r);
        r = un(EM_UNARY_atanh, a);
        t_read_f64(r, got, 6);
        CHECK(got[0] == -INFINITY && got[3] == INFINITY && isnan(got[4]));
        CHECK_NEAR(got[2], atanh(0.5), tol);
        em_array_release(r);
        r = un(EM_UNARY_acosh, a);
        t_read_f64(r, got, 6);
        CHECK(isnan(got[0]) && isnan(got[2]) && got[3] == 0);
        CHECK_NEAR(got[4], acosh(2.0), tol);
        em_array_release(r);
        r = un(EM_UNARY_erf_inv, a);
        t_read_f64(r, got, 6);
        CHECK(got[0] == -INFINITY && got[1] == 0 && got[3] == INFINITY);
        CHECK(isnan(got[4]) && signbit(got[5]));
        CHECK_NEAR(got[2], 0.47693627620446987, tol);
        em_array_release(r);
        em_array_release(a);
    }
    /* erf_inv inverts erf over the whole range, tails included. */
    const double p[] = {1e-300, 0.1, 0.9, 0.999999, 1 - 1e-15, -0.75};
    em_array *a = vec(p, N_OF(p), EM_F64);
    em_array *r = un(EM_UNARY_erf_inv, a);
    double got[6];
    t_read_f64(r, got, 6);
    for (int i = 0; i < 6; i++) {
        if (fabs(p[i]) <= 0.5)
            CHECK_NEAR(erf(got[i]) / p[i], 1.0, 1e-15);
        else
            CHECK_NEAR(erfc(fabs(got[i])) / (1 - fabs(p[i])), 1.0, 1e-13);
    }
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(elementwise_unary_complex_parts) {
    double complex v[] = {3 + 4 * I, -2.5 - 0.5 * I, -8};
    int64_t n = 3;
    em_array *src = NULL, *a = NULL;
    CHECK_OK(em_from_data(v, sizeof v, &n, 1, EM_C128, &src));
    CHECK_OK(em_as_type(src, EM_C64, &a));
    const em_array *arrays[] = {src, a};
    for (int k = 0; k < 2; k++) {
        em_array *c = (em_array *)arrays[k];
        em_dtype real = k == 0 ? EM_F64 : EM_F32;
        em_array *r = un(EM_UNARY_real, c);
        CHECK(em_array_dtype(r) == real);
        EXPECT_VALUES(r, 3, -2.5, -8);
        em_array_release(r);
        r = un(EM_UNARY_imag, c);
        CHECK(em_array_dtype(r) == real);
        EXPECT_VALUES(r, 4, -0.5, 0);
        em_array_release(r);
        double complex got[3];
        r = un(EM_UNARY_conjugate, c);
        CHECK(em_array_dtype(r) == em_array_dtype(c));
        read_c128(r, got, 3);
        CHECK(got[0] == 3 - 4 * I && got[1] == -2.5 + 0.5 * I);
        em_array_release(r);
        r = un(EM_UNARY_cbrt, c); /* principal root: -8 -> 1 + sqrt(3) i */
        read_c128(r, got, 3);
        CHECK_NEAR(creal(got[2]), 1.0, 1e-6);
        CHECK_NEAR(cimag(got[2]), sqrt(3.0), 1e-6);
        em_array_release(r);
        {   /* infinite moduli: Inf on the real axis stays there, no Inf·0 */
            double complex inf[4] = {INFINITY + 3 * I, INFINITY - 3 * I,
                                     -INFINITY + 3 * I, NAN + 1 * I};
            em_array *c128 = NULL, *ci = NULL;
            int64_t four = 4;
            CHECK_OK(em_from_data(inf, sizeof inf, &four, 1, EM_C128, &c128));
            CHECK_OK(em_as_type(c128, em_array_dtype(c), &ci));
            em_array_release(c128);
            r = un(EM_UNARY_cbrt, ci);
            double complex gi[4];
            read_c128(r, gi, 4);
            CHECK(creal(gi[0]) == INFINITY && cimag(gi[0]) == 0 &&
                  !signbit(cimag(gi[0])));
            CHECK(creal(gi[1]) == INFINITY && cimag(gi[1]) == 0 &&
                  signbit(cimag(gi[1])));
            /* arg π: a third of it is π/3, both parts infinite */
            CHECK(creal(gi[2]) == INFINITY && cimag(gi[2]) == INFINITY);
            CHECK(isnan(creal(gi[3])) && isnan(cimag(gi[3])));
            em_array_release(r), em_array_release(ci);
        }
        r = un(EM_UNARY_atanh, c);
        read_c128(r, got, 3);
        CHECK_NEAR(creal(got[0]), creal(catanh(3 + 4 * I)), 1e-6);
        CHECK_NEAR(cimag(got[0]), cimag(catanh(3 + 4 * I)), 1e-6);
        em_array_release(r);
    }
    /* On real floats: real is the value, imag zero, conjugate the value. */
    const double x[] = {1.5, -0.0, NAN};
    em_array *f = vec(x, 3, EM_BF16);
    CHECK_UNARY(EM_UNARY_real, f, 1.5, -0.0, NAN);
    CHECK_UNARY(EM_UNARY_imag, f, 0, 0, 0);
    CHECK_UNARY(EM_UNARY_conjugate, f, 1.5, -0.0, NAN);
    em_array_release(f);
    em_array_release(a);
    em_array_release(src);
}

EM_TEST(elementwise_unary_bit_counts) {
    const double s8v[] = {0, 1, -1, 127, -128, 6};
    em_array *a = vec(s8v, 6, EM_S8);
    CHECK_UNARY(EM_UNARY_population_count, a, 0, 1, 8, 7, 1, 2);
    CHECK_UNARY(EM_UNARY_count_leading_zeros, a, 8, 7, 0, 1, 0, 5);
    em_array_release(a);
    const double u64v[] = {0, 1, 18446744073709551615.0, 4294967296.0};
    a = vec(u64v, 4, EM_U64);
    CHECK_UNARY(EM_UNARY_population_count, a, 0, 1, 64, 1);
    CHECK_UNARY(EM_UNARY_count_leading_zeros, a, 64, 63, 0, 31);
    em_array_release(a);
    const double u16v[] = {0, 255, 256, 65535};
    a = vec(u16v, 4, EM_U16);
    CHECK_UNARY(EM_UNARY_population_count, a, 0, 8, 1, 16);
    CHECK_UNARY(EM_UNARY_count_leading_zeros, a, 16, 8, 7, 0);
    em_array_release(a);
    const double s32v[] = {-1, 1 << 30, 0};
    a = vec(s32v, 3, EM_S32);
    CHECK_UNARY(EM_UNARY_population_count, a, 32, 1, 0);
    CHECK_UNARY(EM_UNARY_count_leading_zeros, a, 0, 1, 32);
    em_array_release(a);
    const double pv[] = {0, 1};
    a = vec(pv, 2, EM_PRED);
    CHECK_UNARY(EM_UNARY_population_count, a, 0, 1);
    CHECK_UNARY(EM_UNARY_count_leading_zeros, a, 1, 0);
    em_array *out = NULL;
    em_array *f = vec(pv, 2, EM_F32);
    CHECK_ERR(em_unary(EM_UNARY_population_count, f, &out), EM_ERR_ARGUMENT,
              "population_count: expected an integer dtype");
    CHECK_ERR(em_unary(EM_UNARY_real, a, &out), EM_ERR_ARGUMENT,
              "real: expected a float or complex dtype");
    em_array_release(f);
    em_array_release(a);
}

EM_TEST(elementwise_unary_errors) {
    const double x[] = {1, 2};
    em_array *c = vec(x, 2, EM_C64), *i = vec(x, 2, EM_S32), *f = vec(x, 2, EM_F32);
    em_array *p = vec(x, 2, EM_PRED), *out = (em_array *)1;
    CHECK_ERR(em_unary(EM_UNARY_floor, c, &out), EM_ERR_ARGUMENT,
              "floor: expected a non-complex dtype, got c64[2]");
    CHECK(out == NULL);
    CHECK_ERR(em_unary(EM_UNARY_sqrt, i, &out), EM_ERR_ARGUMENT,
              "sqrt: expected a float or complex dtype, got s32[2]");
    CHECK_ERR(em_unary(EM_UNARY_erf, c, &out), EM_ERR_ARGUMENT, "erf");
    CHECK_ERR(em_unary(EM_UNARY_bitwise_not, f, &out), EM_ERR_ARGUMENT,
              "bitwise_not: expected an integer dtype");
    CHECK_ERR(em_unary(EM_UNARY_negate, p, &out), EM_ERR_ARGUMENT,
              "negate: expected any dtype but pred, got pred[2]");
    CHECK_ERR(em_unary((em_unary_op)EM_UNARY_COUNT, f, &out), EM_ERR_ARGUMENT,
              "unknown op");
    CHECK_ERR(em_unary(EM_UNARY_exp, NULL, &out), EM_ERR_ARGUMENT, "exp");
    CHECK(strcmp(em_unary_name(EM_UNARY_is_infinity), "is_infinity") == 0);
    CHECK(strcmp(em_binary_name(EM_BINARY_logical_xor), "logical_xor") == 0);
    em_array_release(c);
    em_array_release(i);
    em_array_release(f);
    em_array_release(p);
}

/* ------------------------------------------------------------------------ */
/* Binary                                                                    */
/* ------------------------------------------------------------------------ */

EM_TEST(elementwise_binary_integer_division) {
    const em_dtype sdts[] = {EM_S8, EM_S16, EM_S32, EM_S64};
    const double mins[] = {-128, -32768, -2147483648.0, -9223372036854775808.0};
    for (size_t d = 0; d < 4; d++) {
        const double a[] = {7, -7, 7, -7, mins[d], 5, mins[d]};
        const double b[] = {2, 2, -2, -2, -1, 0, mins[d]};
        em_array *x = vec(a, 7, sdts[d]), *y = vec(b, 7, sdts[d]);
        CHECK_BINARY(EM_BINARY_quotient, x, y, 3, -3, -3, 3, mins[d], 0, 1);
        CHECK_BINARY(EM_BINARY_divide, x, y, 3, -3, -3, 3, mins[d], 0, 1);
        CHECK_BINARY(EM_BINARY_remainder, x, y, 1, -1, 1, -1, 0, 0, 0);
        CHECK_BINARY(EM_BINARY_multiply, x, y, 14, -14, -14, 14, mins[d], 0, 0);
        em_array_release(x);
        em_array_release(y);
    }
    const double a[] = {7, 0, 255};
    const double b[] = {0, 3, 2};
    em_array *x = vec(a, 3, EM_U8), *y = vec(b, 3, EM_U8);
    CHECK_BINARY(EM_BINARY_quotient, x, y, 0, 0, 127);
    CHECK_BINARY(EM_BINARY_remainder, x, y, 0, 0, 1);
    CHECK_BINARY(EM_BINARY_subtract, y, x, 249, 3, 3);
    CHECK_BINARY(EM_BINARY_add, x, x, 14, 0, 254);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(elementwise_binary_integer_wrapping) {
    const double a[] = {127, -128, 100, 3};
    const double b[] = {1, -1, 100, 5};
    em_array *x = vec(a, 4, EM_S8), *y = vec(b, 4, EM_S8);
    CHECK_BINARY(EM_BINARY_add, x, y, -128, 127, -56, 8);
    CHECK_BINARY(EM_BINARY_subtract, x, y, 126, -127, 0, -2);
    CHECK_BINARY(EM_BINARY_multiply, x, y, 127, -128, 16, 15);
    CHECK_BINARY(EM_BINARY_pow, x, y, 127, 0, 0, -13); /* 3^5 = 243 */
    em_array_release(x);
    em_array_release(y);
    /* u16 products would overflow a promoted int. */
    const double u[] = {65535, 65535, 300};
    x = vec(u, 3, EM_U16);
    CHECK_BINARY(EM_BINARY_multiply, x, x, 1, 1, 24464);
    em_array_release(x);
}

EM_TEST(elementwise_binary_integer_pow) {
    const double a[] = {2, 3, -2, 1, -1, -1, 5, 2, 0, 0, 7};
    const double b[] = {10, 0, 3, -5, -3, -2, -1, 31, 0, 5, 1};
    em_array *x = vec(a, 11, EM_S32), *y = vec(b, 11, EM_S32);
    CHECK_BINARY(EM_BINARY_pow, x, y, 1024, 1, -8, 1, -1, 1, 0,
                 -2147483648.0, 1, 0, 7);
    em_array_release(x);
    em_array_release(y);
    const double ua[] = {2, 3, 10};
    const double ub[] = {63, 40, 20};
    x = vec(ua, 3, EM_U64);
    y = vec(ub, 3, EM_U64);
    uint64_t got[3];
    em_array *r = bin(EM_BINARY_pow, x, y);
    CHECK_OK(em_read(r, got, sizeof got));
    uint64_t p3 = 1, p10 = 1;
    for (int i = 0; i < 40; i++)
        p3 *= 3;
    for (int i = 0; i < 20; i++)
        p10 *= 10;
    CHECK(got[0] == (uint64_t)1 << 63 && got[1] == p3 && got[2] == p10);
    em_array_release(r);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(elementwise_binary_shifts_and_bits) {
    const double a[] = {1, 1, 1, -1, -8, -8, 8, -8};
    const double b[] = {31, 32, -1, 4, 1, 40, 40, -1};
    em_array *x = vec(a, 8, EM_S32), *y = vec(b, 8, EM_S32);
    CHECK_BINARY(EM_BINARY_left_shift, x, y, -2147483648.0, 0, 0, -16, -16, 0,
                 0, 0);
    CHECK_BINARY(EM_BINARY_right_shift, x, y, 0, 0, 0, -1, -4, -1, 0, -1);
    CHECK_BINARY(EM_BINARY_bitwise_and, x, y, 1, 0, 1, 4, 0, 40, 8, -8);
    CHECK_BINARY(EM_BINARY_bitwise_or, x, y, 31, 33, -1, -1, -7, -8, 40, -1);
    CHECK_BINARY(EM_BINARY_bitwise_xor, x, y, 30, 33, -2, -5, -7, -48, 32, 7);
    em_array_release(x);
    em_array_release(y);
    const double ua[] = {255, 255, 1};
    const double ub[] = {7, 8, 7};
    x = vec(ua, 3, EM_U8);
    y = vec(ub, 3, EM_U8);
    CHECK_BINARY(EM_BINARY_right_shift, x, y, 1, 0, 0);
    CHECK_BINARY(EM_BINARY_left_shift, x, y, 128, 0, 128);
    em_array_release(x);
    em_array_release(y);
    /* pred is a 1-bit integer. */
    const double pa[] = {0, 1, 1, 1};
    const double pb[] = {0, 0, 1, 1};
    x = vec(pa, 4, EM_PRED);
    y = vec(pb, 4, EM_PRED);
    CHECK_BINARY(EM_BINARY_left_shift, x, y, 0, 1, 0, 0);
    CHECK_BINARY(EM_BINARY_bitwise_xor, x, y, 0, 1, 0, 0);
    CHECK_BINARY(EM_BINARY_quotient, x, y, 0, 0, 1, 1);
    CHECK_BINARY(EM_BINARY_logical_or, x, y, 0, 1, 1, 1);
    CHECK_BINARY(EM_BINARY_less, y, x, 0, 1, 0, 0);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(elementwise_binary_float_nan_and_zero) {
    const double a[] = {NAN, 1, NAN, 0, -0.0, 5, -7, INFINITY};
    const double b[] = {1, NAN, NAN, -0.0, 0, 0, 2, 1};
    for (size_t d = 0; d < N_OF(FLOAT_DTYPES); d++) {
        em_array *x = vec(a, 8, FLOAT_DTYPES[d]), *y = vec(b, 8, FLOAT_DTYPES[d]);
        CHECK_BINARY(EM_BINARY_maximum, x, y, NAN, NAN, NAN, 0, 0, 5, 2,
                     INFINITY);
        CHECK_BINARY(EM_BINARY_minimum, x, y, NAN, NAN, NAN, -0.0, -0.0, 0, -7, 1);
        CHECK_BINARY(EM_BINARY_equal, x, y, 0, 0, 0, 1, 1, 0, 0, 0);
        CHECK_BINARY(EM_BINARY_not_equal, x, y, 1, 1, 1, 0, 0, 1, 1, 1);
        CHECK_BINARY(EM_BINARY_less, x, y, 0, 0, 0, 0, 0, 0, 1, 0);
        CHECK_BINARY(EM_BINARY_greater_equal, x, y, 0, 0, 0, 1, 1, 1, 0, 1);
        CHECK_BINARY(EM_BINARY_logical_and, x, y, 1, 1, 1, 0, 0, 0, 1, 1);
        CHECK_BINARY(EM_BINARY_logical_xor, x, y, 0, 0, 0, 0, 0, 1, 0, 0);
        CHECK_BINARY(EM_BINARY_divide, x, y, NAN, NAN, NAN, NAN, NAN, INFINITY,
                     -3.5, INFINITY);
        CHECK_BINARY(EM_BINARY_remainder, x, y, NAN, NAN, NAN, NAN, NAN, NAN,
                     -1, NAN);
        CHECK_BINARY(EM_BINARY_add, x, y, NAN, NAN, NAN, 0, 0, 5, -5, INFINITY);
        em_array_release(x);
        em_array_release(y);
    }
    const double c[] = {1, -1, 0};
    const double e[] = {1, 1, -1};
    em_array *x = vec(c, 3, EM_F64), *y = vec(e, 3, EM_F64);
    CHECK_BINARY(EM_BINARY_atan2, x, y, atan2(1, 1), atan2(-1, 1), atan2(0, -1));
    CHECK_BINARY(EM_BINARY_pow, y, x, 1, 1, 1);
    em_array_release(x);
    em_array_release(y);
}

EM_TEST(elementwise_binary_complex) {
    double complex va[] = {1 + 2 * I, 3, 0}, vb[] = {3 - 1 * I, 3, 1 * I};
    int64_t n = 3;
    em_array *a = NULL, *b = NULL;
    CHECK_OK(em_from_data(va, sizeof va, &n, 1, EM_C128, &a));
    CHECK_OK(em_from_data(vb, sizeof vb, &n, 1, EM_C128, &b));
    double complex got[3];
    em_array *r = bin(EM_BINARY_multiply, a, b);
    CHECK_OK(em_read(r, got, sizeof got));
    CHECK(got[0] == 5 + 5 * I && got[1] == 9 && got[2] == 0);
    em_array_release(r);
    r = bin(EM_BINARY_divide, a, b);
    CHECK_OK(em_read(r, got, sizeof got));
    CHECK_NEAR(creal(got[0]), 0.1, 1e-15);
    CHECK_NEAR(cimag(got[0]), 0.7, 1e-15);
    em_array_release(r);
    CHECK_BINARY(EM_BINARY_equal, a, b, 0, 1, 0);
    CHECK_BINARY(EM_BINARY_logical_and, a, b, 1, 1, 0);
    em_array_release(a);
    em_array_release(b);
}

/* Strided, reversed, broadcast and sliced inputs. */
EM_TEST(elementwise_binary_layouts) {
    const double av[] = {1, 2, 3, 4, 5, 6};    /* [2,1,3] */
    const double bv[] = {10, 20, 30, 40}; /* [4,1] */
    int64_t sa[3] = {2, 1, 3}, sb[2] = {4, 1};
    em_array *a = t_from_f64(av, sa, 3, EM_F32), *b = t_from_f64(bv, sb, 2, EM_F32);
    em_array *r = bin(EM_BINARY_add, a, b);
    CHECK(em_array_ndim(r) == 3 && em_array_shape(r)[0] == 2 &&
          em_array_shape(r)[1] == 4 && em_array_shape(r)[2] == 3);
    double got[24];
    t_read_f64(r, got, 24);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                CHECK(got[i * 12 + j * 3 + k] == av[i * 3 + k] + bv[j]);
    em_array_release(r);
    em_array_release(a);
    em_array_release(b);

    /* m is [2,3]; its transpose [3,2], a reversed copy, a strided slice. */
    const double mv[] = {1, 2, 3, 4, 5, 6};
    em_array *m = mat(mv, 2, 3, EM_S32);
    em_array *t = NULL, *rev = NULL, *sl = NULL, *bc = NULL;
    int perm[2] = {1, 0}, axes[1] = {1};
    CHECK_OK(em_transpose(m, perm, 2, &t));
    CHECK_OK(em_reverse(m, axes, 1, &rev));
    int64_t start[2] = {0, 0}, stop[2] = {2, 3}, step[2] = {1, 2};
    CHECK_OK(em_slice(m, start, stop, step, &sl)); /* [[1,3],[4,6]] */
    int64_t bshape[2] = {2, 3};
    const double row[] = {100, 200, 300};
    em_array *rowa = vec(row, 3, EM_S32);
    CHECK_OK(em_broadcast_to(rowa, bshape, 2, &bc));
    CHECK_BINARY(EM_BINARY_subtract, rev, m, 2, 0, -2, 2, 0, -2);
    CHECK_BINARY(EM_BINARY_add, bc, rev, 103, 202, 301, 106, 205, 304);
    CHECK_BINARY(EM_BINARY_multiply, sl, sl, 1, 9, 16, 36);
    em_array *tt = bin(EM_BINARY_multiply, t, t); /* [3,2] */
    EXPECT_VALUES(tt, 1, 16, 4, 25, 9, 36);
    em_array_release(tt);
    em_array_release(m);
    em_array_release(t);
    em_array_release(rev);
    em_array_release(sl);
    em_array_release(bc);
    em_array_release(rowa);
}

EM_TEST(elementwise_empty_and_scalar) {
    int64_t s0[2] = {0, 3};
    em_array *e = t_from_f64(NULL, s0, 2, EM_F32);
    const double three[] = {1, 2, 3};
    em_array *v = vec(three, 3, EM_F32);
    em_array *r = bin(EM_BINARY_add, e, v);
    CHECK(r && em_array_size(r) == 0 && em_array_shape(r)[0] == 0);
    CHECK_OK(em_eval(&r, 1));
    em_array_release(r);
    r = un(EM_UNARY_exp, e);
    CHECK_OK(em_eval(&r, 1));
    em_array_release(r);

    em_array *s = NULL;
    CHECK_OK(em_scalar_f64(2.0, EM_F32, &s));
    r = bin(EM_BINARY_pow, v, s);
    EXPECT_VALUES(r, 1, 4, 9);
    em_array_release(r);
    r = un(EM_UNARY_negate, s);
    CHECK(em_array_ndim(r) == 0);
    EXPECT_VALUES(r, -2);
    em_array_release(r);
    r = bin(EM_BINARY_multiply, s, s);
    CHECK(em_array_ndim(r) == 0);
    EXPECT_VALUES(r, 4);
    em_array_release(r);
    em_array_release(s);
    em_array_release(e);
    em_array_release(v);
}

/* Large enough for several threads; strided + broadcast. */
EM_TEST(elementwise_large_parallel) {
    const int64_t rows = 600, cols = 500;
    double *mv = malloc(sizeof(double) * (size_t)(rows * cols));
    CHECK(mv != NULL);
    if (!mv)
        return;
    for (int64_t i = 0; i < rows * cols; i++)
        mv[i] = (double)(i % 1000) - 500;
    em_array *m = mat(mv, rows, cols, EM_F32), *t = NULL, *c = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(m, perm, 2, &t)); /* [cols, rows] */
    CHECK_OK(em_scalar_f64(0.5, EM_F32, &c));
    em_array *x = bin(EM_BINARY_multiply, t, c);
    em_array *y = bin(EM_BINARY_add, x, t); /* 1.5 * m^T */
    em_array *z = un(EM_UNARY_abs, y);
    double *got = malloc(sizeof(double) * (size_t)(rows * cols));
    if (got) {
        t_read_f64(z, got, (size_t)(rows * cols));
        int bad = 0;
        for (int64_t i = 0; i < cols; i++)
            for (int64_t j = 0; j < rows; j++)
                bad += got[i * rows + j] != fabs(1.5 * mv[j * cols + i]);
        CHECK(bad == 0);
    }
    free(got);
    free(mv);
    em_array_release(m);
    em_array_release(t);
    em_array_release(c);
    em_array_release(x);
    em_array_release(y);
    em_array_release(z);
}

/* An input held by nothing but the op gives its buffer to the output. */
EM_TEST(elementwise_donates_input_buffer) {
    const double v[] = {1, 2, 3, 4};
    em_array *a = vec(v, 4, EM_F32);
    CHECK_OK(em_eval(&a, 1));
    void *data = a->buffer->data;
    em_array *r = un(EM_UNARY_negate, a);
    em_array_release(a); /* r's input is now its only holder */
    CHECK_OK(em_eval(&r, 1));
    CHECK(r->buffer->data == data);
    EXPECT_VALUES(r, -1, -2, -3, -4);
    em_array_release(r);
}

EM_TEST(elementwise_binary_errors) {
    const double x[] = {1, 2, 3};
    em_array *f = vec(x, 3, EM_F32), *g = vec(x, 2, EM_F32), *d = vec(x, 3, EM_F64);
    em_array *c = vec(x, 3, EM_C64), *out = (em_array *)1;
    CHECK_ERR(em_binary(EM_BINARY_add, f, d, &out), EM_ERR_ARGUMENT,
              "add: expected inputs of one dtype, got f32[3] and f64[3]");
    CHECK(out == NULL);
    CHECK_ERR(em_binary(EM_BINARY_multiply, f, g, &out), EM_ERR_ARGUMENT,
              "multiply");
    CHECK_ERR(em_binary(EM_BINARY_bitwise_and, f, f, &out), EM_ERR_ARGUMENT,
              "bitwise_and: expected an integer dtype");
    CHECK_ERR(em_binary(EM_BINARY_maximum, c, c, &out), EM_ERR_ARGUMENT,
              "maximum: expected a non-complex dtype, got c64[3] and c64[3]");
    CHECK_ERR(em_binary(EM_BINARY_atan2, c, c, &out), EM_ERR_ARGUMENT, "atan2");
    CHECK_ERR(em_binary((em_binary_op)-1, f, f, &out), EM_ERR_ARGUMENT,
              "unknown op");
    CHECK_ERR(em_binary(EM_BINARY_add, f, NULL, &out), EM_ERR_ARGUMENT, "add");
    em_array_release(f);
    em_array_release(g);
    em_array_release(d);
    em_array_release(c);
}

/* ------------------------------------------------------------------------ */
/* select, clip                                                              */
/* ------------------------------------------------------------------------ */

EM_TEST(elementwise_select) {
    const double pv[] = {0, -0.0, NAN, 0.5};
    const double tv[] = {1, 2, 3, 4};
    const double fv[] = {-1, -2, -3, -4};
    const em_dtype pdts[] = {EM_F32, EM_F16, EM_F64, EM_C64};
    const em_dtype vdts[] = {EM_U8, EM_S16, EM_F32, EM_F64, EM_C128};
    for (size_t i = 0; i < N_OF(pdts); i++) {
        em_array *p = vec(pv, 4, pdts[i]);
        for (size_t j = 0; j < N_OF(vdts); j++) {
            em_array *t = vec(tv, 4, vdts[j]), *f = vec(fv, 4, vdts[j]);
            if (vdts[j] == EM_U8) { /* u8 cannot hold -1: use 9 */
                em_array_release(f);
                const double nine[] = {9, 9, 9, 9};
                f = vec(nine, 4, EM_U8);
            }
            em_array *r = NULL;
            CHECK_OK(em_select(p, t, f, &r));
            CHECK(em_array_dtype(r) == vdts[j]);
            double got[4];
            t_read_f64(r, got, 4);
            CHECK(got[0] != 1 && got[1] != 2 && got[2] == 3 && got[3] == 4);
            em_array_release(r);
            em_array_release(t);
            em_array_release(f);
        }
        em_array_release(p);
    }
    /* Broadcasting: pred [2,1], on_true [3], on_false scalar. */
    const double pc[] = {1, 0};
    em_array *p = mat(pc, 2, 1, EM_PRED), *t = vec(tv, 3, EM_S64), *f = NULL;
    CHECK_OK(em_scalar_s64(-7, EM_S64, &f));
    em_array *r = NULL;
    CHECK_OK(em_select(p, t, f, &r));
    CHECK(em_array_ndim(r) == 2 && em_array_shape(r)[1] == 3);
    EXPECT_VALUES(r, 1, 2, 3, -7, -7, -7);
    em_array_release(r);
    em_array *fd = vec(tv, 3, EM_F32), *bad = vec(tv, 4, EM_S64);
    CHECK_ERR(em_select(p, t, fd, &r), EM_ERR_ARGUMENT,
              "select: expected on_true and on_false of one dtype, got s64[3] "
              "and f32[3]");
    CHECK_ERR(em_select(p, t, bad, &r), EM_ERR_ARGUMENT, "select");
    em_array_release(p);
    em_array_release(t);
    em_array_release(f);
    em_array_release(fd);
    em_array_release(bad);
}

EM_TEST(elementwise_clip) {
    const double x[] = {-3, 0.5, NAN, 7, -0.0};
    for (size_t d = 0; d < N_OF(FLOAT_DTYPES); d++) {
        em_array *a = vec(x, 5, FLOAT_DTYPES[d]), *lo = NULL, *hi = NULL, *r = NULL;
        CHECK_OK(em_scalar_f64(-1, FLOAT_DTYPES[d], &lo));
        CHECK_OK(em_scalar_f64(5, FLOAT_DTYPES[d], &hi));
        CHECK_OK(em_clip(a, lo, hi, &r));
        EXPECT_VALUES(r, -1, 0.5, NAN, 5, -0.0);
        em_array_release(r);
        em_array_release(a);
        em_array_release(lo);
        em_array_release(hi);
    }
    const double xi[] = {-128, -5, 0, 5, 127};
    const double los[] = {-10, -10, 1, -10, -10};
    em_array *a = vec(xi, 5, EM_S8), *lo = vec(los, 5, EM_S8), *hi = NULL, *r = NULL;
    CHECK_OK(em_scalar_s64(100, EM_S8, &hi));
    CHECK_OK(em_clip(a, lo, hi, &r));
    EXPECT_VALUES(r, -10, -5, 1, 5, 100);
    em_array_release(r);
    em_array *wide = NULL;
    int64_t shape[2] = {2, 5};
    CHECK_OK(em_broadcast_to(lo, shape, 2, &wide));
    CHECK_ERR(em_clip(a, wide, hi, &r), EM_ERR_ARGUMENT,
              "clip: expected lo and hi to broadcast to a's shape");
    em_array *hf = NULL;
    CHECK_OK(em_scalar_f64(1, EM_F32, &hf));
    CHECK_ERR(em_clip(a, lo, hf, &r), EM_ERR_ARGUMENT,
              "clip: expected lo and hi of a's dtype");
    em_array_release(a);
    em_array_release(lo);
    em_array_release(hi);
    em_array_release(wide);
    em_array_release(hf);
}

/* ------------------------------------------------------------------------ */
/* Conversions                                                               */
/* ------------------------------------------------------------------------ */

EM_TEST(elementwise_as_type_float_to_int) {
    const double x[] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, -1.9, 1.9, -0.0};
    em_array *a = vec(x, 8, EM_F32), *r = NULL;
    CHECK_OK(em_as_type(a, EM_S32, &r));
    EXPECT_VALUES(r, 0, 2147483647.0, -2147483648.0, 2147483647.0,
                  -2147483648.0, -1, 1, 0);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_U8, &r));
    EXPECT_VALUES(r, 0, 255, 0, 255, 0, 0, 1, 0);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_PRED, &r));
    EXPECT_VALUES(r, 1, 1, 1, 1, 1, 1, 1, 0);
    em_array_release(r);
    int64_t s64[8];
    CHECK_OK(em_as_type(a, EM_S64, &r));
    CHECK_OK(em_read(r, s64, sizeof s64));
    CHECK(s64[0] == 0 && s64[1] == INT64_MAX && s64[2] == INT64_MIN &&
          s64[3] == 3000000000 && s64[5] == -1);
    em_array_release(r);
    uint64_t u64[8];
    CHECK_OK(em_as_type(a, EM_U64, &r));
    CHECK_OK(em_read(r, u64, sizeof u64));
    CHECK(u64[1] == UINT64_MAX && u64[2] == 0 && u64[4] == 0);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(elementwise_as_type_others) {
    const double x[] = {300, -1, 65536 + 5};
    em_array *a = vec(x, 3, EM_S32), *r = NULL;
    CHECK_OK(em_as_type(a, EM_S8, &r)); /* integers wrap */
    EXPECT_VALUES(r, 44, -1, 5);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_U16, &r));
    EXPECT_VALUES(r, 300, 65535, 5);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_F16, &r));
    EXPECT_VALUES(r, 300, -1, INFINITY);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_BF16, &r));
    EXPECT_VALUES(r, 300, -1, 65536);
    em_array_release(r);
    /* The same dtype is the same array. */
    CHECK_OK(em_as_type(a, EM_S32, &r));
    CHECK(r == a);
    em_array_release(r);
    em_array_release(a);

    double complex cv[] = {3 + 4 * I, 1 * I, 0};
    int64_t n = 3;
    CHECK_OK(em_from_data(cv, sizeof cv, &n, 1, EM_C128, &a));
    CHECK_OK(em_as_type(a, EM_F32, &r)); /* real part */
    EXPECT_VALUES(r, 3, 0, 0);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_PRED, &r)); /* nonzero if either part is */
    EXPECT_VALUES(r, 1, 1, 0);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_S16, &r));
    EXPECT_VALUES(r, 3, 0, 0);
    em_array_release(r);
    em_array_release(a);

    const double u[] = {18446744073709551615.0};
    a = vec(u, 1, EM_U64);
    CHECK_OK(em_as_type(a, EM_F64, &r));
    EXPECT_VALUES(r, 18446744073709551616.0);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_S64, &r));
    EXPECT_VALUES(r, -1);
    em_array_release(r);
    CHECK_OK(em_as_type(a, EM_C64, &r));
    float complex fc;
    CHECK_OK(em_read(r, &fc, sizeof fc));
    CHECK(crealf(fc) == 18446744073709551616.0f && cimagf(fc) == 0);
    em_array_release(r);
    CHECK_ERR(em_as_type(a, (em_dtype)42, &r), EM_ERR_ARGUMENT,
              "as_type: invalid target dtype 42 for u64[1]");
    em_array_release(a);
}

EM_TEST(elementwise_as_type_strided) {
    const double mv[] = {1.5, -2.5, 3.5, 4.5, 5.5, 6.5};
    em_array *m = mat(mv, 2, 3, EM_F64), *t = NULL, *r = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(m, perm, 2, &t));
    CHECK_OK(em_as_type(t, EM_S32, &r));
    EXPECT_VALUES(r, 1, 4, -2, 5, 3, 6);
    em_array_release(r);
    em_array_release(t);
    em_array_release(m);
}

EM_TEST(elementwise_bitcast) {
    float fv[4] = {1.0f, -2.0f, 0.0f, -0.0f};
    int64_t shape[2] = {2, 2};
    em_array *a = NULL, *r = NULL, *t = NULL;
    CHECK_OK(em_from_data(fv, sizeof fv, shape, 2, EM_F32, &a));
    CHECK_OK(em_bitcast(a, EM_U32, &r));
    uint32_t got[4];
    CHECK_OK(em_read(r, got, sizeof got));
    CHECK(got[0] == 0x3f800000u && got[1] == 0xc0000000u && got[2] == 0 &&
          got[3] == 0x80000000u);
    CHECK(r->buffer == a->buffer); /* a view */
    em_array_release(r);
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(a, perm, 2, &t));
    CHECK_OK(em_bitcast(t, EM_S32, &r)); /* a view with t's strides */
    int32_t gi[4];
    CHECK_OK(em_read(r, gi, sizeof gi));
    CHECK(gi[0] == 0x3f800000 && gi[1] == 0 && gi[2] == (int32_t)0xc0000000u &&
          gi[3] == (int32_t)0x80000000u);
    em_array_release(r);
    em_array_release(t);
    CHECK_ERR(em_bitcast(a, EM_F64, &r), EM_ERR_ARGUMENT,
              "bitcast: expected a target dtype of 4-byte elements like "
              "f32[2,2], got f64 (8 bytes)");
    em_array_release(a);
    const double b[] = {2};
    a = vec(b, 1, EM_U8);
    CHECK_ERR(em_bitcast(a, EM_PRED, &r), EM_ERR_ARGUMENT, "as pred");
    CHECK_OK(em_bitcast(a, EM_S8, &r));
    EXPECT_VALUES(r, 2);
    em_array_release(r);
    em_array_release(a);
}

EM_TEST(elementwise_scalars) {
    em_array *s = NULL;
    int8_t i8;
    CHECK_OK(em_scalar_f64(300.0, EM_S8, &s)); /* wraps */
    CHECK_OK(em_read(s, &i8, 1));
    CHECK(i8 == 44 && em_array_ndim(s) == 0);
    em_array_release(s);
    uint64_t u;
    CHECK_OK(em_scalar_f64(-1.0, EM_U64, &s));
    CHECK_OK(em_read(s, &u, 8));
    CHECK(u == UINT64_MAX);
    em_array_release(s);
    CHECK_OK(em_scalar_s64(-1, EM_U64, &s));
    CHECK_OK(em_read(s, &u, 8));
    CHECK(u == UINT64_MAX);
    em_array_release(s);
    uint16_t h;
    CHECK_OK(em_scalar_f64(1.0, EM_F16, &s));
    CHECK_OK(em_read(s, &h, 2));
    CHECK(h == 0x3c00);
    em_array_release(s);
    CHECK_OK(em_scalar_f64(-2.0, EM_BF16, &s));
    CHECK_OK(em_read(s, &h, 2));
    CHECK(h == 0xc000);
    em_array_release(s);
    uint8_t p;
    CHECK_OK(em_scalar_f64(0.25, EM_PRED, &s));
    CHECK_OK(em_read(s, &p, 1));
    CHECK(p == 1);
    em_array_release(s);
    double complex c;
    CHECK_OK(em_scalar_s64(-3, EM_C128, &s));
    CHECK_OK(em_read(s, &c, sizeof c));
    CHECK(c == -3);
    em_array_release(s);
    s = (em_array *)1;
    CHECK_ERR(em_scalar_f64(1.0, (em_dtype)99, &s), EM_ERR_ARGUMENT,
              "invalid dtype 99");
    CHECK(s == NULL);
}

/* ---- f32 erf / erfc / erf_inv: ulp sweeps ------------------------------ */

/* The spacing of floats at |v| (2^-149 among the subnormals). */
static double f32_ulp(double v) {
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    return ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
}

/* Inputs (all floats) for the sweep of `op`, written to x; returns the
 * count. erf/erfc: every 1531st bit pattern (all magnitudes: subnormals,
 * tails, huge; both signs), a dense grid over [-10, 10] and the ends of
 * erfc's range. erf_inv: every float in (-1, 1) with a stride of 97, plus
 * the 2^16 floats just inside +-1 (the tail, where each step matters). */
static size_t erf_sweep_inputs(em_unary_op op, double *x, size_t cap) {
    size_t n = 0;
    for (uint64_t b = 0; b < (1ull << 32) && n < cap; b += 1531) {
        uint32_t u = (uint32_t)b;
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f) || (op == EM_UNARY_erf_inv && !(fabsf(f) < 1.0f)))
            continue;
        if (op == EM_UNARY_erf_inv && (u & 0x7fffffffu) % 97 != 0)
            continue;
        x[n++] = f;
    }
    if (op == EM_UNARY_erf_inv) {
        for (uint32_t b = 0; b < (1u << 31) && n + 1 < cap; b += 97) {
            float f;
            memcpy(&f, &b, 4);
            if (!(f < 1.0f))
                break;
            x[n++] = f;
            x[n++] = -f;
        }
        for (int k = 1; k <= 1 << 16 && n + 1 < cap; k++) {
            x[n++] = 1.0 - ldexp(k, -24);
            x[n++] = -(1.0 - ldexp(k, -24));
        }
    } else {
        for (int k = -500000; k <= 500000 && n < cap; k++)
            x[n++] = (float)(k * 2e-5);
        for (float f = 9.0f; f < 10.1f && n < cap; f = nextafterf(f, 11.0f))
            x[n++] = f; /* erfc's last normal and subnormal results */
    }
    return n;
}

/* Max ulp error of the f32 kernel of `op` over its sweep, against `ref`
 * (libm in double) or, with ref NULL, the engine's f64 op (erf_inv). */
static double erf_sweep_max_ulp(em_unary_op op, double (*ref)(double),
                                double *worst_x) {
    size_t cap = 6u << 20;
    double *x = malloc(cap * sizeof *x), *got = malloc(cap * sizeof *got);
    double *want = malloc(cap * sizeof *want);
    size_t n = erf_sweep_inputs(op, x, cap);
    em_array *a = vec(x, (int64_t)n, EM_F32), *r = un(op, a);
    t_read_f64(r, got, n);
    em_array_release(r);
    em_array_release(a);
    if (ref) {
        for (size_t i = 0; i < n; i++)
            want[i] = ref(x[i]);
    } else {
        a = vec(x, (int64_t)n, EM_F64);
        r = un(op, a);
        t_read_f64(r, want, n);
        em_array_release(r);
        em_array_release(a);
    }
    double worst = 0;
    *worst_x = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / f32_ulp(want[i]);
        if (!(e <= worst)) { /* NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
            *worst_x = x[i];
        }
    }
    free(x);
    free(got);
    free(want);
    return worst;
}

/* The bounds documented at un_erff / un_erfcf / un_erfinvf in unary.c; they
 * hold whichever target clone (AVX-512, AVX2, baseline) runs. */
EM_TEST(elementwise_erf_f32_ulp) {
    const struct {
        em_unary_op op;
        double (*ref)(double);
        double bound;
    } cases[] = {{EM_UNARY_erf, erf, 1.5},
                 {EM_UNARY_erfc, erfc, 3.5},
                 {EM_UNARY_erf_inv, NULL, 1.5}};
    for (size_t c = 0; c < N_OF(cases); c++) {
        double at, worst = erf_sweep_max_ulp(cases[c].op, cases[c].ref, &at);
        if (getenv("EMILY_ULP_REPORT"))
            fprintf(stderr, "  %s f32: max %.3f ulp at %.9g\n",
                    em_unary_name(cases[c].op), worst, at);
        if (!(worst <= cases[c].bound))
            em_test_fail(__FILE__, __LINE__, "%s f32: %.3f ulp at %.9g",
                         em_unary_name(cases[c].op), worst, at);
    }
}

/* Special values, exact, in every float dtype (f16/bf16 compute in f32). */
EM_TEST(elementwise_erf_f32_special_values) {
    const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN};
    const double y[] = {0.0, -0.0, 1.0, -1.0, NAN, 1.5, -2.0, INFINITY};
    for (size_t d = 0; d < N_OF(FLOAT_DTYPES); d++) {
        em_array *a = vec(x, N_OF(x), FLOAT_DTYPES[d]);
        em_array *r = un(EM_UNARY_erf, a);
        EXPECT_VALUES(r, 0.0, -0.0, 1.0, -1.0, NAN);
        em_array_release(r);
        r = un(EM_UNARY_erfc, a);
        EXPECT_VALUES(r, 1.0, 1.0, 0.0, 2.0, NAN);
        em_array_release(r);
        em_array_release(a);
        a = vec(y, N_OF(y), FLOAT_DTYPES[d]);
        r = un(EM_UNARY_erf_inv, a);
        EXPECT_VALUES(r, 0.0, -0.0, INFINITY, -INFINITY, NAN, NAN, NAN, NAN);
        em_array_release(r);
        em_array_release(a);
    }
    /* Subnormal inputs: erf(x) ~ 2x/sqrt(pi), sign kept. */
    const double sub[] = {1e-40, -1e-40};
    em_array *a = vec(sub, 2, EM_F32);
    em_array *r = un(EM_UNARY_erf, a);
    double got[2];
    t_read_f64(r, got, 2);
    CHECK_NEAR(got[0], (double)(float)(1e-40 * M_2_SQRTPI), 2e-45);
    CHECK_NEAR(got[1], -(double)(float)(1e-40 * M_2_SQRTPI), 2e-45);
    em_array_release(r);
    em_array_release(a);
}

/* f64 cbrt is exact on exact cubes and correctly rounded on 2 (glibc alone
 * gives 3.0000000000000004 for 27 and 1.2599210498948734 for 2); zeros,
 * infinities and NaN pass through with their signs. */
EM_TEST(elementwise_cbrt_f64_exact_cubes) {
    enum { N = 1000 };
    double *x = malloc(sizeof(double) * N);
    double *got = malloc(sizeof(double) * N);
    for (int k = 0; k < N; k++)
        x[k] = (k % 2 ? -1.0 : 1.0) * (double)(k + 1) * (k + 1) * (k + 1);
    em_array *a = vec(x, N, EM_F64);
    em_array *r = un(EM_UNARY_cbrt, a);
    t_read_f64(r, got, N);
    for (int k = 0; k < N; k++)
        if (got[k] != (k % 2 ? -1.0 : 1.0) * (k + 1))
            em_test_fail(__FILE__, __LINE__, "cbrt(%.17g) = %.17g", x[k], got[k]);
    em_array_release(r);
    em_array_release(a);
    free(x);
    free(got);

    const double special[] = {2.0, 0.0, -0.0, INFINITY, -INFINITY, NAN};
    a = vec(special, N_OF(special), EM_F64);
    r = un(EM_UNARY_cbrt, a);
    EXPECT_VALUES(r, 1.2599210498948732, 0.0, -0.0, INFINITY, -INFINITY, NAN);
    em_array_release(r);
    em_array_release(a);
}
