/*
 * linalg.c — dense linear algebra over LAPACKE (include/emily_linalg.h).
 *
 * Each op builds one node whose buffer holds, per matrix of the batch axes,
 * everything the factorization produces, contiguous: [q | r] for qr,
 * [p | l | u] for lu, [w | v] for eigh, [u | s | vt] for svd, or the single
 * result. Multi-output ops then return views into that node (strides that
 * step over the other parts), so the factorization runs once however many
 * of its outputs are read.
 *
 * Evaluation copies each input to row-major when needed, then for every
 * matrix runs the dtype's kernel: copy to a scratch, call LAPACKE in
 * row-major layout, write the parts. The kernels are written once
 * (DEFINE_LINALG) and instantiated for the four LAPACK types through the
 * LINALG_DTYPES table. A kernel returns 0, 1 for a value failure (singular,
 * not positive definite: reported as EM_ERR_ARGUMENT) or -1 when out of
 * memory. LAPACKE's NaN check makes inputs holding NaN give NaN results.
 */
#include "internal.h"

#include "copy.h"
#include "emily_linalg.h"
#include "linalg_params.h"

#include <complex.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

static const char *const op_names[] = {
    "cholesky",         "qr",    "lu",          "eigh",  "svd",
    "triangular_solve", "solve", "determinant", "invert"};


/* X(sfx, dtype, T, R, lapack prefix, hermitian eigensolver, Q builder, complex) */
#define LINALG_DTYPES(X)                                                       \
    X(f32, EM_F32, float, float, s, syevd, orgqr, 0)                           \
    X(f64, EM_F64, double, double, d, syevd, orgqr, 0)                         \
    X(c64, EM_C64, lapack_complex_float, float, c, heevd, ungqr, 1)            \
    X(c128, EM_C128, lapack_complex_double, double, z, heevd, ungqr, 1)

/* memcpy that allows empty copies from NULL (0x0 matrices have no data). */
static inline void cpy(void *dst, const void *src, size_t n) {
    if (n)
        memcpy(dst, src, n);
}

/*
 * Nx's QR convention (Nx.LinAlg.QR, its default composition): its real
 * Householder step maps the pivot column x to +|x|·e_j, except when there
 * is nothing below the pivot (then the step is the identity and r_jj keeps
 * the pivot's sign); its complex step always maps x to -e^(i·arg x_j)·|x|·e_j,
 * except for the last column of a square matrix, which it leaves alone.
 * LAPACK's geqrf instead makes r_jj = beta = -sign(Re alpha)·|x| (real),
 * with tau_j = 0 when it reflects nothing, and tau_j = (beta - alpha)/beta
 * otherwise: so the pivot alpha = beta·(1 - tau_j) is recovered, and the
 * unit factor d taking beta to Nx's r_jj is:
 *   real: -1 when tau_j != 0 and beta < 0, else 1;
 *   complex, step taken: -(alpha/|alpha|)·|beta|/beta (alpha = 0: phase 0);
 *   complex, last column of a square matrix: alpha/beta = 1 - tau_j.
 * This reproduces Nx's factors whenever both run the same reflections: for
 * complex input, pivots whose phase each reflection agrees on; not where
 * Nx's different choice of reflector earlier changes a later column (its
 * real step reflects towards +|x| where LAPACK reflects towards -|x|, so a
 * later column may have nothing below its pivot in one and not the
 * other). Evaluated in double complex for all four types (the result is
 * converted back, the imaginary part dropped for real ones).
 */
static double _Complex qr_unit(double _Complex diag, double _Complex tau,
                               bool cplx, bool processed) {
    double beta = creal(diag);
    if (!cplx)
        return tau != 0 && beta < 0 ? -1 : 1;
    if (beta == 0) /* a zero column: alpha = 0 too, nothing to turn */
        return 1;
    double _Complex alpha = beta * (1 - tau);
    if (!processed)
        return alpha / beta;
    double mag = cabs(alpha);
    double _Complex unit = mag == 0 ? 1 : alpha / mag;
    return -unit * (fabs(beta) / beta);
}

