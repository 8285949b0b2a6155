/*
 * ggml_matvec_avx512.c — the streaming matrix-vector kernel of
 * em_ggml_matmul for CPUs with AVX-512 (F, BW, VL; compiled with target
 * attributes and chosen at run time, never -march=native).
 *
 * Decoding must keep up with memory: about 2 weights a cycle per core for
 * q4_0 at the machine's read rate. Three things make it cheap here:
 *
 *  - Lookup tables for the 4- and 5-bit formats. A block (or K-quant
 *    sub-block) has one scale a and offset b, so its weights take at most
 *    16 (32) values w = a * q + b. They are computed once per block as a
 *    vector, exactly as the dequantizer computes each weight (a multiply,
 *    then an add: the same f32 values), and the weights are looked up with
 *    vpermps (vpermps / masked vpermps for 32 values), which reads only
 *    the low 4 bits of each index: a nibble needs no masking, the high one
 *    one shift. q8_0 and q6_k convert their quants (w = a * q; exact).
 *  - Four weight rows per pass (m = 1): each x vector load serves four
 *    rows, and eight independent FMA chains hide the FMA latency.
 *  - One horizontal sum per row, at its end.
 *
 * The sum of a row is accumulated in 16 lanes x 2 (weights 0..15 and
 * 16..31 of each group of 32) and reduced at the end: another order than
 * the portable kernel's 32 lanes, within the tests' bounds. Building with
 * -DEM_GGML_NO_AVX512 leaves this kernel out (to test the AVX2 one on
 * AVX-512 machines).
 */
#include "ggml_blocks.h"

#if defined(__x86_64__) && !defined(EM_SIMD_BASELINE) &&                       \
    !defined(EM_GGML_NO_AVX512)

#include <cpuid.h>
#include <immintrin.h>

/* Loops over the rows of a pass and of x are unrolled completely, so that
 * the accumulators and decoded weights stay in registers. */
#if defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 32")
#endif

#define AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define AVX512                                                                 \
    __attribute__((target(AVX512_TARGET), always_inline)) static inline

/* Weight rows decoded together when x has one row. */
#define ROWS_PER_PASS 4
/* Bytes ahead of each row's position that are prefetched into L1: without
 * it the per-block scale loads wait on memory (4 streams at a time). */
#define PREFETCH_BYTES 2048

/* A half-precision scale (exact, as em_f16_to_f32). */
AVX512 float half_at(const uint8_t *p) {
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* 0, 1, ..., 15 as floats, plus `base`. */
AVX512 __m512 iota_plus(float base) {
    return _mm512_add_ps(
        _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_ps(base));
}

/* The 16 weights a * (base + i) + b, i = 0..15: a multiply then an add,
 * as the dequantizer (a * q is exact for every format: at most 24
 * significant bits, so fused or not the value is the same). */
AVX512 __m512 table16(float a, float base, float b) {
    return _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(a), iota_plus(base)),
                         _mm512_set1_ps(b));
}

/* 16 bytes zero-extended to 16 dwords: an index vector whose low nibble
 * is the byte's low nibble. */
AVX512 __m512i bytes16(const uint8_t *p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* 16 signed bytes as floats. */
AVX512 __m512 sbytes16(__m128i v) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
}

/* Weights of a 32-entry table (lo: q 0..15, hi: q 16..31) at the low 4
 * bits of idx, plus 16 where the mask bit is set. */
AVX512 __m512 look32(__m512i idx, __mmask16 fifth, __m512 lo, __m512 hi) {
    return _mm512_mask_permutexvar_ps(_mm512_permutexvar_ps(idx, lo), fifth,
                                      idx, hi);
}

/* Group g (32 weights) of a block: w[0] weights 0..15, w[1] 16..31; sc
 * holds what prep_<type> computed once per block (the K-quants' scales). */
#define NO_PREP(name)                                                          \
    AVX512 __m512 prep_##name(const uint8_t *b, int8_t *qs6) {                 \
        (void)b, (void)qs6;                                                    \
        return _mm512_setzero_ps();                                            \
    }
NO_PREP(q4_0)
NO_PREP(q4_1)
NO_PREP(q5_0)
NO_PREP(q5_1)
NO_PREP(q8_0)

