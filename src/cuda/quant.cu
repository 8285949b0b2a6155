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
//   matmul (the engine sends m <= QMV_MAX_M = 16 here; larger m is
//   dequantize + GEMM):
//     transpose: quant_matvec.cu (warps stream the weight rows).
//     else:     one thread per output column n, walking the K rows of w.
#include "qmv.cuh"

namespace emc {

constexpr int QMM_MAX_M = QMV_MAX_M;

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
        return affine_matvec(d, j);
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
