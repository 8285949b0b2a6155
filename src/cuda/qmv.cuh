// qmv.cuh — what the quantized matrix-vector kernels share
// (ggml_matvec.cu for ggml's blocks, quant_matvec.cu for the affine
// format): a warp-per-row work layout over "units" of 32 consecutive
// weights of a row, byte spans read with aligned 32-bit loads whatever
// the blocks' alignment, codes turned into floats without the
// quarter-rate integer-to-float conversion, and x read as 16-byte vectors.
//
// Work layout (both formats): a CTA of up to QMV_WARPS warps serves
// rows_per_cta weight rows, wpr warps per row (split-K inside the CTA;
// qmv_shape picks both so that small matrices still fill the GPU).
// Lane l of warp p of a row takes units p * 32 + l, then + 32 * wpr, ...:
// a warp reads a contiguous stretch of the row per step. Each lane sums
// its units into one f32 per row of x; the warp reduces by shuffles, the
// row's warps through shared memory, and warp 0 of the row writes.
//
// Each unit contributes a * sum(q x) (+ b * sum(x)) over its weights
// w = a * q + b, the same dequantized values as the CPU (the sums run in
// another order, which the tests' tolerances allow).
//
#pragma once

#include "common.cuh"

#include <cstdint>

namespace emc {

constexpr int QMV_WARPS = 8;    // warps per CTA
constexpr int QMV_MAX_M = 16;   // rows of x the matrix-vector kernels take

// The kernels' entry points: x (m, k) @ W^T for 1 <= m <= QMV_MAX_M.
int ggml_matvec(Device *d, const em_cuda_ggml *job);    // ggml_matvec.cu
int affine_matvec(Device *d, const em_cuda_affine *j); // quant_matvec.cu

// The launch shape: wpr warps per weight row (1, 2, 4 or 8: enough warps
// in flight to cover every SM several times, never more than the row has
// 32-unit steps) and rows per CTA (QMV_WARPS / wpr, halved while that
// leaves fewer than two CTAs per SM: small matrices, SmolLM2's 576-row
// layers, spread over every SM instead of filling a few).
struct QmvShape {
    int wpr, rows_per_cta;
    int threads() const { return 32 * wpr * rows_per_cta; }
    int64_t grid(int64_t rows) const { return (rows + rows_per_cta - 1) / rows_per_cta; }
};
inline QmvShape qmv_shape(const Device *d, int64_t rows, int64_t units) {
    const int64_t steps = (units + 31) / 32;
    const int64_t want = (int64_t)d->sms * 48;
    QmvShape s{1, QMV_WARPS};
    while (s.wpr < QMV_WARPS && 2 * s.wpr <= steps && rows * s.wpr < want)
        s.wpr *= 2;
    s.rows_per_cta = QMV_WARPS / s.wpr;
    while (s.rows_per_cta > 1 && s.grid(rows) < 2 * (int64_t)d->sms)
        s.rows_per_cta /= 2;
    return s;
}

// The N bytes at p (any alignment) as little-endian words c[0..]: the
// aligned words covering them are loaded (never a byte outside their
// 4-byte granules), then funnel-shifted into place. Bytes past N in the
// last word are unspecified.
template <int N>
__device__ __forceinline__ void load_span(const uint8_t *p, uint32_t (&c)[(N + 3) / 4]) {
    constexpr int NC = (N + 3) / 4, NW = NC + 1;
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)3;
    const uint32_t *w = (const uint32_t *)a;
    const int mis = (int)((uintptr_t)p & 3);
    const uintptr_t last = (uintptr_t)p + N - 1; // last byte's word: a + 4 * (NW - 1) at most
    uint32_t r[NW];
#pragma unroll
    for (int i = 0; i < NW; i++)
        r[i] = (i < NW - 1 || a + 4 * i <= last) ? __ldg(w + i) : 0u;
#pragma unroll
    for (int i = 0; i < NC; i++)
        c[i] = __funnelshift_r(r[i], r[i + 1], 8 * mis);
}

// Bytes [O + 4 j, O + 4 j + 4) of the words c: O a compile-time byte
// offset, j the index of an unrolled loop (so that c stays in registers).
template <int O, int NC>
__device__ __forceinline__ uint32_t word_at(const uint32_t (&c)[NC], int j = 0) {
    if constexpr (O % 4 == 0)
        return c[O / 4 + j];
    else
        return __funnelshift_r(c[O / 4 + j], c[O / 4 + j + 1], 8 * (O % 4));
}

