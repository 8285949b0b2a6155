/*
 * ggml_matvec_avx2.c — the streaming matrix-vector kernel of em_ggml_matmul
 * written with AVX2 + FMA (+ F16C) intrinsics (compiled with target attributes and
 * chosen at run time by __builtin_cpu_supports; never -march=native).
 *
 * GCC vectorises ggml_matmul.c's portable kernel only partly (the nibble
 * unpacking stays in 128-bit lanes), and decoding is the bottleneck once
 * the blocks stream from memory. Here every group of 32 weights is
 * decoded in registers: the format's quants as 32 signed bytes q, a scale
 * per 16 weights (a0, a1) and an offset b, so that w = a * q + b, computed
 * as a multiply then an add — the same two f32 roundings as the portable
 * decoder and ggml's dequantization, so the weights used are exactly the
 * dequantized ones. They are multiplied into 16 lane accumulators per row
 * of x, 4 weight rows per pass when x has one row, with every cache line
 * of the blocks prefetched ahead; the lanes are summed at the end of the
 * weight row. Machines with AVX-512 run ggml_matvec_avx512.c instead
 * (building with -DEM_GGML_NO_AVX512 makes them run this one, to test it).
 */
#include "ggml_blocks.h"

#if defined(__x86_64__) && !defined(EM_SIMD_BASELINE)

#include <cpuid.h>
#include <immintrin.h>

/* Loops over the rows of a pass and of x are unrolled completely, so that
 * the accumulators and decoded weights stay in registers. */
#if defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 32")
#endif

#define AVX2                                                                   \
    __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* A half-precision scale by F16C (exact, as em_f16_to_f32, without its
 * branches for subnormals). */
AVX2 float half_at(const uint8_t *p) {
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* One decoded group of 32 weights: w = a * q + b, a = a0 for weights
 * 0..15 and a1 for 16..31. */
typedef struct group32 {
    __m256i q;
    float a0, a1, b;
    int has_offset; /* a constant of the format: b is not always 0 */
} group32;

AVX2 __m256i nibbles(const uint8_t *p) { /* 16 bytes -> lo then hi */
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    const __m128i m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m),
                            _mm_and_si128(v, m));
}

/* 32 bits of qh -> byte j = 16 when bit j is set. */
AVX2 __m256i fifth_bits(uint32_t qh) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)qh),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                          0x0101010101010101, 0x0000000000000000));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

AVX2 void group_q5_0(const uint8_t *b, int g, group32 *o) {
    (void)g;
    const __m256i q =
        _mm256_or_si256(nibbles(b + 6), fifth_bits(ggml_u32(b + 2)));
    o->q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
    o->a0 = o->a1 = half_at(b);
    o->b = 0.0f;
    o->has_offset = 0;
}

AVX2 void group_q5_1(const uint8_t *b, int g, group32 *o) {
    (void)g;
    o->q = _mm256_or_si256(nibbles(b + 8), fifth_bits(ggml_u32(b + 4)));
    o->a0 = o->a1 = half_at(b);
    o->b = half_at(b + 2);
    o->has_offset = 1;
}

AVX2 void group_q8_0(const uint8_t *b, int g, group32 *o) {
    (void)g;
    o->q = _mm256_loadu_si256((const __m256i *)(b + 2));
    o->a0 = o->a1 = half_at(b);
    o->b = 0.0f;
    o->has_offset = 0;
}

/* Sub-block g (0..7) of a q4_k/q5_k block: nibbles of bytes 32 (g / 2)
 * .. +31, low for even g, high for odd. */
AVX2 __m256i k_nibbles(const uint8_t *qs, int g) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (g / 2)));
    const __m256i s = (g & 1) ? _mm256_srli_epi16(v, 4) : v;
    return _mm256_and_si256(s, _mm256_set1_epi8(15));
}

