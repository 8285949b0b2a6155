/* Weight files (include/emily_io.h): safetensors and GGUF built byte by
 * byte in memory, good files of every dtype and value type, and each kind
 * of hostile file. */
#include "emily_ggml.h"
#include "emily_io.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- a byte builder ----------------------------------------------------- */

typedef struct bytes {
    uint8_t data[8192];
    size_t len;
} bytes;

static void put(bytes *b, const void *p, size_t n) {
    if (b->len + n > sizeof b->data) {
        em_test_fail(__FILE__, __LINE__, "test builder overflow");
        return;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}
static void put_u8(bytes *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void pad_to(bytes *b, size_t align) {
    while (b->len % align)
        put_u8(b, 0);
}

/* A safetensors file from a header text and `ndata` data bytes. */
static void st_file(bytes *b, const char *header, const void *data,
                    size_t ndata) {
    b->len = 0;
    put_u64(b, strlen(header));
    put(b, header, strlen(header));
    put(b, data, ndata);
}

/* ---- JSON, through the index parser ------------------------------------- */

EM_TEST(io_json_index) {
    const char *text = " {\"metadata\": {\"total_size\": 12.5e3, \"x\": [true,"
                       " false, null, -0, 1e400]},\n \"weight_map\": {\"a.b\":"
                       " \"model-1.safetensors\", \"\\u00e9\\ud83d\\ude00\\n\":"
                       " \"m\\/2\"}} ";
    em_safetensors_index *ix;
    CHECK_OK(em_safetensors_index_parse(text, strlen(text), &ix));
    if (!ix)
        return;
    CHECK(em_safetensors_index_count(ix) == 2);
    const char *t, *f;
    CHECK_OK(em_safetensors_index_at(ix, 0, &t, &f));
    CHECK(strcmp(t, "a.b") == 0 && strcmp(f, "model-1.safetensors") == 0);
    CHECK_OK(em_safetensors_index_at(ix, 1, &t, &f));
    CHECK(strcmp(t, "\xc3\xa9\xf0\x9f\x98\x80\n") == 0 && strcmp(f, "m/2") == 0);
    CHECK_ERR(em_safetensors_index_at(ix, 2, &t, &f), EM_ERR_ARGUMENT,
              "out of range");
    em_safetensors_index_close(ix);

    static const char *const bad[] = {
        "",           "{",           "{\"weight_map\": {}",  "[1,]",
        "{\"a\" 1}",  "01",          "1.",                   "-",
        "\"abc",      "\"\\x\"",     "\"\\ud800\"",          "\"\\u12\"",
        "tru",        "{} x",        "\"a\x01\"",            "{\"a\":1,}",
        "+1",         "{\"weight_map\": 3}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        em_status st = em_safetensors_index_parse(bad[i], strlen(bad[i]), &ix);
        if (st != EM_ERR_ARGUMENT || ix)
            em_test_fail(__FILE__, __LINE__, "accepted bad JSON %zu: %s", i,
                         bad[i]);
    }
    /* Depth is bounded. */
    char deep[300];
    memset(deep, '[', sizeof deep);
    CHECK_ERR(em_safetensors_index_parse(deep, sizeof deep, &ix),
              EM_ERR_ARGUMENT, "nested too deeply");
}

/* ---- safetensors -------------------------------------------------------- */

EM_TEST(io_safetensors_every_dtype) {
    static const struct {
        const char *name;
        em_dtype dtype;
    } rows[] = {
        {"BOOL", EM_PRED}, {"U8", EM_U8},     {"I8", EM_S8},
        {"U16", EM_U16},   {"I16", EM_S16},   {"U32", EM_U32},
        {"I32", EM_S32},   {"U64", EM_U64},   {"I64", EM_S64},
        {"F16", EM_F16},   {"BF16", EM_BF16}, {"F32", EM_F32},
        {"F64", EM_F64},   {"C64", EM_C64},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        size_t es = em_dtype_size(rows[r].dtype);
        uint8_t data[6 * 8];
        for (size_t i = 0; i < sizeof data; i++)
            data[i] = (uint8_t)(rows[r].dtype == EM_PRED ? i % 2 : i * 7 + 1);
        char header[256];
        /* Padded with spaces to 8 bytes as writers do. */
        snprintf(header, sizeof header,
                 "{\"__metadata__\":{\"format\":\"pt\"},\"t\":{\"dtype\":\"%s\","
                 "\"shape\":[2,3],\"data_offsets\":[0,%zu]}}        ",
                 rows[r].name, 6 * es);
        header[(strlen(header) / 8) * 8] = '\0';
        bytes b;
        st_file(&b, header, data, 6 * es);
        em_safetensors *f;
        CHECK_OK(em_safetensors_open_memory(b.data, b.len, &f));
        if (!f)
            continue;
        CHECK(em_safetensors_count(f) == 1);
        CHECK(em_safetensors_metadata_count(f) == 1);
        em_safetensors_tensor t;
        CHECK_OK(em_safetensors_tensor_at(f, 0, &t));
        CHECK(strcmp(t.name, "t") == 0 && strcmp(t.dtype_name, rows[r].name) == 0);
        CHECK(t.dtype == (int)rows[r].dtype && t.ndim == 2 && t.shape[1] == 3);
        em_array *a;
        CHECK_OK(em_safetensors_get(f, "t", &a));
        em_safetensors_close(f); /* the array keeps the bytes */
        if (!a)
            continue;
        CHECK(em_array_dtype(a) == rows[r].dtype && em_array_size(a) == 6);
        uint8_t back[6 * 16];
        CHECK_OK(em_read(a, back, 6 * es));
        CHECK(memcmp(back, data, 6 * es) == 0);
        em_array_release(a);
    }
}

EM_TEST(io_safetensors_metadata_and_lookup) {
    const char *header =
        "{\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]},"
        "\"__metadata__\":{\"k1\":\"v1\",\"k\\\"2\":\"\\u00e9\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"e\":{\"dtype\":\"F8_E4M3\",\"shape\":[0,5],\"data_offsets\":[8,8]}}";
    float vals[2] = {1.5f, -2.0f};
    bytes b;
    st_file(&b, header, vals, 8);
    em_safetensors *f;
    CHECK_OK(em_safetensors_open_memory(b.data, b.len, &f));
    if (!f)
        return;
    CHECK(em_safetensors_count(f) == 3);
    CHECK(em_safetensors_find(f, "a") == 1 && em_safetensors_find(f, "b") == 0);
    CHECK(em_safetensors_find(f, "zz") == -1);
    const char *k, *v;
    CHECK_OK(em_safetensors_metadata_at(f, 1, &k, &v));
    CHECK(strcmp(k, "k\"2") == 0 && strcmp(v, "\xc3\xa9") == 0);
    em_array *a;
    CHECK_OK(em_safetensors_get(f, "b", &a));
    if (a) {
        CHECK(em_array_ndim(a) == 0);
        double x;
        t_read_f64(a, &x, 1);
        CHECK(x == -2.0);
        em_array_release(a);
    }
    CHECK_ERR(em_safetensors_get(f, "e", &a), EM_ERR_UNSUPPORTED, "F8_E4M3");
    CHECK_OK(em_safetensors_get_bytes(f, "e", &a));
    if (a) {
        CHECK(em_array_dtype(a) == EM_U8 && em_array_size(a) == 0);
        em_array_release(a);
    }
    CHECK_OK(em_safetensors_get_bytes(f, "b", &a));
    if (a) {
        float got;
        CHECK(em_array_size(a) == 4);
        CHECK_OK(em_read(a, &got, 4));
        CHECK(got == -2.0f);
        em_array_release(a);
    }
    CHECK_ERR(em_safetensors_get(f, "nope", &a), EM_ERR_ARGUMENT, "nope");
    em_safetensors_close(f);
}

/* A misaligned tensor is copied rather than aliased. */
EM_TEST(io_safetensors_misaligned_copy) {
    const char *header =
        "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
    uint8_t data[9] = {7};
    float y[2] = {3.25f, 4.5f};
    memcpy(data + 1, y, 8);
    bytes b;
    st_file(&b, header, data, 9);
    em_safetensors *f;
    CHECK_OK(em_safetensors_open_memory(b.data, b.len, &f));
    if (!f)
        return;
    em_array *a;
    CHECK_OK(em_safetensors_get(f, "y", &a));
    em_safetensors_close(f);
    double out[2];
    if (a) {
        t_read_f64(a, out, 2);
        CHECK(out[0] == 3.25 && out[1] == 4.5);
        em_array_release(a);
    }
}

EM_TEST(io_safetensors_hostile) {
    static const struct {
        const char *header;
        size_t ndata;
        const char *needle;
    } cases[] = {
        {"[1]", 0, "not a JSON object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
         "expected 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4,
         "outside"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
         "outside"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
         "dim 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,0]}}",
         0, "dim 0"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,"
         "4294967296],\"data_offsets\":[0,0]}}",
         0, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}",
         8, "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets"},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,5]}}",
         4, "data_offsets"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
        {"{\"__metadata__\":[]}", 0, "__metadata__"},
        {"{\"a\":3}", 0, "not an object"},
        {"{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
         "expected"},
        {"{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
         1, "NUL"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}", 1,
         "invalid JSON"},
    };
    uint8_t zeros[16] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bytes b;
        st_file(&b, cases[i].header, zeros, cases[i].ndata);
        em_safetensors *f = NULL;
        em_status st = em_safetensors_open_memory(b.data, b.len, &f);
        if (st != EM_ERR_ARGUMENT || f ||
            !strstr(em_last_error(), cases[i].needle))
            em_test_fail(__FILE__, __LINE__, "case %zu: %d %s (wanted %s)", i,
                         (int)st, em_last_error(), cases[i].needle);
        em_safetensors_close(f);
    }
    /* Truncated anywhere: every prefix of a good file is refused or, when
     * the cut only drops trailing data the header does not claim, parsed. */
    bytes good;
    float v[2] = {1, 2};
    st_file(&good,
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
            v, 8);
    for (size_t n = 0; n < good.len; n++) {
        em_safetensors *f = NULL;
        em_status st = em_safetensors_open_memory(good.data, n, &f);
        if (st != EM_ERR_ARGUMENT || f)
            em_test_fail(__FILE__, __LINE__, "prefix %zu accepted", n);
        em_safetensors_close(f);
    }
    /* A header length past the file, and an absurd one. */
    bytes b;
    b.len = 0;
    put_u64(&b, 1000);
    put(&b, "{}", 2);
    em_safetensors *f;
    CHECK_ERR(em_safetensors_open_memory(b.data, b.len, &f), EM_ERR_ARGUMENT,
              "header length 1000");
    b.len = 0;
    put_u64(&b, UINT64_MAX);
    CHECK_ERR(em_safetensors_open_memory(b.data, b.len, &f), EM_ERR_ARGUMENT,
              "header length");
}

