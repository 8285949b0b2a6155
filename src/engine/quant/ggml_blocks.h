/*
 * ggml_blocks.h — decoding one block of each ggml format into f32 (private
 * to src/engine/quant). The layouts are documented in include/emily_ggml.h.
 *
 * One definition per format, shared by dequantization (which must be
 * bit-exact: each weight is computed in f32 in the order ggml's reference
 * uses, so the file that includes this for dequantization turns off FMA
 * contraction) and by the matrix products (which inline it into their
 * SIMD clones and decode a block into L1 just before using it).
 */
#ifndef EMILY_GGML_BLOCKS_H
#define EMILY_GGML_BLOCKS_H

#include "emily_ggml.h"
#include "internal.h"

#define GGML_INLINE static inline __attribute__((always_inline))

/* X(type enum, name, weights per block, bytes per block) for every block
 * format: kernels are instantiated once per row. */
#define EM_GGML_BLOCK_TYPES(X)                                                 \
    X(EM_GGML_Q4_0, q4_0, 32, 18)                                              \
    X(EM_GGML_Q4_1, q4_1, 32, 20)                                              \
    X(EM_GGML_Q5_0, q5_0, 32, 22)                                              \
    X(EM_GGML_Q5_1, q5_1, 32, 24)                                              \
    X(EM_GGML_Q8_0, q8_0, 32, 34)                                              \
    X(EM_GGML_Q4_K, q4_k, 256, 144)                                            \
    X(EM_GGML_Q5_K, q5_k, 256, 176)                                            \
    X(EM_GGML_Q6_K, q6_k, 256, 210)

/* The largest block (weights): scratch sizes. */
#define GGML_MAX_BLOCK_ELEMS 256