#define DEFINE_LINALG(sfx, T, R, P, HEEVD, ORGQR, CPLX)                              \
    /* NaN in every element (both parts for complex). */                             \
    static void nan_fill_##sfx(T *out, int64_t count) {                              \
        R parts[2] = {NAN, NAN};                                                     \
        T v;                                                                         \
        cpy(&v, parts, sizeof v);                                                    \
        for (int64_t i = 0; i < count; i++)                                          \
            out[i] = v;                                                              \
    }                                                                                \
                                                                                     \
    static int chol_##sfx(const lparams *p, const T *a, T *out) {                    \
        lapack_int n = (lapack_int)p->n;                                             \
        cpy(out, a, sizeof(T) * (size_t)(n * n));                                    \
        if (n == 0)                                                                  \
            return 0;                                                                \
        lapack_int info =                                                            \
            LAPACKE_##P##potrf(LAPACK_ROW_MAJOR, 'L', n, out, n);                    \
        if (info < 0) {                                                              \
            nan_fill_##sfx(out, (int64_t)n *n);                                      \
            return 0;                                                                \
        }                                                                            \
        if (info > 0)                                                                \
            return 1;                                                                \
        for (lapack_int i = 0; i < n; i++)                                           \
            for (lapack_int j = i + 1; j < n; j++)                                   \
                out[i * n + j] = 0;                                                  \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    static int qr_##sfx(const lparams *p, const T *a, T *out) {                      \
        int64_t m = p->m, n = p->n, k = m < n ? m : n;                               \
        int64_t qc = p->flag ? m : k, rr = p->flag ? m : k;                          \
        T *q = out, *r = out + m * qc;                                               \
        memset(out, 0, sizeof(T) * (size_t)(m * qc + rr * n));                       \
        if (m == 0)                                                                  \
            return 0;                                                                \
        T *w = malloc(sizeof(T) * (size_t)(m * (n > qc ? n : qc) + k + 1));          \
        if (!w)                                                                      \
            return -1;                                                               \
        T *tau = w + m * (n > qc ? n : qc);                                          \
        cpy(w, a, sizeof(T) * (size_t)(m * n));                                      \
        lapack_int info = 0;                                                         \
        if (k > 0)                                                                   \
            info = LAPACKE_##P##geqrf(LAPACK_ROW_MAJOR, (lapack_int)m,               \
                                      (lapack_int)n, w,                              \
                                      (lapack_int)(n > 0 ? n : 1), tau);             \
        if (info != 0) {                                                             \
            nan_fill_##sfx(out, m *qc + rr * n);                                     \
            free(w);                                                                 \
            return 0;                                                                \
        }                                                                            \
        for (int64_t i = 0; i < k; i++)                                              \
            for (int64_t j = i; j < n; j++)                                          \
                r[i * n + j] = w[i * n + j];                                         \
        for (int64_t i = 0; i < m; i++)                                              \
            for (int64_t j = 0; j < qc; j++)                                         \
                q[i * qc + j] = j < k ? w[i * n + j] : 0;                            \
        if (qc > 0)                                                                  \
            info = LAPACKE_##P##ORGQR(LAPACK_ROW_MAJOR, (lapack_int)m,               \
                                      (lapack_int)qc, (lapack_int)k, q,              \
                                      (lapack_int)qc, tau);                          \
        if (info != 0) {                                                             \
            nan_fill_##sfx(out, m *qc + rr * n);                                     \
            free(w);                                                                 \
            return 0;                                                                \
        }                                                                            \
        /* Nx's convention (qr_unit): row j of r times d, column j of q              \
         * times conj(d), which keeps q·r = a. */                                    \
        for (int64_t j = 0; j < k; j++) {                                            \
            T d = (T)qr_unit(r[j * n + j], tau[j], CPLX,                             \
                             !(m == n && j == n - 1));                               \
            if (d == 1)                                                              \
                continue;                                                            \
            T dc = (T)conj(d);                                                       \
            for (int64_t i = 0; i < m; i++) /* + 0: no -0.0 */                       \
                q[i * qc + j] = q[i * qc + j] * dc + 0;                              \
            for (int64_t c = j; c < n; c++)                                          \
                r[j * n + c] = r[j * n + c] * d + 0;                                 \
        }                                                                            \
        free(w);                                                                     \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    /* getrf on a copy of a in w (n*n) with pivots ipiv; returns LAPACK's info. */   \
    static lapack_int getrf_##sfx(int64_t n, const T *a, T *w,                       \
                                  lapack_int *ipiv) {                                \
        cpy(w, a, sizeof(T) * (size_t)(n * n));                                      \
        if (n == 0)                                                                  \
            return 0;                                                                \
        return LAPACKE_##P##getrf(LAPACK_ROW_MAJOR, (lapack_int)n,                   \
                                  (lapack_int)n, w, (lapack_int)n, ipiv);            \
    }                                                                                \
                                                                                     \
    static int lu_##sfx(const lparams *p, const T *a, T *out) {                      \
        int64_t n = p->n;                                                            \
        T *P = out, *L = out + n * n, *U = out + 2 * n * n;                          \
        T *w = malloc(sizeof(T) * (size_t)(n * n + 1));                              \
        lapack_int *ipiv = malloc(sizeof(lapack_int) * (size_t)(n + 1));             \
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n + 1));                   \
        if (!w || !ipiv || !perm) {                                                  \
            free(w), free(ipiv), free(perm);                                         \
            return -1;                                                               \
        }                                                                            \
        lapack_int info = getrf_##sfx(n, a, w, ipiv);                                \
        memset(out, 0, sizeof(T) * (size_t)(3 * n * n));                             \
        if (info < 0) {                                                              \
            nan_fill_##sfx(out, 3 * n * n);                                          \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++)                                          \
                perm[i] = i;                                                         \
            for (int64_t i = 0; i < n; i++) {                                        \
                int64_t t = perm[i], s = ipiv[i] - 1;                                \
                perm[i] = perm[s];                                                   \
                perm[s] = t;                                                         \
            }                                                                        \
            for (int64_t i = 0; i < n; i++) {                                        \
                P[perm[i] * n + i] = 1;                                              \
                for (int64_t j = 0; j < n; j++) {                                    \
                    if (j < i)                                                       \
                        L[i * n + j] = w[i * n + j];                                 \
                    else                                                             \
                        U[i * n + j] = w[i * n + j];                                 \
                }                                                                    \
                L[i * n + i] = 1;                                                    \
            }                                                                        \
        }                                                                            \
        free(w), free(ipiv), free(perm);                                             \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    static int det_##sfx(const lparams *p, const T *a, T *out) {                     \
        int64_t n = p->n;                                                            \
        T *w = malloc(sizeof(T) * (size_t)(n * n + 1));                              \
        lapack_int *ipiv = malloc(sizeof(lapack_int) * (size_t)(n + 1));             \
        if (!w || !ipiv) {                                                           \
            free(w), free(ipiv);                                                     \
            return -1;                                                               \
        }                                                                            \
        lapack_int info = getrf_##sfx(n, a, w, ipiv);                                \
        if (info < 0) {                                                              \
            nan_fill_##sfx(out, 1);                                                  \
        } else {                                                                     \
            T d = 1;                                                                 \
            for (int64_t i = 0; i < n; i++) {                                        \
                d *= w[i * n + i];                                                   \
                if (ipiv[i] != i + 1)                                                \
                    d = -d;                                                          \
            }                                                                        \
            out[0] = d;                                                              \
        }                                                                            \
        free(w), free(ipiv);                                                         \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    static int inv_##sfx(const lparams *p, const T *a, T *out) {                     \
        int64_t n = p->n;                                                            \
        lapack_int *ipiv = malloc(sizeof(lapack_int) * (size_t)(n + 1));             \
        if (!ipiv)                                                                   \
            return -1;                                                               \
        lapack_int info = getrf_##sfx(n, a, out, ipiv);                              \
        if (info == 0 && n > 0)                                                      \
            info = LAPACKE_##P##getri(LAPACK_ROW_MAJOR, (lapack_int)n, out,          \
                                      (lapack_int)n, ipiv);                          \
        if (info != 0)                                                               \
            nan_fill_##sfx(out, n *n);                                               \
        free(ipiv);                                                                  \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    static int solve_##sfx(const lparams *p, const T *a, const T *b, T *out) {       \
        int64_t n = p->n, k = p->k;                                                  \
        cpy(out, b, sizeof(T) * (size_t)(n * k));                                    \
        if (n == 0 || k == 0)                                                        \
            return 0;                                                                \
        T *w = malloc(sizeof(T) * (size_t)(n * n));                                  \
        lapack_int *ipiv = malloc(sizeof(lapack_int) * (size_t)n);                   \
        if (!w || !ipiv) {                                                           \
            free(w), free(ipiv);                                                     \
            return -1;                                                               \
        }                                                                            \
        cpy(w, a, sizeof(T) * (size_t)(n * n));                                      \
        lapack_int info =                                                            \
            LAPACKE_##P##gesv(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)k,        \
                              w, (lapack_int)n, ipiv, out, (lapack_int)k);           \
        free(w), free(ipiv);                                                         \
        if (info < 0)                                                                \
            nan_fill_##sfx(out, n *k);                                               \
        return info > 0 ? 1 : 0;                                                     \
    }                                                                                \
                                                                                     \
    /* left: op(A) X = B with B [n, k]; right: X op(A) = B with B [k, n], solved   \
 * as op(A)ᵀ Xᵀ = Bᵀ. */ \
    static int trsolve_##sfx(const lparams *p, const T *a, const T *b,               \
                             T *out) {                                               \
        int64_t n = p->n, k = p->k;                                                  \
        if (n == 0 || k == 0) {                                                      \
            cpy(out, b, sizeof(T) * (size_t)(n * k));                                \
            return 0;                                                                \
        }                                                                            \
        T *x = out;                                                                  \
        T *bt = NULL;                                                                \
        bool trans = p->trans;                                                       \
        if (p->left) {                                                               \
            cpy(out, b, sizeof(T) * (size_t)(n * k));                                \
        } else {                                                                     \
            if (!(bt = malloc(sizeof(T) * (size_t)(n * k))))                         \
                return -1;                                                           \
            for (int64_t i = 0; i < k; i++)                                          \
                for (int64_t j = 0; j < n; j++)                                      \
                    bt[j * k + i] = b[i * n + j];                                    \
            x = bt;                                                                  \
            trans = !trans;                                                          \
        }                                                                            \
        lapack_int info = LAPACKE_##P##trtrs(                                        \
            LAPACK_ROW_MAJOR, p->lower ? 'L' : 'U', trans ? 'T' : 'N', 'N',          \
            (lapack_int)n, (lapack_int)k, a, (lapack_int)n, x, (lapack_int)k);       \
        if (bt) {                                                                    \
            for (int64_t i = 0; i < k; i++)                                          \
                for (int64_t j = 0; j < n; j++)                                      \
                    out[i * n + j] = bt[j * k + i];                                  \
            free(bt);                                                                \
        }                                                                            \
        if (info < 0)                                                                \
            nan_fill_##sfx(out, n *k);                                               \
        return info > 0 ? 1 : 0;                                                     \
    }                                                                                \
                                                                                     \
    static int eigh_##sfx(const lparams *p, const T *a, T *out) {                    \
        int64_t n = p->n;                                                            \
        T *wv = out, *v = out + n;                                                   \
        cpy(v, a, sizeof(T) * (size_t)(n * n));                                      \
        if (n == 0)                                                                  \
            return 0;                                                                \
        R *w = malloc(sizeof(R) * (size_t)n);                                        \
        if (!w)                                                                      \
            return -1;                                                               \
        lapack_int info = LAPACKE_##P##HEEVD(                                        \
            LAPACK_ROW_MAJOR, 'V', 'L', (lapack_int)n, v, (lapack_int)n, w);         \
        if (info != 0) {                                                             \
            nan_fill_##sfx(out, n + n * n);                                          \
        } else {                                                                     \
            for (int64_t i = 0; i < n; i++)                                          \
                wv[i] = w[i];                                                        \
        }                                                                            \
        free(w);                                                                     \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    static int svd_##sfx(const lparams *p, const T *a, T *out) {                     \
        int64_t m = p->m, n = p->n, k = m < n ? m : n;                               \
        int64_t uc = p->flag ? m : k, vr = p->flag ? n : k;                          \
        T *U = out, *S = out + m * uc, *VT = S + k;                                  \
        memset(out, 0, sizeof(T) * (size_t)(m * uc + k + vr * n));                   \
        if (k == 0) { /* no singular values: identity factors */                     \
            for (int64_t i = 0; i < m && i < uc; i++)                                \
                U[i * uc + i] = 1;                                                   \
            for (int64_t i = 0; i < vr && i < n; i++)                                \
                VT[i * n + i] = 1;                                                   \
            return 0;                                                                \
        }                                                                            \
        T *w = malloc(sizeof(T) * (size_t)(m * n));                                  \
        R *s = malloc(sizeof(R) * (size_t)k);                                        \
        if (!w || !s) {                                                              \
            free(w), free(s);                                                        \
            return -1;                                                               \
        }                                                                            \
        cpy(w, a, sizeof(T) * (size_t)(m * n));                                      \
        lapack_int info =                                                            \
            LAPACKE_##P##gesdd(LAPACK_ROW_MAJOR, p->flag ? 'A' : 'S',                \
                               (lapack_int)m, (lapack_int)n, w, (lapack_int)n,       \
                               s, U, (lapack_int)uc, VT, (lapack_int)n);             \
        if (info != 0) {                                                             \
            nan_fill_##sfx(out, m *uc + k + vr * n);                                 \
        } else {                                                                     \
            for (int64_t i = 0; i < k; i++)                                          \
                S[i] = s[i];                                                         \
        }                                                                            \
        free(w), free(s);                                                            \
        return 0;                                                                    \
    }                                                                                \
                                                                                     \
    static int run_##sfx(const lparams *p, const void *a, const void *b,             \
                         void *out) {                                                \
        switch (p->op) {                                                             \
        case OP_CHOL:                                                                \
            return chol_##sfx(p, a, out);                                            \
        case OP_QR:                                                                  \
            return qr_##sfx(p, a, out);                                              \
        case OP_LU:                                                                  \
            return lu_##sfx(p, a, out);                                              \
        case OP_EIGH:                                                                \
            return eigh_##sfx(p, a, out);                                            \
        case OP_SVD:                                                                 \
            return svd_##sfx(p, a, out);                                             \
        case OP_TRSOLVE:                                                             \
            return trsolve_##sfx(p, a, b, out);                                      \
        case OP_SOLVE:                                                               \
            return solve_##sfx(p, a, b, out);                                        \
        case OP_DET:                                                                 \
            return det_##sfx(p, a, out);                                             \
        case OP_INV:                                                                 \
            return inv_##sfx(p, a, out);                                             \
        }                                                                            \
        return 0;                                                                    \
    }

