/*
 * test_quant.c — affine quantization (include/emily_quant.h) on the GPU
 * against the CPU backend, same random inputs.
 *
 * quantize: packed words, scales and biases bit for bit (both sides run
 * MLX's f32 operations in the same order, no FMA). dequantize of the CPU's
 * packed weights: bit for bit (q * s and + b each rounded to the dtype).
 * quantized_matmul, both layouts, M = 1, 3, 16 (the matrix-vector kernels)
 * and 20 (dequantize + cuBLAS): ||gpu - cpu|| / ||cpu|| (different summation
 * orders, f32 accumulation on both sides, f16/bf16 rounded once at the end).
 * Then x @ D^T for long rows and few of them (K = 8192: several warps per
 * row, reduced through shared memory), short ones (K = 96: a partial
 * step), 1031 rows of K = 2048 (several rows and warps per row in a CTA),
 * x fresh or at an odd element offset (unvectorized loads).
 */
#include "cuda_test.h"
#include "emily_quant.h"

#include <math.h>
#include <stdio.h>

static em_array *on_gpu(em_array *a) {
    em_array *g = NULL;
    die_on(em_to_device(a, GPU, &g), "to_device");
    return g;
}

static double qmm_tol(em_dtype d) {
    return d == EM_F32 ? 1e-5 : d == EM_F16 ? 2e-3 : 1e-2;
}

static void release_n(em_array **a, int n) {
    for (int i = 0; i < n; i++)
        em_array_release(a[i]);
}

/* x (m, k) on the GPU, fresh or one element into a longer array (its
 * rows then start on no 16-byte boundary); *host: the CPU copy. */
static em_array *x_on_gpu(em_dtype d, int64_t m, int64_t k, bool offset,
                          em_array **host) {
    const int64_t flat[1] = {m * k + 1}, xs[2] = {m, k};
    if (!offset) {
        *host = random_array(d, xs, 2, false, 0);
        return on_gpu(*host);
    }
    em_array *base = random_array(d, flat, 1, false, 0), *bg = on_gpu(base);
    const int64_t start[1] = {1}, stop[1] = {m * k + 1}, step[1] = {1};
    em_array *sl = NULL, *sg = NULL, *xg = NULL;
    die_on(em_slice(base, start, stop, step, &sl), "slice");
    die_on(em_reshape(sl, xs, 2, host), "reshape");
    die_on(em_slice(bg, start, stop, step, &sg), "slice gpu");
    die_on(em_reshape(sg, xs, 2, &xg), "reshape gpu");
    em_array *arr[] = {sl, sg, bg, base};
    release_n(arr, 4);
    return xg;
}

/* x (m, k) @ D^T, D (n, k) quantized on the CPU, both sides. */
static void check_matvec_shape(em_dtype d, int bits, int gs, int64_t n,
                               int64_t k, int64_t m, bool offset) {
    char what[128];
    snprintf(what, sizeof what, "quantized_matmul %s bits %d gs %d (%lld, %lld) m %lld%s",
             em_dtype_name(d), bits, gs, (long long)n, (long long)k,
             (long long)m, offset ? " x offset" : "");
    const int64_t ws[2] = {n, k};
    em_array *w = random_array(d, ws, 2, false, 0), *q[3] = {0}, *qg[3] = {0};
    die_on(em_quantize(w, gs, bits, &q[0], &q[1], &q[2]), what);
    for (int i = 0; i < 3 && q[2]; i++)
        qg[i] = on_gpu(q[i]);
    em_array *x = NULL, *xg = x_on_gpu(d, m, k, offset, &x), *rc = NULL, *rg = NULL;
    if (qg[2]) {
        die_on(em_quantized_matmul(x, q[0], q[1], q[2], true, gs, bits, &rc), what);
        em_status st = em_quantized_matmul(xg, qg[0], qg[1], qg[2], true, gs, bits, &rg);
        if (st != EM_OK)
            printf("  %s: %s\n", what, em_last_error());
    }
    const double err = rc && rg ? compare_norm(rc, rg, qmm_tol(d)) : INFINITY;
    record("quant", what, err <= 1, err);
    em_array *arr[] = {w, q[0], q[1], q[2], qg[0], qg[1], qg[2], x, xg, rc, rg};
    release_n(arr, 11);
}

