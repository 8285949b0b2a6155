// decode.cu — the decode path's fused kernels (ops/fast_decode.c's
// semantics; engine side gpu/gpu_decode.c): em_fast_heads (below) and the
// fused matrix-vector product em_fast_linear:
//
//   out (M, N) = [silu(xn gate^T) *] (xn w^T) [+ residual],
//   xn = x or x * rsqrt(mean(x^2) + eps) [* norm_weight]
//
// A decode step multiplies a few rows of activations (M = batch) by weight
// matrices stored a row per output (N, K): the cost is streaming the
// weights once. The schedule:
//   - a block takes LIN_MT rows of x (a tile of M), normalises them into
//     shared memory in the compute type (a warp per row: the row's sum of
//     squares by shuffles; every block recomputes it, x is a few KB), then
//   - each warp owns LIN_NR output rows at a time (grid-stride over N):
//     lanes read consecutive 16-byte pieces of each weight row (and of the
//     gate's row), UNROLL pieces in flight, multiply them with xn's rows
//     from shared memory, and reduce the MT x NR sums by shuffles;
//   - lane 0 applies the epilogue (SiLU gate, residual) and stores.
// Weight rows with K not a multiple of the 16-byte vector, or unaligned,
// are read element by element (same order of work, slower).
#include "common.cuh"

