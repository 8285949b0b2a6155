/*
 * test_quant.c — affine quantization (include/emily_quant.h): words packed
 * by hand for every bits value (codes straddling words included), exact
 * round trips of representable values, the matmul against dequantize +
 * matmul, the vjp and validation errors.
 */
#include "emily_autodiff.h"
#include "emily_quant.h"
#include "test.h"

#include <stdlib.h>

static em_array *u32_array(const uint32_t *words, int64_t rows, int64_t n) {
    const int64_t shape[] = {rows, n};
    em_array *a = NULL;
    CHECK_OK(em_from_data(words, (size_t)(rows * n) * 4, shape, 2, EM_U32, &a));
    return a;
}

static em_array *filled(double v, int64_t rows, int64_t n, em_dtype dt) {
    const int64_t shape[] = {rows, n};
    double *vals = malloc((size_t)(rows * n) * sizeof *vals);
    for (int64_t i = 0; i < rows * n; i++)
        vals[i] = v;
    em_array *a = t_from_f64(vals, shape, 2, dt);
    free(vals);
    return a;
}

/* The 32 codes of one group of 32 packed in `bits` words, read back through
 * dequantize with scale 1 and bias 0 (so the values are the codes). */
static void check_codes(const uint32_t *words, int bits, const int *codes) {
    em_array *wq = u32_array(words, 1, bits);
    em_array *s = filled(1, 1, 1, EM_F32), *b = filled(0, 1, 1, EM_F32);
    em_array *out = NULL;
    CHECK_OK(em_dequantize(wq, s, b, 32, bits, EM_F32, &out));
    double got[32];
    if (out) {
        t_read_f64(out, got, 32);
        for (int i = 0; i < 32; i++)
            if (got[i] != codes[i])
                em_test_fail(__FILE__, __LINE__, "bits %d lane %d: %g, wanted %d",
                             bits, i, got[i], codes[i]);
    }
    em_array *arrs[] = {wq, s, b, out};
    for (int i = 0; i < 4; i++)
        em_array_release(arrs[i]);
}

EM_TEST(quant_hand_packed_power_of_two_bits) {
    int codes[32];
    /* 2 bits: 0,1,2,3 repeated: every byte is 0b11100100 */
    const uint32_t w2[2] = {0xE4E4E4E4u, 0xE4E4E4E4u};
    for (int i = 0; i < 32; i++)
        codes[i] = i % 4;
    check_codes(w2, 2, codes);
    /* 4 bits: 0..15 twice, nibble i of word i/8 */
    const uint32_t w4[4] = {0x76543210u, 0xFEDCBA98u, 0x76543210u,
                            0xFEDCBA98u};
    for (int i = 0; i < 32; i++)
        codes[i] = i % 16;
    check_codes(w4, 4, codes);
    /* 8 bits: byte i is lane i */
    uint32_t w8[8];
    for (int i = 0; i < 8; i++)
        w8[i] = (uint32_t)(4 * i) | (uint32_t)(4 * i + 1) << 8 |
                (uint32_t)(4 * i + 2) << 16 | (uint32_t)(4 * i + 3) << 24;
    for (int i = 0; i < 32; i++)
        codes[i] = i;
    check_codes(w8, 8, codes);
}

EM_TEST(quant_hand_packed_straddling_bits) {
    int codes[32];
    /* 3 bits: lane 10 at bit 30 straddles words 0-1; code 5 = 0b101 puts
     * bit 30 of word 0 and bit 0 of word 1. Lane 0 = 3 (bits 0-1). */
    const uint32_t w3[3] = {0x40000003u, 0x00000001u, 0};
    memset(codes, 0, sizeof codes);
    codes[0] = 3;
    codes[10] = 5;
    check_codes(w3, 3, codes);
    /* 5 bits: lane 6 at bit 30: code 19 = 0b10011 -> bits 30, 31 of word 0
     * and 0b100 in word 1; lane 12 at bit 60: code 31 -> bits 28-31 of
     * word 1 and bit 0 of word 2; lane 31 at bits 155-159: code 17. */
    const uint32_t w5[5] = {0xC0000000u, 0xF0000004u, 0x00000001u, 0,
                            0x88000000u};
    memset(codes, 0, sizeof codes);
    codes[6] = 19;
    codes[12] = 31;
    codes[31] = 17;
    check_codes(w5, 5, codes);
    /* 6 bits: lane 5 at bit 30: code 45 = 0b101101 -> bit 30 of word 0 and
     * 0b1011 in word 1; lane 16 at bit 96 = word 3 bit 0: code 63. */
    const uint32_t w6[6] = {0x40000000u, 0x0000000Bu, 0, 0x0000003Fu, 0, 0};
    memset(codes, 0, sizeof codes);
    codes[5] = 45;
    codes[16] = 63;
    check_codes(w6, 6, codes);
}