EM_TEST(io_safetensors_save_round_trip) {
    char path[] = "/tmp/emily_test_io_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    double v[6] = {1, -2, 3.5, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    em_array *arrays[4];
    arrays[0] = t_from_f64(v, shape, 2, EM_F32);
    arrays[1] = t_from_f64(v, shape, 2, EM_S64);
    arrays[2] = t_from_f64(v, shape + 1, 1, EM_U8);
    em_array *tr = NULL;
    int perm[2] = {1, 0};
    CHECK_OK(em_transpose(arrays[0], perm, 2, &tr)); /* not contiguous */
    arrays[3] = tr;
    const char *names[4] = {"w\"q", "i64", "bytes", "w.T"};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    CHECK_OK(em_safetensors_save(path, names, arrays, 4, mk, mv, 1));
    em_safetensors *f;
    CHECK_OK(em_safetensors_open(path, &f));
    if (f) {
        CHECK(em_safetensors_count(f) == 4);
        /* 8-byte aligned header, tensors laid out by element size. */
        em_safetensors_tensor t;
        CHECK_OK(em_safetensors_tensor_at(f, 0, &t));
        CHECK(strcmp(t.name, "i64") == 0 && t.begin == 0);
        for (int i = 0; i < 4; i++) {
            em_array *a;
            CHECK_OK(em_safetensors_get(f, names[i], &a));
            if (!a)
                continue;
            double got[6], want[6];
            t_read_f64(a, got, (size_t)em_array_size(a));
            t_read_f64(arrays[i], want, (size_t)em_array_size(a));
            CHECK(memcmp(got, want, sizeof(double) * (size_t)em_array_size(a)) == 0);
            CHECK(em_array_ndim(a) == em_array_ndim(arrays[i]));
            em_array_release(a);
        }
        const char *k, *val;
        CHECK_OK(em_safetensors_metadata_at(f, 0, &k, &val));
        CHECK(strcmp(k, "format") == 0 && strcmp(val, "pt") == 0);
        em_safetensors_close(f);
    }
    /* Duplicate names are refused and the file is left as it was. */
    const char *dup[2] = {"x", "x"};
    CHECK_ERR(em_safetensors_save(path, dup, arrays, 2, NULL, NULL, 0),
              EM_ERR_ARGUMENT, "twice");
    for (int i = 0; i < 4; i++)
        em_array_release(arrays[i]);
    unlink(path);
}