GGML_INLINE float ggml_half(const uint8_t *p) {
    return em_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

GGML_INLINE uint32_t ggml_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* d, 16 nibble bytes; w = d * (q - 8). */
GGML_INLINE void ggml_decode_q4_0(const uint8_t *b, float *y) {
    const float d = ggml_half(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 15) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

/* d, m, 16 nibble bytes; w = d * q + m. */
GGML_INLINE void ggml_decode_q4_1(const uint8_t *b, float *y) {
    const float d = ggml_half(b), m = ggml_half(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 15) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* d, u32 of fifth bits, 16 nibble bytes; w = d * (q - 16). */
GGML_INLINE void ggml_decode_q5_0(const uint8_t *b, float *y) {
    const float d = ggml_half(b);
    const uint32_t qh = ggml_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)(((qh >> j) & 1u) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* d, m, u32 of fifth bits, 16 nibble bytes; w = d * q + m. */
GGML_INLINE void ggml_decode_q5_1(const uint8_t *b, float *y) {
    const float d = ggml_half(b), m = ggml_half(b + 2);
    const uint32_t qh = ggml_u32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)(((qh >> j) & 1u) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* d, 32 s8; w = d * q. */
GGML_INLINE void ggml_decode_q8_0(const uint8_t *b, float *y) {
    const float d = ggml_half(b);
    const int8_t *qs = (const int8_t *)(b + 2);
    for (int j = 0; j < 32; j++)
        y[j] = d * (float)qs[j];
}

/* The 6-bit scale and min of sub-block s (0..7) of a q4_k/q5_k block,
 * packed in 12 bytes: s < 4 in the low 6 bits of bytes s and s + 4; s >= 4
 * in the nibbles of byte s + 4 with their top 2 bits in the top bits of
 * bytes s - 4 and s. */
GGML_INLINE void ggml_k_scale_min(const uint8_t *sc, int s, int *scale,
                                  int *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4);
        *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}

/* d, dmin, 12 scale bytes, 128 nibble bytes (32 per 64 weights). */
GGML_INLINE void ggml_decode_q4_k(const uint8_t *b, float *y) {
    const float d = ggml_half(b), dmin = ggml_half(b + 2);
    const uint8_t *sc = b + 4, *qs = b + 16;
    for (int c = 0; c < 4; c++) {
        int s0, m0, s1, m1;
        ggml_k_scale_min(sc, 2 * c, &s0, &m0);
        ggml_k_scale_min(sc, 2 * c + 1, &s1, &m1);
        const float d0 = d * (float)s0, o0 = dmin * (float)m0;
        const float d1 = d * (float)s1, o1 = dmin * (float)m1;
        const uint8_t *q = qs + 32 * c;
        float *yc = y + 64 * c;
        for (int l = 0; l < 32; l++) {
            yc[l] = d0 * (float)(q[l] & 15) - o0;
            yc[l + 32] = d1 * (float)(q[l] >> 4) - o1;
        }
    }
}

/* As q4_k with 32 bytes of fifth bits (bit s of byte l: weight l of
 * sub-block s) between the scales and the nibbles. */
GGML_INLINE void ggml_decode_q5_k(const uint8_t *b, float *y) {
    const float d = ggml_half(b), dmin = ggml_half(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *qs = b + 48;
    for (int c = 0; c < 4; c++) {
        int s0, m0, s1, m1;
        ggml_k_scale_min(sc, 2 * c, &s0, &m0);
        ggml_k_scale_min(sc, 2 * c + 1, &s1, &m1);
        const float d0 = d * (float)s0, o0 = dmin * (float)m0;
        const float d1 = d * (float)s1, o1 = dmin * (float)m1;
        const uint8_t *q = qs + 32 * c;
        float *yc = y + 64 * c;
        for (int l = 0; l < 32; l++) {
            int lo = (q[l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4);
            int hi = (q[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
            yc[l] = d0 * (float)lo - o0;
            yc[l + 32] = d1 * (float)hi - o1;
        }
    }
}

/* 128 low-nibble bytes, 64 bytes of 2-bit high parts, 16 s8 scales (one
 * per 16 weights), d; each half of 128 weights reads 64 ql and 32 qh. */
GGML_INLINE void ggml_decode_q6_k(const uint8_t *b, float *y) {
    const float d = ggml_half(b + 208);
    const int8_t *scales = (const int8_t *)(b + 192);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = scales + 8 * h;
        float *yh = y + 128 * h;
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            int q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            yh[l] = (d * (float)sc[is]) * (float)q1;
            yh[l + 32] = (d * (float)sc[is + 2]) * (float)q2;
            yh[l + 64] = (d * (float)sc[is + 4]) * (float)q3;
            yh[l + 96] = (d * (float)sc[is + 6]) * (float)q4;
        }
    }
}

/* Shared by the op builders and the GPU evals (ggml_ops.c). */
typedef struct ggml_params {
    int type;
    int64_t k;           /* weights per row */
    int64_t block_elems; /* weights per block */
    int64_t block_bytes; /* bytes per block */
} ggml_params;

/* One streaming matrix-vector product: rows [r0, r1) of out (m, n) =
 * x (m, k) @ W^T, W's rows of raw blocks; m <= GGML_MATVEC_MAX_ROWS. */
#define GGML_MATVEC_MAX_ROWS 8
typedef struct ggml_matvec_job {
    const uint8_t *raw;
    const float *x; /* (m, k) */
    float *out;     /* (m, n) */
    int64_t m, n, k;
} ggml_matvec_job;

/* The body of a SIMD kernel's range function over rows [r0, r1) of out:
 * rows(jb, r, R, M) is the kernel's inner function, always inlined, with R
 * weight rows per pass and M rows of x, both constants so that its
 * accumulators stay in registers. One x row takes `pass` weight rows at a
 * time; 2..8 x rows take one (their accumulators fill the registers). */
#define GGML_MATVEC_CASE_M(rows, mm)                                           \
    case mm:                                                                   \
        for (; r < r1; r++)                                                    \
            rows(jb, r, 1, mm);                                                \
        break;
#define GGML_MATVEC_RANGE_BODY(rows, pass)                                     \
    const ggml_matvec_job *jb = ctx;                                           \
    int64_t r = r0;                                                            \
    switch (jb->m) {                                                           \
    case 1:                                                                    \
        for (; r + (pass) <= r1; r += (pass))                                  \
            rows(jb, r, pass, 1);                                              \
        for (; r < r1; r++)                                                    \
            rows(jb, r, 1, 1);                                                 \
        break;                                                                 \
        GGML_MATVEC_CASE_M(rows, 2)                                            \
        GGML_MATVEC_CASE_M(rows, 3)                                            \
        GGML_MATVEC_CASE_M(rows, 4)                                            \
        GGML_MATVEC_CASE_M(rows, 5)                                            \
        GGML_MATVEC_CASE_M(rows, 6)                                            \
        GGML_MATVEC_CASE_M(rows, 7)                                            \
        GGML_MATVEC_CASE_M(rows, 8)                                            \
    }

/* The AVX2 + FMA streaming kernel for `type` (ggml_matvec_avx2.c), or NULL
 * when the CPU lacks AVX2/FMA, the build is the SIMD baseline, or the type
 * has none. */
em_range_fn em__ggml_matvec_avx2(int type);
/* The AVX-512 one (ggml_matvec_avx512.c), or NULL likewise. */
em_range_fn em__ggml_matvec_avx512(int type);

/* CPU evals (ggml_ops.c, ggml_matmul.c) and GPU evals (gpu/gpu_ggml.c). */
em_status em__ggml_matmul_eval(em_array *node);
em_status em__gpu_ggml_dequantize_eval(em_array *node);
em_status em__gpu_ggml_matmul_eval(em_array *node);

#endif
