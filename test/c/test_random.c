/* Tests of the random-number primitives (include/emily_random.h) against
 * the Threefry-2x32-20 known answers and Nx.Random's documented values. */
#include "test.h"

#include "emily_random.h"

#include <stdlib.h>

static em_array *key_of(uint32_t k0, uint32_t k1) {
    uint32_t k[2] = {k0, k1};
    int64_t shape[1] = {2};
    em_array *a = NULL;
    CHECK_OK(em_from_data(k, sizeof k, shape, 1, EM_U32, &a));
    return a;
}

/* Hash one counter pair through em_threefry2x32. */
static void hash_pair(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1,
                      uint32_t *o) {
    em_array *key = key_of(k0, k1), *c = NULL, *out = NULL;
    uint32_t pair[2] = {x0, x1};
    int64_t shape[1] = {2};
    CHECK_OK(em_from_data(pair, sizeof pair, shape, 1, EM_U32, &c));
    CHECK_OK(em_threefry2x32(key, c, &out));
    CHECK_OK(em_read(out, o, 2 * sizeof(uint32_t)));
    em_array_release(out);
    em_array_release(c);
    em_array_release(key);
}

EM_TEST(threefry_known_answers) {
    /* The Random123 known-answer vectors for threefry2x32 with 20 rounds. */
    uint32_t o[2];
    hash_pair(0, 0, 0, 0, o);
    CHECK(o[0] == 0x6b200159u && o[1] == 0x99ba4efeu);
    hash_pair(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, o);
    CHECK(o[0] == 0x1cb996fcu && o[1] == 0xbb002be7u);
    hash_pair(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u, o);
    CHECK(o[0] == 0xc4923a9cu && o[1] == 0x483df7a0u);
}

EM_TEST(random_bits_split_layout) {
    /* Nx.Random.split(key(1701)) is the u32 bits of shape {2, 2}. */
    em_array *key = key_of(0, 1701), *out = NULL;
    int64_t shape[2] = {2, 2};
    CHECK_OK(em_random_bits(key, shape, 2, EM_U32, &out));
    uint32_t v[4];
    CHECK_OK(em_read(out, v, sizeof v));
    CHECK(v[0] == 56197195u && v[1] == 1801093307u);
    CHECK(v[2] == 961309823u && v[3] == 1704866707u);
    em_array_release(out);
    /* split(key(1701), parts: 4) */
    int64_t shape4[2] = {4, 2};
    CHECK_OK(em_random_bits(key, shape4, 2, EM_U32, &out));
    uint32_t w[8];
    CHECK_OK(em_read(out, w, sizeof w));
    CHECK(w[0] == 4000152724u && w[1] == 2030591747u);
    CHECK(w[6] == 3136765380u && w[7] == 433355682u);
    em_array_release(out);
    em_array_release(key);
}

EM_TEST(random_bits_odd_and_widths) {
    em_array *key = key_of(12, 34), *b32 = NULL, *b16 = NULL, *b8 = NULL,
             *b64 = NULL, *pairs = NULL, *hashed = NULL;
    enum { N = 7 };
    int64_t shape[1] = {N};
    CHECK_OK(em_random_bits(key, shape, 1, EM_U32, &b32));
    CHECK_OK(em_random_bits(key, shape, 1, EM_U16, &b16));
    CHECK_OK(em_random_bits(key, shape, 1, EM_U8, &b8));
    CHECK_OK(em_random_bits(key, shape, 1, EM_U64, &b64));
    uint32_t v32[N];
    uint16_t v16[N];
    uint8_t v8[N];
    uint64_t v64[N];
    CHECK_OK(em_read(b32, v32, sizeof v32));
    CHECK_OK(em_read(b16, v16, sizeof v16));
    CHECK_OK(em_read(b8, v8, sizeof v8));
    CHECK_OK(em_read(b64, v64, sizeof v64));
    /* n = 7: pairs (0,4) (1,5) (2,6) (3,0); words 0-3 are x0 results,
     * words 4-6 the x1 results of pairs 0-2. */
    uint32_t o[2];
    for (int i = 0; i < 4; i++) {
        hash_pair(12, 34, (uint32_t)i, i + 4 < N ? (uint32_t)(i + 4) : 0, o);
        CHECK(v32[i] == o[0]);
        if (i + 4 < N)
            CHECK(v32[i + 4] == o[1]);
    }
    for (int i = 0; i < N; i++) {
        CHECK(v16[i] == (uint16_t)v32[i]);
        CHECK(v8[i] == (uint8_t)v32[i]);
        /* u64: 14 counters, pair (i, 7 + i): high x0, low x1 */
        hash_pair(12, 34, (uint32_t)i, (uint32_t)(N + i), o);
        CHECK(v64[i] == (((uint64_t)o[0] << 32) | o[1]));
    }
    (void)pairs;
    (void)hashed;
    em_array_release(b32);
    em_array_release(b16);
    em_array_release(b8);
    em_array_release(b64);
    em_array_release(key);
}

