/*
 * erfinv.h — Giles' single-precision erfinv (Nx.Random's erf_inv), shared
 * by the CPU (random.c) and the CUDA backend (src/cuda/window.cu) so both
 * evaluate one definition. Plain C99 that nvcc compiles for host and
 * device; evaluated in double, so the two differ only by the last bits of
 * log/sqrt before the result is rounded to the dtype.
 */
#ifndef EMILY_ERFINV_H
#define EMILY_ERFINV_H

#include <math.h>

#if defined(__CUDACC__)
#define EM_ERFINV_FN static inline __host__ __device__
#else
#define EM_ERFINV_FN static inline
#endif

/* A polynomial in w = -log(1 - x^2), one for the central region (w < 5)
 * and one in sqrt(w) for the tails; +-1 give +-Inf, |x| > 1 NaN. */
EM_ERFINV_FN double em_giles_erfinv(double x) {
    if (x == 1.0)
        return INFINITY;
    if (x == -1.0)
        return -INFINITY;
    if (x == 0.0)
        return x;
    double w = -log((1.0 - x) * (1.0 + x)); /* NaN beyond [-1, 1] */
    double p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = p * w + 3.43273939e-07;
        p = p * w - 3.5233877e-06;
        p = p * w - 4.39150654e-06;
        p = p * w + 0.00021858087;
        p = p * w - 0.00125372503;
        p = p * w - 0.00417768164;
        p = p * w + 0.246640727;
        p = p * w + 1.50140941;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = p * w + 0.000100950558;
        p = p * w + 0.00134934322;
        p = p * w - 0.00367342844;
        p = p * w + 0.00573950773;
        p = p * w - 0.0076224613;
        p = p * w + 0.00943887047;
        p = p * w + 1.00167406;
        p = p * w + 2.83297682;
    }
    return p * x;
}

#endif
