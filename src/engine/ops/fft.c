/*
 * fft.c — em_fft: discrete Fourier transforms of any length along one axis.
 *
 * A plan is built once per evaluation for the transform length n:
 *   - n a power of two: a table of the n/2 twiddles e^{-2πik/n} (computed
 *     with cos/sin in double, one call each, so no error accumulates) for an
 *     iterative in-place radix-2 transform (bit-reversal permutation, then
 *     log2(n) butterfly passes);
 *   - any other n: Bluestein's algorithm. With the chirp w_k = e^{-πi k²/n}
 *     (k² reduced mod 2n before the angle is formed, to keep it exact),
 *     X_k = w_k · Σ_j (x_j w_j) · conj(w_{k-j}), a linear convolution done
 *     as a cyclic one of power-of-two length m >= 2n - 1 with the
 *     transform of the conj(w) sequence precomputed in the plan.
 * The inverse uses conj(FFT(conj(x))) / n. Rows (every position of the
 * other axes) are loaded into a double-complex scratch row (cut or zero
 * padded), transformed, and stored in the output dtype; they are spread
 * over the thread pool.
 */
#include "internal.h"

#include "emily_fft.h"

#include <stdlib.h>

typedef double complex cd;

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct fft_plan {
    int64_t n;   /* transform length */
    bool pow2;   /* n is a power of two: radix-2 directly */
    int64_t m;   /* radix-2 length actually run: n, or Bluestein's m */
    cd *tw;      /* m/2 twiddles e^{-2πik/m} */
    cd *chirp;   /* Bluestein: w_k, k < n */
    cd *bfft;    /* Bluestein: FFT_m of the conj(w) sequence */
} fft_plan;

static bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* In-place forward radix-2 transform of x (length m, a power of two). */
static void fft_radix2(cd *restrict x, int64_t m, const cd *restrict tw) {
    /* bit-reversal permutation */
    for (int64_t i = 1, j = 0; i < m; i++) {
        int64_t bit = m >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j |= bit;
        if (i < j) {
            cd t = x[i];
            x[i] = x[j];
            x[j] = t;
        }
    }
    for (int64_t len = 2; len <= m; len <<= 1) {
        int64_t half = len >> 1, step = m / len;
        for (int64_t i = 0; i < m; i += len) {
            cd *lo = x + i, *hi = x + i + half;
            for (int64_t j = 0; j < half; j++) {
                cd v = hi[j] * tw[j * step];
                cd u = lo[j];
                lo[j] = u + v;
                hi[j] = u - v;
            }
        }
    }
}

static void plan_free(fft_plan *p) {
    free(p->tw);
    free(p->chirp);
    free(p->bfft);
}

static em_status plan_init(fft_plan *p, int64_t n) {
    memset(p, 0, sizeof *p);
    p->n = n;
    p->pow2 = is_pow2(n);
    int64_t m = 1;
    if (p->pow2) {
        m = n;
    } else {
        while (m < 2 * n - 1)
            m <<= 1;
    }
    p->m = m;
    p->tw = malloc(sizeof(cd) * (size_t)(m / 2 + 1));
    if (!p->tw)
        goto oom;
    for (int64_t k = 0; k < m / 2; k++) {
        double ang = -2.0 * M_PI * (double)k / (double)m;
        p->tw[k] = cos(ang) + I * sin(ang);
    }
    if (p->pow2)
        return EM_OK;
    p->chirp = malloc(sizeof(cd) * (size_t)n);
    p->bfft = calloc((size_t)m, sizeof(cd));
    if (!p->chirp || !p->bfft)
        goto oom;
    uint64_t two_n = 2 * (uint64_t)n;
    for (int64_t k = 0; k < n; k++) {
        uint64_t k2 = (uint64_t)k % two_n;
        k2 = (unsigned __int128)k2 * k2 % two_n;
        double ang = -M_PI * (double)k2 / (double)n;
        p->chirp[k] = cos(ang) + I * sin(ang);
    }
    p->bfft[0] = conj(p->chirp[0]);
    for (int64_t k = 1; k < n; k++)
        p->bfft[k] = p->bfft[m - k] = conj(p->chirp[k]);
    fft_radix2(p->bfft, m, p->tw);
    return EM_OK;
oom:
    plan_free(p);
    return em__fail(EM_ERR_OOM, "fft: out of memory for a plan of length %lld",
                    (long long)n);
}