/* ---- GGUF --------------------------------------------------------------- */

static void gguf_header(bytes *b, uint32_t version, uint64_t nt, uint64_t nk) {
    b->len = 0;
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, nt);
    put_u64(b, nk);
}

/* A file with one kv of every value type and four tensors: f32 (2x3),
 * f16 (4), q8_0 (2 rows of 32), and q2_k (unsupported, 256). */
static void gguf_good(bytes *b) {
    gguf_header(b, 3, 4, 16);
    put_str(b, "u8"); put_u32(b, EM_GGUF_U8); put_u8(b, 200);
    put_str(b, "i8"); put_u32(b, EM_GGUF_I8); put_u8(b, 0xFE);
    put_str(b, "u16"); put_u32(b, EM_GGUF_U16); put_u8(b, 0x34); put_u8(b, 0x12);
    put_str(b, "i16"); put_u32(b, EM_GGUF_I16); put_u8(b, 0xFF); put_u8(b, 0xFF);
    put_str(b, "u32"); put_u32(b, EM_GGUF_U32); put_u32(b, 4000000000u);
    put_str(b, "i32"); put_u32(b, EM_GGUF_I32); put_u32(b, (uint32_t)-7);
    float f = 0.5f;
    put_str(b, "f32"); put_u32(b, EM_GGUF_F32); put(b, &f, 4);
    put_str(b, "bool"); put_u32(b, EM_GGUF_BOOL); put_u8(b, 1);
    put_str(b, "str"); put_u32(b, EM_GGUF_STRING); put_str(b, "h\xc3\xa9llo");
    put_str(b, "u64"); put_u32(b, EM_GGUF_U64); put_u64(b, UINT64_MAX);
    put_str(b, "i64"); put_u32(b, EM_GGUF_I64); put_u64(b, (uint64_t)INT64_MIN);
    double d = -1.25;
    put_str(b, "f64"); put_u32(b, EM_GGUF_F64); put(b, &d, 8);
    put_str(b, "arr_i32"); put_u32(b, EM_GGUF_ARRAY); put_u32(b, EM_GGUF_I32);
    put_u64(b, 3); put_u32(b, 1); put_u32(b, (uint32_t)-2); put_u32(b, 3);
    put_str(b, "arr_str"); put_u32(b, EM_GGUF_ARRAY); put_u32(b, EM_GGUF_STRING);
    put_u64(b, 2); put_str(b, "ab"); put_str(b, "");
    /* [[true], [false, true]] */
    put_str(b, "nested"); put_u32(b, EM_GGUF_ARRAY); put_u32(b, EM_GGUF_ARRAY);
    put_u64(b, 2);
    put_u32(b, EM_GGUF_BOOL); put_u64(b, 1); put_u8(b, 1);
    put_u32(b, EM_GGUF_BOOL); put_u64(b, 2); put_u8(b, 0); put_u8(b, 1);
    put_str(b, "general.alignment"); put_u32(b, EM_GGUF_U32); put_u32(b, 64);
    /* tensor infos */
    put_str(b, "w"); put_u32(b, 2); put_u64(b, 3); put_u64(b, 2);
    put_u32(b, EM_GGML_F32); put_u64(b, 0);
    put_str(b, "h"); put_u32(b, 1); put_u64(b, 4);
    put_u32(b, EM_GGML_F16); put_u64(b, 64);
    put_str(b, "q"); put_u32(b, 2); put_u64(b, 32); put_u64(b, 2);
    put_u32(b, EM_GGML_Q8_0); put_u64(b, 128);
    put_str(b, "k2"); put_u32(b, 1); put_u64(b, 256);
    put_u32(b, 10 /* q2_k */); put_u64(b, 256);
    pad_to(b, 64);
    size_t base = b->len;
    float w[6] = {1, 2, 3, 4, 5, 6};
    put(b, w, sizeof w);
    pad_to(b, 64);
    uint16_t h[4] = {0x3C00, 0xC000, 0x3800, 0}; /* 1, -2, 0.5, 0 */
    put(b, h, sizeof h);
    while (b->len < base + 128)
        put_u8(b, 0);
    for (int row = 0; row < 2; row++) {
        put_u8(b, 0x00); put_u8(b, 0x3C); /* scale 1.0 */
        for (int i = 0; i < 32; i++)
            put_u8(b, (uint8_t)(row * 32 + i));
    }
    while (b->len < base + 256)
        put_u8(b, 0);
    for (int i = 0; i < 84; i++) /* one q2_k block's worth of bytes */
        put_u8(b, 0);
}

