// decode.cu — the decode path's fused kernels (ops/fast_decode.c's
// semantics; engine side gpu/gpu_decode.c): em_fast_heads (below) and the
// fused matrix-vector product em_fast_linear:
//
//   out (M, N) = [silu(xn gate^T) *] (xn w^T) [+ residual],
//   xn = x or x * rsqrt(mean(x^2) + eps) [* norm_weight]
//
// A decode step multiplies a few rows of activations (M = batch) by weight
// matrices stored a row per output (N, K): the cost is streaming the
// weights once, and at decode sizes (a few MB) the whole matrix fits in
// flight at once (132 SMs x 2048 threads x a few 16-byte loads), so the
// kernel is latency-bound unless every thread issues its loads at once and
// as early as possible. The schedule:
//   - a team of `split` warps owns LIN_NR output rows at a time (grid-stride
//     over the row groups); its 32 * split threads read consecutive 16-byte
//     pieces of each weight row (and of the gate's row), UNROLL pieces per
//     row in flight; split is chosen on the host so that a thread's share
//     of a row is about UNROLL pieces and the grid still fits in one wave
//     (small N: several warps per row, large K: no second round trip);
//     blocks have 8 warps (4 for register-heavy variants), occupancy
//     queries are cached per variant;
//   - the first pieces are loaded before the prologue (the weights do not
//     depend on x), which then normalises the block's MT rows of x (a tile
//     of M, up to 16) into shared memory with all its threads (a
//     block-wide sum of squares);
//   - the products with xn's rows (shared memory) are summed per warp by
//     shuffles, then over the team's warps through shared memory; a lane per
//     (output row, row of x) applies the epilogue (SiLU gate, residual) and
//     stores.
// Weight rows with K not a multiple of the 16-byte vector, or unaligned,
// are read element by element (same schedule, one element a piece).
#include "common.cuh"

#include <mutex>

namespace emc {

constexpr int LIN_WARPS = 8;               // warps per block at most
constexpr int LIN_NR = 2;                  // output rows per team
constexpr size_t LIN_SMEM_MAX = 96 * 1024; // bytes of xn per block
constexpr unsigned LIN_FULL = 0xffffffffu;

// Pieces of each weight row a thread has in flight: fewer with more rows of
// x, whose accumulators take the registers.
constexpr int lin_unroll(int mt) { return mt <= 4 ? 4 : 2; }

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

// A thread's unit of a weight row: 16 bytes (LEN elements) with VECTOR,
// else one element.
template <int DTYPE, bool VECTOR> struct LinPiece {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    static constexpr int LEN = VECTOR ? 16 / (int)sizeof(S) : 1;
    std::conditional_t<VECTOR, uint4, S> raw;

    __device__ __forceinline__ void load(const S *p, bool ok) {
        if constexpr (VECTOR)
            raw = ok ? __ldg(reinterpret_cast<const uint4 *>(p))
                     : make_uint4(0, 0, 0, 0);
        else
            raw = ok ? __ldg(p) : S(0);
    }
    __device__ __forceinline__ void unpack(C *out) const {
        S e[LEN];
        memcpy(e, &raw, sizeof e);
#pragma unroll
        for (int t = 0; t < LEN; t++)
            out[t] = DT<DTYPE>::load(e[t]);
    }
};

// LEN values of xn from shared memory, in 16-byte loads when they fill them.
template <int LEN, class C>
__device__ __forceinline__ void lin_xn(const C *p, C *out) {
    if constexpr (LEN * sizeof(C) % 16 == 0) {
#pragma unroll
        for (int c = 0; c < LEN * (int)sizeof(C) / 16; c++)
            memcpy(reinterpret_cast<unsigned char *>(out) + 16 * c,
                   reinterpret_cast<const uint4 *>(p) + c, 16);
    } else {
#pragma unroll
        for (int t = 0; t < LEN; t++)
            out[t] = p[t];
    }
}

// The prologue, by the whole block: xs (MT, K) = xn's rows m0.. of the tile
// (zeros past the last of `rows`). part: MT * LIN_WARPS scratch for the
// per-warp sums of squares. Ends with the block synchronised.
template <int DTYPE, int MT>
__device__ __forceinline__ void
lin_prologue(const em_cuda_linear &j, typename DT<DTYPE>::C *xs,
             typename DT<DTYPE>::C *part, int64_t m0, int rows) {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    const int64_t K = j.K;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warps = blockDim.x / 32;
    const S *x = (const S *)j.x + m0 * K;
    for (int r = 0; r < MT; r++) {
        C ss = C(0);
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            const C v = r < rows ? DT<DTYPE>::load(x[r * K + k]) : C(0);
            xs[r * K + k] = v;
            ss += v * v;
        }
        if (j.norm) {
            ss = lin_warp_sum(ss);
            if (lane == 0)
                part[r * LIN_WARPS + warp] = ss;
        }
    }
    __syncthreads();
    const S *nw = (const S *)j.norm_weight;
    if (!j.norm && !nw)
        return;
    for (int r = 0; r < rows; r++) {
        C inv = C(1);
        if (j.norm) {
            C ss = C(0);
            for (int w = 0; w < warps; w++)
                ss += part[r * LIN_WARPS + w];
            if constexpr (std::is_same_v<C, double>)
                inv = 1.0 / sqrt(ss / (C)K + (C)j.eps);
            else
                inv = 1.f / sqrtf(ss / (C)K + (C)j.eps);
        }
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
            xs[r * K + k] =
                xs[r * K + k] * inv * (nw ? DT<DTYPE>::load(nw[k]) : C(1));
    }
    __syncthreads();
}