#define INSTANTIATE(sfx, E, T, R, P, HEEVD, ORGQR, CPLX)                       \
    DEFINE_LINALG(sfx, T, R, P, HEEVD, ORGQR, CPLX)
LINALG_DTYPES(INSTANTIATE)

typedef int (*lkernel)(const lparams *, const void *, const void *, void *);
#define REG(sfx, E, ...) [E] = run_##sfx,
static const lkernel kernels[EM_DTYPE_COUNT] = {LINALG_DTYPES(REG)};

/* ------------------------------------------------------------------------ */
/* Evaluation                                                                */
/* ------------------------------------------------------------------------ */

/* Row-major data of an evaluated input: its own buffer when contiguous, else
 * a malloc'ed copy stored in *owned. */
static const void *row_major(const em_array *a, void **owned) {
    *owned = NULL;
    if (a->size == 0)
        return NULL;
    if (a->row_contiguous)
        return em__data(a);
    void *copy = malloc((size_t)a->size * em_dtype_size(a->dtype));
    if (copy)
        em__copy_array(copy, a);
    *owned = copy;
    return copy;
}

em_status em__linalg_value_error(const lparams *p, int64_t i) {
    if (p->op == OP_CHOL)
        return em__fail(EM_ERR_ARGUMENT,
                        "cholesky: matrix %lld of the batch is not positive "
                        "definite",
                        (long long)i);
    return em__fail(EM_ERR_ARGUMENT,
                    "%s: can't solve for singular matrix (matrix %lld of the "
                    "batch)",
                    op_names[p->op], (long long)i);
}