/* Values q * s + b with s a power of two and both ends of the code range
 * present come back exactly, for every bits value and float dtype. */
EM_TEST(quant_exact_round_trip) {
    static const int bits_list[] = {2, 3, 4, 5, 6, 8};
    static const em_dtype dts[] = {EM_F32, EM_F16, EM_BF16};
    for (int d = 0; d < 3; d++)
        for (int bi = 0; bi < 6; bi++) {
            const int bits = bits_list[bi], levels = 1 << bits;
            double vals[2 * 64];
            for (int i = 0; i < 128; i++) /* group 0: 0.25 steps from -1 */
                vals[i] = (i < 64 ? -1.0 : 3.0) +
                          (i < 64 ? 0.25 : -0.5) * ((i * 7) % levels);
            vals[5] = -1.0 + 0.25 * (levels - 1); /* both ends present */
            vals[6] = -1.0;
            vals[70] = 3.0 - 0.5 * (levels - 1);
            vals[71] = 3.0;
            const int64_t shape[] = {2, 64};
            em_array *w = t_from_f64(vals, shape, 2, dts[d]);
            em_array *wq = NULL, *s = NULL, *b = NULL, *out = NULL;
            CHECK_OK(em_quantize(w, 64, bits, &wq, &s, &b));
            CHECK_OK(em_dequantize(wq, s, b, 64, bits, dts[d], &out));
            double got[128];
            if (out) {
                t_read_f64(out, got, 128);
                for (int i = 0; i < 128; i++)
                    if (got[i] != vals[i])
                        em_test_fail(__FILE__, __LINE__,
                                     "%s bits %d [%d]: %g, wanted %g",
                                     em_dtype_name(dts[d]), bits, i, got[i],
                                     vals[i]);
            }
            em_array *arrs[] = {w, wq, s, b, out};
            for (int i = 0; i < 5; i++)
                em_array_release(arrs[i]);
        }
}

