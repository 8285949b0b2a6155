/*
 * test_linalg.c — em_fft and the linalg ops on the GPU against the CPU.
 *
 * fft: every mode and input dtype, lengths 1, odd, 64, 256 and 1000, rows
 * cut or zero padded to n, along a contiguous or a strided axis, from
 * contiguous, transposed and sliced inputs, a batch with two outer axes,
 * eps clean-up; ||gpu - cpu|| / ||cpu|| within a few log2(n) ulp of the
 * dtype (cuFFT computes in the input's precision, the CPU in double).
 *
 * linalg: f32, f64, c64, c128 (svd: f32, f64), sizes 1, 7, 64, 256 and a
 * batch with two batch axes, contiguous and transposed inputs. Unique
 * results (cholesky, solve, triangular_solve, invert, determinant,
 * eigenvalues, singular values) against the CPU by norm; factors whose
 * signs or phases are free (qr, lu, eigenvectors, singular vectors) by
 * their invariants, computed on the host in double: Q R = A, QᴴQ = I, R
 * upper; P L U = A, L unit lower, U upper, P a permutation; V diag(w) Vᴴ
 * = A, VᴴV = I; U diag(S) Vt = A, UᴴU = I, Vt Vtᴴ = I. Value failures: the
 * CPU's errors (cholesky of a matrix that is not positive definite, solve
 * and triangular_solve of a singular one), NaN for invert of a singular
 * matrix, 0 for its determinant, NaN results for NaN inputs.
 */
#include "cuda_test.h"
#include "emily_fft.h"
#include "emily_linalg.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef double complex cplx;

static double ulp_of(em_dtype d) {
    return d == EM_F32 || d == EM_C64 ? 1.19e-7 : 2.22e-16;
}

/* ---- fft ----------------------------------------------------------------- */

static const char *const fft_modes[] = {"fft", "ifft", "rfft", "irfft"};

/* One transform of `in` (a CPU array) and its copy on the GPU, as the view
 * `l` (2-D inputs) along `axis`. */
static void fft_case(em_array *in, enum layout l, int axis, int64_t n,
                     em_fft_mode mode, double eps, const char *what) {
    em_array *vc = view_on(in, EM_DEVICE_CPU, l), *vg = view_on(in, GPU, l);
    em_array *rc = NULL, *rg = NULL;
    em_status st = em_fft(vc, axis, n, mode, eps, &rc);
    die_on(st, what);
    double w = INFINITY;
    if (st == EM_OK) {
        st = em_fft(vg, axis, n, mode, eps, &rg);
        if (st != EM_OK)
            printf("  %s: %s\n", what, em_last_error());
        else
            w = compare_norm(
                rc, rg, 8 * ulp_of(em_array_dtype(in)) * (log2((double)n) + 1));
    }
    record("fft", what, w <= 1, w);
    em_array *arr[] = {vc, vg, rc, rg};
    for (int i = 0; i < 4; i++)
        em_array_release(arr[i]);
}

void test_fft(void) {
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_C64, EM_C128};
    static const int64_t ns[] = {1, 7, 64, 256, 1000};
    for (size_t di = 0; di < 4; di++)
        for (int mode = 0; mode < 4; mode++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int v = 0; v < 4; v++) {
                    em_dtype d = dts[di];
                    int64_t n = ns[ni];
                    /* v 0..2: along axis 1 of layout v, the row as long as
                     * n, 5 longer (cut), 3 shorter (zero padded); v 3:
                     * along axis 0 (a strided axis) of a contiguous input */
                    int64_t len = v == 1 ? n + 5 : v == 2 && n > 3 ? n - 3 : n;
                    enum layout l = v < 3 ? (enum layout)v : CONTIGUOUS;
                    int axis = v == 3 ? 0 : 1;
                    em_array *base = axis == 1
                                         ? base_for(d, 9, len, l, false, 0)
                                         : base_for(d, len, 9, l, false, 0);
                    char what[96];
                    snprintf(what, sizeof what,
                             "%s %s n=%lld len=%lld %s axis %d",
                             fft_modes[mode], em_dtype_name(d), (long long)n,
                             (long long)len, layout_names[l], axis);
                    fft_case(base, l, axis, n, (em_fft_mode)mode, 0, what);
                    em_array_release(base);
                }
    /* two outer axes around the transformed one, and eps clean-up */
    for (size_t di = 0; di < 4; di++) {
        em_dtype d = dts[di];
        int64_t shape[3] = {3, 64, 5};
        em_array *a = random_array(d, shape, 3, false, 0);
        char what[96];
        snprintf(what, sizeof what, "fft %s [3,64,5] axis 1", em_dtype_name(d));
        /* view_on with CONTIGUOUS only moves the array */
        fft_case(a, CONTIGUOUS, 1, 64, EM_FFT_FORWARD, 0, what);
        snprintf(what, sizeof what, "rfft %s [3,64,5] axis 1 eps 0.5",
                 em_dtype_name(d));
        fft_case(a, CONTIGUOUS, 1, 100, EM_FFT_RFFT, 0.5, what);
        snprintf(what, sizeof what, "irfft %s [3,64,5] axis 2 n 8",
                 em_dtype_name(d));
        fft_case(a, CONTIGUOUS, 2, 8, EM_FFT_IRFFT, 0, what);
        em_array_release(a);
    }
}