/* Group g = 4 h + t of a q6_k block: half h, quarter t. */
AVX2 void group_q6_k(const uint8_t *b, int g, group32 *o) {
    const int h = g / 4, t = g % 4;
    const __m256i ql =
        _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32 * (t & 1)));
    const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4),
                                        _mm256_set1_epi8(15));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
    const __m256i hi = _mm256_and_si256(
        _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * t)), _mm256_set1_epi8(3));
    o->q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
                           _mm256_set1_epi8(32));
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * h + 2 * t;
    const float d = half_at(b + 208);
    o->a0 = d * (float)sc[0];
    o->a1 = d * (float)sc[1];
    o->b = 0.0f;
    o->has_offset = 0;
}

/* The group's 32 weights as 4 x 8 floats: w = a * q + b. a * q is exact
 * for every format (at most 24 significant bits), so one fused
 * multiply-add rounds as the dequantizer's multiply then add; formats
 * without an offset only multiply. */
AVX2 void weights_v(__m256i q32, __m256 a0, __m256 a1, __m256 b, int has_offset,
                    __m256 w[4]) {
    const __m128i lo = _mm256_castsi256_si128(q32);
    const __m128i hi = _mm256_extracti128_si256(q32, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi,
                             _mm_srli_si128(hi, 8)};
    UNROLL
    for (int i = 0; i < 4; i++) {
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[i]));
        w[i] = !has_offset ? _mm256_mul_ps(i < 2 ? a0 : a1, q)
                           : _mm256_fmadd_ps(i < 2 ? a0 : a1, q, b);
    }
}

AVX2 void weights(const group32 *gr, __m256 w[4]) {
    weights_v(gr->q, _mm256_set1_ps(gr->a0), _mm256_set1_ps(gr->a1),
              _mm256_set1_ps(gr->b), gr->has_offset, w);
}

/* The 4-bit formats skip the 32-byte form: 8 bytes at a time are
 * widened to dwords and their nibbles converted, w = a * q + b as one
 * exact FMA (q4_0's b = -8 a: a * (q - 8) is exact too). w[i] holds
 * weights 8 i .. 8 i + 7 of the group. */
AVX2 void nibble_weights(const uint8_t *p, int layout_k, int high, __m256 va,
                         __m256 vb, __m256 w[4]) {
    const __m256i m15 = _mm256_set1_epi32(15);
    UNROLL
    for (int i = 0; i < 4; i++) {
        /* q4_0/q4_1: weights 0..15 are the low nibbles of bytes 0..15,
         * 16..31 the high ones; q4_k: weight l is a nibble of byte l. */
        const int byte = layout_k ? 8 * i : 8 * (i & 1);
        const int hi = layout_k ? high : i >= 2;
        const __m256i v =
            _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + byte)));
        const __m256i q =
            hi ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, m15);
        w[i] = _mm256_fmadd_ps(va, _mm256_cvtepi32_ps(q), vb);
    }
}

/* What a block's groups share, decoded once per block: the K-quants' 8
 * scales times d (a) and mins times dmin, negated (b), one a lane. */
typedef struct block_scales {
    __m256 a, b;
} block_scales;

AVX2 void no_prep(const uint8_t *b, block_scales *ks) {
    (void)b;
    ks->a = ks->b = _mm256_setzero_ps();
}

/* The 6-bit scales and mins of a q4_k/q5_k block (12 bytes, see
 * ggml_k_scale_min), all 8 at once from 3 little-endian words: sub-blocks
 * 0..3 in the low 6 bits of u0 (scales) and u1 (mins); 4..7 in the
 * nibbles of u2, their top 2 bits in the top bits of u0 and u1. */