namespace emc {

constexpr int LIN_WARPS = 4;
constexpr int LIN_NR = 2;                        // output rows per warp
constexpr size_t LIN_SMEM_MAX = 96 * 1024;      // bytes of xn per block
constexpr unsigned LIN_FULL = 0xffffffffu;

template <class C> __device__ __forceinline__ C lin_warp_sum(C v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(LIN_FULL, v, o);
    return v;
}

template <class C> __device__ __forceinline__ C lin_silu(C g) {
    if constexpr (std::is_same_v<C, double>)
        return g / (1.0 + exp(-g));
    else
        return g / (1.f + expf(-g));
}

// grid (output blocks, row tiles); LIN_WARPS warps; dynamic shared memory
// MT * K compute-type elements.
template <int DTYPE, int MT, bool GATE, bool VECTOR>
__global__ void __launch_bounds__(LIN_WARPS * 32)
    linear_kernel(em_cuda_linear j) {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    constexpr int VEC = 16 / (int)sizeof(S);
    // 16-byte loads in flight per lane: UNROLL x NW x LIN_NR (few x rows
    // leave registers for more).
    constexpr int UNROLL = MT <= 4 ? 4 : 2;
    constexpr int NW = GATE ? 2 : 1; // weight matrices read per output
    extern __shared__ __align__(16) unsigned char lin_smem[];
    C *xs = reinterpret_cast<C *>(lin_smem);
    const int64_t K = j.K, N = j.N, m0 = (int64_t)blockIdx.y * MT;
    const int rows = j.M - m0 < MT ? (int)(j.M - m0) : MT;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    // Prologue: xn's rows of the tile (zeros past the last row).
    for (int r = warp; r < MT; r += LIN_WARPS) {
        C *o = xs + (int64_t)r * K;
        if (r >= rows) {
            for (int64_t k = lane; k < K; k += 32)
                o[k] = C(0);
            continue;
        }
        const S *xr = (const S *)j.x + (m0 + r) * K;
        C inv = C(1);
        if (j.norm) {
            C ss = C(0);
            for (int64_t k = lane; k < K; k += 32) {
                const C v = DT<DTYPE>::load(xr[k]);
                ss += v * v;
            }
            ss = lin_warp_sum(ss);
            if constexpr (std::is_same_v<C, double>)
                inv = 1.0 / sqrt(ss / (C)K + (C)j.eps);
            else
                inv = 1.f / sqrtf(ss / (C)K + (C)j.eps);
        }
        const S *nw = (const S *)j.norm_weight;
        for (int64_t k = lane; k < K; k += 32)
            o[k] = DT<DTYPE>::load(xr[k]) * inv *
                   (nw ? DT<DTYPE>::load(nw[k]) : C(1));
    }
    __syncthreads();

    const S *mats[NW];
    mats[0] = (const S *)j.w;
    if constexpr (GATE)
        mats[NW - 1] = (const S *)j.gate;
    const int64_t stride = (int64_t)gridDim.x * LIN_WARPS * LIN_NR;
    for (int64_t n0 = ((int64_t)blockIdx.x * LIN_WARPS + warp) * LIN_NR;
         n0 < N; n0 += stride) {
        C acc[NW][LIN_NR][MT];
#pragma unroll
        for (int a = 0; a < NW; a++)
#pragma unroll
            for (int q = 0; q < LIN_NR; q++)
#pragma unroll
                for (int m = 0; m < MT; m++)
                    acc[a][q][m] = C(0);
        if constexpr (VECTOR) {
            for (int64_t k0 = (int64_t)lane * VEC; k0 < K;
                 k0 += (int64_t)32 * VEC * UNROLL) {
                uint4 raw[UNROLL][NW][LIN_NR];
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    const int64_t k = k0 + (int64_t)u * 32 * VEC;
#pragma unroll
                    for (int a = 0; a < NW; a++)
#pragma unroll
                        for (int q = 0; q < LIN_NR; q++)
                            raw[u][a][q] =
                                k < K && n0 + q < N
                                    ? __ldg(reinterpret_cast<const uint4 *>(
                                          mats[a] + (n0 + q) * K + k))
                                    : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    const int64_t k = k0 + (int64_t)u * 32 * VEC;
                    if (k >= K)
                        break;
                    C wf[NW][LIN_NR][VEC];
#pragma unroll
                    for (int a = 0; a < NW; a++)
#pragma unroll
                        for (int q = 0; q < LIN_NR; q++) {
                            S e[VEC];
                            memcpy(e, &raw[u][a][q], 16);
#pragma unroll
                            for (int t = 0; t < VEC; t++)
                                wf[a][q][t] = DT<DTYPE>::load(e[t]);
                        }
#pragma unroll
                    for (int m = 0; m < MT; m++) {
                        // xn's VEC values at k, in 16-byte shared loads
                        C xv[VEC];
                        const uint4 *xp =
                            reinterpret_cast<const uint4 *>(xs + m * K + k);
#pragma unroll
                        for (int c = 0; c < VEC * (int)sizeof(C) / 16; c++)
                            memcpy(reinterpret_cast<unsigned char *>(xv) +
                                       16 * c,
                                   &xp[c], 16);
#pragma unroll
                        for (int a = 0; a < NW; a++)
#pragma unroll
                            for (int q = 0; q < LIN_NR; q++)
#pragma unroll
                                for (int t = 0; t < VEC; t++)
                                    acc[a][q][m] += wf[a][q][t] * xv[t];
                    }
                }
            }
        } else {
            for (int64_t k = lane; k < K; k += 32) {
                C xv[MT];
#pragma unroll
                for (int m = 0; m < MT; m++)
                    xv[m] = xs[(int64_t)m * K + k];
#pragma unroll
                for (int a = 0; a < NW; a++)
#pragma unroll
                    for (int q = 0; q < LIN_NR; q++) {
                        const C wv = n0 + q < N ? DT<DTYPE>::load(
                                                      mats[a][(n0 + q) * K + k])
                                                : C(0);
#pragma unroll
                        for (int m = 0; m < MT; m++)
                            acc[a][q][m] += wv * xv[m];
                    }
            }
        }
#pragma unroll
        for (int a = 0; a < NW; a++)
#pragma unroll
            for (int q = 0; q < LIN_NR; q++)
#pragma unroll
                for (int m = 0; m < MT; m++)
                    acc[a][q][m] = lin_warp_sum(acc[a][q][m]);
        if (lane == 0) {
#pragma unroll
            for (int q = 0; q < LIN_NR; q++) {
                if (n0 + q >= N)
                    break;
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    if (m >= rows)
                        break;
                    C h = acc[0][q][m];
                    if constexpr (GATE)
                        h *= lin_silu(acc[NW - 1][q][m]);
                    const int64_t at = (m0 + m) * N + n0 + q;
                    if (j.residual)
                        h += DT<DTYPE>::load(((const S *)j.residual)[at]);
                    ((S *)j.out)[at] = DT<DTYPE>::store(h);
                }
            }
        }
    }
}

template <int DTYPE, int MT, bool GATE, bool VECTOR>
static int launch_linear_v(Device *d, const em_cuda_linear &j, size_t smem,
                           int64_t out_blocks) {
    auto kernel = linear_kernel<DTYPE, MT, GATE, VECTOR>;
    if (smem > 48 * 1024)
        EMC_TRY(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    // One wave: as many blocks as fit on the GPU at once (the warps stride
    // over the outputs), so that no SM idles through a last partial wave.
    int per_sm = 0, dev = 0, sms = 0;
    EMC_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, kernel, LIN_WARPS * 32, smem));
    EMC_TRY(cudaGetDevice(&dev));
    EMC_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int64_t tiles = (j.M + MT - 1) / MT;
    int64_t wave = (int64_t)(per_sm > 0 ? per_sm : 1) * sms / tiles;
    if (wave < 1)
        wave = 1;
    if (out_blocks > wave)
        out_blocks = wave;
    dim3 grid((unsigned)out_blocks, (unsigned)tiles);
    kernel<<<grid, LIN_WARPS * 32, smem, d->stream>>>(j);
    EMC_LAUNCHED("fast_linear kernel");
    return 0;
}