/* ---- linalg: inputs --------------------------------------------------------- */

enum kind { RANDOM, WELL, SPD };

/* A CPU array [shape] of dtype d: per matrix (the last two axes) uniform
 * entries in [-1, 1] (complex: both parts); WELL: scaled by 0.5 / sqrt(c)
 * plus the identity (well conditioned); SPD: X Xᴴ / c + I. */
static em_array *gen(em_dtype d, const int64_t *shape, int ndim, enum kind k) {
    int64_t r = shape[ndim - 2], c = shape[ndim - 1], nmat = 1;
    for (int i = 0; i < ndim - 2; i++)
        nmat *= shape[i];
    bool cpx = d == EM_C64 || d == EM_C128;
    int64_t total = nmat * r * c;
    cplx *v = malloc(sizeof(cplx) * (size_t)(total ? total : 1));
    cplx *x = malloc(sizeof(cplx) * (size_t)(r * c + 1));
    for (int64_t b = 0; b < nmat; b++) {
        cplx *m = v + b * r * c;
        for (int64_t i = 0; i < r * c; i++) {
            double re = next_unit() * 2 - 1, im = cpx ? next_unit() * 2 - 1 : 0;
            x[i] = re + im * I;
        }
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) {
                if (k == RANDOM) {
                    m[i * c + j] = x[i * c + j];
                } else if (k == WELL) {
                    m[i * c + j] =
                        x[i * c + j] * 0.5 / sqrt((double)c) + (i == j);
                } else {
                    cplx s = 0;
                    for (int64_t l = 0; l < c; l++)
                        s += x[i * c + l] * conj(x[j * c + l]);
                    m[i * c + j] = s / (double)c + (i == j);
                }
            }
    }
    size_t es = em_dtype_size(d);
    char *buf = malloc(es * (size_t)(total ? total : 1));
    for (int64_t i = 0; i < total; i++) {
        if (d == EM_F32)
            ((float *)buf)[i] = (float)creal(v[i]);
        else if (d == EM_F64)
            ((double *)buf)[i] = creal(v[i]);
        else if (d == EM_C64) {
            ((float *)buf)[2 * i] = (float)creal(v[i]);
            ((float *)buf)[2 * i + 1] = (float)cimag(v[i]);
        } else {
            ((double *)buf)[2 * i] = creal(v[i]);
            ((double *)buf)[2 * i + 1] = cimag(v[i]);
        }
    }
    em_array *out = NULL;
    die_on(em_from_data(buf, es * (size_t)total, shape, ndim, d, &out),
           "from_data");
    free(v);
    free(x);
    free(buf);
    return out;
}

/* The same logical input on the CPU and the GPU. */
typedef struct pair {
    em_array *c, *g;
} pair;

/* Matrices [nb batch axes of bshape, r, c] of kind k; transposed: stored
 * as [.., c, r] and viewed transposed on both devices. */
