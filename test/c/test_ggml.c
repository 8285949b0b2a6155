/* ggml block formats (include/emily_ggml.h): hand-built blocks whose
 * weights are small integers, so dequantization and products are exact;
 * and random blocks of every type through the streaming matrix-vector
 * kernels, against their dequantized weights. */
#include "emily_ggml.h"
#include "test.h"

static em_array *raw_rows(const uint8_t *bytes, int64_t rows, int64_t cols) {
    const int64_t shape[2] = {rows, cols};
    em_array *a = NULL;
    CHECK_OK(em_from_data(bytes, (size_t)(rows * cols), shape, 2, EM_U8, &a));
    return a;
}

/* Dequantize one row of `type` into out (f64). */
static void dequant_row(const uint8_t *block, int64_t bytes, int type,
                        int64_t k, double *out) {
    em_array *raw = raw_rows(block, 1, bytes), *w = NULL;
    CHECK_OK(em_ggml_dequantize(raw, type, k, EM_F64, &w));
    t_read_f64(w, out, (size_t)k);
    em_array_release(w);
    em_array_release(raw);
}

EM_TEST(ggml_q4_0_nibble_order) {
    /* d = 1: byte j holds weight j (low nibble j) and weight j + 16 (high
     * nibble 15 - j): w[j] = j - 8, w[j + 16] = 7 - j. */
    uint8_t b[18] = {0x00, 0x3c};
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    double w[32];
    dequant_row(b, 18, EM_GGML_Q4_0, 32, w);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(w[j], j - 8, 0);
        CHECK_NEAR(w[j + 16], 7 - j, 0);
    }
    /* Against ones: sum of the weights = -16; with x = e_20: w[20] = 3. */
    double xv[64] = {0};
    for (int j = 0; j < 32; j++)
        xv[j] = 1;
    xv[32 + 20] = 1;
    const int64_t xs[2] = {2, 32};
    em_array *x = t_from_f64(xv, xs, 2, EM_F32), *raw = raw_rows(b, 1, 18);
    em_array *y = NULL;
    CHECK_OK(em_ggml_matmul(x, raw, EM_GGML_Q4_0, 32, &y));
    double got[2];
    t_read_f64(y, got, 2);
    CHECK_NEAR(got[0], -16, 0);
    CHECK_NEAR(got[1], 3, 0);
    em_array_release(y);
    em_array_release(raw);
    em_array_release(x);
}

EM_TEST(ggml_q5_0_fifth_bits) {
    /* d = 1, nibbles 0, qh = 0xffff0000: weights 16..31 get the fifth bit,
     * w = q - 16: first half -16, second half 0. */
    uint8_t b[22] = {0x00, 0x3c, 0x00, 0x00, 0xff, 0xff};
    double w[32];
    dequant_row(b, 22, EM_GGML_Q5_0, 32, w);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(w[j], -16, 0);
        CHECK_NEAR(w[j + 16], 0, 0);
    }
    /* q5_1 with d = 2, m = -1 and qh bit 3 only: w[3] = 2 * 16 - 1. */
    uint8_t c[24] = {0x00, 0x40, 0x00, 0xbc, 0x08, 0, 0, 0};
    dequant_row(c, 24, EM_GGML_Q5_1, 32, w);
    for (int j = 0; j < 32; j++)
        CHECK_NEAR(w[j], j == 3 ? 31 : -1, 0);
}

EM_TEST(ggml_q8_0_and_q4_1) {
    /* q8_0: d = 0.5, q = j - 16. */
    uint8_t b[34] = {0x00, 0x38};
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)(j - 16);
    double w[32];
    dequant_row(b, 34, EM_GGML_Q8_0, 32, w);
    for (int j = 0; j < 32; j++)
        CHECK_NEAR(w[j], 0.5 * (j - 16), 0);
    /* q4_1: d = 1, m = 0.5, nibbles 5 (low) and 10 (high). */
    uint8_t c[20] = {0x00, 0x3c, 0x00, 0x38};
    for (int j = 0; j < 16; j++)
        c[4 + j] = 0xa5;
    dequant_row(c, 20, EM_GGML_Q4_1, 32, w);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(w[j], 5.5, 0);
        CHECK_NEAR(w[j + 16], 10.5, 0);
    }
}

/* A q4_k block: d = 1, dmin = 0.5, sub-block s has scale s + 1 and min s,
 * every nibble 3: w = 3 (s + 1) - s / 2. */