static void test_quant_matvec_shapes(void) {
    static const em_dtype dts[] = {EM_F32, EM_BF16, EM_F16};
    for (int di = 0; di < 3; di++) {
        if (skip_dtype(dts[di]))
            continue;
        for (int bits = 3; bits <= 4; bits++) {
            check_matvec_shape(dts[di], bits, 64, 5, 8192, 1, false);
            check_matvec_shape(dts[di], bits, 128, 3, 8192, 7, false);
            check_matvec_shape(dts[di], bits, 32, 45, 96, 2, false);
            check_matvec_shape(dts[di], bits, 64, 33, 576, 1, true);
            check_matvec_shape(dts[di], bits, 64, 33, 576, 9, true);
        }
        check_matvec_shape(dts[di], 8, 64, 7, 4096, 1, true);
        /* 2 warps per row, 2 rows per CTA, the last CTA half idle */
        check_matvec_shape(dts[di], 4, 64, 1031, 2048, 1, false);
        check_matvec_shape(dts[di], 4, 64, 1031, 2048, 3, false);
        check_matvec_shape(dts[di], 8, 32, 70, 1536, 16, false);
    }
}

void test_quant(void) {
    test_quant_matvec_shapes();
    static const em_dtype dts[] = {EM_F32, EM_F16, EM_BF16};
    static const int bits_list[] = {2, 3, 4, 5, 6, 8};
    static const int group_sizes[] = {32, 64, 128};
    for (int di = 0; di < 3; di++)
        for (int bi = 0; bi < 6; bi++)
            for (int gi = 0; gi < 3; gi++) {
                const em_dtype d = dts[di];
                const int bits = bits_list[bi], gs = group_sizes[gi];
                if (skip_dtype(d))
                    continue;
                char what[96];
                const int64_t wshape[2] = {24, 256};
                em_array *wc = random_array(d, wshape, 2, false, 0);
                em_array *wg = on_gpu(wc);
                em_array *qc[3] = {0}, *qg[3] = {0};
                snprintf(what, sizeof what, "quantize %s bits %d gs %d",
                         em_dtype_name(d), bits, gs);
                die_on(em_quantize(wc, gs, bits, &qc[0], &qc[1], &qc[2]), what);
                die_on(em_quantize(wg, gs, bits, &qg[0], &qg[1], &qg[2]), what);
                double w = 0;
                for (int i = 0; i < 3; i++)
                    w = fmax(w, qc[i] && qg[i] ? compare(qc[i], qg[i], what, 0)
                                               : INFINITY);
                record("quant", what, w <= 1, w);

                /* dequantize the CPU's packed weights on both sides */
                em_array *pg[3] = {0}, *dc = NULL, *dg = NULL;
                for (int i = 0; i < 3 && qc[i]; i++)
                    pg[i] = on_gpu(qc[i]);
                snprintf(what, sizeof what, "dequantize %s bits %d gs %d",
                         em_dtype_name(d), bits, gs);
                if (qc[0] && pg[2]) {
                    die_on(em_dequantize(qc[0], qc[1], qc[2], gs, bits, d, &dc),
                           what);
                    die_on(em_dequantize(pg[0], pg[1], pg[2], gs, bits, d, &dg),
                           what);
                }
                w = dc && dg ? compare(dc, dg, what, 0) : INFINITY;
                record("quant", what, w <= 1, w);

                /* x @ D^T with D (24, 256), and x @ D with D (24, 256) as
                 * (K, N) */
                static const int64_t ms[] = {1, 3, 16, 20};
                for (int t = 0; t < 2 && pg[2]; t++)
                    for (int mi = 0; mi < 4; mi++) {
                        const bool transpose = t == 0;
                        const int64_t xs[2] = {ms[mi], transpose ? 256 : 24};
                        em_array *xc = random_array(d, xs, 2, false, 0);
                        em_array *xg = on_gpu(xc), *rc = NULL, *rg = NULL;
                        snprintf(what, sizeof what,
                                 "quantized_matmul %s bits %d gs %d %s m %lld",
                                 em_dtype_name(d), bits, gs,
                                 transpose ? "x@w^T" : "x@w", (long long)ms[mi]);
                        die_on(em_quantized_matmul(xc, qc[0], qc[1], qc[2],
                                                   transpose, gs, bits, &rc),
                               what);
                        em_status st = em_quantized_matmul(
                            xg, pg[0], pg[1], pg[2], transpose, gs, bits, &rg);
                        if (st != EM_OK)
                            printf("  %s: %s\n", what, em_last_error());
                        w = rc && rg ? compare_norm(rc, rg, qmm_tol(d))
                                     : INFINITY;
                        record("quant", what, w <= 1, w);
                        em_array *arr[] = {xc, xg, rc, rg};
                        release_n(arr, 4);
                    }
                em_array *arr[] = {wc, wg, qc[0], qc[1], qc[2], qg[0], qg[1],
                                   qg[2], pg[0], pg[1], pg[2], dc, dg};
                release_n(arr, 13);
            }
}