static pair make_pair(em_dtype d, int nb, const int64_t *bshape, int64_t r,
                      int64_t c, enum kind k, bool transposed) {
    int64_t shape[EM_MAX_NDIM];
    memcpy(shape, bshape, sizeof(int64_t) * (size_t)nb);
    shape[nb] = transposed ? c : r;
    shape[nb + 1] = transposed ? r : c;
    em_array *host = gen(d, shape, nb + 2, k), *g = NULL;
    die_on(em_to_device(host, GPU, &g), "to_device");
    pair p = {host, g};
    if (transposed) {
        int perm[EM_MAX_NDIM];
        for (int i = 0; i < nb + 2; i++)
            perm[i] = i;
        perm[nb] = nb + 1;
        perm[nb + 1] = nb;
        p.c = p.g = NULL;
        die_on(em_transpose(host, perm, nb + 2, &p.c), "transpose");
        if (g)
            die_on(em_transpose(g, perm, nb + 2, &p.g), "transpose");
        em_array_release(host);
        em_array_release(g);
    }
    return p;
}

static void pair_release(pair p) {
    em_array_release(p.c);
    em_array_release(p.g);
}

/* ---- linalg: host arithmetic -------------------------------------------- */

static cplx *values(em_array *a) {
    int64_t n;
    return (cplx *)as_c128_values(a, &n);
}

/* c[b] = op(a[b]) · x[b]: op(a) is r x k (a stored r x k, or k x r and
 * conjugate-transposed when ct), x k x cc, for nb matrices. */
static void mm(const cplx *a, const cplx *x, cplx *c, int64_t nb, int64_t r,
               int64_t k, int64_t cc, bool ct) {
    for (int64_t b = 0; b < nb; b++) {
        const cplx *pa = a + b * r * k, *px = x + b * k * cc;
        cplx *pc = c + b * r * cc;
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < cc; j++) {
                cplx s = 0;
                for (int64_t l = 0; l < k; l++)
                    s += (ct ? conj(pa[l * r + i]) : pa[i * k + l]) *
                         px[l * cc + j];
                pc[i * cc + j] = s;
            }
    }
}

/* ||x - y|| / ||y|| (NaN: infinity). */
static double rel_err(const cplx *x, const cplx *y, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += creal((x[i] - y[i]) * conj(x[i] - y[i]));
        den += creal(y[i] * conj(y[i]));
    }
    double e = sqrt(num) / (sqrt(den) + 1e-300);
    return isnan(e) ? INFINITY : e;
}

/* ||G - I|| / sqrt(q) for nb q x q matrices G = XᴴX (X r x q) or X Xᴴ. */
static double orth_err(const cplx *x, int64_t nb, int64_t r, int64_t q,
                       bool rows) {
    if (q == 0 || nb == 0)
        return 0;
    cplx *g = malloc(sizeof(cplx) * (size_t)(nb * q * q));
    cplx *id = malloc(sizeof(cplx) * (size_t)(nb * q * q));
    if (rows) { /* x is q x r: x xᴴ, computed as (xᴴ)ᴴ xᴴ */
        cplx *xt = malloc(sizeof(cplx) * (size_t)(nb * q * r));
        for (int64_t b = 0; b < nb; b++)
            for (int64_t i = 0; i < q; i++)
                for (int64_t j = 0; j < r; j++)
                    xt[b * q * r + j * q + i] = conj(x[b * q * r + i * r + j]);
        mm(xt, xt, g, nb, q, r, q, true);
        free(xt);
    } else {
        mm(x, x, g, nb, q, r, q, true);
    }
    for (int64_t i = 0; i < nb * q * q; i++)
        id[i] = (i % (q * q)) / q == (i % (q * q)) % q;
    double e = rel_err(g, id, nb * q * q);
    free(g);
    free(id);
    return e;
}

/* Largest |x| over the elements of nb r x c matrices where bad(i, j). */
static double tri_max(const cplx *x, int64_t nb, int64_t r, int64_t c,
                      int which) {
    double m = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) {
                bool bad = which == 0 ? j > i : j < i; /* 0: above, 1: below */
                double v = cabs(x[b * r * c + i * c + j]);
                if (bad && !(v <= m))
                    m = v;
            }
    return m;
}

static int64_t batch_of(int nb, const int64_t *bshape) {
    int64_t n = 1;
    for (int i = 0; i < nb; i++)
        n *= bshape[i];
    return n;
}

/* ---- linalg: cases ---------------------------------------------------------- */

typedef struct lcase {
    em_dtype d;
    int nb;
    int64_t bshape[2];
    int64_t n;
    bool transposed;
    const char *label;
} lcase;