// grid (blocks over the row groups, row tiles of MT); blockDim.x = 32 *
// split * teams, at most LIN_WARPS warps; dynamic shared memory: xs (MT,
// K), then the warp sums red[2][LIN_WARPS][NW * LIN_NR * MT], both in the
// compute type.
template <int DTYPE, int MT, bool GATE, bool VECTOR>
__global__ void __launch_bounds__(LIN_WARPS * 32)
    linear_kernel(em_cuda_linear j, int split) {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    using P = LinPiece<DTYPE, VECTOR>;
    constexpr int LEN = P::LEN, UNROLL = lin_unroll(MT);
    constexpr int NW = GATE ? 2 : 1; // weight matrices read per output
    constexpr int OUTS = NW * LIN_NR * MT;
    extern __shared__ __align__(16) unsigned char lin_smem[];
    C *xs = reinterpret_cast<C *>(lin_smem);
    C *red = xs + (int64_t)MT * j.K;
    const int64_t K = j.K, N = j.N, m0 = (int64_t)blockIdx.y * MT;
    const int rows = j.M - m0 < MT ? (int)(j.M - m0) : MT;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // A team's warps are consecutive: tl is the thread's place in its team.
    const int teams = blockDim.x / (32 * split), team = warp / split;
    const int tl = threadIdx.x % (32 * split);
    const int64_t step = (int64_t)32 * split * LEN; // a team's piece round
    const int64_t groups = (N + LIN_NR - 1) / LIN_NR;
    const int64_t first = (int64_t)blockIdx.x * teams,
                  stride = (int64_t)gridDim.x * teams;
    const S *mats[NW];
    mats[0] = (const S *)j.w;
    if constexpr (GATE)
        mats[NW - 1] = (const S *)j.gate;

    P w[UNROLL][NW][LIN_NR];
    auto load = [&](int64_t g, int64_t k0) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int64_t k = k0 + u * step;
#pragma unroll
            for (int a = 0; a < NW; a++)
#pragma unroll
                for (int q = 0; q < LIN_NR; q++) {
                    const int64_t n = g * LIN_NR + q;
                    w[u][a][q].load(mats[a] + n * K + k, k < K && n < N);
                }
        }
    };
    // The first pieces are in flight while the prologue reads x.
    load(first + team, (int64_t)tl * LEN);
    lin_prologue<DTYPE, MT>(j, xs, red, m0, rows);

    int buf = 0;
    // gb is block-uniform (the team sums meet at a barrier); a team past
    // the last group computes zeros and stores nothing.
    for (int64_t gb = first; gb < groups; gb += stride, buf ^= 1) {
        const int64_t g = gb + team;
        C acc[NW][LIN_NR][MT];
#pragma unroll
        for (int a = 0; a < NW; a++)
#pragma unroll
            for (int q = 0; q < LIN_NR; q++)
#pragma unroll
                for (int m = 0; m < MT; m++)
                    acc[a][q][m] = C(0);
        for (int64_t k0 = (int64_t)tl * LEN; k0 < K; k0 += step * UNROLL) {
            if (gb != first || k0 != (int64_t)tl * LEN)
                load(g, k0);
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int64_t k = k0 + u * step;
                if (k >= K)
                    break;
                C wf[NW][LIN_NR][LEN];
#pragma unroll
                for (int a = 0; a < NW; a++)
#pragma unroll
                    for (int q = 0; q < LIN_NR; q++)
                        w[u][a][q].unpack(wf[a][q]);
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    C xv[LEN];
                    lin_xn<LEN>(xs + m * K + k, xv);
#pragma unroll
                    for (int a = 0; a < NW; a++)
#pragma unroll
                        for (int q = 0; q < LIN_NR; q++)
#pragma unroll
                            for (int t = 0; t < LEN; t++)
                                acc[a][q][m] += wf[a][q][t] * xv[t];
                }
            }
        }
        // Warp sums to red (double-buffered: one barrier per group).
        C *mine = red + ((int64_t)buf * LIN_WARPS + warp) * OUTS;