AVX2 void k_prep(const uint8_t *b, block_scales *ks) {
    const uint32_t u0 = ggml_u32(b + 4), u1 = ggml_u32(b + 8),
                   u2 = ggml_u32(b + 12);
    const uint32_t low6 = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, top2 = 0x03030303u;
    const uint32_t sc_hi = (u2 & nib) | (((u0 >> 6) & top2) << 4);
    const uint32_t mn_hi = ((u2 >> 4) & nib) | (((u1 >> 6) & top2) << 4);
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_set_epi32(0, 0, (int)sc_hi, (int)(u0 & low6))));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_set_epi32(0, 0, (int)mn_hi, (int)(u1 & low6))));
    ks->a = _mm256_mul_ps(_mm256_set1_ps(half_at(b)), sc);
    /* -(dmin * mn): exact negation, as the dequantizer's subtraction. */
    ks->b = _mm256_sub_ps(_mm256_setzero_ps(),
                          _mm256_mul_ps(_mm256_set1_ps(half_at(b + 2)), mn));
}

AVX2 __m256 lane8(__m256 v, int i) {
    return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i));
}

#define prep_q4_0 no_prep
#define prep_q4_1 no_prep
#define prep_q5_0 no_prep
#define prep_q5_1 no_prep
#define prep_q8_0 no_prep
#define prep_q6_k no_prep
#define prep_q4_k k_prep
#define prep_q5_k k_prep

AVX2 void weights_q4_0(const uint8_t *b, int g, const block_scales *ks,
                       __m256 w[4]) {
    (void)g, (void)ks;
    const float d = half_at(b);
    nibble_weights(b + 2, 0, 0, _mm256_set1_ps(d), _mm256_set1_ps(-8.0f * d),
                   w);
}

AVX2 void weights_q4_1(const uint8_t *b, int g, const block_scales *ks,
                       __m256 w[4]) {
    (void)g, (void)ks;
    nibble_weights(b + 4, 0, 0, _mm256_set1_ps(half_at(b)),
                   _mm256_set1_ps(half_at(b + 2)), w);
}

AVX2 void weights_q4_k(const uint8_t *b, int g, const block_scales *ks,
                       __m256 w[4]) {
    nibble_weights(b + 16 + 32 * (g / 2), 1, g & 1, lane8(ks->a, g),
                   lane8(ks->b, g), w);
}

AVX2 void weights_q5_k(const uint8_t *b, int g, const block_scales *ks,
                       __m256 w[4]) {
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
    const __m256i hi = _mm256_and_si256(
        _mm256_srl_epi16(qh, _mm_cvtsi32_si128(g)), _mm256_set1_epi8(1));
    const __m256i q =
        _mm256_or_si256(k_nibbles(b + 48, g), _mm256_slli_epi16(hi, 4));
    const __m256 a = lane8(ks->a, g);
    weights_v(q, a, a, lane8(ks->b, g), 1, w);
}

/* The other formats: the 32-byte form, then weights(). */
#define WEIGHTS_VIA_GROUP(name)                                                \
    AVX2 void weights_##name(const uint8_t *b, int g, const block_scales *ks,  \
                             __m256 w[4]) {                                    \
        (void)ks;                                                              \
        group32 gr;                                                            \
        group_##name(b, g, &gr);                                               \
        weights(&gr, w);                                                       \
    }
WEIGHTS_VIA_GROUP(q5_0)
WEIGHTS_VIA_GROUP(q5_1)
WEIGHTS_VIA_GROUP(q8_0)
WEIGHTS_VIA_GROUP(q6_k)