static double tol_of(const lcase *c) {
    return 64 * ulp_of(c->d) * (double)(c->n + 4);
}

static void fail_status(const char *what, em_status st) {
    printf("  %s: %s\n", what, em_last_error());
    record("linalg", what, st == EM_OK, INFINITY);
}

/* op on the CPU input and on the GPU input: the results must agree
 * (compare's tolerance); a GPU failure fails the case. */
static void same_on_both(const char *what,
                         em_status (*op)(em_array *, em_array **),
                         em_array *cpu_in, em_array *gpu_in) {
    em_array *rc = NULL, *rg = NULL;
    die_on(op(cpu_in, &rc), what);
    em_status st = op(gpu_in, &rg);
    if (st == EM_OK) {
        double w = compare(rc, rg, what, 1);
        record("linalg", what, w <= 1, w);
    } else {
        fail_status(what, st);
    }
    em_array_release(rc);
    em_array_release(rg);
}

/* Unique results against the CPU: cholesky, invert, determinant, solve,
 * triangular_solve (both sides, both triangles, transposed). */
static void unique_cases(const lcase *c) {
    char what[128];
    int64_t n = c->n;
    double tol = tol_of(c);
    for (int op = 0; op < 8; op++) {
        enum kind k = op == 0 ? SPD : WELL;
        if (op == 2 &&
            n > 64) /* the determinant of a 256 x 256 matrix over/underflows f32 */
            continue;
        pair a = make_pair(c->d, c->nb, c->bshape, n, n, k, c->transposed);
        pair b = {NULL, NULL};
        em_array *rc = NULL, *rg = NULL;
        em_status sc, sg;
        const char *name;
        bool left = true, lower = true, trans = false;
        if (op >= 3) { /* right-hand sides */
            int64_t kk = op == 4 ? 1 : 3;
            b = make_pair(c->d, c->nb, c->bshape, op == 7 ? kk : n,
                          op == 7 ? n : kk, RANDOM, c->transposed);
            if (op == 4) { /* a batch of vectors: the first column */
                int64_t start[EM_MAX_NDIM] = {0}, stop[EM_MAX_NDIM],
                        step[EM_MAX_NDIM];
                int nd = c->nb + 2;
                for (int i = 0; i < nd; i++) {
                    stop[i] = i < c->nb ? c->bshape[i] : n;
                    step[i] = 1;
                }
                stop[nd - 1] = 1;
                int64_t vshape[EM_MAX_NDIM];
                memcpy(vshape, stop, sizeof vshape);
                pair v = {NULL, NULL};
                em_array *t = NULL;
                die_on(em_slice(b.c, start, stop, step, &t), "slice");
                die_on(em_reshape(t, vshape, nd - 1, &v.c), "reshape");
                em_array_release(t);
                t = NULL;
                die_on(em_slice(b.g, start, stop, step, &t), "slice");
                die_on(em_reshape(t, vshape, nd - 1, &v.g), "reshape");
                em_array_release(t);
                pair_release(b);
                b = v;
            }
        }
        switch (op) {
        case 0:
            name = "cholesky";
            sc = em_cholesky(a.c, &rc);
            sg = em_cholesky(a.g, &rg);
            break;
        case 1:
            name = "invert";
            sc = em_invert(a.c, &rc);
            sg = em_invert(a.g, &rg);
            break;
        case 2:
            name = "determinant";
            sc = em_determinant(a.c, &rc);
            sg = em_determinant(a.g, &rg);
            break;
        case 3:
        case 4:
            name = op == 3 ? "solve" : "solve vector";
            sc = em_solve(a.c, b.c, &rc);
            sg = em_solve(a.g, b.g, &rg);
            break;
        default: /* 5: lower left, 6: upper left transposed, 7: right */
            name = op == 5   ? "trsolve lower"
                   : op == 6 ? "trsolve upper T"
                             : "trsolve right lower T";
            lower = op != 6;
            trans = op != 5;
            left = op != 7;
            sc = em_triangular_solve(a.c, b.c, left, lower, trans, &rc);
            sg = em_triangular_solve(a.g, b.g, left, lower, trans, &rg);
            break;
        }
        snprintf(what, sizeof what, "%s %s %s", name, em_dtype_name(c->d),
                 c->label);
        if (sc == EM_OK)
            sc = em_eval(&rc, 1);
        if (sg == EM_OK)
            sg = em_eval(&rg, 1);
        if (sc != EM_OK) {
            die_on(sc, what);
        } else if (sg != EM_OK) {
            fail_status(what, sg);
        } else {
            double w = compare_norm(rc, rg, tol);
            record("linalg", what, w <= 1, w);
        }
        em_array_release(rc);
        em_array_release(rg);
        pair_release(a);
        pair_release(b);
    }
}