// The half float stored in the low 16 bits of v.
__device__ __forceinline__ float half_lo(uint32_t v) {
    return __half2float(__ushort_as_half((unsigned short)(v & 0xffffu)));
}

// Four byte-sized codes (each < 256) of v as floats minus `offset`: each
// byte goes into the mantissa of 2^23 (one byte permute) and 2^23 +
// offset is subtracted (exact), instead of four I2F conversions.
__device__ __forceinline__ void bytes_to_floats(uint32_t v, float offset, float *q) {
    const float sub = 8388608.0f + offset;
#pragma unroll
    for (int b = 0; b < 4; b++)
        q[b] = __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7440 + b)) - sub;
}

// A code (< 2^23) as a float, the same way.
__device__ __forceinline__ float code_float(uint32_t q) {
    return __uint_as_float(0x4B000000u | q) - 8388608.0f;
}

// Two elements of dtype D packed in a word as floats.
template <int D> __device__ __forceinline__ void unpack2(uint32_t v, float &lo, float &hi) {
    if constexpr (D == EM_BF16) {
        lo = __uint_as_float(v << 16);
        hi = __uint_as_float(v & 0xffff0000u);
    } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&v));
        lo = f.x;
        hi = f.y;
    }
}

// The 32 elements of x at p as floats; vec: p is 16-byte aligned.
template <int D>
__device__ __forceinline__ void load_x32(const typename DT<D>::S *p, bool vec, float (&x)[32]) {
    if constexpr (D == EM_F32) {
        if (vec) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const float4 v = __ldg((const float4 *)p + i);
                x[4 * i] = v.x;
                x[4 * i + 1] = v.y;
                x[4 * i + 2] = v.z;
                x[4 * i + 3] = v.w;
            }
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++)
                x[i] = __ldg(p + i);
        }
    } else {
        if (vec) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const uint4 v = __ldg((const uint4 *)p + i);
                unpack2<D>(v.x, x[8 * i], x[8 * i + 1]);
                unpack2<D>(v.y, x[8 * i + 2], x[8 * i + 3]);
                unpack2<D>(v.z, x[8 * i + 4], x[8 * i + 5]);
                unpack2<D>(v.w, x[8 * i + 6], x[8 * i + 7]);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 32; i++)
                x[i] = DT<D>::load(__ldg(p + i));
        }
    }
}

// A unit's contribution to each row of x: acc[r] += a[0] * sum_{i<16}
// q_i x_i + a[1] * sum_{i>=16} q_i x_i (+ b[0] / b[1] times the halves'
// sums of x when BIAS). xrow: x's row r starts at xrow + r * k.
template <int D, int MAXM, bool BIAS>
__device__ __forceinline__ void unit_dot(const float (&q)[32], const float (&a)[2],
                                         const float (&b)[2],
                                         const typename DT<D>::S *xrow, int64_t k,
                                         int m, bool xvec, float (&acc)[MAXM]) {
#pragma unroll
    for (int r = 0; r < MAXM; r++) {
        if (r < m) {
            float x[32];
            load_x32<D>(xrow + r * k, xvec, x);
            float d0 = 0.0f, d1 = 0.0f, s0 = 0.0f, s1 = 0.0f;
#pragma unroll
            for (int i = 0; i < 16; i++) {
                d0 = fmaf(q[i], x[i], d0);
                d1 = fmaf(q[i + 16], x[i + 16], d1);
                if constexpr (BIAS) {
                    s0 += x[i];
                    s1 += x[i + 16];
                }
            }
            float t = fmaf(a[0], d0, a[1] * d1);
            if constexpr (BIAS)
                t = fmaf(b[0], s0, fmaf(b[1], s1, t));
            acc[r] += t;
        }
    }
}

// The row's sums: the warp's lanes by shuffles, the row's wpr warps
// through shared memory; warp 0 of the row stores out[r * n + row].
// Every thread of the CTA calls this (it synchronizes the CTA).
template <int D, int MAXM>
__device__ __forceinline__ void qmv_finish(float (&acc)[MAXM], int m, int wpr,
                                           int64_t row, int64_t n,
                                           typename DT<D>::S *out) {
    __shared__ float part[QMV_WARPS][MAXM];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < MAXM; r++) {
        float v = acc[r];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0)
            part[warp][r] = v;
    }
    __syncthreads();
    if (warp % wpr == 0 && lane < m && lane < MAXM && row < n) {
        float v = 0.0f;
        for (int w = 0; w < wpr; w++)
            v += part[warp + w][lane];
        out[(int64_t)lane * n + row] = DT<D>::store(v);
    }
}

} // namespace emc
