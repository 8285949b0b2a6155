/*
 * fft.c — em_fft: discrete Fourier transforms of any length along one axis.
 *
 * A plan is built once per evaluation for the transform length n:
 *   - n a power of two: a power-of-two kernel plan of length n (below);
 *   - any other n: Bluestein's algorithm. With the chirp w_k = e^{-πi k²/n}
 *     (k² reduced mod 2n before the angle is formed, to keep it exact),
 *     X_k = w_k · Σ_j (x_j w_j) · conj(w_{k-j}), a linear convolution done
 *     as a cyclic one of power-of-two length m >= 2n - 1 with the
 *     transform of the conj(w) sequence precomputed in the plan.
 * The inverse uses conj(FFT(conj(x))) / n. Rows (every position of the
 * other axes) are loaded into a double-complex scratch row (cut or zero
 * padded), transformed, and stored in the output dtype; they are spread
 * over the thread pool.
 *
 * Power-of-two kernel (length m):
 *   - m <= KERNEL_DIRECT_MAX: the row fits in L1/L2, so an iterative
 *     in-place transform: a bit-reversal permutation from a table, then
 *     radix-2² passes (two radix-2 levels fused, halving the passes over
 *     the data), with one contiguous twiddle table per pass so the inner
 *     loop reads twiddles sequentially;
 *   - larger m: the four-step decomposition m = n1·n2 (n1 <= n2). Viewing
 *     x as an n1 × n2 row-major matrix, the n2 columns are transformed
 *     (gathered a few at a time into a small buffer, so the strided reads
 *     touch each cache line once), multiplied by the twiddles w_m^{j2·k1},
 *     the n1 rows transformed in place, and the matrix transposed into the
 *     output order X[k1 + n1·k2]. Every sub-transform works in cache, and
 *     the column, row and transpose steps are spread over the thread pool
 *     (one long row otherwise keeps a single core busy; inside a parallel
 *     row loop the pool runs them inline).
 * All twiddles are computed with cos/sin in double from an exact integer
 * angle; the four-step twiddle w_m^e is the product of two table entries
 * (w_m^e = w_{n2}^{e / n1} · w_m^{e % n1}), so no error accumulates and
 * only n1 + n2 sin/cos pairs are needed. Arithmetic is written on the
 * real and imaginary parts: C's complex multiply checks for infinities
 * and NaNs on every product, which is slow.
 */
#include "internal.h"

#include "emily_fft.h"
#include "linalg_params.h"

#include <stdlib.h>

typedef double complex cd;

/* ------------------------------------------------------------------------ */
/* Power-of-two kernels                                                      */
/* ------------------------------------------------------------------------ */

/* Longest length transformed directly (64 KiB of data: stays in L2). */
#define KERNEL_DIRECT_MAX 4096
/* Columns gathered together in the four-step column pass: 8 complex
 * doubles are two cache lines, so each strided line is read once. */
#define COLS 8

typedef struct kplan {
    int64_t m;
    /* direct (m <= KERNEL_DIRECT_MAX) */
    uint32_t *rev; /* bit-reversed index of each i */
    double *tw;    /* per radix-2² pass with quarter q: for j < q the
                         (re, im) pairs w_{2q}^j, w_{4q}^j */
    /* four-step */
    int64_t n1, n2;
    struct kplan *sub1, *sub2; /* lengths n1 and n2 */
    double *fine;              /* w_m^b, b < n1 (interleaved re, im) */
    double *coarse;            /* w_m^{a·n1} = w_{n2}^a, a < n2 */
} kplan;

static bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

static int ilog2(int64_t m) {
    int lg = 0;
    while (((int64_t)1 << lg) < m)
        lg++;
    return lg;
}

/* e^{-2πi k/m} into w[0], w[1]. */
static void twiddle(double *w, int64_t k, int64_t m) {
    double ang = -2.0 * M_PI * (double)k / (double)m;
    w[0] = cos(ang);
    w[1] = sin(ang);
}

static void kplan_free(kplan *p) {
    if (!p)
        return;
    free(p->rev);
    free(p->tw);
    free(p->fine);
    free(p->coarse);
    kplan_free(p->sub1);
    kplan_free(p->sub2);
    free(p);
}