AVX512 void group_q4_0(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    (void)g, (void)sc, (void)qs6;
    const __m512 t = table16(half_at(b), -8.0f, 0.0f);
    const __m512i v = bytes16(b + 2);
    w[0] = _mm512_permutexvar_ps(v, t);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), t);
}

AVX512 void group_q4_1(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    (void)g, (void)sc, (void)qs6;
    const __m512 t = table16(half_at(b), 0.0f, half_at(b + 2));
    const __m512i v = bytes16(b + 4);
    w[0] = _mm512_permutexvar_ps(v, t);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), t);
}

AVX512 void group_q5_0(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    (void)g, (void)sc, (void)qs6;
    const float d = half_at(b);
    const __m512 lo = table16(d, -16.0f, 0.0f), hi = table16(d, 0.0f, 0.0f);
    const uint32_t qh = ggml_u32(b + 2);
    const __m512i v = bytes16(b + 6);
    w[0] = look32(v, (__mmask16)qh, lo, hi);
    w[1] = look32(_mm512_srli_epi32(v, 4), (__mmask16)(qh >> 16), lo, hi);
}

AVX512 void group_q5_1(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    (void)g, (void)sc, (void)qs6;
    const float d = half_at(b), m = half_at(b + 2);
    const __m512 lo = table16(d, 0.0f, m), hi = table16(d, 16.0f, m);
    const uint32_t qh = ggml_u32(b + 4);
    const __m512i v = bytes16(b + 8);
    w[0] = look32(v, (__mmask16)qh, lo, hi);
    w[1] = look32(_mm512_srli_epi32(v, 4), (__mmask16)(qh >> 16), lo, hi);
}

AVX512 void group_q8_0(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    (void)g, (void)sc, (void)qs6;
    const __m512 d = _mm512_set1_ps(half_at(b));
    w[0] =
        _mm512_mul_ps(d, sbytes16(_mm_loadu_si128((const __m128i *)(b + 2))));
    w[1] =
        _mm512_mul_ps(d, sbytes16(_mm_loadu_si128((const __m128i *)(b + 18))));
}

/* The 8 scales and 8 mins of a q4_k/q5_k block, times d and dmin: lanes
 * 0..7 d * scale[s], lanes 8..15 dmin * min[s] (the dequantizer's
 * products). The 6-bit values are packed in 12 bytes (u0, u1, u2 as
 * little-endian words): sub-blocks 0..3 in the low 6 bits of u0 (scales)
 * and u1 (mins); 4..7 in the nibbles of u2 with their top 2 bits in the
 * top 2 bits of u0 (scales) and u1 (mins). */
AVX512 __m512 k_scales_mins(const uint8_t *b) {
    const uint32_t u0 = ggml_u32(b + 4), u1 = ggml_u32(b + 8),
                   u2 = ggml_u32(b + 12);
    const uint32_t low6 = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, top2 = 0x03030303u;
    const uint32_t sc_hi = (u2 & nib) | (((u0 >> 6) & top2) << 4);
    const uint32_t mn_hi = ((u2 >> 4) & nib) | (((u1 >> 6) & top2) << 4);
    const __m128i packed = _mm_set_epi32((int)mn_hi, (int)(u1 & low6),
                                         (int)sc_hi, (int)(u0 & low6));
    const float d = half_at(b), dmin = half_at(b + 2);
    const __m512 dd =
        _mm512_insertf32x8(_mm512_set1_ps(d), _mm256_set1_ps(dmin), 1);
    return _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(packed)));
}

AVX512 __m512 lane(__m512 v, int i) {
    return _mm512_permutexvar_ps(_mm512_set1_epi32(i), v);
}

/* Sub-block g (0..7) of a q4_k/q5_k block: its nibbles are bytes 32 (g /
 * 2) .. +31 of qs, low for even g, high for odd; v[0], v[1] hold them (as
 * the low 4 bits) for weights 0..15, 16..31. */
AVX512 void k_nibbles(const uint8_t *qs, int g, __m512i v[2]) {
    v[0] = bytes16(qs + 32 * (g / 2));
    v[1] = bytes16(qs + 32 * (g / 2) + 16);
    if (g & 1) {
        v[0] = _mm512_srli_epi32(v[0], 4);
        v[1] = _mm512_srli_epi32(v[1], 4);
    }
}

/* Weights a * q - o (as the dequantizer: a * q, then minus o), q = base +
 * 0..15, for sub-block g. */