template <int DTYPE, int MT>
static int launch_linear_mt(Device *d, const em_cuda_linear &j, size_t smem,
                            int64_t out_blocks, bool vector) {
    const bool gate = j.gate != nullptr;
    if (gate && vector)
        return launch_linear_v<DTYPE, MT, true, true>(d, j, smem, out_blocks);
    if (gate)
        return launch_linear_v<DTYPE, MT, true, false>(d, j, smem, out_blocks);
    if (vector)
        return launch_linear_v<DTYPE, MT, false, true>(d, j, smem, out_blocks);
    return launch_linear_v<DTYPE, MT, false, false>(d, j, smem, out_blocks);
}

int launch_fast_linear(Device *d, const em_cuda_linear *job) {
    if (job->M == 0 || job->N == 0)
        return 0;
    return with_dtype(job->dtype, [&]<int DTYPE>() -> int {
        if constexpr (DTYPE != EM_F16 && DTYPE != EM_BF16 && DTYPE != EM_F32 &&
                      DTYPE != EM_F64) {
            return fail(EM_ERR_ARGUMENT, "fast_linear: dtype %d has no GPU "
                                         "kernel", DTYPE);
        } else {
            using S = typename DT<DTYPE>::S;
            using C = typename DT<DTYPE>::C;
            const em_cuda_linear &j = *job;
            const size_t row = (size_t)j.K * sizeof(C);
            if (row > LIN_SMEM_MAX)
                return fail(EM_ERR_UNSUPPORTED,
                            "fast_linear: K = %lld needs %zu bytes of shared "
                            "memory per row, the kernel has %zu",
                            (long long)j.K, row, LIN_SMEM_MAX);
            // Rows of x per block: as many as fit, up to 16.
            int64_t fit = (int64_t)(LIN_SMEM_MAX / (row ? row : 1));
            int64_t want = j.M < fit ? j.M : fit;
            const int MT = want >= 16 ? 16 : want >= 8 ? 8 : want >= 4 ? 4
                           : want >= 2 ? 2 : 1;
            const size_t smem = (size_t)MT * row;
            const int64_t vec = 16 / (int64_t)sizeof(S);
            const bool vector = j.K % vec == 0 && (uintptr_t)j.w % 16 == 0 &&
                                (!j.gate || (uintptr_t)j.gate % 16 == 0);
            // A block per LIN_WARPS * LIN_NR outputs, capped at one wave
            // (launch_linear_v); each block normalises x once.
            const int64_t per_block = (int64_t)LIN_WARPS * LIN_NR;
            const int64_t out_blocks = (j.N + per_block - 1) / per_block;
            if ((j.M + MT - 1) / MT > 65535)
                return fail(EM_ERR_UNSUPPORTED,
                            "fast_linear: %lld rows of x exceed one grid",
                            (long long)j.M);
            switch (MT) {
            case 16:
                return launch_linear_mt<DTYPE, 16>(d, j, smem, out_blocks,
                                                   vector);
            case 8:
                return launch_linear_mt<DTYPE, 8>(d, j, smem, out_blocks,
                                                  vector);
            case 4:
                return launch_linear_mt<DTYPE, 4>(d, j, smem, out_blocks,
                                                  vector);
            case 2:
                return launch_linear_mt<DTYPE, 2>(d, j, smem, out_blocks,
                                                  vector);
            default:
                return launch_linear_mt<DTYPE, 1>(d, j, smem, out_blocks,
                                                  vector);
            }
        }
    });
}

// ---- em_fast_heads: head split + per-head RMS norm + RoPE (+ cache) -------
//
// One warp per computed row (b, h, s) of head_dim features: the row is read
// into the warp's slice of shared memory (compute type) while summing its
// squares, normed in place, then each lane rotates pairs i = lane, lane +
// 32, ... (angle in double as the CPU, cos / sin rounded to the compute
// type) and stores; features past the rotated ones are copied. The row
// lands at row start + s of the L rows of (b, h): the heads themselves (L =
// S, start 0) or a KV cache's new rows (the engine put the cache in out).

