// ggml_matvec.cu — x @ W^T for 1..QMV_MAX_M rows of x read straight from
// ggml's blocks (layouts: include/emily_ggml.h), the layout of
// qmv.cuh: a lane takes a 32-weight unit (a whole block of the
// 32-weight formats, a sub-block of the 256-weight k-quants), loads the
// bytes it needs as aligned words (blocks are 18..210 bytes, so a block
// rarely starts on a word), and turns the quants into floats with byte
// permutes: a lane reads its 18..34 bytes in 5..9 loads instead of one
// load per byte, and no weight goes through an integer-to-float
// conversion.
//
// Each unit contributes a * sum(q x) + b * sum(x) with the CPU's
// dequantized weight w = a * q + b: q4_0 a = d, q - 8; q4_1 a = d, b = m;
// q4_k a = d * sc, b = -(dmin * mn) (each product rounded as the CPU
// does); q6_k has a scale per 16 weights (a[0], a[1]).
#include "qmv.cuh"

#include "emily_ggml.h"

namespace emc {

namespace {

// Four bytes' low (high) nibbles, as bytes.
__device__ __forceinline__ uint32_t low_nibbles(uint32_t v) { return v & 0x0F0F0F0Fu; }
__device__ __forceinline__ uint32_t high_nibbles(uint32_t v) { return (v >> 4) & 0x0F0F0F0Fu; }

// Bits 0..3 of v into bit 4 of bytes 0..3.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t v) {
    return ((v & 1u) << 4) | ((v & 2u) << 11) | ((v & 4u) << 18) | ((v & 8u) << 25);
}

// Byte j (0..11, runtime) of the 12 bytes in w0, w1, w2.
__device__ __forceinline__ int byte12(uint32_t w0, uint32_t w1, uint32_t w2, int j) {
    const uint32_t w = j < 4 ? w0 : j < 8 ? w1 : w2;
    return (int)((w >> (8 * (j & 3))) & 0xffu);
}

// One 32-weight unit of each format: load(row, u, raw) reads the bytes
// unit u of a row needs into registers; decode(raw, u, q, a, b) fills the
// unit's quants (as floats, offsets applied) and its scales a and offsets
// b (per half of 16 weights); bias: b is used.
template <int T> struct Unit;

// q4_0 / q4_1 / q5_0 / q5_1: d[, m][, qh], 16 bytes of nibble pairs.
template <bool MIN, bool FIVE, int BB> struct Nibble32 {
    static constexpr int elems = 32, bytes = BB;
    static constexpr bool bias = MIN;
    struct Raw {
        uint32_t c[(BB + 3) / 4];
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t u, Raw &r) {
        load_span<BB>(row + u * BB, r.c);
    }
    static __device__ __forceinline__ void decode(const Raw &r, int64_t, float (&q)[32],
                                                  float (&a)[2], float (&b)[2]) {
        constexpr int qh_at = MIN ? 4 : 2, qs_at = qh_at + (FIVE ? 4 : 0);
        constexpr float offset = MIN ? 0.0f : FIVE ? 16.0f : 8.0f;
        const auto &c = r.c;
        a[0] = a[1] = half_lo(c[0]);
        b[0] = b[1] = MIN ? half_lo(c[0] >> 16) : 0.0f;
        uint32_t qh = 0;
        if constexpr (FIVE)
            qh = word_at<qh_at>(c);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t v = word_at<qs_at>(c, j);
            uint32_t lo = low_nibbles(v), hi = high_nibbles(v);
            if constexpr (FIVE) {
                lo |= fifth_bits(qh >> (4 * j));
                hi |= fifth_bits(qh >> (16 + 4 * j));
            }
            bytes_to_floats(lo, offset, q + 4 * j);
            bytes_to_floats(hi, offset, q + 16 + 4 * j);
        }
    }
};
template <> struct Unit<EM_GGML_Q4_0> : Nibble32<false, false, 18> {};
template <> struct Unit<EM_GGML_Q4_1> : Nibble32<true, false, 20> {};
template <> struct Unit<EM_GGML_Q5_0> : Nibble32<false, true, 22> {};
template <> struct Unit<EM_GGML_Q5_1> : Nibble32<true, true, 24> {};

