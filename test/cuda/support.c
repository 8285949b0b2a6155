/*
 * support.c — what every GPU-vs-CPU test family shares: the per-family
 * bookkeeping, random inputs with edge values, the comparisons and the
 * input layouts (declared in cuda_test.h).
 */
#include "cuda_test.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bookkeeping -------------------------------------------------------- */

family_stats families[MAX_FAMILIES];
int nfamilies;
int total_failed;

family_stats *family(const char *name) {
    for (int i = 0; i < nfamilies; i++)
        if (!strcmp(families[i].name, name))
            return &families[i];
    if (nfamilies == MAX_FAMILIES) { /* a test-suite bug, not a GPU fault */
        fprintf(stderr, "test_cuda: more than %d families\n", MAX_FAMILIES);
        exit(2);
    }
    families[nfamilies].name = name;
    return &families[nfamilies++];
}

void record(const char *fam, const char *what, bool ok, double worst) {
    family_stats *f = family(fam);
    f->cases++;
    if (worst > f->worst)
        f->worst = worst;
    if (!ok) {
        f->failed++;
        total_failed++;
        printf("FAIL %s: %s (error %.3g x tolerance)\n", fam, what, worst);
    }
}

void die_on(em_status st, const char *what) {
    if (st != EM_OK) {
        printf("FAIL setup %s: %s\n", what, em_last_error());
        total_failed++;
    }
}

/* ---- random inputs -------------------------------------------------------- */

uint64_t rng = 0x9e3779b97f4a7c15ull;
uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
double next_unit(void) {
    return (next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

/* f32 values to f16 bits through the engine's own conversion. */
void f32_to_f16_bits(const float *src, uint16_t *dst, int64_t n) {
    em_array *a = NULL, *b = NULL;
    die_on(em_from_data(src, (size_t)n * 4, &n, 1, EM_F32, &a), "from_data");
    die_on(em_as_type(a, EM_F16, &b), "as_type");
    die_on(em_read(b, dst, (size_t)n * 2), "read");
    em_array_release(a);
    em_array_release(b);
}

/* `n` random elements of dtype d into buf. Floats in [-3, 3] with edge
 * values (0, -0, +-Inf, NaN, tiny) at a few positions when `edges`; integers
 * over their whole range, or in [0, small) when small > 0. */
void fill_random(em_dtype d, void *buf, int64_t n, bool edges, int small) {
    static const double edge_values[] = {0.0, -0.0,  INFINITY, -INFINITY,
                                         NAN, 1e-30, 0.5,      -2.5};
    for (int64_t i = 0; i < n; i++) {
        double v = next_unit() * 6.0 - 3.0, w = next_unit() * 6.0 - 3.0;
        if (small < 0) { /* near 1: long products stay finite */
            v = 0.9 + next_unit() * 0.2;
            w = next_unit() * 0.1 - 0.05;
        }
        if (edges && i % 17 == 3)
            v = edge_values[(i / 17) % 8];
        uint64_t r = next_u64();
        if (small > 0)
            r %= (uint64_t)small;
        else if (small < 0)
            r %= 3;
        switch (d) {
        case EM_PRED:
            ((uint8_t *)buf)[i] = r & 1;
            break;
        case EM_U8:
        case EM_S8:
            ((uint8_t *)buf)[i] = (uint8_t)r;
            break;
        case EM_U16:
        case EM_S16:
            ((uint16_t *)buf)[i] = (uint16_t)r;
            break;
        case EM_U32:
        case EM_S32:
            ((uint32_t *)buf)[i] = (uint32_t)r;
            break;
        case EM_U64:
        case EM_S64:
            ((uint64_t *)buf)[i] = r;
            break;
        case EM_F16: /* converted below, all at once */
            ((float *)buf)[i] = (float)v;
            break;
        case EM_BF16: {
            float f = (float)v;
            uint32_t bits;
            memcpy(&bits, &f, 4);
            ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16);
            break;
        }
        case EM_F32:
            ((float *)buf)[i] = (float)v;
            break;
        case EM_F64:
            ((double *)buf)[i] = v;
            break;
        case EM_C64:
            ((float *)buf)[2 * i] = (float)v;
            ((float *)buf)[2 * i + 1] = (float)w;
            break;
        case EM_C128:
            ((double *)buf)[2 * i] = v;
            ((double *)buf)[2 * i + 1] = w;
            break;
        default:
            break;
        }
    }
}

em_array *random_array(em_dtype d, const int64_t *shape, int ndim, bool edges,
                       int small) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    size_t nbytes = (size_t)n * em_dtype_size(d);
    /* f16 is drawn as f32 first (twice the room), then converted. */
    void *buf = malloc(n ? (size_t)n * 16 : 1);
    fill_random(d, buf, n, edges, small);
    if (d == EM_F16 && n > 0) {
        uint16_t *bits = malloc((size_t)n * 2);
        f32_to_f16_bits(buf, bits, n);
        memcpy(buf, bits, (size_t)n * 2);
        free(bits);
    }
    em_array *a = NULL;
    die_on(em_from_data(buf, nbytes, shape, ndim, d, &a), "from_data");
    free(buf);
    return a;
}