/* A kernel plan for length m (a power of two), or NULL when out of memory. */
static kplan *kplan_new(int64_t m) {
    kplan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->m = m;
    int lg = ilog2(m);
    if (m <= KERNEL_DIRECT_MAX) {
        p->rev = malloc(sizeof(uint32_t) * (size_t)m);
        p->tw = malloc(sizeof(double) * 2 * (size_t)(m + 2));
        if (!p->rev || !p->tw)
            goto oom;
        for (int64_t i = 0; i < m; i++) {
            uint32_t r = 0;
            for (int b = 0; b < lg; b++)
                r |= (uint32_t)((i >> b) & 1) << (lg - 1 - b);
            p->rev[i] = r;
        }
        double *t = p->tw;
        for (int64_t q = (lg & 1) ? 2 : 1; 4 * q <= m; q *= 4) {
            for (int64_t j = 0; j < q; j++, t += 4) {
                twiddle(t, j, 2 * q);
                twiddle(t + 2, j, 4 * q);
            }
        }
        return p;
    }
    p->n1 = (int64_t)1 << (lg / 2);
    p->n2 = m / p->n1;
    p->sub1 = kplan_new(p->n1);
    p->sub2 = kplan_new(p->n2);
    p->fine = malloc(sizeof(double) * 2 * (size_t)p->n1);
    p->coarse = malloc(sizeof(double) * 2 * (size_t)p->n2);
    if (!p->sub1 || !p->sub2 || !p->fine || !p->coarse)
        goto oom;
    for (int64_t b = 0; b < p->n1; b++)
        twiddle(p->fine + 2 * b, b, m);
    for (int64_t a = 0; a < p->n2; a++)
        twiddle(p->coarse + 2 * a, a, p->n2);
    return p;
oom:
    kplan_free(p);
    return NULL;
}

/* Direct in-place forward transform of x (m interleaved complex values). */
EM_TARGET_CLONES
static void kernel_direct(const kplan *p, double *restrict x) {
    int64_t m = p->m;
    const uint32_t *rev = p->rev;
    for (int64_t i = 0; i < m; i++) {
        int64_t r = rev[i];
        if (i < r) {
            double a = x[2 * i], b = x[2 * i + 1];
            x[2 * i] = x[2 * r];
            x[2 * i + 1] = x[2 * r + 1];
            x[2 * r] = a;
            x[2 * r + 1] = b;
        }
    }
    int64_t q = 1;
    if (ilog2(m) & 1) { /* odd number of levels: one radix-2 pass first */
        for (int64_t i = 0; i < 2 * m; i += 4) {
            double ar = x[i], ai = x[i + 1], br = x[i + 2], bi = x[i + 3];
            x[i] = ar + br;
            x[i + 1] = ai + bi;
            x[i + 2] = ar - br;
            x[i + 3] = ai - bi;
        }
        q = 2;
    }
    const double *tw = p->tw;
    for (; 4 * q <= m; q *= 4) {
        for (int64_t i = 0; i < m; i += 4 * q) {
            double *restrict x0 = x + 2 * i, *restrict x1 = x0 + 2 * q,
                             *restrict x2 = x1 + 2 * q,
                             *restrict x3 = x2 + 2 * q;
            for (int64_t j = 0; j < q; j++) {
                double t1r = tw[4 * j], t1i = tw[4 * j + 1];
                double t2r = tw[4 * j + 2], t2i = tw[4 * j + 3];
                double a0r = x0[2 * j], a0i = x0[2 * j + 1];
                double a1r = x1[2 * j], a1i = x1[2 * j + 1];
                double a2r = x2[2 * j], a2i = x2[2 * j + 1];
                double a3r = x3[2 * j], a3i = x3[2 * j + 1];
                /* level 2q: pairs (a0, a1) and (a2, a3), twiddle t1 */
                double u1r = a1r * t1r - a1i * t1i, u1i = a1r * t1i + a1i * t1r;
                double u3r = a3r * t1r - a3i * t1i, u3i = a3r * t1i + a3i * t1r;
                double b0r = a0r + u1r, b0i = a0i + u1i;
                double b1r = a0r - u1r, b1i = a0i - u1i;
                double b2r = a2r + u3r, b2i = a2i + u3i;
                double b3r = a2r - u3r, b3i = a2i - u3i;
                /* level 4q: pairs (b0, b2) with t2, (b1, b3) with -i·t2 */
                double v2r = b2r * t2r - b2i * t2i, v2i = b2r * t2i + b2i * t2r;
                double v3r = b3r * t2i + b3i * t2r, v3i = b3i * t2i - b3r * t2r;
                x0[2 * j] = b0r + v2r;
                x0[2 * j + 1] = b0i + v2i;
                x2[2 * j] = b0r - v2r;
                x2[2 * j + 1] = b0i - v2i;
                x1[2 * j] = b1r + v3r;
                x1[2 * j + 1] = b1i + v3i;
                x3[2 * j] = b1r - v3r;
                x3[2 * j + 1] = b1i - v3i;
            }
        }
        tw += 4 * q;
    }
}