// q8_0: d, 32 signed bytes (flipped to unsigned, 128 subtracted).
template <> struct Unit<EM_GGML_Q8_0> {
    static constexpr int elems = 32, bytes = 34;
    static constexpr bool bias = false;
    struct Raw {
        uint32_t c[9];
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t u, Raw &r) {
        load_span<34>(row + u * 34, r.c);
    }
    static __device__ __forceinline__ void decode(const Raw &r, int64_t, float (&q)[32],
                                                  float (&a)[2], float (&b)[2]) {
        const auto &c = r.c;
        a[0] = a[1] = half_lo(c[0]);
        b[0] = b[1] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            bytes_to_floats(word_at<2>(c, j) ^ 0x80808080u, 128.0f, q + 4 * j);
    }
};

// q4_k / q5_k: sub-block g of block u / 8; header d, dmin, 12 scale bytes.
template <bool FIVE, int BB> struct KQuant {
    static constexpr int elems = 256, bytes = BB;
    static constexpr bool bias = true;
    static constexpr int qs_at = FIVE ? 48 : 16;
    struct Raw {
        uint32_t h[4], qs[8], qh[FIVE ? 8 : 1];
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t u, Raw &r) {
        const uint8_t *blk = row + (u >> 3) * BB;
        load_span<16>(blk, r.h);
        load_span<32>(blk + qs_at + 32 * ((int)(u & 7) >> 1), r.qs);
        if constexpr (FIVE)
            load_span<32>(blk + 16, r.qh);
    }
    static __device__ __forceinline__ void decode(const Raw &r, int64_t u, float (&q)[32],
                                                  float (&a)[2], float (&b)[2]) {
        const int g = (int)(u & 7);
        const auto &h = r.h;
        int sc, mn;
        if (g < 4) {
            sc = byte12(h[1], h[2], h[3], g) & 63;
            mn = byte12(h[1], h[2], h[3], g + 4) & 63;
        } else {
            const int hi = byte12(h[1], h[2], h[3], g + 4);
            sc = (hi & 15) | ((byte12(h[1], h[2], h[3], g - 4) >> 6) << 4);
            mn = (hi >> 4) | ((byte12(h[1], h[2], h[3], g) >> 6) << 4);
        }
        a[0] = a[1] = __fmul_rn(half_lo(h[0]), (float)sc);
        b[0] = b[1] = -__fmul_rn(half_lo(h[0] >> 16), (float)mn);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t v = (g & 1) ? high_nibbles(r.qs[j]) : low_nibbles(r.qs[j]);
            if constexpr (FIVE)
                v |= ((r.qh[j] >> g) & 0x01010101u) << 4;
            bytes_to_floats(v, 0.0f, q + 4 * j);
        }
    }
};
template <> struct Unit<EM_GGML_Q4_K> : KQuant<false, 144> {};
template <> struct Unit<EM_GGML_Q5_K> : KQuant<true, 176> {};

// q6_k: sub-block g = 4 h + t of block u / 8 (quarter t of half h).
template <> struct Unit<EM_GGML_Q6_K> {
    static constexpr int elems = 256, bytes = 210;
    static constexpr bool bias = false;
    struct Raw {
        uint32_t ql[8], qh[8], sc[1], d[1];
    };
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t u, Raw &r) {
        const uint8_t *blk = row + (u >> 3) * 210;
        const int g = (int)(u & 7), h = g >> 2, t = g & 3;
        load_span<32>(blk + 64 * h + 32 * (t & 1), r.ql);
        load_span<32>(blk + 128 + 32 * h, r.qh);
        load_span<2>(blk + 192 + 8 * h + 2 * t, r.sc);
        load_span<2>(blk + 208, r.d);
    }
    static __device__ __forceinline__ void decode(const Raw &r, int64_t u, float (&q)[32],
                                                  float (&a)[2], float (&b)[2]) {
        const int t = (int)(u & 3);
        const auto &ql = r.ql, &qh = r.qh;
        const float dd = half_lo(r.d[0]);
        a[0] = __fmul_rn(dd, (float)(int8_t)(r.sc[0] & 0xffu));
        a[1] = __fmul_rn(dd, (float)(int8_t)((r.sc[0] >> 8) & 0xffu));
        b[0] = b[1] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const uint32_t lo = t < 2 ? low_nibbles(ql[j]) : high_nibbles(ql[j]);
            const uint32_t hi = ((qh[j] >> (2 * t)) & 0x03030303u) << 4;
            bytes_to_floats(lo | hi, 32.0f, q + 4 * j);
        }
    }
};