constexpr int HEADS_WARPS = 8;
constexpr int HEADS_MAX_DIM = 256;

// The value of a 0-d s32 / s64 on the device (offset, cache_offset).
__device__ __forceinline__ int64_t heads_index(const void *p, int dtype) {
    if (dtype == EM_S32)
        return *static_cast<const int32_t *>(p);
    return *static_cast<const int64_t *>(p);
}

template <int DTYPE>
__global__ void __launch_bounds__(HEADS_WARPS * 32)
    heads_kernel(em_cuda_heads j, int64_t rows) {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    __shared__ C buf[HEADS_WARPS][HEADS_MAX_DIM];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t u = (int64_t)blockIdx.x * HEADS_WARPS + warp;
    if (u >= rows)
        return; // the whole warp: no block-wide barrier below
    const int64_t D = j.head_dim, s = u % j.S, h = (u / j.S) % j.count,
                  b = u / (j.S * j.count);
    const S *xr = (const S *)j.x + (b * j.S + s) * j.N + (j.first + h) * D;
    const S *nw = (const S *)j.norm_weight;
    int64_t start = 0;
    if (j.cache_offset) { // em_dynamic_put_slice's clamp into [0, L - S]
        const int64_t v = heads_index(j.cache_offset, j.cache_offset_dtype);
        start = v < 0 ? 0 : v > j.L - j.S ? j.L - j.S : v;
    }
    C *row = buf[warp];
    C ss = C(0);
    for (int64_t e = lane; e < D; e += 32) {
        const C v = DT<DTYPE>::load(xr[e]);
        row[e] = v;
        ss += v * v;
    }
    C r = C(1);
    if (j.norm) {
        ss = lin_warp_sum(ss);
        if constexpr (std::is_same_v<C, double>)
            r = 1.0 / sqrt(ss / (C)D + (C)j.eps);
        else
            r = 1.f / sqrtf(ss / (C)D + (C)j.eps);
    }
    for (int64_t e = lane; e < D; e += 32)
        row[e] = row[e] * r * (nw ? DT<DTYPE>::load(nw[e]) : C(1));
    __syncwarp();
    S *yr = (S *)j.out + ((u / j.S) * j.L + start + s) * D;
    int64_t done = 0;
    if (j.rope) {
        const int64_t off = heads_index(j.offset, j.offset_dtype);
        const int64_t half = j.dims / 2;
        const double pos = j.scale * (double)(off + s);
        for (int64_t i = lane; i < half; i += 32) {
            const double th =
                pos * pow(j.base, -2.0 * (double)i / (double)j.dims);
            const C c = (C)cos(th), sn = (C)sin(th);
            const int64_t ia = j.traditional ? 2 * i : i,
                          ib = j.traditional ? 2 * i + 1 : i + half;
            const C a = row[ia], bb = row[ib];
            yr[ia] = DT<DTYPE>::store(a * c - bb * sn);
            yr[ib] = DT<DTYPE>::store(a * sn + bb * c);
        }
        done = 2 * half;
    }
    for (int64_t e = done + lane; e < D; e += 32)
        yr[e] = DT<DTYPE>::store(row[e]);
}

int launch_fast_heads(Device *d, const em_cuda_heads *job) {
    const int64_t rows = job->B * job->count * job->S;
    if (rows == 0 || job->head_dim == 0)
        return 0;
    if (job->head_dim > HEADS_MAX_DIM)
        return fail(EM_ERR_UNSUPPORTED,
                    "fast_heads: head_dim %lld above %d has no GPU kernel",
                    (long long)job->head_dim, HEADS_MAX_DIM);
    const int64_t blocks = (rows + HEADS_WARPS - 1) / HEADS_WARPS;
    if (blocks > INT32_MAX)
        return fail(EM_ERR_UNSUPPORTED, "fast_heads: %lld rows exceed a grid",
                    (long long)rows);
    return with_dtype(job->dtype, [&]<int DTYPE>() -> int {
        if constexpr (DTYPE != EM_F16 && DTYPE != EM_BF16 && DTYPE != EM_F32 &&
                      DTYPE != EM_F64) {
            return fail(EM_ERR_ARGUMENT,
                        "fast_heads: dtype %d has no GPU kernel", DTYPE);
        } else {
            heads_kernel<DTYPE><<<(unsigned)blocks, HEADS_WARPS * 32, 0,
                                  d->stream>>>(*job, rows);
            EMC_LAUNCHED("fast_heads kernel");
            return 0;
        }
    });
}

} // namespace emc