static void q4_k_block(uint8_t *b) {
    memset(b, 0, 144);
    b[1] = 0x3c;
    b[3] = 0x38;
    uint8_t *sc = b + 4;
    for (int s = 0; s < 4; s++) {
        sc[s] = (uint8_t)(s + 1);
        sc[s + 4] = (uint8_t)s;
    }
    for (int s = 4; s < 8; s++) /* low nibble scale, high nibble min */
        sc[s + 4] = (uint8_t)((s + 1) | (s << 4));
    memset(b + 16, 0x33, 128);
}

EM_TEST(ggml_q4_k_scales_and_mins) {
    uint8_t b[144];
    q4_k_block(b);
    double w[256];
    dequant_row(b, 144, EM_GGML_Q4_K, 256, w);
    for (int e = 0; e < 256; e++) {
        int s = e / 32;
        CHECK_NEAR(w[e], 3.0 * (s + 1) - 0.5 * s, 0);
    }
    /* A six-bit scale's top bits live in bytes 0..7: scale of sub-block 4
     * = low nibble of byte 8 | top bits of byte 0 << 4. */
    b[4 + 0] |= 0x40; /* scale 4 gains 16 */
    dequant_row(b, 144, EM_GGML_Q4_K, 256, w);
    CHECK_NEAR(w[4 * 32], 3.0 * (5 + 16) - 0.5 * 4, 0);
    CHECK_NEAR(w[0], 3.0, 0);
}

/* q6_k: d = 1, scales i - 8, ql 0x21, qh 0xe4 (2-bit parts 0, 1, 2, 3):
 * quarter t of each half has q = 1 - 32, 17 - 32, 34 - 32, 50 - 32. */
static double q6_k_weight(int e) {
    static const int q[4] = {-31, -15, 2, 18};
    return (double)(e / 16 - 8) * q[(e % 128) / 32];
}

EM_TEST(ggml_q6_k_layout_and_products) {
    uint8_t b[210];
    memset(b, 0x21, 128);
    memset(b + 128, 0xe4, 64);
    for (int i = 0; i < 16; i++)
        b[192 + i] = (uint8_t)(int8_t)(i - 8);
    b[208] = 0x00;
    b[209] = 0x3c;
    double w[256];
    dequant_row(b, 210, EM_GGML_Q6_K, 256, w);
    for (int e = 0; e < 256; e++)
        CHECK_NEAR(w[e], q6_k_weight(e), 0);

    /* Two weight rows (q6_k, then the q4_k block), 12 rows of x (the
     * decode-tiles + sgemm path) and 1 row (the streaming path): x[i][e] =
     * (e % 5) - 2 + i, so every product is an exact small integer. */
    uint8_t rows[2][210];
    memcpy(rows[0], b, 210);
    em_array *raw6 = raw_rows(&rows[0][0], 1, 210);
    uint8_t kb[144];
    q4_k_block(kb);
    em_array *raw4 = raw_rows(kb, 1, 144);
    for (int m = 1; m <= 12; m += 11) {
        double xv[12 * 256];
        for (int i = 0; i < m; i++)
            for (int e = 0; e < 256; e++)
                xv[i * 256 + e] = (e % 5) - 2 + i;
        const int64_t xs[2] = {m, 256};
        em_array *x = t_from_f64(xv, xs, 2, EM_F32);
        em_array *y6 = NULL, *y4 = NULL;
        CHECK_OK(em_ggml_matmul(x, raw6, EM_GGML_Q6_K, 256, &y6));
        CHECK_OK(em_ggml_matmul(x, raw4, EM_GGML_Q4_K, 256, &y4));
        double g6[12], g4[12];
        t_read_f64(y6, g6, (size_t)m);
        t_read_f64(y4, g4, (size_t)m);
        for (int i = 0; i < m; i++) {
            double w6 = 0, w4 = 0;
            for (int e = 0; e < 256; e++) {
                w6 += q6_k_weight(e) * xv[i * 256 + e];
                w4 += (3.0 * (e / 32 + 1) - 0.5 * (e / 32)) * xv[i * 256 + e];
            }
            CHECK_NEAR(g6[i], w6, 0);
            CHECK_NEAR(g4[i], w4, 0);
        }
        em_array_release(y6);
        em_array_release(y4);
        em_array_release(x);
    }
    em_array_release(raw4);
    em_array_release(raw6);
}