EM_TEST(io_gguf_good_file) {
    bytes b;
    gguf_good(&b);
    em_gguf *f;
    CHECK_OK(em_gguf_open_memory(b.data, b.len, &f));
    if (!f)
        return;
    CHECK(em_gguf_version(f) == 3 && em_gguf_alignment(f) == 64);
    CHECK(em_gguf_data_offset(f) % 64 == 0);
    CHECK(em_gguf_kv_count(f) == 16 && em_gguf_tensor_count(f) == 4);
    em_gguf_value v, e;
    int64_t i;
    uint64_t u;
    double x;
    const char *s;
    size_t n;
    CHECK_OK(em_gguf_find_kv(f, "u8", &v));
    CHECK(em_gguf_value_i64(&v, &i) == EM_OK && i == 200);
    CHECK_OK(em_gguf_find_kv(f, "i8", &v));
    CHECK(em_gguf_value_i64(&v, &i) == EM_OK && i == -2);
    CHECK_ERR(em_gguf_value_u64(&v, &u), EM_ERR_ARGUMENT, "u64");
    CHECK_OK(em_gguf_find_kv(f, "u16", &v));
    CHECK(em_gguf_value_u64(&v, &u) == EM_OK && u == 0x1234);
    CHECK_OK(em_gguf_find_kv(f, "i16", &v));
    CHECK(em_gguf_value_i64(&v, &i) == EM_OK && i == -1);
    CHECK_OK(em_gguf_find_kv(f, "u32", &v));
    CHECK(em_gguf_value_u64(&v, &u) == EM_OK && u == 4000000000u);
    CHECK_OK(em_gguf_find_kv(f, "i32", &v));
    CHECK(em_gguf_value_f64(&v, &x) == EM_OK && x == -7);
    CHECK_OK(em_gguf_find_kv(f, "f32", &v));
    CHECK(em_gguf_value_f64(&v, &x) == EM_OK && x == 0.5);
    CHECK_ERR(em_gguf_value_i64(&v, &i), EM_ERR_ARGUMENT, "f32");
    CHECK_OK(em_gguf_find_kv(f, "bool", &v));
    CHECK(v.type == EM_GGUF_BOOL && em_gguf_value_i64(&v, &i) == EM_OK && i == 1);
    CHECK_OK(em_gguf_find_kv(f, "str", &v));
    CHECK(em_gguf_value_string(&v, &s, &n) == EM_OK && n == 6 &&
          memcmp(s, "h\xc3\xa9llo", 6) == 0);
    CHECK_OK(em_gguf_find_kv(f, "u64", &v));
    CHECK(em_gguf_value_u64(&v, &u) == EM_OK && u == UINT64_MAX);
    CHECK_ERR(em_gguf_value_i64(&v, &i), EM_ERR_ARGUMENT, "i64");
    CHECK_OK(em_gguf_find_kv(f, "i64", &v));
    CHECK(em_gguf_value_i64(&v, &i) == EM_OK && i == INT64_MIN);
    CHECK_OK(em_gguf_find_kv(f, "f64", &v));
    CHECK(em_gguf_value_f64(&v, &x) == EM_OK && x == -1.25);
    CHECK_OK(em_gguf_find_kv(f, "arr_i32", &v));
    CHECK(v.type == EM_GGUF_ARRAY && v.elem_type == EM_GGUF_I32 && v.len == 3);
    CHECK_OK(em_gguf_value_element(&v, 1, &e));
    CHECK(em_gguf_value_i64(&e, &i) == EM_OK && i == -2);
    CHECK_ERR(em_gguf_value_element(&v, 3, &e), EM_ERR_ARGUMENT, "element 3");
    CHECK_OK(em_gguf_find_kv(f, "arr_str", &v));
    CHECK_OK(em_gguf_value_element(&v, 0, &e));
    CHECK(em_gguf_value_string(&e, &s, &n) == EM_OK && n == 2 && !memcmp(s, "ab", 2));
    CHECK_OK(em_gguf_value_element(&v, 1, &e));
    CHECK(em_gguf_value_string(&e, &s, &n) == EM_OK && n == 0);
    CHECK_OK(em_gguf_find_kv(f, "nested", &v));
    CHECK(v.len == 2 && v.elem_type == EM_GGUF_ARRAY);
    CHECK_OK(em_gguf_value_element(&v, 1, &e));
    CHECK(e.type == EM_GGUF_ARRAY && e.len == 2 && e.elem_type == EM_GGUF_BOOL);
    em_gguf_value inner;
    CHECK_OK(em_gguf_value_element(&e, 1, &inner));
    CHECK(em_gguf_value_i64(&inner, &i) == EM_OK && i == 1);
    CHECK_ERR(em_gguf_find_kv(f, "missing", &v), EM_ERR_ARGUMENT, "missing");

    /* Tensors. */
    em_gguf_tensor t;
    CHECK_OK(em_gguf_tensor_at(f, 0, &t));
    CHECK(t.n_dims == 2 && t.dims[0] == 3 && t.shape[0] == 2 && t.shape[1] == 3);
    CHECK(t.nbytes == 24 && strcmp(t.type_name, "f32") == 0);
    em_array *a;
    int type;
    CHECK_OK(em_gguf_get(f, "w", &a, &type));
    if (a) {
        CHECK(type == EM_GGML_F32 && em_array_shape(a)[0] == 2);
        /* Zero copy: the array's bytes are the mapping's. The first key's
         * text is at file offset 32 (24-byte header, 8-byte length). */
        const char *key;
        size_t key_len;
        CHECK_OK(em_gguf_kv_at(f, 0, &key, &key_len, &v));
        const void *bytes;
        size_t nbytes;
        CHECK_OK(em_array_data(a, &bytes, &nbytes));
        CHECK((const char *)bytes == key - 32 + em_gguf_data_offset(f));
        double got[6];
        t_read_f64(a, got, 6);
        CHECK(got[0] == 1 && got[5] == 6);
        em_array_release(a);
    }
    CHECK_OK(em_gguf_get(f, "h", &a, &type));
    if (a) {
        double got[4];
        t_read_f64(a, got, 4);
        CHECK(em_array_dtype(a) == EM_F16 && got[0] == 1 && got[1] == -2 &&
              got[2] == 0.5);
        em_array_release(a);
    }
    CHECK_OK(em_gguf_get(f, "q", &a, &type));
    em_gguf_close(f); /* arrays outlive the handle */
    if (a) {
        CHECK(type == EM_GGML_Q8_0 && em_array_dtype(a) == EM_U8);
        CHECK(em_array_ndim(a) == 2 && em_array_shape(a)[0] == 2 &&
              em_array_shape(a)[1] == 34);
        uint8_t raw[68];
        CHECK_OK(em_read(a, raw, 68));
        CHECK(raw[1] == 0x3C && raw[2] == 0 && raw[34 + 2] == 32);
        em_array_release(a);
    }
    CHECK_OK(em_gguf_open_memory(b.data, b.len, &f));
    if (f) {
        CHECK_ERR(em_gguf_get(f, "k2", &a, &type), EM_ERR_UNSUPPORTED, "q2_k");
        CHECK_ERR(em_gguf_get(f, "zz", &a, &type), EM_ERR_ARGUMENT, "zz");
        em_gguf_close(f);
    }
}