#pragma unroll
        for (int a = 0; a < NW; a++)
#pragma unroll
            for (int q = 0; q < LIN_NR; q++)
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    const C v = lin_warp_sum(acc[a][q][m]);
                    if (lane == 0)
                        mine[(a * LIN_NR + q) * MT + m] = v;
                }
        if (split > 1)
            __syncthreads();
        else
            __syncwarp();
        // The team's first warp: a lane per (output row q, row of x m).
        const int q = tl / MT, m = tl % MT;
        const int64_t n = g * LIN_NR + q;
        if (tl < LIN_NR * MT && m < rows && n < N) {
            const C *part =
                red + ((int64_t)buf * LIN_WARPS + team * split) * OUTS;
            C h[NW];
#pragma unroll
            for (int a = 0; a < NW; a++) {
                h[a] = C(0);
                for (int s = 0; s < split; s++)
                    h[a] += part[s * OUTS + (a * LIN_NR + q) * MT + m];
            }
            C y = h[0];
            if constexpr (GATE)
                y *= lin_silu(h[NW - 1]);
            const int64_t at = (m0 + m) * N + n;
            if (j.residual)
                y += DT<DTYPE>::load(((const S *)j.residual)[at]);
            ((S *)j.out)[at] = DT<DTYPE>::store(y);
        }
    }
}

// Blocks per SM of one kernel variant per (block size, shared memory),
// remembered: the occupancy query costs host time on every launch. The
// GPUs of a process are taken to be alike (one architecture in the build).
class LinOccupancy {
    struct Seen {
        int threads;
        size_t smem;
        int per_sm;
    };
    std::mutex mu_;
    Seen seen_[16];
    int n_ = 0;

  public:
    template <class Kernel>
    int get(Kernel kernel, int threads, size_t smem, int *per_sm) {
        std::lock_guard<std::mutex> lock(mu_);
        for (int i = 0; i < n_; i++)
            if (seen_[i].threads == threads && seen_[i].smem == smem) {
                *per_sm = seen_[i].per_sm;
                return 0;
            }
        EMC_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kernel,
                                                              threads, smem));
        if (*per_sm < 1)
            *per_sm = 1;
        if (n_ < 16)
            seen_[n_++] = {threads, smem, *per_sm};
        return 0;
    }
};

// The launch shape for a team of `split` warps: `teams` per block, and the
// blocks (capped at `wave`, the blocks that fit on the GPU at once).
struct LinShape {
    int split, threads;
    int64_t blocks, wave;
};