/* Forward transform of x (length n) in place; work has m entries. */
static void fft_forward(const fft_plan *p, cd *restrict x, cd *restrict work) {
    if (p->pow2) {
        fft_radix2(x, p->n, p->tw);
        return;
    }
    int64_t n = p->n, m = p->m;
    for (int64_t k = 0; k < n; k++)
        work[k] = x[k] * p->chirp[k];
    for (int64_t k = n; k < m; k++)
        work[k] = 0;
    fft_radix2(work, m, p->tw);
    /* multiply, then the inverse through conj(FFT(conj(.))) */
    for (int64_t k = 0; k < m; k++)
        work[k] = conj(work[k] * p->bfft[k]);
    fft_radix2(work, m, p->tw);
    double scale = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++)
        x[k] = p->chirp[k] * conj(work[k]) * scale;
}

/* ------------------------------------------------------------------------ */
/* Rows                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct fft_job {
    const fft_plan *plan;
    em_fft_mode mode;
    em_dtype in_dtype, out_dtype;
    const char *in;     /* element 0 of the input */
    char *out;          /* element 0 of the output */
    int64_t in_len, in_stride, out_len, out_stride;
    int nouter;
    int64_t oshape[EM_MAX_NDIM];
    int64_t istr[EM_MAX_NDIM];
    int64_t ostr[EM_MAX_NDIM];
    double eps;
    atomic_bool oom;
} fft_job;

static void load_row(const fft_job *j, const char *src, cd *buf, int64_t nload) {
    int64_t c = j->in_len < nload ? j->in_len : nload;
    int64_t s = j->in_stride;
    switch (j->in_dtype) {
    case EM_F32:
        for (int64_t k = 0; k < c; k++)
            buf[k] = ((const float *)src)[k * s];
        break;
    case EM_F64:
        for (int64_t k = 0; k < c; k++)
            buf[k] = ((const double *)src)[k * s];
        break;
    case EM_C64:
        for (int64_t k = 0; k < c; k++)
            buf[k] = ((const em_c64_t *)src)[k * s];
        break;
    default:
        for (int64_t k = 0; k < c; k++)
            buf[k] = ((const em_c128_t *)src)[k * s];
        break;
    }
    for (int64_t k = c; k < nload; k++)
        buf[k] = 0;
}

/* x, or +0.0 when |x| < eps (adding 0.0 also turns -0.0 into +0.0). */
static inline double clean(double x, double eps) {
    return fabs(x) < eps ? 0.0 : x + 0.0;
}

static void store_row(const fft_job *j, char *dst, cd *buf) {
    int64_t c = j->out_len, s = j->out_stride;
    for (int64_t k = 0; k < c; k++)
        buf[k] = em_make_c128(clean(creal(buf[k]), j->eps), clean(cimag(buf[k]), j->eps));
    switch (j->out_dtype) {
    case EM_F32:
        for (int64_t k = 0; k < c; k++)
            ((float *)dst)[k * s] = (float)creal(buf[k]);
        break;
    case EM_F64:
        for (int64_t k = 0; k < c; k++)
            ((double *)dst)[k * s] = creal(buf[k]);
        break;
    case EM_C64:
        for (int64_t k = 0; k < c; k++)
            ((em_c64_t *)dst)[k * s] = (em_c64_t)buf[k];
        break;
    default:
        for (int64_t k = 0; k < c; k++)
            ((em_c128_t *)dst)[k * s] = buf[k];
        break;
    }
}