/* Version 2 with the default alignment of 32. */
EM_TEST(io_gguf_v2_default_alignment) {
    bytes b;
    gguf_header(&b, 2, 1, 1);
    put_str(&b, "general.name"); put_u32(&b, EM_GGUF_STRING); put_str(&b, "t");
    put_str(&b, "b"); put_u32(&b, 1); put_u64(&b, 2);
    put_u32(&b, EM_GGML_BF16); put_u64(&b, 0);
    pad_to(&b, 32);
    uint16_t v[2] = {0x3F80, 0x4000}; /* 1, 2 */
    put(&b, v, 4);
    em_gguf *f;
    CHECK_OK(em_gguf_open_memory(b.data, b.len, &f));
    if (!f)
        return;
    CHECK(em_gguf_alignment(f) == 32 && em_gguf_data_offset(f) % 32 == 0);
    em_array *a;
    CHECK_OK(em_gguf_get(f, "b", &a, NULL));
    if (a) {
        double got[2];
        t_read_f64(a, got, 2);
        CHECK(em_array_dtype(a) == EM_BF16 && got[0] == 1 && got[1] == 2);
        em_array_release(a);
    }
    em_gguf_close(f);
}

static void expect_gguf_error(const bytes *b, em_status want,
                              const char *needle, int line) {
    em_gguf *f = NULL;
    em_status st = em_gguf_open_memory(b->data, b->len, &f);
    if (st != want || f || !strstr(em_last_error(), needle))
        em_test_fail(__FILE__, line, "got %d (%s), wanted %d (%s)", (int)st,
                     em_last_error(), (int)want, needle);
    em_gguf_close(f);
}