/* Turns every -0.0 of a result into +0.0 (x + 0.0 leaves the rest as they
 * are). Which zeros LAPACK returns negative depends on the BLAS kernels the
 * CPU gets (OpenBLAS's SkylakeX set gives a -0.0 in the exact inverse of a
 * unit upper triangular integer matrix where its Haswell set gives +0.0),
 * and no result here gives the sign of a zero a meaning: cleaned, results
 * read the same on every CPU. Complex results are cleaned part by part. */
static void unsign_zeros(void *data, em_dtype dtype, int64_t count) {
    if (dtype == EM_F64 || dtype == EM_C128) {
        double *x = data;
        count *= dtype == EM_C128 ? 2 : 1;
        for (int64_t i = 0; i < count; i++)
            x[i] += 0.0;
    } else {
        float *x = data;
        count *= dtype == EM_C64 ? 2 : 1;
        for (int64_t i = 0; i < count; i++)
            x[i] += 0.0f;
    }
}

static em_status linalg_eval(em_array *node) {
    const lparams *p = node->params;
    em_array *a = node->inputs[0];
    em_array *b = node->ninputs > 1 ? node->inputs[1] : NULL;
    em_status st = em__alloc_output(node, NULL, 0);
    if (st != EM_OK || p->batch == 0)
        return st;
    void *own_a, *own_b = NULL;
    const char *da = row_major(a, &own_a);
    const char *db = b ? row_major(b, &own_b) : NULL;
    if ((a->size > 0 && !da) || (b && b->size > 0 && !db)) {
        free(own_a);
        free(own_b);
        return em__fail(EM_ERR_OOM, "%s: out of memory", op_names[p->op]);
    }
    size_t esz = em_dtype_size(node->dtype);
    int64_t a_per = p->m * p->n, b_per = p->n * p->k;
    char *out = em__data(node);
    lkernel run = kernels[node->dtype];
    st = EM_OK;
    for (int64_t i = 0; i < p->batch && st == EM_OK; i++) {
        int rc = run(p, da ? da + (size_t)(i * a_per) * esz : NULL,
                     db ? db + (size_t)(i * b_per) * esz : NULL,
                     out + (size_t)(i * p->per) * esz);
        if (rc < 0)
            st = em__fail(EM_ERR_OOM, "%s: out of memory", op_names[p->op]);
        else if (rc > 0)
            st = em__linalg_value_error(p, i);
    }
    if (st == EM_OK)
        unsign_zeros(out, node->dtype, p->batch * p->per);
    free(own_a);
    free(own_b);
    return st;
}

