// quant_matvec.cu — out (m, n) = x (m, k) @ D^T for 1..QMV_MAX_M rows of x
// and the affine-quantized D (n, k) (include/emily_quant.h), the layout of
// qmv.cuh: a lane takes a 32-code unit, which is exactly `bits` words
// of the row (128-bit loads for 4 and 8 bits when the weights are 16-byte
// aligned), decodes the codes with shifts and byte permutes into floats
// (no integer-to-float conversion) and adds s * sum(q x) + b * sum(x) per
// row of x: the CPU's formula (src/engine/quant/affine.c), with group
// scale s and bias b (a unit never straddles groups: 32 | group_size).
#include "qmv.cuh"

namespace emc {

namespace {

// The 32 codes of `bits` words w into q (code i at bits [i*B, (i+1)*B)).
template <int B> __device__ __forceinline__ void unpack_codes(const uint32_t (&w)[B], float (&q)[32]) {
    if constexpr (B == 8) {
#pragma unroll
        for (int i = 0; i < 8; i++)
            bytes_to_floats(w[i], 0.0f, q + 4 * i);
    } else if constexpr (B == 4) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float lo[4], hi[4];
            bytes_to_floats(w[i] & 0x0F0F0F0Fu, 0.0f, lo);
            bytes_to_floats((w[i] >> 4) & 0x0F0F0F0Fu, 0.0f, hi);
#pragma unroll
            for (int b = 0; b < 4; b++) {
                q[8 * i + 2 * b] = lo[b];
                q[8 * i + 2 * b + 1] = hi[b];
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int bit = i * B, wo = bit >> 5, s = bit & 31;
            uint32_t v = w[wo] >> s;
            if (s + B > 32)
                v = __funnelshift_r(w[wo], w[wo + 1], s);
            q[i] = code_float(v & ((1u << B) - 1));
        }
    }
}

// The `bits` words of a unit at w (16-byte aligned when vec and B is 4 or 8).
template <int B>
__device__ __forceinline__ void load_words(const uint32_t *w, bool vec, uint32_t (&out)[B]) {
    if constexpr (B % 4 == 0) {
        if (vec) {
#pragma unroll
            for (int v = 0; v < B / 4; v++) {
                const uint4 t = __ldg((const uint4 *)w + v);
                out[4 * v] = t.x;
                out[4 * v + 1] = t.y;
                out[4 * v + 2] = t.z;
                out[4 * v + 3] = t.w;
            }
            return;
        }
    }
#pragma unroll
    for (int v = 0; v < B; v++)
        out[v] = __ldg(w + v);
}

template <int D, int BITS, int MAXM>
__global__ void __launch_bounds__(QMV_WARPS * 32, MAXM == 1 ? 3 : 2)
    affine_matvec_kernel(em_cuda_affine j, int wpr, bool wvec, bool xvec) {
    using S = typename DT<D>::S;
    const int64_t K = j.k, N = j.n, W = K * BITS / 32, G = K / j.group_size;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t n = (int64_t)blockIdx.x * ((blockDim.x >> 5) / wpr) + warp / wpr;
    const int part = warp % wpr;
    const int m = (int)j.m;
    const S *x = (const S *)j.x;
    float acc[MAXM];
#pragma unroll
    for (int r = 0; r < MAXM; r++)
        acc[r] = 0.0f;
    if (n < N) {
        const uint32_t *row = (const uint32_t *)j.wq + n * W;
        const S *scales = (const S *)j.scales + n * G, *biases = (const S *)j.biases + n * G;
        // units per group: 1, 2 or 4 (group_size 32, 64, 128)
        const int gshift = j.group_size == 32 ? 0 : j.group_size == 64 ? 1 : 2;
        const int64_t units = K / 32, step = 32 * wpr;
        // Software pipeline: the next unit's words (and its group's scale
        // and bias) are requested before this unit is decoded.
        uint32_t cur[BITS], next[BITS];
        S cur_s{}, cur_b{}, next_s{}, next_b{};
        int64_t u = part * 32 + lane;
        if (u < units) {
            load_words<BITS>(row + u * BITS, wvec, cur);
            cur_s = __ldg(scales + (u >> gshift));
            cur_b = __ldg(biases + (u >> gshift));
        }
        for (; u < units; u += step) {
            if (u + step < units) {
                load_words<BITS>(row + (u + step) * BITS, wvec, next);
                next_s = __ldg(scales + ((u + step) >> gshift));
                next_b = __ldg(biases + ((u + step) >> gshift));
            }
            float a[2], b[2], q[32];
            a[0] = a[1] = DT<D>::load(cur_s);
            b[0] = b[1] = DT<D>::load(cur_b);
            unpack_codes<BITS>(cur, q);
            unit_dot<D, MAXM, true>(q, a, b, x + u * 32, K, m, xvec, acc);
#pragma unroll
            for (int v = 0; v < BITS; v++)
                cur[v] = next[v];
            cur_s = next_s;
            cur_b = next_b;
        }
    }
    qmv_finish<D, MAXM>(acc, m, wpr, n, N, (S *)j.out);
}

template <int D, int BITS, int MAXM> int launch(Device *d, const em_cuda_affine *j) {
    const QmvShape shape = qmv_shape(d, j->n, j->k / 32);
    const int64_t grid = shape.grid(j->n);
    if (grid > 0x7fffffff)
        return fail(EM_ERR_ARGUMENT, "quantized_matmul: %lld weight rows is too many",
                    (long long)j->n);
    const bool wvec = ((uintptr_t)j->wq & 15) == 0;
    const bool xvec = ((uintptr_t)j->x & 15) == 0;
    affine_matvec_kernel<D, BITS, MAXM>
        <<<(unsigned)grid, shape.threads(), 0, d->stream>>>(*j, shape.wpr, wvec, xvec);
    EMC_LAUNCHED("quantized_matmul matvec kernel");
    return 0;
}

template <int D, int BITS> int launch_m(Device *d, const em_cuda_affine *j) {
    return j->m == 1 ? launch<D, BITS, 1>(d, j) : launch<D, BITS, QMV_MAX_M>(d, j);
}

template <int D> int launch_bits(Device *d, const em_cuda_affine *j) {
    switch (j->bits) {
    case 2:
        return launch_m<D, 2>(d, j);
    case 3:
        return launch_m<D, 3>(d, j);
    case 4:
        return launch_m<D, 4>(d, j);
    case 5:
        return launch_m<D, 5>(d, j);
    case 6:
        return launch_m<D, 6>(d, j);
    case 8:
        return launch_m<D, 8>(d, j);
    default:
        return fail(EM_ERR_ARGUMENT, "quantized_matmul: bits %d", j->bits);
    }
}

} // namespace

int affine_matvec(Device *d, const em_cuda_affine *j) {
    if (j->m < 1 || j->m > QMV_MAX_M)
        return fail(EM_ERR_ARGUMENT, "quantized_matmul: the matrix-vector kernel takes 1..%d rows of x, got %lld",
                    QMV_MAX_M, (long long)j->m);
    if (j->k % 32 != 0 || (j->group_size != 32 && j->group_size != 64 && j->group_size != 128))
        return fail(EM_ERR_ARGUMENT, "quantized_matmul: k %lld must be a multiple of 32 and group_size %d 32, 64 or 128",
                    (long long)j->k, j->group_size);
    switch (j->dtype) {
    case EM_F32:
        return launch_bits<EM_F32>(d, j);
    case EM_F16:
        return launch_bits<EM_F16>(d, j);
    case EM_BF16:
        return launch_bits<EM_BF16>(d, j);
    default:
        return fail(EM_ERR_ARGUMENT, "quantized_matmul: dtype %d is not f32, f16 or bf16", j->dtype);
    }
}

} // namespace emc