AVX512 __m512 k_table(__m512 sc, int g, float base) {
    return _mm512_sub_ps(_mm512_mul_ps(lane(sc, g), iota_plus(base)),
                         lane(sc, 8 + g));
}

AVX512 __m512 prep_q4_k(const uint8_t *b, int8_t *qs6) {
    (void)qs6;
    return k_scales_mins(b);
}

AVX512 __m512 prep_q5_k(const uint8_t *b, int8_t *qs6) {
    (void)qs6;
    return k_scales_mins(b);
}

AVX512 void group_q4_k(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    __m512i v[2];
    (void)qs6;
    k_nibbles(b + 16, g, v);
    const __m512 t = k_table(sc, g, 0.0f);
    w[0] = _mm512_permutexvar_ps(v[0], t);
    w[1] = _mm512_permutexvar_ps(v[1], t);
}

/* q5_k: bit g of qh byte l is the fifth bit of weight l of sub-block g. */
AVX512 void group_q5_k(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    __m512i v[2];
    (void)qs6;
    k_nibbles(b + 48, g, v);
    const __m512 lo = k_table(sc, g, 0.0f), hi = k_table(sc, g, 16.0f);
    const __mmask32 fifth =
        _mm256_test_epi8_mask(_mm256_loadu_si256((const __m256i *)(b + 16)),
                              _mm256_set1_epi8((char)(1 << g)));
    w[0] = look32(v[0], (__mmask16)fifth, lo, hi);
    w[1] = look32(v[1], (__mmask16)(fifth >> 16), lo, hi);
}

/* A q6_k block: its 256 quants (-32..31) into qs6, in the order of the
 * weights, and its 16 scales times d (the dequantizer's products). Each
 * half h of 128 weights takes 64 ql bytes (low nibbles: quarters 0 and 1,
 * high nibbles: 2 and 3) and 32 qh bytes (bits 2t, 2t + 1 for quarter t),
 * decoded 64 bytes at a time and read back by group. */
AVX512 __m512 prep_q6_k(const uint8_t *b, int8_t *qs6) {
    const __m512i m3 = _mm512_set1_epi8(3), m15 = _mm512_set1_epi8(15),
                  c32 = _mm512_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512(b + 64 * h);
        const __m256i qh =
            _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
        /* Bytes 0..31: qh (quarter 0's bits at 0, 2's at 4); 32..63:
         * qh >> 2 (quarter 1's at 0, 3's at 4). */
        const __m512i hx = _mm512_inserti64x4(_mm512_castsi256_si512(qh),
                                              _mm256_srli_epi16(qh, 2), 1);
        const __m512i q01 =
            _mm512_or_si512(_mm512_and_si512(ql, m15),
                            _mm512_slli_epi16(_mm512_and_si512(hx, m3), 4));
        const __m512i q23 = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16(ql, 4), m15),
            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hx, 4), m3),
                              4));
        _mm512_storeu_si512(qs6 + 128 * h, _mm512_sub_epi8(q01, c32));
        _mm512_storeu_si512(qs6 + 128 * h + 64, _mm512_sub_epi8(q23, c32));
    }
    return _mm512_mul_ps(_mm512_set1_ps(half_at(b + 208)),
                         sbytes16(_mm_loadu_si128((const __m128i *)(b + 192))));
}

/* Group g of a q6_k block: quants 32 g .. 32 g + 31 of qs6, a scale per 16
 * weights (scales 2 g and 2 g + 1). */
AVX512 void group_q6_k(const uint8_t *b, int g, __m512 sc, const int8_t *qs6,
                       __m512 w[2]) {
    (void)b;
    const int8_t *q = qs6 + 32 * g;
    w[0] = _mm512_mul_ps(lane(sc, 2 * g),
                         sbytes16(_mm_loadu_si128((const __m128i *)q)));
    w[1] = _mm512_mul_ps(lane(sc, 2 * g + 1),
                         sbytes16(_mm_loadu_si128((const __m128i *)(q + 16))));
}

/* R weight rows from r against M rows of x (both compile-time constants
 * once inlined): out[i][r + j] for i < M, j < R. */
