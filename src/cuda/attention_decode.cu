// attention_decode.cu — scaled dot-product attention for a few queries over
// a long cache (decode, speculative decoding: Lq <= 16), grouped heads
// (include/emily_attention.h's semantics; gpu_attention.c picks this path,
// attention.cu has the general kernel).
//
// The cost is reading K and V once, so the schedule is built around that:
//   - a block owns one (batch, KV head), up to DEC_RT of the query rows
//     that share that KV head (G = H / Hkv heads x Lq positions), and one
//     chunk of the keys: the cache is split across blocks until one wave
//     of two 8-warp blocks per SM streams it (flash-decoding), so every SM
//     keeps 16 warps' loads in flight;
//   - a key's row is read by LPK lanes with 16-byte loads (head dimension
//     128 in bf16: 16 lanes of 8 elements, two keys per warp step), several
//     keys' K and V rows loaded before any is used (loads in flight); each
//     K row is scored against every query row of the block from registers,
//     so grouped heads read it once;
//   - each lane group keeps an online softmax (running max m, sum l, output
//     slice acc) per query row, in f32; the groups of a warp merge by
//     shuffles, the warps of a block through shared memory;
//   - the chunks of one (batch, KV head, row group) are combined in the
//     same launch where they fit one thread-block cluster (up to
//     DEC_CLUSTER, sm_90): each block leaves its (m, l, acc) in shared
//     memory, the cluster synchronises, and each block finishes a slice of
//     the output reading the others' states through distributed shared
//     memory: no second launch, no workspace, no counter to reset (so
//     graph replays and concurrent streams need nothing special);
//   - more chunks (long caches over few sequences, to keep every SM
//     streaming) write (m, l, acc) to a workspace and
//     sdpa_decode_combine_kernel (a block per query row) merges them: the
//     chunks' maxima and sums by lanes over chunks and warp shuffles, the
//     accumulators by 16-byte loads split over groups of threads, all of
//     a thread's loads independent (in flight together).
// Masks (additive of q's dtype or boolean, broadcast through zero strides),
// the causal limit with Lq != Lk, sinks and the scale are those of the
// general kernel. K and V need unit stride along the head dimension and
// 16-byte aligned rows; the engine routes other layouts (and f64, other
// head dimensions) to the general kernel, and this one fails clearly if
// called with them.
#include "common.cuh"

#include <cooperative_groups.h>