template <int DTYPE, int MT, bool GATE, bool VECTOR>
static int launch_linear_v(Device *d, const em_cuda_linear &j, size_t smem,
                           int split) {
    auto kernel = linear_kernel<DTYPE, MT, GATE, VECTOR>;
    static LinOccupancy occupancy;
    if (smem > 48 * 1024)
        EMC_TRY(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int64_t tiles = (j.M + MT - 1) / MT;
    const int64_t groups = (j.N + LIN_NR - 1) / LIN_NR;
    // Blocks of 8 warps, or of 4 where the registers leave room for more
    // warps that way (the gated tiles of 4+ rows: one block of 8 warps or
    // three of 4 per SM).
    int per8 = 0, per4 = 0;
    if (int rc = occupancy.get(kernel, LIN_WARPS * 32, smem, &per8))
        return rc;
    if (int rc = occupancy.get(kernel, LIN_WARPS * 16, smem, &per4))
        return rc;
    const int block_warps = per4 > 2 * per8 ? LIN_WARPS / 2 : LIN_WARPS;
    if (split > block_warps)
        split = block_warps;
    auto plan = [&](int s, LinShape *out) -> int {
        const int teams = block_warps / s;
        int per_sm = 0;
        out->split = s;
        out->threads = teams * s * 32;
        out->blocks = (groups + teams - 1) / teams;
        if (int rc = occupancy.get(kernel, out->threads, smem, &per_sm))
            return rc;
        out->wave = (int64_t)per_sm * d->sms / tiles;
        if (out->wave < 1)
            out->wave = 1;
        return 0;
    };
    LinShape shape, wider;
    if (int rc = plan(split, &shape))
        return rc;
    // More warps per row while the grid still fits in one wave: the same
    // bytes in flight, spread over more SMs and warps (N = 1024: 256 blocks
    // of 8 warps instead of 128 of them).
    while (shape.split * 2 <= block_warps) {
        if (int rc = plan(shape.split * 2, &wider))
            return rc;
        if (wider.blocks > wider.wave)
            break;
        shape = wider;
    }
    dim3 grid((unsigned)(shape.blocks < shape.wave ? shape.blocks : shape.wave),
              (unsigned)tiles);
    kernel<<<grid, shape.threads, smem, d->stream>>>(j, shape.split);
    EMC_LAUNCHED("fast_linear kernel");
    return 0;
}

template <int DTYPE, int MT>
static int launch_linear_mt(Device *d, const em_cuda_linear &j, bool vector) {
    using C = typename DT<DTYPE>::C;
    const int nw = j.gate ? 2 : 1;
    const size_t smem =
        ((size_t)MT * j.K + (size_t)2 * LIN_WARPS * nw * LIN_NR * MT) *
        sizeof(C);
    // A team's thread takes about lin_unroll(MT) pieces of a row: one round
    // trip per row group.
    const int64_t pieces =
        vector ? j.K / (16 / (int64_t)sizeof(typename DT<DTYPE>::S)) : j.K;
    const int64_t round = (int64_t)32 * lin_unroll(MT);
    int64_t split = (pieces + round - 1) / round;
    split = split < 1 ? 1 : split > LIN_WARPS ? LIN_WARPS : split;
    const bool gate = j.gate != nullptr;
    if (gate && vector)
        return launch_linear_v<DTYPE, MT, true, true>(d, j, smem, (int)split);
    if (gate)
        return launch_linear_v<DTYPE, MT, true, false>(d, j, smem, (int)split);
    if (vector)
        return launch_linear_v<DTYPE, MT, false, true>(d, j, smem, (int)split);
    return launch_linear_v<DTYPE, MT, false, false>(d, j, smem, (int)split);
}

int launch_fast_linear(Device *d, const em_cuda_linear *job) {
    if (job->M == 0 || job->N == 0)
        return 0;
    return with_dtype(job->dtype, [&]<int DTYPE>() -> int {
        if constexpr (DTYPE != EM_F16 && DTYPE != EM_BF16 && DTYPE != EM_F32 &&
                      DTYPE != EM_F64) {
            return fail(EM_ERR_ARGUMENT,
                        "fast_linear: dtype %d has no GPU "
                        "kernel",
                        DTYPE);
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
            const int MT = want >= 16  ? 16
                           : want >= 8 ? 8
                           : want >= 4 ? 4
                           : want >= 2 ? 2
                                       : 1;
            const int64_t vec = 16 / (int64_t)sizeof(S);
            const bool vector = j.K % vec == 0 && (uintptr_t)j.w % 16 == 0 &&
                                (!j.gate || (uintptr_t)j.gate % 16 == 0);
            if ((j.M + MT - 1) / MT > 65535)
                return fail(EM_ERR_UNSUPPORTED,
                            "fast_linear: %lld rows of x exceed one grid",
                            (long long)j.M);
            switch (MT) {
            case 16:
                return launch_linear_mt<DTYPE, 16>(d, j, vector);
            case 8:
                return launch_linear_mt<DTYPE, 8>(d, j, vector);
            case 4:
                return launch_linear_mt<DTYPE, 4>(d, j, vector);
            case 2:
                return launch_linear_mt<DTYPE, 2>(d, j, vector);
            default:
                return launch_linear_mt<DTYPE, 1>(d, j, vector);
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
