/*
 * test_fast.c — the Emily.Fast kernels (include/emily_fast.h) on gpu:0
 * against the CPU on the same random inputs: rms_norm, layer_norm and
 * softmax over rows of several lengths (one element, a partial warp, more
 * than a block's threads, long rows), contiguous and strided inputs, with
 * and without weight/bias, edge values (NaN/Inf rows); rope in both
 * pairings, partial dims, base/scale, freqs, s32/s64 offsets.
 *
 * Row reductions sum in a different order on the two devices, so the
 * tolerance is a few times the dtype's rounding.
 */
#include "cuda_test.h"
#include "emily_fast.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static em_array *to_gpu(em_array *a) {
    em_array *g = NULL;
    if (a)
        die_on(em_to_device(a, GPU, &g), "to_device");
    return g;
}

/* A [rows, cols] random input, or its transpose's view when strided. */
static em_array *input(em_dtype d, int64_t rows, int64_t cols, bool strided,
                       bool edges) {
    int64_t shape[2] = {strided ? cols : rows, strided ? rows : cols};
    em_array *a = random_array(d, shape, 2, edges, 0);
    if (!strided)
        return a;
    int perm[2] = {1, 0};
    em_array *t = NULL;
    die_on(em_transpose(a, perm, 2, &t), "transpose");
    em_array_release(a);
    return t;
}

typedef enum { RMS, LAYER, SOFTMAX } row_op;
static const char *row_names[] = {"rms_norm", "layer_norm", "softmax"};

static em_status run_rows(row_op op, em_array *x, em_array *w, em_array *b,
                          int axis, em_array **out) {
    switch (op) {
    case RMS:
        return em_rms_norm(x, w, 1e-5, out);
    case LAYER:
        return em_layer_norm(x, w, b, 1e-5, out);
    default:
        return em_softmax(x, axis, out);
    }
}