AVX2 float hsum8(__m256 v) {
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Weight rows decoded together when x has one row: each x load serves
 * them all, and 2 accumulators a row give 8 independent FMA chains (16
 * ymm registers: 8 accumulators, a group's 4 weight vectors, x). */
#define ROWS_PER_PASS 4
/* Bytes ahead of each row's position that are prefetched into L1. */
#define PREFETCH_BYTES 2048

/* R weight rows from r against M rows of x (compile-time constants once
 * inlined): out[i][r + j]. The 32 weights of a group go into 2
 * accumulators (weights 0..7 and 16..23 into one, 8..15 and 24..31 into
 * the other), summed at the end of the row. */
#define DEFINE_AVX2_MATVEC(T, name, BE, BB)                                    \
    AVX2 void avx2_rows_##name(const ggml_matvec_job *jb, int64_t r,           \
                               const int R, const int M) {                     \
        const int64_t nblocks = jb->k / (BE), k = jb->k;                       \
        const int64_t row_bytes = nblocks * (BB);                              \
        const uint8_t *row = jb->raw + r * row_bytes;                          \
        __m256 acc[ROWS_PER_PASS * GGML_MATVEC_MAX_ROWS][2];                   \
        UNROLL                                                                 \
        for (int a = 0; a < R * M; a++)                                        \
            acc[a][0] = acc[a][1] = _mm256_setzero_ps();                       \
        for (int64_t b = 0; b < nblocks; b++) {                                \
            const uint8_t *blk = row + b * (BB);                               \
            UNROLL                                                             \
            for (int j = 0; j < R; j++)                                        \
                for (int line = 0; line < (BB); line += 64)                    \
                    _mm_prefetch((const char *)blk + j * row_bytes +           \
                                     PREFETCH_BYTES + line,                    \
                                 _MM_HINT_T0);                                 \
            block_scales ks[ROWS_PER_PASS];                                    \
            UNROLL                                                             \
            for (int j = 0; j < R; j++)                                        \
                prep_##name(blk + j * row_bytes, &ks[j]);                      \
            UNROLL                                                             \
            for (int g = 0; g < (BE) / 32; g++) {                              \
                const float *xg = jb->x + b * (BE) + 32 * g;                   \
                UNROLL                                                         \
                for (int j = 0; j < R; j++) {                                  \
                    __m256 w[4];                                               \
                    weights_##name(blk + j * row_bytes, g, &ks[j], w);         \
                    UNROLL                                                     \
                    for (int i = 0; i < M; i++) {                              \
                        __m256 *s = acc[i * R + j];                            \
                        UNROLL                                                 \
                        for (int v = 0; v < 4; v++)                            \
                            s[v & 1] = _mm256_fmadd_ps(                        \
                                w[v], _mm256_loadu_ps(xg + i * k + 8 * v),     \
                                s[v & 1]);                                     \
                    }                                                          \
                }                                                              \
            }                                                                  \
        }                                                                      \
        UNROLL                                                                 \
        for (int i = 0; i < M; i++)                                            \
            UNROLL                                                             \
        for (int j = 0; j < R; j++)                                            \
            jb->out[i * jb->n + r + j] =                                       \
                hsum8(_mm256_add_ps(acc[i * R + j][0], acc[i * R + j][1]));    \
    }                                                                          \
    __attribute__((target("avx2,fma,f16c"))) static void avx2_##name(          \
        void *ctx, int64_t r0, int64_t r1) {                                   \
        GGML_MATVEC_RANGE_BODY(avx2_rows_##name, ROWS_PER_PASS)                \
    }

EM_GGML_BLOCK_TYPES(DEFINE_AVX2_MATVEC)

/* Whether the CPU has the kernel's instructions, asked once: CPUID can
 * trap to the hypervisor in a virtual machine. */
static int cpu_has_avx2(void) {
    static atomic_int known = -1;
    int supported = atomic_load_explicit(&known, memory_order_relaxed);
    if (supported >= 0)
        return supported;
    __builtin_cpu_init();
    unsigned eax, ebx, ecx, edx; /* F16C: CPUID leaf 1, ECX (clang's
                                    __builtin_cpu_supports lacks it) */
    supported = __builtin_cpu_supports("avx2") &&
                __builtin_cpu_supports("fma") &&
                __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    atomic_store_explicit(&known, supported, memory_order_relaxed);
    return supported;
}

em_range_fn em__ggml_matvec_avx2(int type) {
    if (!cpu_has_avx2())
        return NULL;
    switch (type) {
#define AVX2_CASE(T, name, BE, BB)                                             \
    case T:                                                                    \
        return avx2_##name;
        EM_GGML_BLOCK_TYPES(AVX2_CASE)
#undef AVX2_CASE
    default:
        return NULL;
    }
}

#else

em_range_fn em__ggml_matvec_avx2(int type) {
    (void)type;
    return NULL;
}

#endif
