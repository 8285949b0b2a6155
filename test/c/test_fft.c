/* test_fft.c — em_fft on hand-computed transforms. */
#include "emily_fft.h"
#include "test.h"

#include <complex.h>
#include <stdlib.h>

static em_array *c128(const double complex *v, const int64_t *shape, int ndim, size_t n) {
    em_array *a = NULL;
    CHECK_OK(em_from_data(v, n * sizeof(double complex), shape, ndim, EM_C128, &a));
    return a;
}

EM_TEST(fft_small_hand_values) {
    /* fft([1, 1, 0, 0]) = [2, 1-i, 0, 1+i]; length 3 (Bluestein): fft([1,1,0]) */
    double complex x[4] = {1, 1, 0, 0};
    int64_t shape[1] = {4};
    em_array *a = c128(x, shape, 1, 4), *f = NULL, *g = NULL, *h = NULL;
    CHECK_OK(em_fft(a, 0, 4, EM_FFT_FORWARD, 0.0, &f));
    double complex out[4];
    CHECK_OK(em_read(f, out, sizeof out));
    CHECK_NEAR(creal(out[1]), 1, 1e-15);
    CHECK_NEAR(cimag(out[1]), -1, 1e-15);
    CHECK_NEAR(cimag(out[3]), 1, 1e-15);
    CHECK_OK(em_fft(a, -1, 3, EM_FFT_FORWARD, 0.0, &g));
    double complex o3[3];
    CHECK_OK(em_read(g, o3, sizeof o3));
    /* 1 + e^{-2πik/3}: k=1 -> 0.5 - i·sqrt(3)/2 */
    CHECK_NEAR(creal(o3[0]), 2, 1e-14);
    CHECK_NEAR(creal(o3[1]), 0.5, 1e-14);
    CHECK_NEAR(cimag(o3[1]), -sqrt(3) / 2, 1e-14);
    /* inverse of the forward gives the input back, eps cleans the residue */
    CHECK_OK(em_fft(f, 0, 4, EM_FFT_INVERSE, 1e-10, &h));
    CHECK_OK(em_read(h, out, sizeof out));
    for (int i = 0; i < 4; i++) {
        CHECK_NEAR(creal(out[i]), creal(x[i]), 1e-15);
        CHECK(cimag(out[i]) == 0 && !signbit(cimag(out[i])));
    }
    em_array_release(a), em_array_release(f), em_array_release(g), em_array_release(h);
}

EM_TEST(fft_rfft_irfft_and_errors) {
    float x[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4};
    em_array *a = NULL, *r = NULL, *back = NULL, *bad = NULL;
    CHECK_OK(em_from_data(x, sizeof x, shape, 1, EM_F32, &a));
    CHECK_OK(em_fft(a, 0, 4, EM_FFT_RFFT, 0.0, &r));
    CHECK(em_array_dtype(r) == EM_C64 && em_array_shape(r)[0] == 3);
    CHECK_OK(em_fft(r, 0, 4, EM_FFT_IRFFT, 0.0, &back));
    CHECK(em_array_dtype(back) == EM_F32);
    float y[4];
    CHECK_OK(em_read(back, y, sizeof y));
    for (int i = 0; i < 4; i++)
        CHECK_NEAR(y[i], x[i], 1e-6);
    CHECK_ERR(em_fft(a, 0, 0, EM_FFT_FORWARD, 0.0, &bad), EM_ERR_ARGUMENT, "length must be positive");
    CHECK_ERR(em_fft(a, 1, 4, EM_FFT_FORWARD, 0.0, &bad), EM_ERR_ARGUMENT, "fft");
    CHECK_ERR(em_fft(a, 0, 4, EM_FFT_FORWARD, -1.0, &bad), EM_ERR_ARGUMENT, "eps");
    CHECK(bad == NULL);
    em_array_release(a), em_array_release(r), em_array_release(back);
}

/* Long rows take the four-step path (over 4096 points) and lengths that are
 * not powers of two take Bluestein: an inverse after a forward transform
 * must give the input back. Also the path the sanitizer runs should reach. */
EM_TEST(fft_long_rows_round_trip) {
    const int64_t lengths[3] = {1 << 14, 5003, 3 * 4096};
    for (int li = 0; li < 3; li++) {
        int64_t n = lengths[li];
        double *values = malloc(sizeof(double) * (size_t)n);
        double *back = malloc(sizeof(double) * 2 * (size_t)n);
        CHECK(values && back);
        if (!values || !back) {
            free(values);
            free(back);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            values[i] = sin(0.37 * (double)i) + (double)(i % 7) * 0.125;
        em_array *x = t_from_f64(values, &n, 1, EM_C128), *f = NULL, *g = NULL;
        CHECK_OK(em_fft(x, 0, n, EM_FFT_FORWARD, 0.0, &f));
        CHECK_OK(em_fft(f, 0, n, EM_FFT_INVERSE, 0.0, &g));
        CHECK_OK(em_read(g, back, sizeof(double) * 2 * (size_t)n));
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(back[2 * i] - values[i]) + fabs(back[2 * i + 1]);
            if (d > worst)
                worst = d;
        }
        CHECK(worst < 1e-9);
        em_array_release(x);
        em_array_release(f);
        em_array_release(g);
        free(values);
        free(back);
    }
}