namespace emc {

namespace cg = cooperative_groups;

// 8 warps: one step of a block loads 64 keys of K and V (bf16, D 128) at
// once, so a 64-key chunk costs one memory round trip.
constexpr int DEC_WARPS = 8;
constexpr int DEC_RT_MAX = 4;         // query rows per block, at most
constexpr int64_t DEC_MIN_CHUNK = 64; // keys per block, at least (splits)
constexpr int DEC_CLUSTER = 8; // chunks combined in-launch (portable size)
// Partial states in the workspace: (m, l, 2 pad, acc[HD]) per (row, chunk),
// the pad keeping acc 16-byte aligned for the combine's vector loads.
constexpr int DEC_PART_HEAD = 4;
constexpr unsigned DEC_FULL = 0xffffffffu;

template <int DTYPE, int HD, int RT> struct DecodeShape {
    using S = typename DT<DTYPE>::S;
    static constexpr int VEC = 16 / (int)sizeof(S);           // per load
    static constexpr int LPK = HD / VEC < 32 ? HD / VEC : 32; // lanes per key
    static constexpr int PER = HD / LPK;    // elements per lane
    static constexpr int NLOAD = PER / VEC; // 16-byte loads per lane and row
    static constexpr int KPW = 32 / LPK;    // keys per warp step
    // Key steps whose loads are in flight at once (registers: 4 rows of
    // 8-element slices leave room for 2).
    static constexpr int UNROLL = NLOAD == 1 && RT * PER <= 16 ? 4 : 2;
    static_assert(HD % (VEC * LPK) == 0 && PER % VEC == 0, "head dimension");
};

template <int DTYPE, int N>
__device__ __forceinline__ void unpack16(const uint4 (&raw)[N], float *out) {
    using S = typename DT<DTYPE>::S;
    constexpr int VEC = 16 / (int)sizeof(S);
#pragma unroll
    for (int n = 0; n < N; n++) {
        S e[VEC];
        memcpy(e, &raw[n], 16);
#pragma unroll
        for (int t = 0; t < VEC; t++)
            out[n * VEC + t] = DT<DTYPE>::load(e[t]);
    }
}

// Folds the state (m2, l2, acc2) into (m, l, acc): both rescaled to the
// larger max. Empty states (m = -inf) contribute nothing.
template <int PER>
__device__ __forceinline__ void dec_merge(float &m, float &l, float *acc,
                                          float m2, float l2,
                                          const float *acc2) {
    const float M = m2 > m ? m2 : m;
    if (M == -INFINITY)
        return;
    const float a = expf(m - M), b = expf(m2 - M);
    l = l * a + l2 * b;
#pragma unroll
    for (int e = 0; e < PER; e++)
        acc[e] = acc[e] * a + acc2[e] * b;
    m = M;
}

// 1 / l, or with a sink exp(m - M) / (l exp(m - M) + exp(sink - M)),
// M = max(m, sink); 0 for a row that saw no key (m = -inf).
__device__ __forceinline__ float dec_factor(float m, float l, bool has_sink,
                                            float sink) {
    if (m == -INFINITY)
        return 0.f;
    if (!has_sink)
        return 1.f / l;
    const float M = sink > m ? sink : m;
    const float a = expf(m - M);
    return a / (l * a + expf(sink - M));
}

template <int DTYPE>
__device__ __forceinline__ float dec_sink(const em_cuda_sdpa &j, int64_t h) {
    using S = typename DT<DTYPE>::S;
    return j.sinks ? DT<DTYPE>::load(((const S *)j.sinks)[h * j.sinks_st])
                   : 0.f;
}

// Output row (b, h, i) of the (B, H, Lq, Dv) result for query row rr of
// KV head kvh (rr -> head kvh * G + rr / Lq, position rr % Lq).
__device__ __forceinline__ int64_t dec_out_row(const em_cuda_sdpa &j, int64_t b,
                                               int64_t kvh, int64_t rr) {
    const int64_t h = kvh * (j.H / j.Hkv) + rr / j.Lq, i = rr % j.Lq;
    return (b * j.H + h) * j.Lq + i;
}

// Element e of output row `row` from its merged state (M, L, A).
template <int DTYPE, int HD>
__device__ __forceinline__ void dec_store(const em_cuda_sdpa &j, int64_t row,
                                          int e, float M, float L, float A) {
    using S = typename DT<DTYPE>::S;
    const int64_t h = (row / j.Lq) % j.H;
    const float f = dec_factor(M, L, j.sinks != nullptr, dec_sink<DTYPE>(j, h));
    ((S *)j.out)[row * HD + e] = DT<DTYPE>::store(A * f);
}

// The fused combine: the cluster's blocks (the chunks of one row group,
// block rank = chunk) have left their states in `fin` ([RT][HD + 2]: acc,
// m, l); after the cluster barrier (which orders those shared-memory
// writes before the reads) block c finishes elements c * blockDim + t,
// stepping by the cluster's threads, reading every chunk's state through
// distributed shared memory (independent loads, in flight together).
template <int DTYPE, int HD>
__device__ void dec_cluster_finish(const em_cuda_sdpa &j, float *fin, int nrows,
                                   int64_t b, int64_t kvh, int64_t r0, int c) {
    constexpr int ROW = HD + 2;
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    const int ns = (int)j.nsplit;
    const float *st[DEC_CLUSTER];
#pragma unroll
    for (int s = 0; s < DEC_CLUSTER; s++)
        st[s] = cl.map_shared_rank(fin, s < ns ? s : 0);
    for (int t = c * (int)blockDim.x + (int)threadIdx.x; t < nrows * HD;
         t += ns * (int)blockDim.x) {
        const int r = t / HD, e = t % HD;
        float ms[DEC_CLUSTER], M = -INFINITY;
#pragma unroll
        for (int s = 0; s < DEC_CLUSTER; s++) {
            ms[s] = s < ns ? st[s][r * ROW + HD] : -INFINITY;
            M = fmaxf(M, ms[s]);
        }
        float L = 0.f, A = 0.f;
        if (M != -INFINITY) {
#pragma unroll
            for (int s = 0; s < DEC_CLUSTER; s++) {
                if (ms[s] == -INFINITY)
                    continue;
                const float f = expf(ms[s] - M);
                L += st[s][r * ROW + HD + 1] * f;
                A += st[s][r * ROW + e] * f;
            }
        }
        dec_store<DTYPE, HD>(j, dec_out_row(j, b, kvh, r0 + r), e, M, L, A);
    }
    // No block may leave (its shared memory gone) while others read it.
    cl.sync();
}

// grid (row groups x chunks, Hkv, B), the chunks of a row group adjacent
// (a cluster of them when `fused`); DEC_WARPS warps, two blocks per SM (the
// split count assumes it).
template <int DTYPE, int HD, int RT>
__global__ void __launch_bounds__(DEC_WARPS * 32, 2)
    sdpa_decode_kernel(em_cuda_sdpa j, float *partial, int64_t chunk,
                       int fused) {
    using Sh = DecodeShape<DTYPE, HD, RT>;
    using S = typename DT<DTYPE>::S;
    constexpr int LPK = Sh::LPK, PER = Sh::PER, NLOAD = Sh::NLOAD,
                  KPW = Sh::KPW, U = Sh::UNROLL;
    __shared__ float red[DEC_WARPS][RT][HD + 2];
    __shared__ float fin[RT][HD + 2]; // the block's state (fused)

    const int64_t b = blockIdx.z, kvh = blockIdx.y;
    const int64_t rg = blockIdx.x / j.nsplit, c = blockIdx.x % j.nsplit;
    const int64_t G = j.H / j.Hkv, R = G * j.Lq, r0 = rg * RT;
    const int nrows = R - r0 < RT ? (int)(R - r0) : RT;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int sub = lane / LPK, li = lane % LPK;

    // The block's query rows: r -> head kvh * G + r / Lq, position r % Lq.
    int64_t head[RT], pos[RT];
    int64_t last = -1; // the latest position among the rows (causal limit)
#pragma unroll
    for (int r = 0; r < RT; r++) {
        const int64_t rr = r0 + (r < nrows ? r : 0);
        head[r] = kvh * G + rr / j.Lq;
        pos[r] = rr % j.Lq;
        if (r < nrows && pos[r] > last)
            last = pos[r];
    }
    float q[RT][PER];
#pragma unroll
    for (int r = 0; r < RT; r++) {
        const S *qr = (const S *)j.q + b * j.q_st[0] + head[r] * j.q_st[1] +
                      pos[r] * j.q_st[2];
#pragma unroll
        for (int e = 0; e < PER; e++)
            q[r][e] =
                r < nrows
                    ? DT<DTYPE>::load(qr[(int64_t)(li * PER + e) * j.q_st[3]]) *
                          (float)j.scale
                    : 0.f;
    }

    int64_t j_begin = c * chunk, j_end = j_begin + chunk;
    if (j_end > j.Lk)
        j_end = j.Lk;
    if (j.causal) { // keys past the latest row's limit are masked for all
        const int64_t lim = last + j.Lk - j.Lq + 1;
        if (j_end > lim)
            j_end = lim < j_begin ? j_begin : lim;
    }

    float m[RT], l[RT], acc[RT][PER];
#pragma unroll
    for (int r = 0; r < RT; r++) {
        m[r] = -INFINITY;
        l[r] = 0.f;
#pragma unroll
        for (int e = 0; e < PER; e++)
            acc[r][e] = 0.f;
    }

    const S *kb = (const S *)j.k + b * j.k_st[0] + kvh * j.k_st[1] + li * PER;
    const S *vb = (const S *)j.v + b * j.v_st[0] + kvh * j.v_st[1] + li * PER;
    constexpr int STEP = DEC_WARPS * KPW; // keys per block step
    // The loop bound is uniform across the warp (its shuffles need every
    // lane); keys past the chunk are masked per lane group.
    for (int64_t kw = j_begin + warp * KPW; kw < j_end;
         kw += (int64_t)STEP * U) {
        const int64_t key0 = kw + sub;
        uint4 kr[U][NLOAD], vr[U][NLOAD];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t key = key0 + (int64_t)u * STEP;
#pragma unroll
            for (int n = 0; n < NLOAD; n++) {
                if (key < j_end) {
                    kr[u][n] = __ldg(
                        reinterpret_cast<const uint4 *>(kb + key * j.k_st[2]) +
                        n);
                    vr[u][n] = __ldg(
                        reinterpret_cast<const uint4 *>(vb + key * j.v_st[2]) +
                        n);
                } else {
                    kr[u][n] = make_uint4(0, 0, 0, 0);
                    vr[u][n] = make_uint4(0, 0, 0, 0);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t key = key0 + (int64_t)u * STEP;
            float kf[PER], vf[PER];
            unpack16<DTYPE>(kr[u], kf);
            unpack16<DTYPE>(vr[u], vf);
#pragma unroll
            for (int r = 0; r < RT; r++) {
                float dot = 0.f;
#pragma unroll
                for (int e = 0; e < PER; e++)
                    dot += q[r][e] * kf[e];
#pragma unroll
                for (int o = LPK / 2; o > 0; o >>= 1)
                    dot += __shfl_xor_sync(DEC_FULL, dot, o);
                float s = key < j_end && r < nrows ? dot : -INFINITY;
                if (s != -INFINITY && j.mask_kind) {
                    const int64_t off =
                        b * j.mask_st[0] + head[r] * j.mask_st[1] +
                        pos[r] * j.mask_st[2] + key * j.mask_st[3];
                    if (j.mask_kind == 2)
                        s = ((const uint8_t *)j.mask)[off] ? s : -INFINITY;
                    else
                        s += DT<DTYPE>::load(((const S *)j.mask)[off]);
                }
                if (j.causal && key > pos[r] + j.Lk - j.Lq)
                    s = -INFINITY;
                if (s != -INFINITY) { // else weight 0: nothing changes
                    float p, corr;
                    if (s > m[r]) { // the max grows: rescale what came before
                        corr = expf(m[r] - s);
                        p = 1.f;
                        m[r] = s;
                    } else { // one exponential per key and row either way
                        corr = 1.f;
                        p = expf(s - m[r]);
                    }
                    l[r] = l[r] * corr + p;
#pragma unroll
                    for (int e = 0; e < PER; e++)
                        acc[r][e] = acc[r][e] * corr + p * vf[e];
                }
            }
        }
    }

    // Merge the lane groups of the warp (same elements, other keys).
#pragma unroll
    for (int o = LPK; o < 32; o <<= 1) {
#pragma unroll
        for (int r = 0; r < RT; r++) {
            const float m2 = __shfl_xor_sync(DEC_FULL, m[r], o);
            const float l2 = __shfl_xor_sync(DEC_FULL, l[r], o);
            float acc2[PER];
#pragma unroll
            for (int e = 0; e < PER; e++)
                acc2[e] = __shfl_xor_sync(DEC_FULL, acc[r][e], o);
            dec_merge<PER>(m[r], l[r], acc[r], m2, l2, acc2);
        }
    }
    // Then the warps, through shared memory.
    if (sub == 0) {
#pragma unroll
        for (int r = 0; r < RT; r++) {
#pragma unroll
            for (int e = 0; e < PER; e++)
                red[warp][r][li * PER + e] = acc[r][e];
            if (li == 0) {
                red[warp][r][HD] = m[r];
                red[warp][r][HD + 1] = l[r];
            }
        }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < nrows * HD; t += blockDim.x) {
        const int r = t / HD, e = t % HD;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++)
            M = red[w][r][HD] > M ? red[w][r][HD] : M;
        float L = 0.f, A = 0.f;
        if (M != -INFINITY) {
#pragma unroll
            for (int w = 0; w < DEC_WARPS; w++) {
                const float mw = red[w][r][HD];
                if (mw == -INFINITY)
                    continue;
                const float f = expf(mw - M);
                L += red[w][r][HD + 1] * f;
                A += red[w][r][e] * f;
            }
        }
        const int64_t row = dec_out_row(j, b, kvh, r0 + r);
        if (j.nsplit == 1) {
            dec_store<DTYPE, HD>(j, row, e, M, L, A);
        } else if (fused) {
            fin[r][e] = A;
            if (e == 0) {
                fin[r][HD] = M;
                fin[r][HD + 1] = L;
            }
        } else {
            float *p = partial + (row * j.nsplit + c) * (HD + DEC_PART_HEAD);
            if (e == 0) {
                p[0] = M;
                p[1] = L;
            }
            p[DEC_PART_HEAD + e] = A;
        }
    }
    if (fused && j.nsplit > 1) // uniform over the cluster
        dec_cluster_finish<DTYPE, HD>(j, &fin[0][0], nrows, b, kvh, r0, (int)c);
}

// A block per output row (128 threads): the chunks' (m, l) by lanes over
// chunks and warp reductions (every warp computes them; the loads hit L2),
// then the accumulators: thread group g of NG sums chunks g, g + NG, ...
// with one 16-byte load per chunk, its loads independent of each other,
// and the groups meet in shared memory.
constexpr int DEC_COMBINE_THREADS = 128;
template <int DTYPE, int HD>
__global__ void __launch_bounds__(DEC_COMBINE_THREADS)
    sdpa_decode_combine_kernel(em_cuda_sdpa j, const float *partial) {
    constexpr int F = HD / 4, NG = DEC_COMBINE_THREADS / F,
                  STRIDE = HD + DEC_PART_HEAD;
    static_assert(DEC_COMBINE_THREADS % F == 0, "head dimension");
    __shared__ float4 red[NG][F];
    const int64_t row = blockIdx.x, ns = j.nsplit;
    const float *p = partial + row * ns * STRIDE;
    const int lane = threadIdx.x % 32;
    float M = -INFINITY;
    for (int64_t c = lane; c < ns; c += 32)
        M = fmaxf(M, p[c * STRIDE]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        M = fmaxf(M, __shfl_xor_sync(DEC_FULL, M, o));
    float L = 0.f;
    if (M != -INFINITY)
        for (int64_t c = lane; c < ns; c += 32) {
            const float mc = p[c * STRIDE];
            if (mc != -INFINITY)
                L += p[c * STRIDE + 1] * expf(mc - M);
        }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        L += __shfl_xor_sync(DEC_FULL, L, o);
    const int f = threadIdx.x % F, g = threadIdx.x / F;
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
    if (M != -INFINITY) {
#pragma unroll 4
        for (int64_t c = g; c < ns; c += NG) {
            const float *pc = p + c * STRIDE;
            const float mc = pc[0];
            const float4 v =
                reinterpret_cast<const float4 *>(pc + DEC_PART_HEAD)[f];
            const float w = mc == -INFINITY ? 0.f : expf(mc - M);
            a.x += v.x * w;
            a.y += v.y * w;
            a.z += v.z * w;
            a.w += v.w * w;
        }
    }
    red[g][f] = a;
    __syncthreads();
    if (g != 0)
        return;
#pragma unroll
    for (int k = 1; k < NG; k++) {
        a.x += red[k][f].x;
        a.y += red[k][f].y;
        a.z += red[k][f].z;
        a.w += red[k][f].w;
    }
    dec_store<DTYPE, HD>(j, row, 4 * f, M, L, a.x);
    dec_store<DTYPE, HD>(j, row, 4 * f + 1, M, L, a.y);
    dec_store<DTYPE, HD>(j, row, 4 * f + 2, M, L, a.z);
    dec_store<DTYPE, HD>(j, row, 4 * f + 3, M, L, a.w);
}

// The main kernel; fused (several chunks combined in-launch) as clusters of
// j.nsplit blocks along x.
template <int DTYPE, int HD, int RT>
static int launch_decode_rt(Device *d, const em_cuda_sdpa &j, float *partial,
                            int64_t chunk, int64_t rgroups, bool fused) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim =
        dim3((unsigned)(rgroups * j.nsplit), (unsigned)j.Hkv, (unsigned)j.B);
    cfg.blockDim = dim3(DEC_WARPS * 32);
    cfg.stream = d->stream;
    cudaLaunchAttribute cluster[1];
    cluster[0].id = cudaLaunchAttributeClusterDimension;
    cluster[0].val.clusterDim.x = (unsigned)j.nsplit;
    cluster[0].val.clusterDim.y = 1;
    cluster[0].val.clusterDim.z = 1;
    if (fused && j.nsplit > 1) {
        cfg.attrs = cluster;
        cfg.numAttrs = 1;
    }
    EMC_TRY(cudaLaunchKernelEx(&cfg, sdpa_decode_kernel<DTYPE, HD, RT>, j,
                               partial, chunk, (int)fused));
    EMC_LAUNCHED("sdpa decode kernel");
    if (fused || j.nsplit == 1)
        return 0;
    sdpa_decode_combine_kernel<DTYPE, HD>
        <<<(unsigned)(j.B * j.H * j.Lq), DEC_COMBINE_THREADS, 0, d->stream>>>(
            j, partial);
    EMC_LAUNCHED("sdpa decode combine kernel");
    return 0;
}

template <int DTYPE, int HD>
static int launch_decode_hd(Device *d, const em_cuda_sdpa &j, float *partial,
                            int64_t chunk, int64_t rgroups, int64_t R,
                            bool fused) {
    if (R <= 1)
        return launch_decode_rt<DTYPE, HD, 1>(d, j, partial, chunk, rgroups,
                                              fused);
    if (R <= 2)
        return launch_decode_rt<DTYPE, HD, 2>(d, j, partial, chunk, rgroups,
                                              fused);
    return launch_decode_rt<DTYPE, HD, DEC_RT_MAX>(d, j, partial, chunk,
                                                   rgroups, fused);
}

// Whether the decode kernel takes the job (the engine asks the same before
// choosing it; see sdpa_decode_supported in emily_cuda.h).
static const char *decode_unsupported(const em_cuda_sdpa *j) {
    if (j->dtype != EM_F16 && j->dtype != EM_BF16 && j->dtype != EM_F32)
        return "dtype other than f16, bf16, f32";
    if (j->D != j->Dv || (j->D != 64 && j->D != 128 && j->D != 256))
        return "head dimensions other than 64, 128, 256 (equal for k and v)";
    if (j->Lq > EM_CUDA_SDPA_DECODE_MAX_LQ)
        return "more query positions than the decode bound";
    if (j->Hkv < 1 || j->H % j->Hkv)
        return "query heads not a multiple of the KV heads";
    const int64_t vec = 16 / (int64_t)dtype_bytes(j->dtype);
    if (j->k_st[3] != 1 || j->v_st[3] != 1)
        return "K or V not contiguous along the head dimension";
    for (int i = 0; i < 3; i++)
        if (j->k_st[i] % vec || j->v_st[i] % vec)
            return "K or V rows not 16-byte aligned";
    if ((uintptr_t)j->k % 16 || (uintptr_t)j->v % 16)
        return "K or V not 16-byte aligned";
    return nullptr;
}

int launch_sdpa_decode(Device *d, const em_cuda_sdpa *job) {
    if (job->B == 0 || job->H == 0 || job->Lq == 0 || job->Dv == 0)
        return 0;
    if (const char *why = decode_unsupported(job))
        return fail(EM_ERR_UNSUPPORTED, "sdpa decode kernel: %s", why);
    em_cuda_sdpa j = *job;
    const int64_t R = (j.H / j.Hkv) * j.Lq;
    const int64_t RT = R <= 1 ? 1 : R <= 2 ? 2 : DEC_RT_MAX;
    const int64_t rgroups = (R + RT - 1) / RT;
    if (j.B > 65535 || j.Hkv > 65535)
        return fail(EM_ERR_UNSUPPORTED,
                    "sdpa decode: batch %lld x KV heads %lld too large for "
                    "one GPU grid",
                    (long long)j.B, (long long)j.Hkv);
    // Split the keys into as many chunks as fill one wave of two blocks
    // per SM (registers allow two: __launch_bounds__), rounding down: a
    // second, partial wave costs more than longer chunks. At least
    // DEC_MIN_CHUNK keys (one block step) per block. Up to DEC_CLUSTER
    // chunks combine in-launch, more in the combine kernel; where
    // DEC_CLUSTER chunks would take at most two block steps each, one
    // launch beats a shorter chunk, so the split stops there.
    const int64_t base = j.B * j.Hkv * rgroups;
    const int64_t want = 2 * (int64_t)d->sms / base;
    const int64_t most = (j.Lk + DEC_MIN_CHUNK - 1) / DEC_MIN_CHUNK;
    int64_t ns = want < most ? want : most;
    if (ns < 1)
        ns = 1;
    if (ns > DEC_CLUSTER && j.Lk <= 2 * DEC_MIN_CHUNK * DEC_CLUSTER)
        ns = DEC_CLUSTER;
    const int64_t chunk = (j.Lk + ns - 1) / ns;
    ns = chunk ? (j.Lk + chunk - 1) / chunk : 1;
    const bool fused = ns <= DEC_CLUSTER;
    if (rgroups * ns > INT32_MAX || j.B * j.H * j.Lq > INT32_MAX)
        return fail(EM_ERR_UNSUPPORTED, "sdpa decode: grid too large");
    j.nsplit = ns;
    Scratch part(d->stream);
    if (!fused)
        EMC_TRY(part.alloc((size_t)(j.B * j.H * j.Lq * ns) *
                           (size_t)(j.Dv + DEC_PART_HEAD) * sizeof(float)));
    float *partial = (float *)part.p;
    return with_dtype(j.dtype, [&]<int DTYPE>() -> int {
        if constexpr (DTYPE != EM_F16 && DTYPE != EM_BF16 && DTYPE != EM_F32) {
            return fail(EM_ERR_ARGUMENT, "sdpa decode: dtype %d", DTYPE);
        } else {
            if (j.D == 64)
                return launch_decode_hd<DTYPE, 64>(d, j, partial, chunk,
                                                   rgroups, R, fused);
            if (j.D == 128)
                return launch_decode_hd<DTYPE, 128>(d, j, partial, chunk,
                                                    rgroups, R, fused);
            return launch_decode_hd<DTYPE, 256>(d, j, partial, chunk, rgroups,
                                                R, fused);
        }
    });
}

} // namespace emc
