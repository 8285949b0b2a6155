// quant.cu — affine quantization on the GPU (include/emily_quant.h's
// format; src/engine/quant/affine.c is the CPU twin and the oracle of
// test/cuda/test_quant.c).
//
//   quantize:   one thread per group: min/max, MLX's scale and bias in f32
//               (the same IEEE operations in the same order as the CPU, so
//               the same bits), then the codes packed into the group's own
//               words (a group starts on a word boundary).
//   dequantize: one thread per value; q * s and + b rounded separately
//               (__fmul_rn/__fadd_rn: no FMA contraction), as the CPU.
//   matmul (the engine sends m <= 8 here; larger m is dequantize + GEMM):
//     transpose: one warp per output row n. Lane l takes the 32-code blocks
//               l, l + 32, ... of row n (a block is `bits` words, so the
//               warp reads consecutive memory), with 128-bit loads when
//               bits is 4 or 8 and the row is 16-byte aligned; per block
//               s * sum(x q) + b * sum(x); a shuffle reduction per row of x.
//     else:     one thread per output column n, walking the K rows of w.
#include "common.cuh"

namespace emc {

constexpr int QMM_MAX_M = 8;

__device__ __forceinline__ uint32_t code_at(const uint32_t *row, int64_t i, int bits) {
    const int64_t bit = i * bits;
    const int64_t w = bit >> 5;
    const int s = (int)(bit & 31);
    uint32_t v = row[w] >> s;
    if (s + bits > 32)
        v |= row[w + 1] << (32 - s);
    return v & ((1u << bits) - 1);
}

template <int D>
__global__ void quantize_kernel(em_cuda_affine j) {
    using T = DT<D>;
    using S = typename T::S;
    const int gs = j.group_size, bits = j.bits;
    const int64_t G = j.len / gs, W = j.len * bits / 32;
    const int64_t groups = j.rows * G;
    const float n_bins = (float)((1 << bits) - 1);
    for (int64_t gi = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; gi < groups;
         gi += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = gi / G, g = gi % G;
        const S *v = (const S *)j.w + r * j.len + g * gs;
        float lo = T::load(v[0]), hi = lo;
        for (int i = 1; i < gs; i++) {
            const float x = T::load(v[i]);
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
        float s = __fdiv_rn(__fsub_rn(hi, lo), n_bins);
        s = s > 1e-7f ? s : 1e-7f;
        const bool low_edge = fabsf(lo) > fabsf(hi);
        if (!low_edge)
            s = -s;
        const float edge = low_edge ? lo : hi;
        const float q0 = rintf(__fdiv_rn(edge, s));
        float b = 0.0f;
        if (q0 != 0.0f) {
            s = __fdiv_rn(edge, q0);
            b = edge;
        }
        uint32_t *out = (uint32_t *)j.wq + r * W + g * gs * bits / 32;
        uint64_t acc = 0;
        int nbits = 0;
        for (int i = 0; i < gs; i++) {
            float c = rintf(__fdiv_rn(__fsub_rn(T::load(v[i]), b), s));
            c = c < 0.0f ? 0.0f : (c > n_bins ? n_bins : c);
            acc |= (uint64_t)(uint32_t)c << nbits;
            nbits += bits;
            if (nbits >= 32) {
                *out++ = (uint32_t)acc;
                acc >>= 32;
                nbits -= 32;
            }
        }
        ((S *)j.scales)[gi] = T::store(s);
        ((S *)j.biases)[gi] = T::store(b);
    }
}

template <int D>
__global__ void dequantize_kernel(em_cuda_affine j) {
    using T = DT<D>;
    using S = typename T::S;
    const int64_t n = j.rows * j.len, W = j.len * j.bits / 32, G = j.len / j.group_size;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / j.len, c = i % j.len;
        const int64_t g = r * G + c / j.group_size;
        const uint32_t q = code_at((const uint32_t *)j.wq + r * W, c, j.bits);
        const float s = T::load(((const S *)j.scales)[g]);
        const float b = T::load(((const S *)j.biases)[g]);
        const float t = T::load(T::store(__fmul_rn((float)q, s)));
        ((S *)j.out)[i] = T::store(__fadd_rn(t, b));
    }
}

// The 32 codes of a block (`bits` words at w) into q.
template <int BITS> __device__ __forceinline__ void unpack_block(const uint32_t *w, float *q) {
#pragma unroll
    for (int i = 0; i < 32; i++) {
        const int bit = i * BITS, wo = bit >> 5, s = bit & 31;
        uint32_t v = w[wo] >> s;
        if (s + BITS > 32)
            v |= w[wo + 1] << (32 - s);
        q[i] = (float)(v & ((1u << BITS) - 1));
    }
}

// transpose: out (m, n) = x (m, k) @ D^T, D (n, k); one warp per row n.
template <int D, int BITS, bool VEC>
__global__ void qmv_rows_kernel(em_cuda_affine j) {
    using T = DT<D>;
    using S = typename T::S;
    const int64_t K = j.k, N = j.n, W = K * BITS / 32, G = K / j.group_size;
    const int64_t blocks = K / 32;
    const int lane = threadIdx.x & 31;
    const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const S *x = (const S *)j.x;
    for (int64_t n = warp; n < N; n += warps) {
        const uint32_t *row = (const uint32_t *)j.wq + n * W;
        float acc[QMM_MAX_M];
#pragma unroll
        for (int m = 0; m < QMM_MAX_M; m++)
            acc[m] = 0.0f;
        for (int64_t blk = lane; blk < blocks; blk += 32) {
            uint32_t w[BITS + 1];
            const uint32_t *src = row + blk * BITS;
            if constexpr (VEC) {
                // BITS is 4 or 8: the block is 1 or 2 aligned uint4.
#pragma unroll
                for (int v = 0; v < BITS / 4; v++) {
                    const uint4 u = __ldg((const uint4 *)src + v);
                    w[4 * v] = u.x;
                    w[4 * v + 1] = u.y;
                    w[4 * v + 2] = u.z;
                    w[4 * v + 3] = u.w;
                }
            } else {
#pragma unroll
                for (int v = 0; v < BITS; v++)
                    w[v] = __ldg(src + v);
            }
            w[BITS] = 0;
            float q[32];
            unpack_block<BITS>(w, q);
            const int64_t g = n * G + blk * 32 / j.group_size;
            const float s = T::load(((const S *)j.scales)[g]);
            const float b = T::load(((const S *)j.biases)[g]);
            for (int m = 0; m < j.m; m++) {
                const S *xb = x + m * K + blk * 32;
                float dq = 0.0f, sx = 0.0f;
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    const float xv = T::load(xb[i]);
                    dq = fmaf(xv, q[i], dq);
                    sx += xv;
                }
                acc[m] += s * dq + b * sx;
            }
        }
        for (int m = 0; m < j.m; m++) {
            float v = acc[m];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1)
                v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0)
                ((S *)j.out)[m * N + n] = T::store(v);
        }
    }
}