static double *kernel_run(const kplan *p, double *x, double *scratch);

/* The four-step passes share one job; a pass that cannot get its scratch
 * sets oom and the caller reports it. */
typedef struct fs_job {
    const kplan *p;
    double *x; /* the data, n1 × n2 row-major */
    double *y; /* the transposed result, n2 × n1 */
    atomic_bool oom;
} fs_job;

/* Columns blocks [begin, end) of COLS columns: gather, transform, twiddle,
 * scatter back in place. */
static void fs_cols(void *ctx, int64_t begin, int64_t end) {
    fs_job *j = ctx;
    const kplan *p = j->p;
    int64_t n1 = p->n1, n2 = p->n2;
    int lg1 = ilog2(n1);
    double *buf = malloc(sizeof(double) * 2 * (size_t)(COLS + 1) * (size_t)n1);
    if (!buf) {
        atomic_store(&j->oom, true);
        return;
    }
    double *scr = buf + 2 * COLS * n1, *x = j->x;
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t c0 = blk * COLS;
        for (int64_t j1 = 0; j1 < n1; j1++) {
            const double *src = x + 2 * (j1 * n2 + c0);
            for (int c = 0; c < COLS; c++) {
                buf[2 * (c * n1 + j1)] = src[2 * c];
                buf[2 * (c * n1 + j1) + 1] = src[2 * c + 1];
            }
        }
        for (int c = 0; c < COLS; c++) {
            double *col = buf + 2 * c * n1;
            double *r = kernel_run(p->sub1, col, scr);
            if (!r) {
                atomic_store(&j->oom, true);
                free(buf);
                return;
            }
            if (r != col)
                memcpy(col, r, sizeof(double) * 2 * (size_t)n1);
        }
        for (int64_t k1 = 0; k1 < n1; k1++) {
            double *dst = x + 2 * (k1 * n2 + c0);
            for (int c = 0; c < COLS; c++) {
                int64_t e = (c0 + c) * k1; /* < m */
                const double *wc = p->coarse + 2 * (e >> lg1);
                const double *wf = p->fine + 2 * (e & (n1 - 1));
                double wr = wc[0] * wf[0] - wc[1] * wf[1];
                double wi = wc[0] * wf[1] + wc[1] * wf[0];
                double vr = buf[2 * (c * n1 + k1)],
                       vi = buf[2 * (c * n1 + k1) + 1];
                dst[2 * c] = vr * wr - vi * wi;
                dst[2 * c + 1] = vr * wi + vi * wr;
            }
        }
    }
    free(buf);
}

/* Rows [begin, end) transformed in place. */
static void fs_rows(void *ctx, int64_t begin, int64_t end) {
    fs_job *j = ctx;
    const kplan *p = j->p;
    int64_t n2 = p->n2;
    double *scr = NULL;
    if (!p->sub2->rev && p->sub2->n1 != p->sub2->n2) { /* it needs scratch */
        scr = malloc(sizeof(double) * 2 * (size_t)n2);
        if (!scr) {
            atomic_store(&j->oom, true);
            return;
        }
    }
    for (int64_t k1 = begin; k1 < end; k1++) {
        double *row = j->x + 2 * k1 * n2;
        double *r = kernel_run(p->sub2, row, scr);
        if (!r) {
            atomic_store(&j->oom, true);
            break;
        }
        if (r != row)
            memcpy(row, r, sizeof(double) * 2 * (size_t)n2);
    }
    free(scr);
}