/* qr (reduced and complete, tall and wide), lu, eigh, svd by invariants. */
static void factor_cases(const lcase *c) {
    char what[128];
    int64_t nbm = batch_of(c->nb, c->bshape);
    double tol = tol_of(c);
    for (int shape_i = 0; shape_i < 2; shape_i++) {
        /* tall (n + 3) x n and wide n x (n + 3) for qr and svd */
        int64_t m = shape_i == 0 ? c->n + 3 : c->n,
                n = shape_i == 0 ? c->n : c->n + 3;
        int64_t k = m < n ? m : n;
        for (int full = 0; full < 2; full++) {
            pair a =
                make_pair(c->d, c->nb, c->bshape, m, n, RANDOM, c->transposed);
            cplx *av = values(a.c);
            /* qr */
            em_array *q = NULL, *r = NULL;
            snprintf(what, sizeof what, "qr%s %s [%lld,%lld] %s",
                     full ? " complete" : "", em_dtype_name(c->d), (long long)m,
                     (long long)n, c->label);
            em_status st = em_qr(a.g, full, &q, &r);
            em_array *both[2] = {q, r};
            if (st == EM_OK)
                st = em_eval(both, 2);
            if (st != EM_OK) {
                fail_status(what, st);
            } else {
                int64_t qc = full ? m : k;
                cplx *qv = values(q), *rv = values(r),
                     *qr = malloc(sizeof(cplx) * (size_t)(nbm * m * n + 1));
                mm(qv, rv, qr, nbm, m, qc, n, false);
                double e = rel_err(qr, av, nbm * m * n) / tol;
                double o = orth_err(qv, nbm, m, qc, false) / tol;
                double lo = tri_max(rv, nbm, full ? m : k, n, 1);
                record("linalg", what, e <= 1 && o <= 1 && lo == 0,
                       fmax(fmax(e, o), lo > 0 ? INFINITY : 0));
                /* real: the CPU's sign convention, so the same factors */
                if (c->d == EM_F32 || c->d == EM_F64) {
                    em_array *qc_ = NULL, *rc_ = NULL;
                    die_on(em_qr(a.c, full, &qc_, &rc_), what);
                    double w = rc_ ? compare_norm(rc_, r, tol) : INFINITY;
                    char w2[160];
                    snprintf(w2, sizeof w2, "%s: r equals the CPU's", what);
                    record("linalg", w2, w <= 1, w);
                    em_array_release(qc_);
                    em_array_release(rc_);
                }
                free(qv);
                free(rv);
                free(qr);
            }
            em_array_release(q);
            em_array_release(r);
            /* svd */
            if (c->d == EM_F32 || c->d == EM_F64) {
                em_array *u = NULL, *s = NULL, *vt = NULL, *uc = NULL,
                         *sc = NULL, *vtc = NULL;
                snprintf(what, sizeof what, "svd%s %s [%lld,%lld] %s",
                         full ? " full" : "", em_dtype_name(c->d), (long long)m,
                         (long long)n, c->label);
                st = em_svd(a.g, full, &u, &s, &vt);
                em_array *three[3] = {u, s, vt};
                if (st == EM_OK)
                    st = em_eval(three, 3);
                die_on(em_svd(a.c, full, &uc, &sc, &vtc), what);
                if (st != EM_OK) {
                    fail_status(what, st);
                } else {
                    int64_t ucols = full ? m : k, vr = full ? n : k;
                    cplx *uv = values(u), *sv = values(s), *vv = values(vt);
                    /* U[:, :k] diag(S) Vt[:k, :] */
                    cplx *us = malloc(sizeof(cplx) * (size_t)(nbm * m * k + 1));
                    cplx *vk = malloc(sizeof(cplx) * (size_t)(nbm * k * n + 1));
                    cplx *rec =
                        malloc(sizeof(cplx) * (size_t)(nbm * m * n + 1));
                    for (int64_t b = 0; b < nbm; b++) {
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < k; j++)
                                us[b * m * k + i * k + j] =
                                    uv[b * m * ucols + i * ucols + j] *
                                    sv[b * k + j];
                        memcpy(vk + b * k * n, vv + b * vr * n,
                               sizeof(cplx) * (size_t)(k * n));
                    }
                    mm(us, vk, rec, nbm, m, k, n, false);
                    double e = rel_err(rec, av, nbm * m * n) / tol;
                    double o1 = orth_err(uv, nbm, m, ucols, false) / tol;
                    double o2 = orth_err(vv, nbm, n, vr, true) / tol;
                    double sw = sc ? compare_norm(sc, s, tol) : INFINITY;
                    double worst = fmax(fmax(e, sw), fmax(o1, o2));
                    record("linalg", what, worst <= 1, worst);
                    free(uv);
                    free(sv);
                    free(vv);
                    free(us);
                    free(vk);
                    free(rec);
                }
                em_array *arr[] = {u, s, vt, uc, sc, vtc};
                for (int i = 0; i < 6; i++)
                    em_array_release(arr[i]);
            }
            free(av);
            pair_release(a);
        }
    }
    /* lu and eigh of square matrices */
    int64_t n = c->n;
    for (int op = 0; op < 2; op++) {
        pair a = make_pair(c->d, c->nb, c->bshape, n, n, op == 0 ? RANDOM : SPD,
                           c->transposed);
        cplx *av = values(a.c);
        cplx *rec = malloc(sizeof(cplx) * (size_t)(nbm * n * n + 1));
        cplx *t = malloc(sizeof(cplx) * (size_t)(nbm * n * n + 1));
        if (op == 0) {
            em_array *p = NULL, *l = NULL, *u = NULL;
            snprintf(what, sizeof what, "lu %s %s", em_dtype_name(c->d),
                     c->label);
            em_status st = em_lu(a.g, &p, &l, &u);
            em_array *three[3] = {p, l, u};
            if (st == EM_OK)
                st = em_eval(three, 3);
            if (st != EM_OK) {
                fail_status(what, st);
            } else {
                cplx *pv = values(p), *lv = values(l), *uv = values(u);
                mm(lv, uv, t, nbm, n, n, n, false);
                mm(pv, t, rec, nbm, n, n, n, false);
                double e = rel_err(rec, av, nbm * n * n) / tol;
                bool shape_ok = tri_max(lv, nbm, n, n, 0) == 0 &&
                                tri_max(uv, nbm, n, n, 1) == 0;
                for (int64_t b = 0; b < nbm; b++)
                    for (int64_t i = 0; i < n; i++) {
                        shape_ok &= lv[b * n * n + i * n + i] == 1;
                        double rowsum = 0;
                        for (int64_t j = 0; j < n; j++) {
                            cplx x = pv[b * n * n + i * n + j];
                            shape_ok &= x == 0 || x == 1;
                            rowsum += creal(x);
                        }
                        shape_ok &= rowsum == 1;
                    }
                record("linalg", what, e <= 1 && shape_ok,
                       shape_ok ? e : INFINITY);
                free(pv);
                free(lv);
                free(uv);
            }
            em_array_release(p);
            em_array_release(l);
            em_array_release(u);
        } else {
            em_array *w = NULL, *v = NULL, *wc = NULL, *vc = NULL;
            snprintf(what, sizeof what, "eigh %s %s", em_dtype_name(c->d),
                     c->label);
            em_status st = em_eigh(a.g, &w, &v);
            em_array *two[2] = {w, v};
            if (st == EM_OK)
                st = em_eval(two, 2);
            die_on(em_eigh(a.c, &wc, &vc), what);
            if (st != EM_OK) {
                fail_status(what, st);
            } else {
                cplx *wv = values(w), *vv = values(v);
                /* V diag(w) Vᴴ */
                for (int64_t b = 0; b < nbm; b++)
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t j = 0; j < n; j++)
                            t[b * n * n + i * n + j] =
                                vv[b * n * n + i * n + j] * wv[b * n + j];
                for (int64_t b = 0; b < nbm; b++) /* rec = (t Vᴴ) */
                    for (int64_t i = 0; i < n; i++)
                        for (int64_t j = 0; j < n; j++) {
                            cplx s = 0;
                            for (int64_t l = 0; l < n; l++)
                                s += t[b * n * n + i * n + l] *
                                     conj(vv[b * n * n + j * n + l]);
                            rec[b * n * n + i * n + j] = s;
                        }
                double e = rel_err(rec, av, nbm * n * n) / tol;
                double o = orth_err(vv, nbm, n, n, false) / tol;
                double ew = wc ? compare_norm(wc, w, tol) : INFINITY;
                double worst = fmax(fmax(e, o), ew);
                record("linalg", what, worst <= 1, worst);
                free(wv);
                free(vv);
            }
            em_array *arr[] = {w, v, wc, vc};
            for (int i = 0; i < 4; i++)
                em_array_release(arr[i]);
        }
        free(av);
        free(rec);
        free(t);
        pair_release(a);
    }
}