EM_TEST(random_bits_large_parallel_matches_pairs) {
    /* A large draw (threaded) agrees with hashing the pairs one by one. */
    em_array *key = key_of(7, 9), *out = NULL;
    int64_t n = 300001, shape[1] = {n};
    CHECK_OK(em_random_bits(key, shape, 1, EM_U32, &out));
    uint32_t *v = malloc((size_t)n * 4);
    CHECK_OK(em_read(out, v, (size_t)n * 4));
    int64_t half = (n + 1) / 2;
    int64_t probes[] = {0, 1, 12345, half - 1, half, n - 1};
    for (size_t p = 0; p < sizeof probes / sizeof *probes; p++) {
        int64_t w = probes[p], i = w < half ? w : w - half;
        uint32_t o[2];
        hash_pair(7, 9, (uint32_t)i, i + half < n ? (uint32_t)(i + half) : 0,
                  o);
        CHECK(v[w] == (w < half ? o[0] : o[1]));
    }
    /* Bit balance: about half the bits are set. */
    uint64_t ones = 0;
    for (int64_t i = 0; i < n; i++)
        ones += (uint64_t)__builtin_popcount(v[i]);
    double frac = (double)ones / (32.0 * (double)n);
    CHECK_NEAR(frac, 0.5, 1e-3);
    free(v);
    em_array_release(out);
    em_array_release(key);
}

EM_TEST(random_strided_key_and_errors) {
    /* The key may be a view: row 1 of a {2, 2} array. */
    uint32_t k[4] = {5, 6, 0, 1701};
    int64_t shape[2] = {2, 2}, start[2] = {1, 0}, stop[2] = {2, 2},
            strides[2] = {1, 1}, one[1] = {2};
    em_array *keys = NULL, *row = NULL, *key = NULL, *out = NULL;
    CHECK_OK(em_from_data(k, sizeof k, shape, 2, EM_U32, &keys));
    CHECK_OK(em_slice(keys, start, stop, strides, &row));
    CHECK_OK(em_reshape(row, one, 1, &key));
    int64_t s2[2] = {2, 2};
    CHECK_OK(em_random_bits(key, s2, 2, EM_U32, &out));
    uint32_t v[4];
    CHECK_OK(em_read(out, v, sizeof v));
    CHECK(v[0] == 56197195u && v[3] == 1704866707u);
    em_array_release(out);
    out = NULL;

    CHECK_ERR(em_random_bits(keys, s2, 2, EM_U32, &out), EM_ERR_ARGUMENT,
              "expected u32[2]");
    CHECK_ERR(em_random_bits(key, s2, 2, EM_F32, &out), EM_ERR_ARGUMENT,
              "expected u8, u16, u32 or u64");
    em_array *flat = NULL;
    int64_t four[1] = {4};
    CHECK_OK(em_reshape(keys, four, 1, &flat));
    CHECK_ERR(em_threefry2x32(key, flat, &out), EM_ERR_ARGUMENT,
              "last axis of size 2");
    em_array_release(flat);
    CHECK_ERR(em_random_erf_inv(key, &out), EM_ERR_ARGUMENT,
              "expected a real float dtype");
    CHECK(out == NULL);
    em_array_release(key);
    em_array_release(row);
    em_array_release(keys);
}

EM_TEST(random_erf_inv_values) {
    double x[6] = {0.0, 0.5204998778130465, -0.5204998778130465, 1.0, -1.0,
                   0.999999};
    int64_t shape[1] = {6};
    em_array *a = t_from_f64(x, shape, 1, EM_F64), *out = NULL;
    CHECK_OK(em_random_erf_inv(a, &out));
    double y[6];
    t_read_f64(out, y, 6);
    CHECK(y[0] == 0.0);
    CHECK_NEAR(y[1], 0.5, 1e-7);
    CHECK_NEAR(y[2], -0.5, 1e-7);
    CHECK(isinf(y[3]) && y[3] > 0);
    CHECK(isinf(y[4]) && y[4] < 0);
    CHECK_NEAR(y[5], 3.458910737279, 1e-5);
    em_array_release(out);
    em_array_release(a);
    /* Out of range gives NaN; f16 works. */
    double z[2] = {1.5, 0.25};
    int64_t s2[1] = {2};
    a = t_from_f64(z, s2, 1, EM_F16);
    CHECK_OK(em_random_erf_inv(a, &out));
    t_read_f64(out, y, 2);
    CHECK(isnan(y[0]));
    CHECK_NEAR(y[1], 0.2253, 1e-3);
    em_array_release(out);
    em_array_release(a);
}