/* Tile edge of the transposes: 16 complex doubles are four cache lines. */
#define TILE 16

/* y[k2][k1] = x[k1][k2] for the k2 tiles [begin, end). */
static void fs_transpose(void *ctx, int64_t begin, int64_t end) {
    fs_job *j = ctx;
    int64_t n1 = j->p->n1, n2 = j->p->n2;
    const double *x = j->x;
    double *y = j->y;
    for (int64_t t2 = begin * TILE; t2 < end * TILE; t2 += TILE)
        for (int64_t t1 = 0; t1 < n1; t1 += TILE)
            for (int64_t k2 = t2; k2 < t2 + TILE; k2++)
                for (int64_t k1 = t1; k1 < t1 + TILE; k1++) {
                    y[2 * (k2 * n1 + k1)] = x[2 * (k1 * n2 + k2)];
                    y[2 * (k2 * n1 + k1) + 1] = x[2 * (k1 * n2 + k2) + 1];
                }
}

/* In-place transpose of the square x (n1 == n2), tile rows [begin, end):
 * tile row b swaps its tiles right of the diagonal with their mirror
 * images. Square lengths (even log2 m) need no scratch row this way. */
static void fs_transpose_square(void *ctx, int64_t begin, int64_t end) {
    fs_job *j = ctx;
    int64_t n = j->p->n1;
    double *x = j->x;
    for (int64_t b = begin; b < end; b++)
        for (int64_t c = b; c < n / TILE; c++)
            for (int64_t r = b * TILE; r < (b + 1) * TILE; r++)
                for (int64_t k = (b == c ? r + 1 : c * TILE);
                     k < (c + 1) * TILE; k++) {
                    double *u = x + 2 * (r * n + k), *v = x + 2 * (k * n + r);
                    double ur = u[0], ui = u[1];
                    u[0] = v[0];
                    u[1] = v[1];
                    v[0] = ur;
                    v[1] = ui;
                }
}

/* Forward transform of x (p->m interleaved complex values). The result is
 * in x (direct or square four-step) or in scratch (other four-step: p->m
 * values; x is clobbered); the pointer to it is returned, or NULL when out
 * of memory. */
static double *kernel_run(const kplan *p, double *x, double *scratch) {
    if (p->rev) {
        kernel_direct(p, x);
        return x;
    }
    fs_job j = {.p = p, .x = x, .y = scratch};
    atomic_init(&j.oom, false);
    em__parallel_for(p->n2 / COLS, 1, fs_cols, &j);
    if (!atomic_load(&j.oom))
        em__parallel_for(p->n1, 1, fs_rows, &j);
    if (atomic_load(&j.oom))
        return NULL;
    if (p->n1 == p->n2) {
        em__parallel_for(p->n1 / TILE, 1, fs_transpose_square, &j);
        return x;
    }
    em__parallel_for(p->n2 / TILE, 1, fs_transpose, &j);
    return scratch;
}

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct fft_plan {
    int64_t n;     /* transform length */
    bool pow2;     /* n is a power of two: the kernel directly */
    int64_t m;     /* kernel length actually run: n, or Bluestein's m */
    kplan *k;      /* the length-m kernel */
    double *chirp; /* Bluestein: w_k, k < n (interleaved re, im) */
    double *bfft;  /* Bluestein: FFT_m of the conj(w) sequence */
} fft_plan;

static void plan_free(fft_plan *p) {
    kplan_free(p->k);
    free(p->chirp);
    free(p->bfft);
}