/* An n x n matrix (dtype d) on both devices from row-major values. */
static pair fixed_pair(em_dtype d, int64_t n, const double *vals) {
    int64_t shape[2] = {n, n};
    em_array *f = NULL, *c = NULL, *g = NULL;
    die_on(em_from_data(vals, sizeof(double) * (size_t)(n * n), shape, 2,
                        EM_F64, &f),
           "from_data");
    die_on(em_as_type(f, d, &c), "as_type");
    die_on(em_eval(&c, 1), "eval");
    die_on(em_to_device(c, GPU, &g), "to_device");
    em_array_release(f);
    pair p = {c, g};
    return p;
}

static void expect_error(const char *what, em_status st, em_array **out,
                         const char *needle) {
    if (st == EM_OK)
        st = em_eval(out, 1);
    bool ok = st == EM_ERR_ARGUMENT && strstr(em_last_error(), needle);
    if (!ok)
        printf("  %s: status %d (%s), wanted an error with \"%s\"\n", what,
               (int)st, em_last_error(), needle);
    record("linalg", what, ok, ok ? 0 : INFINITY);
}

/* A [2, 3, 3] batch (on both devices): `first` then `second`. */
static pair batch2_pair(em_dtype d, const double *first, const double *second) {
    double v[18];
    memcpy(v, first, sizeof(double) * 9);
    memcpy(v + 9, second, sizeof(double) * 9);
    int64_t shape[3] = {2, 3, 3};
    em_array *f = NULL, *c = NULL, *g = NULL;
    die_on(em_from_data(v, sizeof v, shape, 3, EM_F64, &f), "from_data");
    die_on(em_as_type(f, d, &c), "as_type");
    die_on(em_eval(&c, 1), "eval");
    die_on(em_to_device(c, GPU, &g), "to_device");
    em_array_release(f);
    pair p = {c, g};
    return p;
}