static const em_prim linalg_prim = {"linalg", linalg_eval, NULL,
                                     em__gpu_linalg_eval};

/* ------------------------------------------------------------------------ */
/* Building nodes                                                            */
/* ------------------------------------------------------------------------ */

static em_status check_input(lop op, em_array *a, bool square, bool real_only) {
    em_desc d;
    const char *name = op_names[op];
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", name);
    bool ok = a->dtype == EM_F32 || a->dtype == EM_F64 ||
              (!real_only && (a->dtype == EM_C64 || a->dtype == EM_C128));
    if (!ok)
        return em__fail(EM_ERR_ARGUMENT, "%s: expected an %s tensor, got %s",
                        name,
                        real_only ? "f32 or f64" : "f32, f64, c64 or c128",
                        em__describe(a, &d));
    if (a->ndim < 2)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: expected a tensor of rank >= 2 (a batch of "
                        "matrices), got %s",
                        name, em__describe(a, &d));
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    if (square && m != n)
        return em__fail(EM_ERR_ARGUMENT, "%s: expected square matrices, got %s",
                        name, em__describe(a, &d));
    if (m > INT_MAX / 2 || n > INT_MAX / 2)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: matrices too large for LAPACK: %s", name,
                        em__describe(a, &d));
    return EM_OK;
}