/* Whether the length-m kernel needs an m-entry scratch row. */
static bool needs_scratch(const fft_plan *p) {
    return p->k->rev == NULL && p->k->n1 != p->k->n2;
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
    double *scratch = NULL;
    p->k = kplan_new(m);
    if (!p->k)
        goto oom;
    if (p->pow2)
        return EM_OK;
    p->chirp = malloc(sizeof(double) * 2 * (size_t)n);
    p->bfft = calloc(2 * (size_t)m, sizeof(double));
    if (needs_scratch(p))
        scratch = malloc(sizeof(double) * 2 * (size_t)m);
    if (!p->chirp || !p->bfft || (needs_scratch(p) && !scratch))
        goto oom;
    uint64_t two_n = 2 * (uint64_t)n;
    for (int64_t k = 0; k < n; k++) {
        uint64_t k2 = (uint64_t)k % two_n;
        k2 = (unsigned __int128)k2 * k2 % two_n;
        double ang = -M_PI * (double)k2 / (double)n;
        p->chirp[2 * k] = cos(ang);
        p->chirp[2 * k + 1] = sin(ang);
    }
    double *b = p->bfft;
    b[0] = p->chirp[0];
    b[1] = -p->chirp[1];
    for (int64_t k = 1; k < n; k++) {
        b[2 * k] = b[2 * (m - k)] = p->chirp[2 * k];
        b[2 * k + 1] = b[2 * (m - k) + 1] = -p->chirp[2 * k + 1];
    }
    double *r = kernel_run(p->k, b, scratch);
    if (!r)
        goto oom;
    if (r != b)
        memcpy(b, r, sizeof(double) * 2 * (size_t)m);
    free(scratch);
    return EM_OK;
oom:
    free(scratch);
    plan_free(p);
    memset(p, 0, sizeof *p);
    return em__fail(EM_ERR_OOM, "fft: out of memory for a plan of length %lld",
                    (long long)n);
}

/* Forward transform of x (n interleaved complex values); work has m
 * entries (Bluestein only) and scratch m entries (when needs_scratch).
 * Returns where the result is (x or scratch), or NULL when out of memory. */
static double *fft_forward(const fft_plan *p, double *restrict x,
                           double *restrict work, double *restrict scratch) {
    if (p->pow2)
        return kernel_run(p->k, x, scratch);
    int64_t n = p->n, m = p->m;
    const double *c = p->chirp, *b = p->bfft;
    for (int64_t k = 0; k < n; k++) {
        double xr = x[2 * k], xi = x[2 * k + 1];
        work[2 * k] = xr * c[2 * k] - xi * c[2 * k + 1];
        work[2 * k + 1] = xr * c[2 * k + 1] + xi * c[2 * k];
    }
    memset(work + 2 * n, 0, sizeof(double) * 2 * (size_t)(m - n));
    double *r = kernel_run(p->k, work, scratch);
    if (!r)
        return NULL;
    /* multiply, then the inverse through conj(FFT(conj(.))) */
    for (int64_t k = 0; k < m; k++) {
        double vr = r[2 * k], vi = r[2 * k + 1];
        r[2 * k] = vr * b[2 * k] - vi * b[2 * k + 1];
        r[2 * k + 1] = -(vr * b[2 * k + 1] + vi * b[2 * k]);
    }
    r = kernel_run(p->k, r, r == work ? scratch : work);
    if (!r)
        return NULL;
    double scale = 1.0 / (double)m;
    for (int64_t k = 0; k < n; k++) {
        /* chirp · conj(r) · scale */
        double vr = r[2 * k], vi = -r[2 * k + 1];
        x[2 * k] = (c[2 * k] * vr - c[2 * k + 1] * vi) * scale;
        x[2 * k + 1] = (c[2 * k] * vi + c[2 * k + 1] * vr) * scale;
    }
    return x;
}

/* ------------------------------------------------------------------------ */
/* Rows                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct fft_job {
    const fft_plan *plan;
    em_fft_mode mode;
    em_dtype in_dtype, out_dtype;
    const char *in; /* element 0 of the input */
    char *out;      /* element 0 of the output */
    int64_t in_len, in_stride, out_len, out_stride;
    int nouter;
    int64_t oshape[EM_MAX_NDIM];
    int64_t istr[EM_MAX_NDIM];
    int64_t ostr[EM_MAX_NDIM];
    double eps;
    atomic_bool oom;
} fft_job;