#define DEFINE_AVX512_MATVEC(T, name, BE, BB)                                  \
    AVX512 void avx512_rows_##name(const ggml_matvec_job *jb, int64_t r,       \
                                   const int R, const int M) {                 \
        const int64_t nblocks = jb->k / (BE), k = jb->k;                       \
        const uint8_t *row = jb->raw + r * nblocks * (BB);                     \
        const int64_t row_bytes = nblocks * (BB);                              \
        __m512 acc[ROWS_PER_PASS * GGML_MATVEC_MAX_ROWS][2];                   \
        int8_t qs6[ROWS_PER_PASS][GGML_MAX_BLOCK_ELEMS]; /* q6_k's quants */   \
        UNROLL                                                                 \
        for (int a = 0; a < R * M; a++)                                        \
            acc[a][0] = acc[a][1] = _mm512_setzero_ps();                       \
        for (int64_t b = 0; b < nblocks; b++) {                                \
            const uint8_t *blk = row + b * (BB);                               \
            UNROLL                                                             \
            for (int j = 0; j < R; j++)                                        \
                for (int line = 0; line < (BB); line += 64)                    \
                    _mm_prefetch((const char *)blk + j * row_bytes +           \
                                     PREFETCH_BYTES + line,                    \
                                 _MM_HINT_T0);                                 \
            __m512 sc[ROWS_PER_PASS];                                          \
            UNROLL                                                             \
            for (int j = 0; j < R; j++)                                        \
                sc[j] = prep_##name(blk + j * row_bytes, qs6[j]);              \
            UNROLL                                                             \
            for (int g = 0; g < (BE) / 32; g++) {                              \
                __m512 w[ROWS_PER_PASS][2];                                    \
                UNROLL                                                         \
                for (int j = 0; j < R; j++)                                    \
                    group_##name(blk + j * row_bytes, g, sc[j], qs6[j], w[j]); \
                const float *xg = jb->x + b * (BE) + 32 * g;                   \
                UNROLL                                                         \
                for (int i = 0; i < M; i++) {                                  \
                    const __m512 x0 = _mm512_loadu_ps(xg + i * k);             \
                    const __m512 x1 = _mm512_loadu_ps(xg + i * k + 16);        \
                    UNROLL                                                     \
                    for (int j = 0; j < R; j++) {                              \
                        __m512 *s = acc[i * R + j];                            \
                        s[0] = _mm512_fmadd_ps(w[j][0], x0, s[0]);             \
                        s[1] = _mm512_fmadd_ps(w[j][1], x1, s[1]);             \
                    }                                                          \
                }                                                              \
            }                                                                  \
        }                                                                      \
        UNROLL                                                                 \
        for (int i = 0; i < M; i++)                                            \
            UNROLL                                                             \
        for (int j = 0; j < R; j++)                                            \
            jb->out[i * jb->n + r + j] = _mm512_reduce_add_ps(                 \
                _mm512_add_ps(acc[i * R + j][0], acc[i * R + j][1]));          \
    }                                                                          \
    __attribute__((target(AVX512_TARGET))) static void avx512_##name(          \
        void *ctx, int64_t r0, int64_t r1) {                                   \
        GGML_MATVEC_RANGE_BODY(avx512_rows_##name, ROWS_PER_PASS)              \
    }

EM_GGML_BLOCK_TYPES(DEFINE_AVX512_MATVEC)

/* Whether the CPU has the kernel's instructions, asked once: CPUID can
 * trap to the hypervisor in a virtual machine. */
static int cpu_has_avx512(void) {
    static atomic_int known = -1;
    int supported = atomic_load_explicit(&known, memory_order_relaxed);
    if (supported >= 0)
        return supported;
    __builtin_cpu_init();
    unsigned eax, ebx, ecx, edx; /* F16C: CPUID leaf 1, ECX (clang's
                                    __builtin_cpu_supports lacks it) */
    supported = __builtin_cpu_supports("avx512f") &&
                __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx2") &&
                __builtin_cpu_supports("fma") &&
                __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    atomic_store_explicit(&known, supported, memory_order_relaxed);
    return supported;
}

em_range_fn em__ggml_matvec_avx512(int type) {
    if (!cpu_has_avx512())
        return NULL;
    switch (type) {
#define AVX512_CASE(T, name, BE, BB)                                           \
    case T:                                                                    \
        return avx512_##name;
        EM_GGML_BLOCK_TYPES(AVX512_CASE)
#undef AVX512_CASE
    default:
        return NULL;
    }
}

#else

em_range_fn em__ggml_matvec_avx512(int type) {
    (void)type;
    return NULL;
}

#endif
