/*
 * emily_fft.h — discrete Fourier transforms along one axis (part of
 * libemily; include after or instead of emily.h).
 *
 * Every row along `axis` is transformed on its own (rows run on the thread
 * pool). Any length is supported: powers of two use an iterative radix-2
 * transform, other lengths Bluestein's chirp-z algorithm on a power-of-two
 * convolution. Arithmetic is in double precision whatever the dtype (the
 * twiddles too), then rounded to the output dtype.
 *
 * Conventions are numpy's and Nx's: forward X[k] = sum_j x[j] e^{-2πi jk/n},
 * unscaled; inverse x[j] = (1/n) sum_k X[k] e^{+2πi jk/n}.
 *
 * Input dtypes: f32, f64, c64, c128 (real inputs have imaginary part 0).
 * The result dtype is c64 for f32/c64 inputs and c128 for f64/c128
 * (EM_FFT_IRFFT: f32 / f64).
 */
#ifndef EMILY_FFT_H
#define EMILY_FFT_H

#include "emily.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum em_fft_mode {
    EM_FFT_FORWARD = 0, /* complex transform of length n */
    EM_FFT_INVERSE = 1, /* inverse complex transform of length n, 1/n scaled */
    /* Forward transform of length n keeping the n/2 + 1 non-negative
     * frequencies (numpy.fft.rfft: the input is usually real). */
    EM_FFT_RFFT = 2,
    /* Inverse of EM_FFT_RFFT: the row holds the non-negative frequencies of
     * a Hermitian spectrum; its first n/2 + 1 entries (zero padded) are
     * extended by X[n-k] = conj(X[k]) to length n, inverse transformed, and
     * the real part kept. The result is real, of length n. */
    EM_FFT_IRFFT = 3,
} em_fft_mode;

/* Transform `a` along `axis` (negative counts from the end). The input row
 * is first cut or zero padded to the length the mode reads (n, or n/2 + 1
 * for EM_FFT_IRFFT). n >= 1. The result has a's shape with `axis` replaced
 * by n (EM_FFT_RFFT: n/2 + 1). Result parts (real or imaginary) whose
 * magnitude is below `eps` (>= 0; Nx's clean-up threshold) are stored as
 * +0.0; eps = 0 only turns -0.0 into +0.0. */
em_status em_fft(em_array *a, int axis, int64_t n, em_fft_mode mode, double eps,
                 em_array **out);

#ifdef __cplusplus
}
#endif

#endif