EM_TEST(io_gguf_hostile) {
    /* Truncated anywhere. */
    bytes good;
    gguf_good(&good);
    size_t info_end = 0; /* the file's data section start */
    {
        em_gguf *f;
        CHECK_OK(em_gguf_open_memory(good.data, good.len, &f));
        if (f)
            info_end = em_gguf_data_offset(f);
        em_gguf_close(f);
    }
    for (size_t n = 0; n < good.len; n++) {
        em_gguf *f = NULL;
        em_status st = em_gguf_open_memory(good.data, n, &f);
        if (st != EM_ERR_ARGUMENT || f)
            em_test_fail(__FILE__, __LINE__, "prefix %zu of %zu accepted (%zu)",
                         n, good.len, info_end);
        em_gguf_close(f);
    }
    bytes b;
    b.len = 0;
    put(&b, "GGUX", 4);
    put_u32(&b, 3);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "magic", __LINE__);
    gguf_header(&b, 1, 0, 0);
    expect_gguf_error(&b, EM_ERR_UNSUPPORTED, "version 1", __LINE__);
    gguf_header(&b, 0x03000000, 0, 0);
    expect_gguf_error(&b, EM_ERR_UNSUPPORTED, "big-endian", __LINE__);
    /* Absurd counts. */
    gguf_header(&b, 3, 0, UINT64_MAX);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "metadata count at offset 16",
                      __LINE__);
    gguf_header(&b, 3, 1ull << 40, 0);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "tensor count", __LINE__);
    /* A string length past the end. */
    gguf_header(&b, 3, 0, 1);
    put_u64(&b, 1000);
    put(&b, "abcdefghijklmnopqrstuvwxyz", 26);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "metadata key at offset 24",
                      __LINE__);
    /* An array count past the end (and one that would overflow a size). */
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_ARRAY); put_u32(&b, EM_GGUF_U64);
    put_u64(&b, UINT64_MAX / 4);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "array of", __LINE__);
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_ARRAY); put_u32(&b, EM_GGUF_STRING);
    put_u64(&b, 3); put_str(&b, "x"); put_u64(&b, 99);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "metadata \"a\"", __LINE__);
    /* Unknown value types, top level and inside an array. */
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "a"); put_u32(&b, 13); put_u64(&b, 0);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "unknown value type 13", __LINE__);
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_ARRAY); put_u32(&b, 99);
    put_u64(&b, 0);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "unknown value type 99", __LINE__);
    /* Bad bool. */
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_BOOL); put_u8(&b, 2);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "bool", __LINE__);
    /* Arrays nested past the limit. */
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_ARRAY);
    for (int i = 0; i < 20; i++) {
        put_u32(&b, EM_GGUF_ARRAY);
        put_u64(&b, 1);
    }
    put_u32(&b, EM_GGUF_U8); put_u64(&b, 0);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "nested", __LINE__);
    /* Duplicate key. */
    gguf_header(&b, 3, 0, 2);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_U8); put_u8(&b, 1);
    put_str(&b, "a"); put_u32(&b, EM_GGUF_U8); put_u8(&b, 1);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "twice", __LINE__);
    /* Bad alignment. */
    gguf_header(&b, 3, 0, 1);
    put_str(&b, "general.alignment"); put_u32(&b, EM_GGUF_U32); put_u32(&b, 48);
    expect_gguf_error(&b, EM_ERR_ARGUMENT, "general.alignment", __LINE__);

    /* Tensor infos: one f32 [8] tensor with parameters to break. */
    struct {
        uint32_t n_dims;
        uint64_t dim0, dim1;
        uint32_t type;
        uint64_t offset;
        const char *needle;
    } cases[] = {
        {9, 8, 1, EM_GGML_F32, 0, "9 dims"},
        {1, 8, 1, EM_GGML_F32, 64, "past"},
        {1, 8, 1, EM_GGML_F32, 8, "not a multiple of the alignment"},
        {1, 1ull << 63, 1, EM_GGML_F32, 0, "negative"},
        {2, 1ull << 40, 1ull << 40, EM_GGML_F32, 0, "overflows"},
        {1, 33, 1, EM_GGML_Q8_0, 0, "multiple of its 32"},
        {1, 8, 1, EM_GGML_F32, UINT64_MAX - 31, "past"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gguf_header(&b, 3, 1, 0);
        put_str(&b, "t"); put_u32(&b, cases[i].n_dims);
        put_u64(&b, cases[i].dim0);
        if (cases[i].n_dims >= 2)
            put_u64(&b, cases[i].dim1);
        for (uint32_t d = 2; d < cases[i].n_dims; d++)
            put_u64(&b, 1);
        put_u32(&b, cases[i].type); put_u64(&b, cases[i].offset);
        pad_to(&b, 32);
        for (int k = 0; k < 32; k++)
            put_u8(&b, 0);
        expect_gguf_error(&b, EM_ERR_ARGUMENT, cases[i].needle, __LINE__);
    }
    /* Overlapping tensors and a duplicate name. */
    for (int dup = 0; dup < 2; dup++) {
        gguf_header(&b, 3, 2, 0);
        put_str(&b, "t"); put_u32(&b, 1); put_u64(&b, 16);
        put_u32(&b, EM_GGML_F32); put_u64(&b, 0);
        put_str(&b, dup ? "t" : "u"); put_u32(&b, 1); put_u64(&b, 8);
        put_u32(&b, EM_GGML_F32); put_u64(&b, dup ? 64 : 32);
        pad_to(&b, 32);
        for (int k = 0; k < 96; k++)
            put_u8(&b, 0);
        expect_gguf_error(&b, EM_ERR_ARGUMENT, dup ? "twice" : "overlaps",
                          __LINE__);
    }
}