static void rows_case(row_op op, em_dtype d, int64_t rows, int64_t cols,
                      bool strided, bool affine, bool edges, int axis) {
    char what[160];
    snprintf(what, sizeof what, "%s %s [%lld,%lld]%s%s%s axis %d",
             row_names[op], em_dtype_name(d), (long long)rows,
             (long long)cols, strided ? " strided" : "",
             affine ? " weight+bias" : "", edges ? " edges" : "", axis);
    em_array *x = input(d, rows, cols, strided, edges);
    int64_t vshape[1] = {cols};
    em_array *w = affine ? random_array(d, vshape, 1, false, 0) : NULL;
    em_array *b = affine ? random_array(d, vshape, 1, false, 0) : NULL;
    em_array *xg = to_gpu(x), *wg = to_gpu(w), *bg = to_gpu(b);
    em_array *yc = NULL, *yg = NULL;
    die_on(run_rows(op, x, w, b, axis, &yc), what);
    die_on(run_rows(op, xg, wg, bg, axis, &yg), what);
    if (yc && yg) {
        /* Errors against |cpu| + floor: norms subtract and sum terms of
         * magnitude ~1 (long rows leave results far below the rounding of
         * those terms); softmax probabilities near zero may round to 0 on
         * one device and to f16's smallest normal on the other. */
        double floor = op != SOFTMAX ? 1.0 : d == EM_F16 ? 1e-2 : 1e-3;
        double worst = compare_floor(yc, yg, what, 16, floor);
        record("fast", what, worst <= 1, worst);
    }
    em_array *all[] = {x, w, b, xg, wg, bg, yc, yg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        em_array_release(all[i]);
}

/* Rows that start one element past an aligned address: a view of a flat
 * array from element 1, reshaped, so the kernels' 16-byte packs cannot be
 * used though the row length allows them (the single-element path). */
static void offset_rows_case(row_op op, em_dtype d, int64_t rows,
                             int64_t cols) {
    char what[160];
    snprintf(what, sizeof what, "%s %s [%lld,%lld] from element 1",
             row_names[op], em_dtype_name(d), (long long)rows,
             (long long)cols);
    int64_t flat[1] = {rows * cols + 1};
    em_array *base = random_array(d, flat, 1, false, 0);
    em_array *base_g = to_gpu(base);
    em_array *ys[2] = {NULL, NULL};
    em_array *bases[2] = {base, base_g};
    for (int k = 0; k < 2; k++) {
        int64_t start[1] = {1}, stop[1] = {rows * cols + 1}, step[1] = {1};
        int64_t shape[2] = {rows, cols};
        em_array *s = NULL, *x = NULL;
        die_on(em_slice(bases[k], start, stop, step, &s), "slice");
        die_on(em_reshape(s, shape, 2, &x), "reshape");
        die_on(run_rows(op, x, NULL, NULL, -1, &ys[k]), what);
        em_array_release(s);
        em_array_release(x);
    }
    if (ys[0] && ys[1]) {
        double floor = op != SOFTMAX ? 1.0 : d == EM_F16 ? 1e-2 : 1e-3;
        double worst = compare_floor(ys[0], ys[1], what, 16, floor);
        record("fast", what, worst <= 1, worst);
    }
    em_array *all[] = {base, base_g, ys[0], ys[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        em_array_release(all[i]);
}

static void rope_case(em_dtype d, int64_t heads, int64_t L, int64_t D,
                      int64_t dims, bool traditional, bool freqs,
                      bool s64_offset, bool strided) {
    char what[160];
    snprintf(what, sizeof what,
             "rope %s [2,%lld,%lld,%lld] dims %lld%s%s%s%s", em_dtype_name(d),
             (long long)heads, (long long)L, (long long)D, (long long)dims,
             traditional ? " traditional" : "", freqs ? " freqs" : "",
             s64_offset ? " s64" : "", strided ? " strided" : "");
    /* strided: a (L, 2, heads, D) array viewed as (2, heads, L, D) */
    int64_t shape[4] = {2, heads, L, D}, sshape[4] = {L, 2, heads, D};
    em_array *base = random_array(d, strided ? sshape : shape, 4, false, 0);
    em_array *x = base;
    if (strided) {
        int perm[4] = {1, 2, 0, 3};
        x = NULL;
        die_on(em_transpose(base, perm, 4, &x), "transpose");
        em_array_release(base);
    }
    em_array *off = NULL, *fr = NULL;
    die_on(em_scalar_s64(4093, s64_offset ? EM_S64 : EM_S32, &off), "offset");
    if (freqs) {
        float fv[64];
        for (int64_t i = 0; i < dims / 2; i++)
            fv[i] = (float)(pow(10000.0, 2.0 * (double)i / (double)dims) *
                            (1.0 + 3.0 * next_unit()));
        int64_t fshape[1] = {dims / 2};
        die_on(em_from_data(fv, (size_t)(dims / 2) * sizeof(float), fshape, 1,
                            EM_F32, &fr),
               "freqs");
    }
    em_array *xg = to_gpu(x), *offg = to_gpu(off), *frg = to_gpu(fr);
    em_rope_options oc = {dims, traditional, 500000.0, 0.5, fr};
    em_rope_options og = oc;
    og.freqs = frg;
    em_array *yc = NULL, *yg = NULL;
    die_on(em_rope(x, off, &oc, &yc), what);
    die_on(em_rope(xg, offg, &og, &yg), what);
    if (yc && yg) {
        /* The angle's rounding (pow on the GPU, a table on the CPU) moves
         * results by a few ulp of the inputs' magnitude (~1), not of the
         * (possibly tiny) rotated value. */
        double worst = compare_floor(yc, yg, what, 8, 1.0);
        record("fast", what, worst <= 1, worst);
    }
    em_array *all[] = {x, off, fr, xg, offg, frg, yc, yg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        em_array_release(all[i]);
}

void test_fast(void) {
    const em_dtype dtypes[] = {EM_F32, EM_F16, EM_BF16, EM_F64};
    const int64_t cols[] = {1, 7, 33, 256, 1000, 4096, 20000};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        em_dtype d = dtypes[k];
        if (skip_dtype(d))
            continue;
        for (int op = 0; op < 3; op++)
            for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
                if (quick && c % 2)
                    continue;
                int64_t rows = cols[c] > 4096 ? 3 : 37;
                rows_case((row_op)op, d, rows, cols[c], false, false, false,
                          -1);
                if (op != SOFTMAX)
                    rows_case((row_op)op, d, rows, cols[c], c % 2, true,
                              false, -1);
            }
        for (int op = 0; op < 3; op++) {
            rows_case((row_op)op, d, 50, 300, true, op == LAYER, true, -1);
            rows_case((row_op)op, d, 9, 130, false, false, true, -1);
        }
        /* The GPU's row kernels by row length: several rows per block,
         * registers (up to 8 packs per thread), and rows too long for the
         * registers (streamed); lengths that are not whole 16-byte packs;
         * rows off 16-byte alignment. */
        const int64_t long_cols[] = {8192, 16384, 16385, 32768, 40000, 65536,
                                     100003};
        for (int op = 0; op < 3; op++) {
            rows_case((row_op)op, d, 1000, 5, false, op != SOFTMAX, false,
                      -1);
            rows_case((row_op)op, d, 333, 96, false, false, false, -1);
            for (size_t c = 0; c < sizeof long_cols / sizeof long_cols[0];
                 c++) {
                if (quick && c % 2)
                    continue;
                rows_case((row_op)op, d, c % 2 ? 2 : 5, long_cols[c], false,
                          c == 2, c == 4, -1);
            }
            offset_rows_case((row_op)op, d, 17, 64);
            offset_rows_case((row_op)op, d, 3, 20000);
        }
        rows_case(SOFTMAX, d, 40, 17, false, false, false, 0);
        rows_case(SOFTMAX, d, 40, 17, true, false, false, -1);
        rope_case(d, 3, 9, 64, 64, false, false, false, false);
        rope_case(d, 3, 9, 64, 64, true, false, true, false);
        rope_case(d, 2, 5, 80, 32, false, true, false, true);
        rope_case(d, 2, 5, 80, 32, true, true, true, true);
        rope_case(d, 4, 1, 128, 128, false, false, true, false); /* decode */
    }
}