/* Singular, not positive definite and NaN inputs: the CPU's policy. */
static void value_failures(em_dtype d) {
    char what[128];
    /* a zero column: an exactly zero pivot in LU on both */
    static const double sing[9] = {1, 0, 2, 3, 0, 4, 5, 0, 6};
    static const double negdef[9] = {-1, 0, 0, 0, -2, 0, 0, 0, -3};
    static const double zdiag[9] = {1, 0, 0, 2, 0, 0, 3, 4, 5};
    double nanm[9] = {2, 0, 0, 0, 2, 0, 0, 0, 2};
    nanm[3] = NAN;
    pair s = fixed_pair(d, 3, sing), nd = fixed_pair(d, 3, negdef),
         zd = fixed_pair(d, 3, zdiag), nm = fixed_pair(d, 3, nanm);
    em_array *rc = NULL, *rg = NULL;
    const char *dn = em_dtype_name(d);

    snprintf(what, sizeof what, "invert singular %s: NaN", dn);
    same_on_both(what, em_invert, s.c, s.g);

    snprintf(what, sizeof what, "determinant singular %s: 0", dn);
    same_on_both(what, em_determinant, s.c, s.g);

    snprintf(what, sizeof what, "solve singular %s: error", dn);
    expect_error(what, em_solve(s.g, nd.g, &rg), &rg, "singular");
    em_array_release(rg);
    rg = NULL;
    snprintf(what, sizeof what, "cholesky not positive definite %s: error", dn);
    expect_error(what, em_cholesky(nd.g, &rg), &rg, "not positive definite");
    em_array_release(rg);
    rg = NULL;
    snprintf(what, sizeof what, "triangular_solve zero diagonal %s: error", dn);
    expect_error(what, em_triangular_solve(zd.g, nd.g, true, true, false, &rg),
                 &rg, "singular");
    em_array_release(rg);
    rg = NULL;

    /* NaN in the lower triangle: NaN results, no error */
    for (int op = 0; op < 3; op++) {
        snprintf(what, sizeof what, "%s with NaN %s: NaN",
                 op == 0   ? "cholesky"
                 : op == 1 ? "solve"
                           : "eigh",
                 dn);
        em_array *vc = NULL, *vg = NULL;
        em_status sc, sg;
        if (op == 0) {
            sc = em_cholesky(nm.c, &rc);
            sg = em_cholesky(nm.g, &rg);
        } else if (op == 1) {
            sc = em_solve(nd.c, nm.c, &rc);
            sg = em_solve(nd.g, nm.g, &rg);
        } else {
            sc = em_eigh(nm.c, &rc, &vc);
            sg = em_eigh(nm.g, &rg, &vg);
        }
        if (sc == EM_OK)
            sc = em_eval(&rc, 1);
        if (sg == EM_OK)
            sg = em_eval(&rg, 1);
        die_on(sc, what);
        if (sg != EM_OK) {
            fail_status(what, sg);
        } else if (sc == EM_OK) {
            double w = compare(rc, rg, what, 1);
            if (vc && vg) {
                double w2 = compare(vc, vg, what, 1);
                w = fmax(w, w2);
            }
            record("linalg", what, w <= 1, w);
        }
        em_array *arr[] = {rc, rg, vc, vg};
        for (int i = 0; i < 4; i++)
            em_array_release(arr[i]);
        rc = rg = NULL;
    }
    /* the same in a batch (the batched solver calls): matrix 1 fails */
    static const double pd[9] = {1, 0, 0, 0, 2, 0, 0, 0, 3};
    pair bs = batch2_pair(d, pd, sing), bz = batch2_pair(d, pd, zdiag),
         bn = batch2_pair(d, negdef, negdef);
    snprintf(what, sizeof what, "batch invert singular %s: NaN", dn);
    same_on_both(what, em_invert, bs.c, bs.g);
    snprintf(what, sizeof what, "batch solve singular %s: error", dn);
    expect_error(what, em_solve(bs.g, bn.g, &rg), &rg, "matrix 1 of the batch");
    em_array_release(rg);
    rg = NULL;
    snprintf(what, sizeof what,
             "batch cholesky not positive definite %s: error", dn);
    expect_error(what, em_cholesky(bs.g, &rg), &rg, "matrix 1 of the batch");
    em_array_release(rg);
    rg = NULL;
    snprintf(what, sizeof what,
             "batch triangular_solve zero diagonal %s: error", dn);
    expect_error(what, em_triangular_solve(bz.g, bn.g, true, true, false, &rg),
                 &rg, "matrix 1 of the batch");
    em_array_release(rg);
    rg = NULL;
    pair_release(bs);
    pair_release(bz);
    pair_release(bn);
    pair_release(s);
    pair_release(nd);
    pair_release(zd);
    pair_release(nm);
}

void test_linalg(void) {
    static const em_dtype dts[] = {EM_F32, EM_F64, EM_C64, EM_C128};
    static const int64_t ns[] = {1, 7, 64, 256};
    for (size_t di = 0; di < 4; di++) {
        em_dtype d = dts[di];
        for (size_t ni = 0; ni < 4; ni++)
            for (int t = 0; t < 2; t++) {
                if (ns[ni] == 256 && t == 1)
                    continue; /* the 256 cases cost the host's reference */
                lcase c = {d, 0, {0, 0}, ns[ni], t == 1, NULL};
                char label[48];
                snprintf(label, sizeof label, "n=%lld %s", (long long)ns[ni],
                         t ? "transposed" : "contiguous");
                c.label = label;
                unique_cases(&c);
                if (ns[ni] <= 64) /* the host's O(n^3) references */
                    factor_cases(&c);
            }
        lcase c = {d, 2, {3, 2}, 16, true, "batch [3,2] n=16 transposed"};
        unique_cases(&c);
        factor_cases(&c);
        value_failures(d);
    }
}