/* The row (cut or zero padded to nload) as interleaved re, im doubles. */
static void load_row(const fft_job *j, const char *src, double *buf,
                     int64_t nload) {
    int64_t c = j->in_len < nload ? j->in_len : nload;
    int64_t s = j->in_stride;
    switch (j->in_dtype) {
    case EM_F32:
        for (int64_t k = 0; k < c; k++) {
            buf[2 * k] = ((const float *)src)[k * s];
            buf[2 * k + 1] = 0;
        }
        break;
    case EM_F64:
        for (int64_t k = 0; k < c; k++) {
            buf[2 * k] = ((const double *)src)[k * s];
            buf[2 * k + 1] = 0;
        }
        break;
    case EM_C64:
        for (int64_t k = 0; k < c; k++) {
            em_c64_t v = ((const em_c64_t *)src)[k * s];
            buf[2 * k] = crealf(v);
            buf[2 * k + 1] = cimagf(v);
        }
        break;
    default:
        for (int64_t k = 0; k < c; k++) {
            em_c128_t v = ((const em_c128_t *)src)[k * s];
            buf[2 * k] = creal(v);
            buf[2 * k + 1] = cimag(v);
        }
        break;
    }
    memset(buf + 2 * c, 0, sizeof(double) * 2 * (size_t)(nload - c));
}

/* x, or +0.0 when |x| < eps (adding 0.0 also turns -0.0 into +0.0). */
static inline double clean(double x, double eps) {
    return fabs(x) < eps ? 0.0 : x + 0.0;
}

static void store_row(const fft_job *j, char *dst, const double *buf) {
    int64_t c = j->out_len, s = j->out_stride;
    double eps = j->eps;
    switch (j->out_dtype) {
    case EM_F32:
        for (int64_t k = 0; k < c; k++)
            ((float *)dst)[k * s] = (float)clean(buf[2 * k], eps);
        break;
    case EM_F64:
        for (int64_t k = 0; k < c; k++)
            ((double *)dst)[k * s] = clean(buf[2 * k], eps);
        break;
    case EM_C64:
        for (int64_t k = 0; k < c; k++)
            ((em_c64_t *)dst)[k * s] =
                em_make_c64((float)clean(buf[2 * k], eps),
                            (float)clean(buf[2 * k + 1], eps));
        break;
    default:
        for (int64_t k = 0; k < c; k++)
            ((em_c128_t *)dst)[k * s] = em_make_c128(
                clean(buf[2 * k], eps), clean(buf[2 * k + 1], eps));
        break;
    }
}

static void fft_rows(void *ctx, int64_t begin, int64_t end) {
    fft_job *j = ctx;
    const fft_plan *p = j->plan;
    int64_t n = p->n, m = p->m;
    size_t len = (size_t)n + (p->pow2 ? 0 : (size_t)m) +
                 (needs_scratch(p) ? (size_t)m : 0);
    double *buf = malloc(sizeof(double) * 2 * len);
    if (!buf) {
        atomic_store(&j->oom, true);
        return;
    }
    double *work = buf + 2 * n;
    double *scratch = needs_scratch(p) ? work + (p->pow2 ? 0 : 2 * m) : NULL;
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
            for (int64_t k = h; k < n; k++) {
                buf[2 * k] = buf[2 * (n - k)];
                buf[2 * k + 1] = -buf[2 * (n - k) + 1];
            }
        } else {
            load_row(j, j->in + ioff * (int64_t)isz, buf, n);
        }
        if (inverse)
            for (int64_t k = 0; k < n; k++)
                buf[2 * k + 1] = -buf[2 * k + 1];
        double *res = fft_forward(p, buf, work, scratch);
        if (!res) {
            atomic_store(&j->oom, true);
            break;
        }
        if (inverse) {
            double scale = 1.0 / (double)n;
            for (int64_t k = 0; k < n; k++) {
                res[2 * k] *= scale;
                res[2 * k + 1] *= -scale;
            }
        }
        store_row(j, j->out + ooff * (int64_t)osz, res);
    }
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* The op                                                                    */
/* ------------------------------------------------------------------------ */

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

static const em_prim fft_prim = {"fft", fft_eval, NULL, em__gpu_fft_eval};

em_status em_fft(em_array *a, int axis, int64_t n, em_fft_mode mode, double eps,
                 em_array **out) {
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
    fft_params pr = {.axis = ax, .n = n, .mode = mode, .eps = eps};
    return em__node_new_params(&fft_prim, odt, shape, a->ndim, &a, 1, &pr,
                               sizeof pr, out);
}