EM_TEST(ggml_errors) {
    uint8_t b[36] = {0};
    em_array *raw = raw_rows(b, 2, 18), *out = NULL;
    const int64_t xs[2] = {1, 32};
    double xv[32] = {0};
    em_array *x = t_from_f64(xv, xs, 2, EM_F32);
    CHECK_ERR(em_ggml_dequantize(raw, 5, 32, EM_F32, &out), EM_ERR_ARGUMENT,
              "ggml type 5");
    CHECK_ERR(em_ggml_dequantize(raw, EM_GGML_F16, 32, EM_F32, &out),
              EM_ERR_ARGUMENT, "(f16) is not a block format");
    CHECK_ERR(em_ggml_dequantize(raw, EM_GGML_Q4_0, 48, EM_F32, &out),
              EM_ERR_ARGUMENT, "multiple of q4_0's block of 32");
    CHECK_ERR(em_ggml_dequantize(raw, EM_GGML_Q8_0, 32, EM_F32, &out),
              EM_ERR_ARGUMENT, "(N, 34)");
    CHECK_ERR(em_ggml_dequantize(raw, EM_GGML_Q4_0, 32, EM_S32, &out),
              EM_ERR_ARGUMENT, "s32 is not one of");
    CHECK_ERR(em_ggml_matmul(raw, raw, EM_GGML_Q4_0, 32, &out),
              EM_ERR_ARGUMENT, "u8[2,18] must be f32, f16 or bf16");
    CHECK_ERR(em_ggml_matmul(x, raw, EM_GGML_Q4_0, 64, &out),
              EM_ERR_ARGUMENT, "ggml_matmul");
    CHECK(out == NULL);
    em_array_release(x);
    em_array_release(raw);
}

/* Random bytes as blocks of `type`, with every half scale a small normal
 * (high byte 0x20..0x2f) so that no weight is inf or nan. */
static void random_blocks(int type, uint8_t *raw, int64_t nblocks,
                          int64_t bytes, uint32_t *seed) {
    for (int64_t i = 0; i < nblocks * bytes; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        raw[i] = (uint8_t)(*seed >> 24);
    }
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = raw + b * bytes;
        const int d = type == EM_GGML_Q6_K ? 208 : 0;
        blk[d + 1] = (uint8_t)(0x20 | (blk[d + 1] & 0x0f));
        if (type == EM_GGML_Q4_1 || type == EM_GGML_Q5_1 ||
            type == EM_GGML_Q4_K || type == EM_GGML_Q5_K)
            blk[3] = (uint8_t)(0x20 | (blk[3] & 0x0f));
    }
}

EM_TEST(ggml_matmul_streaming_rows_every_type) {
    /* The streaming kernels decode 4 weight rows per pass (13 rows: 3
     * passes and a tail of 1) with a variant per number of x rows, 1..8.
     * Against the dequantized weights in f64, within the bound of f32
     * accumulation: 2 k 2^-24 sum |x| |w|. */
    static const int types[] = {EM_GGML_Q4_0, EM_GGML_Q4_1, EM_GGML_Q5_0,
                                EM_GGML_Q5_1, EM_GGML_Q8_0, EM_GGML_Q4_K,
                                EM_GGML_Q5_K, EM_GGML_Q6_K};
    enum { N = 13, K = 512, MAX_M = 8 };
    static uint8_t raw[N * K / 32 * 34];
    static double w[N * K], xv[MAX_M * K];
    uint32_t seed = 12345;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        int64_t be, bb;
        CHECK_OK(em_ggml_type_info(types[t], &be, &bb));
        random_blocks(types[t], raw, N * K / be, bb, &seed);
        em_array *ra = raw_rows(raw, N, K / be * bb), *wd = NULL;
        CHECK_OK(em_ggml_dequantize(ra, types[t], K, EM_F64, &wd));
        t_read_f64(wd, w, N * K);
        em_array_release(wd);
        for (int m = 1; m <= MAX_M; m++) {
            for (int i = 0; i < m * K; i++)
                xv[i] = ((i * 7 + m) % 19 - 9) / 8.0;
            const int64_t xs[2] = {m, K};
            em_array *x = t_from_f64(xv, xs, 2, EM_F32), *y = NULL;
            CHECK_OK(em_ggml_matmul(x, ra, types[t], K, &y));
            double got[MAX_M * N];
            t_read_f64(y, got, (size_t)(m * N));
            for (int i = 0; i < m; i++)
                for (int r = 0; r < N; r++) {
                    double want = 0, mag = 0;
                    for (int e = 0; e < K; e++) {
                        want += xv[i * K + e] * w[r * K + e];
                        mag += fabs(xv[i * K + e] * w[r * K + e]);
                    }
                    CHECK_NEAR(got[i * N + r], want,
                               2.0 * K * ldexp(1.0, -24) * mag);
                }
            em_array_release(y);
            em_array_release(x);
        }
        em_array_release(ra);
    }
}