static void fft_rows(void *ctx, int64_t begin, int64_t end) {
    fft_job *j = ctx;
    const fft_plan *p = j->plan;
    int64_t n = p->n;
    cd *buf = malloc(sizeof(cd) * (size_t)(n + (p->pow2 ? 0 : p->m)));
    if (!buf) {
        atomic_store(&j->oom, true);
        return;
    }
    cd *work = buf + n;
    size_t isz = em_dtype_size(j->in_dtype), osz = em_dtype_size(j->out_dtype);
    bool inverse = j->mode == EM_FFT_INVERSE || j->mode == EM_FFT_IRFFT;
    for (int64_t r = begin; r < end; r++) {
        int64_t ioff = 0, ooff = 0, rem = r;
        for (int d = j->nouter - 1; d >= 0; d--) {
            int64_t i = rem % j->oshape[d];
            rem /= j->oshape[d];
            ioff += i * j->istr[d];
            ooff += i * j->ostr[d];
        }
        if (j->mode == EM_FFT_IRFFT) {
            int64_t h = n / 2 + 1;
            load_row(j, j->in + ioff * (int64_t)isz, buf, h);
            for (int64_t k = h; k < n; k++)
                buf[k] = conj(buf[n - k]);
        } else {
            load_row(j, j->in + ioff * (int64_t)isz, buf, n);
        }
        if (inverse)
            for (int64_t k = 0; k < n; k++)
                buf[k] = conj(buf[k]);
        fft_forward(p, buf, work);
        if (inverse) {
            double scale = 1.0 / (double)n;
            for (int64_t k = 0; k < n; k++)
                buf[k] = conj(buf[k]) * scale;
        }
        store_row(j, j->out + ooff * (int64_t)osz, buf);
    }
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* The op                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct fft_params {
    int axis;
    int64_t n;
    em_fft_mode mode;
    double eps;
} fft_params;

static em_status fft_eval(em_array *node) {
    const fft_params *pr = node->params;
    em_array *a = node->inputs[0];
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || node->size == 0)
        return st;
    fft_plan plan;
    if ((st = plan_init(&plan, pr->n)) != EM_OK)
        return st;
    fft_job *j = calloc(1, sizeof *j);
    if (!j) {
        plan_free(&plan);
        return em__fail(EM_ERR_OOM, "fft: out of memory");
    }
    j->plan = &plan;
    j->mode = pr->mode;
    j->eps = pr->eps;
    j->in_dtype = a->dtype;
    j->out_dtype = node->dtype;
    j->in = a->size > 0 ? em__data(a) : NULL; /* an empty axis reads nothing */
    j->out = em__data(node);
    j->in_len = a->shape[pr->axis];
    j->in_stride = a->strides[pr->axis];
    j->out_len = node->shape[pr->axis];
    j->out_stride = node->strides[pr->axis];
    int64_t rows = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (d == pr->axis)
            continue;
        j->oshape[j->nouter] = a->shape[d];
        j->istr[j->nouter] = a->strides[d];
        j->ostr[j->nouter] = node->strides[d];
        j->nouter++;
        rows *= a->shape[d];
    }
    atomic_init(&j->oom, false);
    int64_t grain = 65536 / (pr->n + 1);
    em__parallel_for(rows, grain < 1 ? 1 : grain, fft_rows, j);
    bool oom = atomic_load(&j->oom);
    free(j);
    plan_free(&plan);
    if (oom)
        return em__fail(EM_ERR_OOM, "fft: out of memory for the scratch rows");
    return EM_OK;
}

static const em_prim fft_prim = {"fft", fft_eval};

em_status em_fft(em_array *a, int axis, int64_t n, em_fft_mode mode,
                 double eps, em_array **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return em__fail(EM_ERR_ARGUMENT, "fft: NULL argument");
    em_desc d;
    if (a->dtype != EM_F32 && a->dtype != EM_F64 && a->dtype != EM_C64 &&
        a->dtype != EM_C128)
        return em__fail(EM_ERR_ARGUMENT,
                        "fft: expected an f32, f64, c64 or c128 tensor, got %s",
                        em__describe(a, &d));
    if (a->ndim < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "fft: expected a tensor of rank >= 1, got %s",
                        em__describe(a, &d));
    if ((int)mode < EM_FFT_FORWARD || (int)mode > EM_FFT_IRFFT)
        return em__fail(EM_ERR_ARGUMENT, "fft: invalid mode %d", (int)mode);
    if (n < 1)
        return em__fail(EM_ERR_ARGUMENT,
                        "fft: the length must be positive, got %lld for %s",
                        (long long)n, em__describe(a, &d));
    if (!(eps >= 0))
        return em__fail(EM_ERR_ARGUMENT, "fft: eps must be >= 0, got %g", eps);
    int ax;
    em_status st = em__check_axis("fft", axis, a->ndim, &ax);
    if (st != EM_OK)
        return st;
    bool dbl = a->dtype == EM_F64 || a->dtype == EM_C128;
    em_dtype odt = mode == EM_FFT_IRFFT ? (dbl ? EM_F64 : EM_F32)
                                        : (dbl ? EM_C128 : EM_C64);
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    shape[ax] = mode == EM_FFT_RFFT ? n / 2 + 1 : n;
    if ((st = em__check_shape("fft", shape, a->ndim, odt, NULL)) != EM_OK)
        return st;
    em_array *node;
    if ((st = em__node_new(&fft_prim, odt, shape, a->ndim, &a, 1, &node)) != EM_OK)
        return st;
    fft_params pr = {.axis = ax, .n = n, .mode = mode, .eps = eps};
    if ((st = em__node_set_params(node, &pr, sizeof pr)) != EM_OK) {
        em_array_release(node);
        return st;
    }
    *out = node;
    return EM_OK;
}