static void init_params(lparams *p, lop op, const em_array *a, int64_t per) {
    memset(p, 0, sizeof *p);
    p->op = op;
    p->m = a->shape[a->ndim - 2];
    p->n = a->shape[a->ndim - 1];
    p->batch = 1;
    for (int i = 0; i < a->ndim - 2; i++)
        p->batch *= a->shape[i];
    p->per = per;
}

/* A node with the batch axes of `a` followed by `tail` (ntail axes). */
static em_status make_node(const lparams *p, em_array *a, em_array *b,
                           const int64_t *tail, int ntail, em_array **out) {
    int64_t shape[EM_MAX_NDIM + 1];
    int nb = a->ndim - 2, nd = nb + ntail;
    if (nd > EM_MAX_NDIM)
        return em__fail(EM_ERR_ARGUMENT, "%s: result rank %d exceeds %d",
                        op_names[p->op], nd, EM_MAX_NDIM);
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)nb);
    if (ntail > 0)
        memcpy(shape + nb, tail, sizeof(int64_t) * (size_t)ntail);
    em_status st = em__check_shape(op_names[p->op], shape, nd, a->dtype, NULL);
    if (st != EM_OK)
        return st;
    em_array *inputs[2] = {a, b};
    return em__node_new_params(&linalg_prim, a->dtype, shape, nd, inputs,
                               b ? 2 : 1, p, sizeof *p, out);
}

static em_status part_eval(em_array *node) {
    em__share_buffer(node, node->inputs[0]);
    return EM_OK;
}
/* A view: the same on either device. */
static const em_prim part_prim = {"linalg_part", part_eval, NULL, part_eval};

/* A view of one part of a packed node: for every matrix of the batch, the
 * `rows` x `cols` (cols < 0: a vector of `rows`) block at element `offset`
 * of the matrix's `per` elements. */
static em_status make_part(em_array *pack, const lparams *p, int nb,
                           int64_t offset, int64_t rows, int64_t cols,
                           em_array **out) {
    int64_t shape[EM_MAX_NDIM], strides[EM_MAX_NDIM];
    int nd = nb + (cols < 0 ? 1 : 2);
    memcpy(shape, pack->shape, sizeof(int64_t) * (size_t)nb);
    int64_t stride = p->per;
    for (int i = nb - 1; i >= 0; i--) {
        strides[i] = stride;
        stride *= shape[i];
    }
    shape[nb] = rows;
    if (cols < 0) {
        strides[nb] = 1;
    } else {
        shape[nb + 1] = cols;
        strides[nb] = cols;
        strides[nb + 1] = 1;
    }
    em_array *node;
    em_status st =
        em__node_new(&part_prim, pack->dtype, shape, nd, &pack, 1, &node);
    if (st != EM_OK)
        return st;
    node->offset = node->size == 0 ? 0 : offset;
    node->row_contiguous = em__is_row_contiguous(node->shape, strides, nd);
    if (!node->row_contiguous)
        memcpy(node->strides, strides, sizeof(int64_t) * (size_t)nd);
    *out = node;
    return EM_OK;
}