/* quantized_matmul both ways and its vjp against dequantize + matmul. */
static void matmul_case(bool transpose, int64_t M) {
    const int64_t R = 24, L = 128; /* w rows, unpacked row length */
    double *wv = malloc(sizeof(double) * R * L);
    for (int64_t i = 0; i < R * L; i++)
        wv[i] = sin(0.37 * (double)i) + 0.1 * cos(1.3 * (double)i);
    const int64_t wshape[] = {R, L};
    em_array *w = t_from_f64(wv, wshape, 2, EM_F32);
    em_array *wq = NULL, *s = NULL, *b = NULL, *d = NULL;
    CHECK_OK(em_quantize(w, 64, 4, &wq, &s, &b));
    CHECK_OK(em_dequantize(wq, s, b, 64, 4, EM_F32, &d));
    const int64_t K = transpose ? L : R, N = transpose ? R : L;
    double *xv = malloc(sizeof(double) * M * K);
    for (int64_t i = 0; i < M * K; i++)
        xv[i] = cos(0.11 * (double)i);
    const int64_t xshape[] = {M, K};
    em_array *x = t_from_f64(xv, xshape, 2, EM_F32), *wrap = NULL;
    CHECK_OK(em_identity(x, &wrap));
    em_array *y = NULL, *dt = NULL, *ref = NULL;
    CHECK_OK(em_quantized_matmul(wrap, wq, s, b, transpose, 64, 4, &y));
    const int perm[] = {1, 0};
    em_array *dd = d;
    if (transpose) {
        CHECK_OK(em_transpose(d, perm, 2, &dt));
        dd = dt;
    }
    CHECK_OK(em_matmul(x, dd, &ref));
    /* vjp: cotangent c gives dx = c @ D (transpose) or c @ D^T */
    em_array *c = filled(0.5, M, N, EM_F32), *grad = NULL, *gref = NULL;
    CHECK_OK(em_vjp(&y, &c, 1, &wrap, 1, &grad));
    double *got = malloc(sizeof(double) * M * N);
    double *want = malloc(sizeof(double) * M * N);
    t_read_f64(y, got, (size_t)(M * N));
    t_read_f64(ref, want, (size_t)(M * N));
    for (int64_t i = 0; i < M * N; i++)
        CHECK_NEAR(got[i], want[i], 1e-4 * (1 + fabs(want[i])));
    em_array *other = transpose ? d : NULL, *dT = NULL;
    if (!transpose) {
        CHECK_OK(em_transpose(d, perm, 2, &dT));
        other = dT;
    }
    CHECK_OK(em_matmul(c, other, &gref));
    double *g1 = malloc(sizeof(double) * M * K), *g2 = malloc(sizeof(double) * M * K);
    if (grad && gref) {
        CHECK(em_array_ndim(grad) == 2 && em_array_shape(grad)[1] == K);
        t_read_f64(grad, g1, (size_t)(M * K));
        t_read_f64(gref, g2, (size_t)(M * K));
        for (int64_t i = 0; i < M * K; i++)
            CHECK_NEAR(g1[i], g2[i], 1e-4 * (1 + fabs(g2[i])));
    }
    em_array *arrs[] = {w, wq, s, b, d, x, wrap, y, dt, ref, c, grad, gref, dT};
    for (int i = 0; i < 14; i++)
        em_array_release(arrs[i]);
    free(wv), free(xv), free(got), free(want), free(g1), free(g2);
}

EM_TEST(quant_matmul_and_vjp) {
    const int64_t ms[] = {1, 5, 20};
    for (int i = 0; i < 3; i++) {
        matmul_case(true, ms[i]);
        matmul_case(false, ms[i]);
    }
}

EM_TEST(quant_errors) {
    em_array *w = filled(1, 4, 64, EM_F32), *wq = NULL, *s = NULL, *b = NULL;
    CHECK_ERR(em_quantize(w, 48, 4, &wq, &s, &b), EM_ERR_ARGUMENT,
              "group_size must be 32, 64 or 128");
    CHECK_ERR(em_quantize(w, 32, 7, &wq, &s, &b), EM_ERR_ARGUMENT,
              "bits must be 2, 3, 4, 5, 6 or 8");
    CHECK_ERR(em_quantize(w, 128, 4, &wq, &s, &b), EM_ERR_ARGUMENT,
              "f32[4,64]");
    em_array *wi = filled(1, 4, 64, EM_S32);
    CHECK_ERR(em_quantize(wi, 32, 4, &wq, &s, &b), EM_ERR_ARGUMENT,
              "must be f32, f16 or bf16");
    CHECK_OK(em_quantize(w, 32, 4, &wq, &s, &b));
    em_array *x = filled(1, 2, 32, EM_F32), *out = NULL;
    CHECK_ERR(em_quantized_matmul(x, wq, s, b, true, 32, 4, &out),
              EM_ERR_ARGUMENT, "f32[2,32]");
    CHECK_ERR(em_quantized_matmul(x, wq, s, b, true, 32, 8, &out),
              EM_ERR_ARGUMENT, "do not match");
    CHECK_ERR(em_dequantize(wq, b, s, 32, 4, EM_S32, &out), EM_ERR_ARGUMENT,
              "output dtype");
    CHECK_ERR(em_dequantize(wq, wq, s, 32, 4, EM_F32, &out), EM_ERR_ARGUMENT,
              "share one dtype");
    CHECK(out == NULL);
    em_array *arrs[] = {w, wq, s, b, wi, x};
    for (int i = 0; i < 6; i++)
        em_array_release(arrs[i]);
}