// not transpose: out (m, n) = x (m, k) @ D, D (k, n) quantized along n;
// one thread per column n.
template <int D>
__global__ void qmv_cols_kernel(em_cuda_affine j) {
    using T = DT<D>;
    using S = typename T::S;
    const int64_t K = j.k, N = j.n, W = N * j.bits / 32, G = N / j.group_size;
    const S *x = (const S *)j.x;
    for (int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; n < N;
         n += (int64_t)gridDim.x * blockDim.x) {
        float acc[QMM_MAX_M];
#pragma unroll
        for (int m = 0; m < QMM_MAX_M; m++)
            acc[m] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const uint32_t q = code_at((const uint32_t *)j.wq + k * W, n, j.bits);
            const int64_t g = k * G + n / j.group_size;
            const float w = fmaf((float)q, T::load(((const S *)j.scales)[g]),
                                 T::load(((const S *)j.biases)[g]));
            for (int m = 0; m < j.m; m++)
                acc[m] = fmaf(T::load(x[m * K + k]), w, acc[m]);
        }
        for (int m = 0; m < j.m; m++)
            ((S *)j.out)[m * N + n] = T::store(acc[m]);
    }
}

template <int D, int BITS>
static int launch_rows(Device *d, const em_cuda_affine *j) {
    const bool vec = (BITS == 4 || BITS == 8) && ((uintptr_t)j->wq & 15) == 0;
    const unsigned grid = grid_for(d, j->n * 32, 256);
    if constexpr (BITS == 4 || BITS == 8) {
        if (vec) {
            qmv_rows_kernel<D, BITS, true><<<grid, 256, 0, d->stream>>>(*j);
            EMC_LAUNCHED("quantized_matmul kernel");
            return 0;
        }
    }
    qmv_rows_kernel<D, BITS, false><<<grid, 256, 0, d->stream>>>(*j);
    EMC_LAUNCHED("quantized_matmul kernel");
    return 0;
}

template <int D>
static int launch_typed(Device *d, const em_cuda_affine *j) {
    switch (j->op) {
    case 0:
        quantize_kernel<D><<<grid_for(d, j->rows * (j->len / j->group_size)), 256, 0,
                             d->stream>>>(*j);
        EMC_LAUNCHED("quantize kernel");
        return 0;
    case 1:
        dequantize_kernel<D><<<grid_for(d, j->rows * j->len), 256, 0, d->stream>>>(*j);
        EMC_LAUNCHED("dequantize kernel");
        return 0;
    case 2:
        if (j->m > QMM_MAX_M)
            return fail(EM_ERR_ARGUMENT, "quantized_matmul: the GPU kernel takes at most %d rows of x, got %lld",
                        QMM_MAX_M, (long long)j->m);
        if (!j->transpose) {
            qmv_cols_kernel<D><<<grid_for(d, j->n), 256, 0, d->stream>>>(*j);
            EMC_LAUNCHED("quantized_matmul kernel");
            return 0;
        }
        switch (j->bits) {
        case 2:
            return launch_rows<D, 2>(d, j);
        case 3:
            return launch_rows<D, 3>(d, j);
        case 4:
            return launch_rows<D, 4>(d, j);
        case 5:
            return launch_rows<D, 5>(d, j);
        case 6:
            return launch_rows<D, 6>(d, j);
        case 8:
            return launch_rows<D, 8>(d, j);
        default:
            return fail(EM_ERR_ARGUMENT, "quantized_matmul: bits %d", j->bits);
        }
    default:
        return fail(EM_ERR_ARGUMENT, "affine quantization: unknown op %d", j->op);
    }
}

int launch_affine(Device *d, const em_cuda_affine *j) {
    switch (j->dtype) {
    case EM_F32:
        return launch_typed<EM_F32>(d, j);
    case EM_F16:
        return launch_typed<EM_F16>(d, j);
    case EM_BF16:
        return launch_typed<EM_BF16>(d, j);
    default:
        return fail(EM_ERR_ARGUMENT, "affine quantization: dtype %d is not f32, f16 or bf16",
                    j->dtype);
    }
}

} // namespace emc