/* Views `parts` (n of them, each {offset, rows, cols}) of the pack. */
static em_status split_pack(em_array *pack, const lparams *p, int nb,
                            const int64_t (*parts)[3], int n,
                            em_array **outs[]) {
    em_status st = EM_OK;
    for (int i = 0; i < n && st == EM_OK; i++)
        st = make_part(pack, p, nb, parts[i][0], parts[i][1], parts[i][2],
                       outs[i]);
    if (st != EM_OK)
        for (int i = 0; i < n; i++) {
            em_array_release(*outs[i]);
            *outs[i] = NULL;
        }
    em_array_release(pack);
    return st;
}

em_status em_cholesky(em_array *a, em_array **out) {
    if (out)
        *out = NULL;
    em_status st = check_input(OP_CHOL, a, true, false);
    if (st != EM_OK || !out)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "cholesky: NULL argument");
    lparams p;
    init_params(&p, OP_CHOL, a, a->shape[a->ndim - 1] * a->shape[a->ndim - 1]);
    return make_node(&p, a, NULL, a->shape + a->ndim - 2, 2, out);
}

em_status em_invert(em_array *a, em_array **out) {
    if (out)
        *out = NULL;
    em_status st = check_input(OP_INV, a, true, false);
    if (st != EM_OK || !out)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "invert: NULL argument");
    lparams p;
    init_params(&p, OP_INV, a, a->shape[a->ndim - 1] * a->shape[a->ndim - 1]);
    return make_node(&p, a, NULL, a->shape + a->ndim - 2, 2, out);
}

em_status em_determinant(em_array *a, em_array **out) {
    if (out)
        *out = NULL;
    em_status st = check_input(OP_DET, a, true, false);
    if (st != EM_OK || !out)
        return st ? st
                  : em__fail(EM_ERR_ARGUMENT, "determinant: NULL argument");
    lparams p;
    init_params(&p, OP_DET, a, 1);
    return make_node(&p, a, NULL, NULL, 0, out);
}

em_status em_qr(em_array *a, bool complete, em_array **q, em_array **r) {
    if (q)
        *q = NULL;
    if (r)
        *r = NULL;
    em_status st = check_input(OP_QR, a, false, false);
    if (st != EM_OK || !q || !r)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "qr: NULL argument");
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    int64_t k = m < n ? m : n, qc = complete ? m : k, rr = complete ? m : k;
    lparams p;
    init_params(&p, OP_QR, a, m * qc + rr * n);
    p.flag = complete;
    em_array *pack;
    if ((st = make_node(&p, a, NULL, &p.per, 1, &pack)) != EM_OK)
        return st;
    const int64_t parts[2][3] = {{0, m, qc}, {m * qc, rr, n}};
    em_array **outs[2] = {q, r};
    return split_pack(pack, &p, a->ndim - 2, parts, 2, outs);
}

em_status em_lu(em_array *a, em_array **pm, em_array **l, em_array **u) {
    if (pm)
        *pm = NULL;
    if (l)
        *l = NULL;
    if (u)
        *u = NULL;
    em_status st = check_input(OP_LU, a, true, false);
    if (st != EM_OK || !pm || !l || !u)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "lu: NULL argument");
    int64_t n = a->shape[a->ndim - 1];
    lparams p;
    init_params(&p, OP_LU, a, 3 * n * n);
    em_array *pack;
    if ((st = make_node(&p, a, NULL, &p.per, 1, &pack)) != EM_OK)
        return st;
    const int64_t parts[3][3] = {{0, n, n}, {n * n, n, n}, {2 * n * n, n, n}};
    em_array **outs[3] = {pm, l, u};
    return split_pack(pack, &p, a->ndim - 2, parts, 3, outs);
}