/* ---- comparison ------------------------------------------------------------ */

/* Relative tolerance per float dtype: a few units in the last place (libm
 * and CUDA's math differ by up to ~2 ulp, and f16/bf16 round once more). */
double rtol_of(em_dtype d) {
    switch (d) {
    case EM_F16:
        return 2e-3;
    case EM_BF16:
        return 1.6e-2;
    case EM_F32:
    case EM_C64:
        return 1e-5;
    case EM_F64:
    case EM_C128:
        return 1e-12;
    default:
        return 0;
    }
}

double load_real(em_dtype d, const void *p, int64_t i, int part) {
    switch (d) {
    case EM_F16: {
        /* decode f16 by hand */
        uint16_t h = ((const uint16_t *)p)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double s = (h & 0x8000) ? -1 : 1;
        if (e == 31)
            return m ? NAN : s * INFINITY;
        return s * (e ? ldexp(1024 + m, e - 25) : ldexp(m, -24));
    }
    case EM_BF16: {
        uint32_t bits = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case EM_F32:
        return ((const float *)p)[i];
    case EM_F64:
        return ((const double *)p)[i];
    case EM_C64:
        return ((const float *)p)[2 * i + part];
    case EM_C128:
        return ((const double *)p)[2 * i + part];
    default:
        return 0;
    }
}

/* Compare two arrays (same dtype and shape); returns the worst error in
 * units of the tolerance (<= 1 passes) and prints the first mismatch. */
double compare(em_array *cpu, em_array *gpu, const char *what,
               double tol_scale) {
    return compare_floor(cpu, gpu, what, tol_scale, 1e-3);
}

/* As compare, with errors measured against rtol * (|cpu| + floor): sums
 * pass a floor near the magnitude of their terms, since cancellation leaves
 * a result far smaller than the rounding of the terms that made it.
 * Complex elements are compared by modulus (a part may cancel to almost
 * nothing while the number itself is accurate). */
double compare_floor(em_array *cpu, em_array *gpu, const char *what,
                     double tol_scale, double floor) {
    em_dtype d = em_array_dtype(cpu);
    size_t nbytes = em_array_nbytes(cpu);
    if (em_array_dtype(gpu) != d || em_array_nbytes(gpu) != nbytes) {
        printf("  %s: dtype/shape mismatch\n", what);
        return INFINITY;
    }
    void *a = malloc(nbytes + 1), *b = malloc(nbytes + 1);
    em_status s1 = em_read(cpu, a, nbytes);
    if (s1 != EM_OK)
        printf("  %s: cpu read failed: %s\n", what, em_last_error());
    em_status s2 = em_read(gpu, b, nbytes);
    if (s2 != EM_OK)
        printf("  %s: gpu read failed: %s\n", what, em_last_error());
    double worst = 0;
    if (s1 != EM_OK || s2 != EM_OK) {
        worst = INFINITY;
    } else if (!em_dtype_is_float(d) && !em_dtype_is_complex(d)) {
        if (memcmp(a, b, nbytes) != 0) {
            size_t es = em_dtype_size(d);
            for (size_t i = 0; i < nbytes / es; i++)
                if (memcmp((char *)a + i * es, (char *)b + i * es, es)) {
                    uint64_t x = 0, y = 0;
                    memcpy(&x, (char *)a + i * es, es);
                    memcpy(&y, (char *)b + i * es, es);
                    printf("  %s: element %zu: cpu %#llx gpu %#llx\n", what, i,
                           (unsigned long long)x, (unsigned long long)y);
                    break;
                }
            worst = INFINITY;
        }
    } else {
        double rtol = rtol_of(d) * tol_scale;
        bool cpx = em_dtype_is_complex(d);
        int64_t n = (int64_t)(nbytes / em_dtype_size(d));
        bool shown = false;
        for (int64_t i = 0; i < n; i++) {
            double xr = load_real(d, a, i, 0), yr = load_real(d, b, i, 0);
            double xi = cpx ? load_real(d, a, i, 1) : 0;
            double yi = cpx ? load_real(d, b, i, 1) : 0;
            double err;
            if (isnan(xr) || isnan(yr) || isnan(xi) || isnan(yi))
                err = (isnan(xr) || isnan(xi)) == (isnan(yr) || isnan(yi))
                          ? 0
                          : INFINITY;
            else if (isinf(xr) || isinf(yr) || isinf(xi) || isinf(yi))
                /* infinite parts must match; finite parts within rtol */
                err = (isinf(xr) || isinf(yr) ? xr != yr : 0) ||
                              (isinf(xi) || isinf(yi) ? xi != yi : 0)
                          ? INFINITY
                          : (fabs(isinf(xr) ? 0 : xr - yr) +
                             fabs(isinf(xi) ? 0 : xi - yi)) /
                                (rtol * (fabs(isinf(xr) ? xi : xr) + floor));
            else
                err =
                    hypot(xr - yr, xi - yi) / (rtol * (hypot(xr, xi) + floor));
            if (err > worst)
                worst = err;
            if (err > 1 && !shown) {
                printf("  %s: element %lld: cpu %.9g%+.9gi gpu %.9g%+.9gi\n",
                       what, (long long)i, xr, xi, yr, yi);
                shown = true;
            }
        }
    }
    free(a);
    free(b);
    return worst;
}

/* The values of `a` as complex doubles (read back through the engine). */
double *as_c128_values(em_array *a, int64_t *n) {
    em_array *w = NULL, *cpu = NULL;
    *n = em_array_size(a);
    double *v = malloc((size_t)(*n ? *n : 1) * 16);
    die_on(em_to_device(a, EM_DEVICE_CPU, &cpu), "to_device");
    die_on(em_as_type(cpu, EM_C128, &w), "as_type");
    if (w)
        die_on(em_read(w, v, (size_t)*n * 16), "read");
    em_array_release(cpu);
    em_array_release(w);
    return v;
}

/* Three-way check for floating results of ill-conditioned functions (tan
 * near its poles, say), where two float results may both be right and still
 * differ: each element's GPU error against a float64 reference `ref` must
 * be within twice the CPU's own error, or within the dtype's tolerance.
 * NaN and infinities must match the CPU's. */
double compare_ref(em_array *cpu, em_array *gpu, em_array *ref,
                   const char *what) {
    double rtol = rtol_of(em_array_dtype(cpu));
    int64_t n, n2, n3;
    double *c = as_c128_values(cpu, &n), *g = as_c128_values(gpu, &n2),
           *r = as_c128_values(ref, &n3);
    double worst = 0;
    bool shown = false;
    for (int64_t i = 0; i < n && n == n2 && n == n3; i++) {
        double cr = c[2 * i], ci = c[2 * i + 1], gr = g[2 * i],
               gi = g[2 * i + 1], rr = r[2 * i], ri = r[2 * i + 1];
        double err;
        bool cbad = isnan(cr) || isnan(ci), gbad = isnan(gr) || isnan(gi);
        if (cbad || gbad)
            err = cbad == gbad ? 0 : INFINITY;
        else if (isinf(cr) || isinf(ci) || isinf(gr) || isinf(gi))
            err = (isinf(cr) == isinf(gr) && isinf(ci) == isinf(gi) &&
                   (!isinf(cr) || cr == gr) && (!isinf(ci) || ci == gi))
                      ? 0
                      : INFINITY;
        else {
            double eg = hypot(gr - rr, gi - ri), ec = hypot(cr - rr, ci - ri);
            double allowed = fmax(2 * ec, rtol * (hypot(rr, ri) + 1e-3));
            err = eg / allowed;
        }
        if (err > worst)
            worst = err;
        if (err > 1 && !shown) {
            printf("  %s: element %lld: cpu %.9g%+.9gi gpu %.9g%+.9gi ref "
                   "%.9g%+.9gi\n",
                   what, (long long)i, cr, ci, gr, gi, rr, ri);
            shown = true;
        }
    }
    if (n != n2 || n != n3)
        worst = INFINITY;
    free(c);
    free(g);
    free(r);
    return worst;
}

/* Norm-wise relative error ||g - c|| / ||c|| for products (one number for
 * the whole result, as METHOD.md compares matrix products). */
double compare_norm(em_array *cpu, em_array *gpu, double tol) {
    em_dtype d = em_array_dtype(cpu);
    size_t nbytes = em_array_nbytes(cpu);
    void *a = malloc(nbytes + 1), *b = malloc(nbytes + 1);
    if (em_read(cpu, a, nbytes) != EM_OK || em_read(gpu, b, nbytes) != EM_OK) {
        printf("  read failed: %s\n", em_last_error());
        free(a);
        free(b);
        return INFINITY;
    }
    int parts = em_dtype_is_complex(d) ? 2 : 1;
    int64_t n = (int64_t)(nbytes / em_dtype_size(d));
    double num = 0, den = 0;
    bool is_float = em_dtype_is_float(d) || em_dtype_is_complex(d);
    for (int64_t i = 0; i < n; i++)
        for (int p = 0; p < parts; p++) {
            double x, y;
            if (is_float) {
                x = load_real(d, a, i, p);
                y = load_real(d, b, i, p);
            } else {
                uint64_t u = 0, v = 0;
                memcpy(&u, (char *)a + i * (int64_t)em_dtype_size(d),
                       em_dtype_size(d));
                memcpy(&v, (char *)b + i * (int64_t)em_dtype_size(d),
                       em_dtype_size(d));
                x = u != v;
                y = 0;
                den += 1;
            }
            num += (x - y) * (x - y);
            if (is_float)
                den += x * x;
        }
    free(a);
    free(b);
    double rel = sqrt(num) / (sqrt(den) + 1e-300);
    if (isnan(rel))
        return INFINITY;
    return rel / tol;
}

/* ---- graph builders run on both devices ---------------------------------- */

const char *layout_names[] = {"contiguous", "transposed", "sliced"};

/* A [rows, cols] input of layout `l`: the base array (held by the caller,
 * on the CPU) and the view built on `device` from a copy of it. */
em_array *base_for(em_dtype d, int64_t rows, int64_t cols, enum layout l,
                   bool edges, int small) {
    int64_t shape[2] = {rows, cols};
    if (l == TRANSPOSED) {
        shape[0] = cols;
        shape[1] = rows;
    } else if (l == SLICED) {
        shape[0] = rows * 2;
        shape[1] = cols * 2 + 1;
    }
    return random_array(d, shape, 2, edges, small);
}

em_array *view_on(em_array *base, em_device device, enum layout l) {
    em_array *moved = NULL, *view = NULL;
    die_on(em_to_device(base, device, &moved), "to_device");
    if (!moved)
        return NULL;
    if (l == TRANSPOSED) {
        int perm[2] = {1, 0};
        die_on(em_transpose(moved, perm, 2, &view), "transpose");
    } else if (l == SLICED) {
        const int64_t *s = em_array_shape(moved);
        int64_t start[2] = {0, 1}, stop[2] = {s[0], s[1]}, step[2] = {2, 2};
        die_on(em_slice(moved, start, stop, step, &view), "slice");
    } else {
        em_array_retain(moved);
        view = moved;
    }
    em_array_release(moved);
    return view;
}

const em_dtype all_dtypes[NDTYPES] = {EM_PRED, EM_U8,  EM_U16, EM_U32, EM_U64,
                                      EM_S8,   EM_S16, EM_S32, EM_S64, EM_F16,
                                      EM_BF16, EM_F32, EM_F64, EM_C64, EM_C128};

bool quick;
bool skip_dtype(em_dtype d) {
    return quick && d != EM_F32 && d != EM_S32 && d != EM_F16 && d != EM_C64;
}

/* ---- elementwise ---------------------------------------------------------- */

em_array *random_keep_mask(int64_t lq, int64_t lk, bool dead_row) {
    const int64_t shape[2] = {lq, lk}, n = lq * lk;
    uint8_t *keep = malloc((size_t)(n ? n : 1));
    if (!keep)
        die_on(EM_ERR_OOM, "mask");
    for (int64_t i = 0; i < n; i++)
        keep[i] = next_unit() > 0.3 && !(dead_row && i < lk);
    em_array *mask = NULL;
    die_on(em_from_data(keep, (size_t)n, shape, 2, EM_PRED, &mask), "mask");
    free(keep);
    return mask;
}

void sdpa_random_extras(em_dtype dt, int mask, bool dead_row, bool sinks,
                        int64_t H, int64_t Lq, int64_t Lk, em_array **in) {
    if (mask == 1) {
        const int64_t ms[4] = {1, H, Lq, Lk};
        in[3] = random_array(dt, ms, 4, false, 0);
    } else if (mask == 2) {
        in[3] = random_keep_mask(Lq, Lk, dead_row);
    }
    if (sinks) {
        const int64_t hs[1] = {H};
        in[4] = random_array(dt, hs, 1, false, 0);
    }
}

void copy_to_gpu(em_array *const *cpu, em_array **gpu, int from, int n) {
    for (int i = from; i < n; i++)
        if (cpu[i])
            die_on(em_to_device(cpu[i], GPU, &gpu[i]), "to_device");
}

void sdpa_cache_views(em_array **cpu_in, em_array **gpu_in, int64_t n,
                      int64_t dk, int64_t dv) {
    for (int i = 1; i <= 2; i++) {
        const int64_t *sh = em_array_shape(cpu_in[i]);
        int64_t start[4] = {0}, stop[4] = {sh[0], sh[1], n, i == 1 ? dk : dv},
                step[4] = {1, 1, 1, 1};
        em_array *a = NULL, *b = NULL;
        die_on(em_slice(cpu_in[i], start, stop, step, &a), "slice");
        die_on(em_slice(gpu_in[i], start, stop, step, &b), "slice");
        em_array_release(cpu_in[i]);
        em_array_release(gpu_in[i]);
        cpu_in[i] = a;
        gpu_in[i] = b;
    }
}