// Three CTAs per SM (80 registers) for one row of x; two for more rows
// and for q5_k, whose decoder needs more registers (no spills either way).
template <int T, int D, int MAXM>
__global__ void __launch_bounds__(QMV_WARPS * 32, MAXM == 1 && T != EM_GGML_Q5_K ? 3 : 2)
    ggml_matvec_kernel(const uint8_t *__restrict__ raw,
                       const typename DT<D>::S *__restrict__ x,
                       typename DT<D>::S *__restrict__ out, int64_t rows, int64_t k,
                       int m, int wpr, bool xvec) {
    using U = Unit<T>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = (int64_t)blockIdx.x * ((blockDim.x >> 5) / wpr) + warp / wpr;
    const int part = warp % wpr;
    float acc[MAXM];
#pragma unroll
    for (int r = 0; r < MAXM; r++)
        acc[r] = 0.0f;
    if (row < rows) {
        const uint8_t *base = raw + row * (k / U::elems * U::bytes);
        const int64_t units = k / 32, step = 32 * wpr;
        // Software pipeline: the next unit's bytes are requested before
        // this one is decoded, doubling the bytes in flight per warp.
        typename U::Raw cur, next;
        int64_t u = part * 32 + lane;
        if (u < units)
            U::load(base, u, cur);
        for (; u < units; u += step) {
            if (u + step < units)
                U::load(base, u + step, next);
            float q[32], a[2], b[2];
            U::decode(cur, u, q, a, b);
            unit_dot<D, MAXM, U::bias>(q, a, b, x + u * 32, k, m, xvec, acc);
            cur = next;
        }
    }
    qmv_finish<D, MAXM>(acc, m, wpr, row, rows, out);
}

template <int T, int D, int MAXM>
int launch(Device *d, const em_cuda_ggml *job) {
    const QmvShape shape = qmv_shape(d, job->rows, job->k / 32);
    const int64_t grid = shape.grid(job->rows);
    if (grid > 0x7fffffff)
        return fail(EM_ERR_ARGUMENT, "ggml_matmul: %lld weight rows is too many",
                    (long long)job->rows);
    const bool xvec = ((uintptr_t)job->x & 15) == 0;
    using S = typename DT<D>::S;
    ggml_matvec_kernel<T, D, MAXM><<<(unsigned)grid, shape.threads(), 0, d->stream>>>(
        (const uint8_t *)job->raw, (const S *)job->x, (S *)job->out, job->rows, job->k,
        (int)job->m, shape.wpr, xvec);
    EMC_LAUNCHED("ggml matvec kernel");
    return 0;
}

template <int T> int launch_type(Device *d, const em_cuda_ggml *job) {
    const bool one = job->m == 1;
    switch (job->dtype) {
    case EM_F32:
        return one ? launch<T, EM_F32, 1>(d, job) : launch<T, EM_F32, QMV_MAX_M>(d, job);
    case EM_F16:
        return one ? launch<T, EM_F16, 1>(d, job) : launch<T, EM_F16, QMV_MAX_M>(d, job);
    case EM_BF16:
        return one ? launch<T, EM_BF16, 1>(d, job) : launch<T, EM_BF16, QMV_MAX_M>(d, job);
    default:
        return fail(EM_ERR_ARGUMENT, "ggml_matmul: dtype %d has no GPU kernel", job->dtype);
    }
}

} // namespace

int ggml_matvec(Device *d, const em_cuda_ggml *job) {
    if (job->m < 1 || job->m > QMV_MAX_M)
        return fail(EM_ERR_ARGUMENT, "ggml_matmul: the matrix-vector kernel takes 1..%d rows of x, got %lld",
                    QMV_MAX_M, (long long)job->m);
    if (job->k % 32 != 0)
        return fail(EM_ERR_ARGUMENT, "ggml_matmul: k %lld is not a multiple of 32",
                    (long long)job->k);
    switch (job->type) {
    case EM_GGML_Q4_0:
        return launch_type<EM_GGML_Q4_0>(d, job);
    case EM_GGML_Q4_1:
        return launch_type<EM_GGML_Q4_1>(d, job);
    case EM_GGML_Q5_0:
        return launch_type<EM_GGML_Q5_0>(d, job);
    case EM_GGML_Q5_1:
        return launch_type<EM_GGML_Q5_1>(d, job);
    case EM_GGML_Q8_0:
        return launch_type<EM_GGML_Q8_0>(d, job);
    case EM_GGML_Q4_K:
        return launch_type<EM_GGML_Q4_K>(d, job);
    case EM_GGML_Q5_K:
        return launch_type<EM_GGML_Q5_K>(d, job);
    case EM_GGML_Q6_K:
        return launch_type<EM_GGML_Q6_K>(d, job);
    default:
        return fail(EM_ERR_ARGUMENT, "ggml_matmul: type %d is not a block format", job->type);
    }
}

} // namespace emc