em_status em_eigh(em_array *a, em_array **w, em_array **v) {
    if (w)
        *w = NULL;
    if (v)
        *v = NULL;
    em_status st = check_input(OP_EIGH, a, true, false);
    if (st != EM_OK || !w || !v)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "eigh: NULL argument");
    int64_t n = a->shape[a->ndim - 1];
    lparams p;
    init_params(&p, OP_EIGH, a, n + n * n);
    em_array *pack;
    if ((st = make_node(&p, a, NULL, &p.per, 1, &pack)) != EM_OK)
        return st;
    const int64_t parts[2][3] = {{0, n, -1}, {n, n, n}};
    em_array **outs[2] = {w, v};
    return split_pack(pack, &p, a->ndim - 2, parts, 2, outs);
}

em_status em_svd(em_array *a, bool full, em_array **u, em_array **s,
                 em_array **vt) {
    if (u)
        *u = NULL;
    if (s)
        *s = NULL;
    if (vt)
        *vt = NULL;
    em_status st = check_input(OP_SVD, a, false, true);
    if (st != EM_OK || !u || !s || !vt)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "svd: NULL argument");
    int64_t m = a->shape[a->ndim - 2], n = a->shape[a->ndim - 1];
    int64_t k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
    lparams p;
    init_params(&p, OP_SVD, a, m * uc + k + vr * n);
    p.flag = full;
    em_array *pack;
    if ((st = make_node(&p, a, NULL, &p.per, 1, &pack)) != EM_OK)
        return st;
    const int64_t parts[3][3] = {
        {0, m, uc}, {m * uc, k, -1}, {m * uc + k, vr, n}};
    em_array **outs[3] = {u, s, vt};
    return split_pack(pack, &p, a->ndim - 2, parts, 3, outs);
}

/* Shared checks of solve and triangular_solve: b is [..., n, k] /
 * [..., k, n] (right side) or [..., n] with a's batch axes. */
static em_status check_rhs(lop op, em_array *a, em_array *b, bool left,
                           lparams *p) {
    em_desc da, db;
    const char *name = op_names[op];
    if (!b)
        return em__fail(EM_ERR_ARGUMENT, "%s: NULL argument", name);
    if (b->dtype != a->dtype)
        return em__fail(EM_ERR_ARGUMENT,
                        "%s: a and b must share a dtype, got %s and %s", name,
                        em__describe(a, &da), em__describe(b, &db));
    int nb = a->ndim - 2;
    int64_t n = a->shape[a->ndim - 1];
    bool vec = b->ndim == a->ndim - 1;
    bool ok = vec || b->ndim == a->ndim;
    for (int i = 0; ok && i < nb; i++)
        ok = b->shape[i] == a->shape[i];
    if (ok && vec)
        ok = b->shape[nb] == n;
    else if (ok)
        ok = b->shape[left ? nb : nb + 1] == n;
    if (!ok)
        return em__fail(
            EM_ERR_ARGUMENT,
            "%s: incompatible dimensions for a and b: %s and %s "
            "(b must be [..., n, k]%s or [..., n] with a's batch axes)",
            name, em__describe(a, &da), em__describe(b, &db),
            left ? "" : " for the right side: [..., k, n]");
    init_params(p, op, a, 0);
    p->k = vec ? 1 : b->shape[left ? nb + 1 : nb];
    if (p->k > INT_MAX / 2)
        return em__fail(EM_ERR_ARGUMENT, "%s: too many right-hand sides: %s",
                        name, em__describe(b, &db));
    p->per = n * p->k;
    return EM_OK;
}

em_status em_solve(em_array *a, em_array *b, em_array **out) {
    if (out)
        *out = NULL;
    em_status st = check_input(OP_SOLVE, a, true, false);
    if (st != EM_OK || !out)
        return st ? st : em__fail(EM_ERR_ARGUMENT, "solve: NULL argument");
    lparams p;
    if ((st = check_rhs(OP_SOLVE, a, b, true, &p)) != EM_OK)
        return st;
    p.left = true;
    return make_node(&p, a, b, b->shape + a->ndim - 2, b->ndim - a->ndim + 2,
                     out);
}

em_status em_triangular_solve(em_array *a, em_array *b, bool left_side,
                              bool lower, bool transpose, em_array **out) {
    if (out)
        *out = NULL;
    em_status st = check_input(OP_TRSOLVE, a, true, false);
    if (st != EM_OK || !out)
        return st ? st
                  : em__fail(EM_ERR_ARGUMENT,
                             "triangular_solve: NULL argument");
    lparams p;
    if ((st = check_rhs(OP_TRSOLVE, a, b, left_side, &p)) != EM_OK)
        return st;
    p.left = left_side;
    p.lower = lower;
    p.trans = transpose;
    return make_node(&p, a, b, b->shape + a->ndim - 2, b->ndim - a->ndim + 2,
                     out);
}
