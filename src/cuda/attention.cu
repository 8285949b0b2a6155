// attention.cu — scaled dot-product attention (include/emily_attention.h's
// semantics; the engine side is src/engine/gpu/gpu_attention.c).
//
// sdpa_kernel: a block takes SDPA_ROWS query rows of one (batch, head) and
// one chunk of keys (all keys unless the job splits them, nsplit > 1). Its
// warps own SDPA_ROWS_PER_WARP rows each and walk the keys in tiles of 32,
// staged in shared memory (K rows padded by one element so that lane j
// reading key j's row is free of bank conflicts) with the scaled queries:
//   - lane j computes the score of key j for the row (mask, causal limit),
//   - the warp's max and sum of the weights update the row's online softmax
//     (running max m, denominator l, in the compute type: f32 for halves),
//   - the weights are broadcast key by key (shuffles) and accumulated into
//     the row's output held in registers, lane + 32 t for t < NV.
// Without a split the block finishes its rows (sinks, fully masked rows:
// 0) and stores them; with one it leaves (m, l, acc) per row and chunk in a
// scratch, and sdpa_combine_kernel (a warp per row) rescales and sums the
// chunks: flash-decoding, so that one query over a long cache fills the
// GPU.
#include "common.cuh"

namespace emc {

constexpr int SDPA_WARPS = 4;
constexpr int SDPA_ROWS_PER_WARP = 4;
constexpr int SDPA_ROWS = SDPA_WARPS * SDPA_ROWS_PER_WARP;
constexpr int SDPA_TK = 32; // keys per tile: one per lane
constexpr unsigned SDPA_FULL = 0xffffffffu;

template <class C> __device__ __forceinline__ C sdpa_exp(C x) {
    if constexpr (std::is_same_v<C, double>)
        return exp(x);
    else
        return expf(x);
}

template <class C> __device__ __forceinline__ C warp_max(C x) {
    for (int o = 16; o > 0; o >>= 1) {
        C y = __shfl_xor_sync(SDPA_FULL, x, o);
        x = y > x ? y : x;
    }
    return x;
}

template <class C> __device__ __forceinline__ C warp_sum(C x) {
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(SDPA_FULL, x, o);
    return x;
}

// The factor that turns a row's accumulated output into the result:
// 1 / l, or with a sink exp(m - M) / (l exp(m - M) + exp(sink - M)), M =
// max(m, sink); 0 for a fully masked row (m = -inf).
template <class C>
__device__ __forceinline__ C sdpa_factor(C m, C l, bool has_sink, C sink) {
    const C ninf = -std::numeric_limits<C>::infinity();
    if (m == ninf)
        return 0;
    if (!has_sink)
        return C(1) / l;
    const C M = sink > m ? sink : m;
    const C a = sdpa_exp(m - M);
    return a / (l * a + sdpa_exp(sink - M));
}

template <int DTYPE>
__device__ __forceinline__ typename DT<DTYPE>::C
sdpa_sink(const em_cuda_sdpa &j, int64_t h) {
    using S = typename DT<DTYPE>::S;
    return DT<DTYPE>::load(((const S *)j.sinks)[h * j.sinks_st]);
}

template <int DTYPE, int NV>
__global__ void __launch_bounds__(SDPA_WARPS * 32)
    sdpa_kernel(em_cuda_sdpa j, void *partial, int64_t chunk) {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    const C ninf = -std::numeric_limits<C>::infinity();
    extern __shared__ __align__(16) unsigned char sdpa_smem[];
    const int64_t D = j.D, Dv = j.Dv, ldk = D + 1;
    C *Qs = reinterpret_cast<C *>(sdpa_smem);
    C *Ks = Qs + SDPA_ROWS * D;
    C *Vs = Ks + SDPA_TK * ldk;

    const int64_t b = blockIdx.z, h = blockIdx.y;
    const int64_t qtile = blockIdx.x / j.nsplit, c = blockIdx.x % j.nsplit;
    const int64_t kvh = h / (j.H / j.Hkv);
    const int64_t i0 = qtile * SDPA_ROWS;
    const int64_t rows = j.Lq - i0 < SDPA_ROWS ? j.Lq - i0 : SDPA_ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    int64_t j_begin = c * chunk, j_end = j_begin + chunk;
    if (j_end > j.Lk)
        j_end = j.Lk;
    if (j.causal) { // the block's last row sees the most keys
        const int64_t last = i0 + rows - 1 + j.Lk - j.Lq + 1;
        if (j_end > last)
            j_end = last < j_begin ? j_begin : last;
    }

    const S *qb = (const S *)j.q + b * j.q_st[0] + h * j.q_st[1];
    for (int64_t t = threadIdx.x; t < SDPA_ROWS * D; t += blockDim.x) {
        const int64_t r = t / D, d = t % D;
        Qs[t] =
            r < rows
                ? DT<DTYPE>::load(qb[(i0 + r) * j.q_st[2] + d * j.q_st[3]]) *
                      (C)j.scale
                : C(0);
    }

    C m[SDPA_ROWS_PER_WARP], l[SDPA_ROWS_PER_WARP];
    C acc[SDPA_ROWS_PER_WARP][NV];
#pragma unroll
    for (int rr = 0; rr < SDPA_ROWS_PER_WARP; rr++) {
        m[rr] = ninf;
        l[rr] = 0;
#pragma unroll
        for (int t = 0; t < NV; t++)
            acc[rr][t] = 0;
    }

    const S *kb = (const S *)j.k + b * j.k_st[0] + kvh * j.k_st[1];
    const S *vb = (const S *)j.v + b * j.v_st[0] + kvh * j.v_st[1];
    for (int64_t j0 = j_begin; j0 < j_end; j0 += SDPA_TK) {
        const int tk = j_end - j0 < SDPA_TK ? (int)(j_end - j0) : SDPA_TK;
        __syncthreads(); // the previous tile is consumed (and Qs written)
        for (int64_t t = threadIdx.x; t < tk * D; t += blockDim.x) {
            const int64_t kk = t / D, d = t % D;
            Ks[kk * ldk + d] =
                DT<DTYPE>::load(kb[(j0 + kk) * j.k_st[2] + d * j.k_st[3]]);
        }
        for (int64_t t = threadIdx.x; t < tk * Dv; t += blockDim.x) {
            const int64_t kk = t / Dv, e = t % Dv;
            Vs[t] = DT<DTYPE>::load(vb[(j0 + kk) * j.v_st[2] + e * j.v_st[3]]);
        }
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < SDPA_ROWS_PER_WARP; rr++) {
            const int r = warp * SDPA_ROWS_PER_WARP + rr;
            if (r >= rows)
                continue; // uniform across the warp
            const int64_t i = i0 + r, key = j0 + lane;
            C s = ninf;
            if (lane < tk) {
                const C *qr = Qs + r * D, *kr = Ks + lane * ldk;
                C dot = 0;
                for (int64_t d = 0; d < D; d++)
                    dot += qr[d] * kr[d];
                s = dot;
                if (j.mask_kind) {
                    const int64_t off = b * j.mask_st[0] + h * j.mask_st[1] +
                                        i * j.mask_st[2] + key * j.mask_st[3];
                    if (j.mask_kind == 2)
                        s = ((const uint8_t *)j.mask)[off] ? s : ninf;
                    else
                        s += DT<DTYPE>::load(((const S *)j.mask)[off]);
                }
                if (j.causal && key > i + j.Lk - j.Lq)
                    s = ninf;
            }
            const C tmax = warp_max(s);
            const C mnew = tmax > m[rr] ? tmax : m[rr];
            if (mnew == ninf)
                continue;                   // nothing unmasked yet
            const C p = sdpa_exp(s - mnew); // 0 for masked keys
            const C corr = sdpa_exp(m[rr] - mnew);
            l[rr] = l[rr] * corr + warp_sum(p);
            m[rr] = mnew;
#pragma unroll
            for (int t = 0; t < NV; t++)
                acc[rr][t] *= corr;
            for (int kk = 0; kk < tk; kk++) {
                const C pk = __shfl_sync(SDPA_FULL, p, kk);
                const C *vr = Vs + kk * Dv;
#pragma unroll
                for (int t = 0; t < NV; t++) {
                    const int64_t e = lane + 32 * t;
                    if (e < Dv)
                        acc[rr][t] += pk * vr[e];
                }
            }
        }
    }

#pragma unroll
    for (int rr = 0; rr < SDPA_ROWS_PER_WARP; rr++) {
        const int r = warp * SDPA_ROWS_PER_WARP + rr;
        if (r >= rows)
            continue;
        const int64_t i = i0 + r;
        if (j.nsplit == 1) {
            const C f = sdpa_factor<C>(m[rr], l[rr], j.sinks != nullptr,
                                       j.sinks ? sdpa_sink<DTYPE>(j, h) : C(0));
            S *o = (S *)j.out + ((b * j.H + h) * j.Lq + i) * Dv;
#pragma unroll
            for (int t = 0; t < NV; t++) {
                const int64_t e = lane + 32 * t;
                if (e < Dv)
                    o[e] = DT<DTYPE>::store(acc[rr][t] * f);
            }
        } else {
            C *p = (C *)partial +
                   (((b * j.H + h) * j.Lq + i) * j.nsplit + c) * (Dv + 2);
            if (lane == 0) {
                p[0] = m[rr];
                p[1] = l[rr];
            }
#pragma unroll
            for (int t = 0; t < NV; t++) {
                const int64_t e = lane + 32 * t;
                if (e < Dv)
                    p[2 + e] = acc[rr][t];
            }
        }
    }
}

// One warp per output row: the chunks' partial results rescaled to the
// overall max and summed, then finished as by the main kernel.
template <int DTYPE>
__global__ void sdpa_combine_kernel(em_cuda_sdpa j, const void *partial) {
    using S = typename DT<DTYPE>::S;
    using C = typename DT<DTYPE>::C;
    const C ninf = -std::numeric_limits<C>::infinity();
    const int64_t nrows = j.B * j.H * j.Lq;
    const int64_t row =
        (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= nrows)
        return;
    const int64_t h = (row / j.Lq) % j.H, Dv = j.Dv, ns = j.nsplit;
    const C *p = (const C *)partial + row * ns * (Dv + 2);
    C M = ninf, L = 0;
    for (int64_t c = 0; c < ns; c++) {
        const C mc = p[c * (Dv + 2)];
        M = mc > M ? mc : M;
    }
    if (M != ninf)
        for (int64_t c = 0; c < ns; c++) {
            const C mc = p[c * (Dv + 2)];
            if (mc != ninf)
                L += p[c * (Dv + 2) + 1] * sdpa_exp(mc - M);
        }
    const C f = sdpa_factor<C>(M, L, j.sinks != nullptr,
                               j.sinks ? sdpa_sink<DTYPE>(j, h) : C(0));
    S *o = (S *)j.out + row * Dv;
    for (int64_t e = lane; e < Dv; e += 32) {
        C a = 0;
        if (M != ninf)
            for (int64_t c = 0; c < ns; c++) {
                const C mc = p[c * (Dv + 2)];
                if (mc != ninf)
                    a += p[c * (Dv + 2) + 2 + e] * sdpa_exp(mc - M);
            }
        o[e] = DT<DTYPE>::store(a * f);
    }
}

template <int DTYPE, int NV>
static int launch_sdpa_nv(Device *d, const em_cuda_sdpa *j, size_t smem,
                          void *partial, int64_t chunk) {
    auto kernel = sdpa_kernel<DTYPE, NV>;
    if (smem > 48 * 1024)
        EMC_TRY(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int64_t qtiles = (j->Lq + SDPA_ROWS - 1) / SDPA_ROWS;
    dim3 grid((unsigned)(qtiles * j->nsplit), (unsigned)j->H, (unsigned)j->B);
    kernel<<<grid, SDPA_WARPS * 32, smem, d->stream>>>(*j, partial, chunk);
    EMC_LAUNCHED("sdpa kernel");
    return 0;
}

int launch_sdpa(Device *d, const em_cuda_sdpa *job) {
    if (job->B == 0 || job->H == 0 || job->Lq == 0 || job->Dv == 0)
        return 0;
    if (job->Dv > 256)
        return fail(
            EM_ERR_UNSUPPORTED,
            "sdpa: value head dimension %lld above 256 has no GPU kernel",
            (long long)job->Dv);
    const int64_t qtiles = (job->Lq + SDPA_ROWS - 1) / SDPA_ROWS;
    if (job->H > 65535 || job->B > 65535 || qtiles * job->nsplit > INT32_MAX)
        return fail(EM_ERR_UNSUPPORTED,
                    "sdpa: batch %lld x heads %lld x query blocks too large "
                    "for one GPU grid",
                    (long long)job->B, (long long)job->H);
    return with_dtype(job->dtype, [&]<int DTYPE>() -> int {
        if constexpr (DTYPE != EM_F16 && DTYPE != EM_BF16 && DTYPE != EM_F32 &&
                      DTYPE != EM_F64) {
            return fail(EM_ERR_ARGUMENT, "sdpa: dtype %d has no GPU kernel",
                        DTYPE);
        } else {
            using C = typename DT<DTYPE>::C;
            const size_t smem =
                (size_t)(SDPA_ROWS * job->D + SDPA_TK * (job->D + 1) +
                         SDPA_TK * job->Dv) *
                sizeof(C);
            int optin = 0, dev = 0;
            EMC_TRY(cudaGetDevice(&dev));
            EMC_TRY(cudaDeviceGetAttribute(
                &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
            if (smem > (size_t)optin)
                return fail(EM_ERR_UNSUPPORTED,
                            "sdpa: head dimensions %lld / %lld need %zu bytes "
                            "of shared memory, the GPU has %d",
                            (long long)job->D, (long long)job->Dv, smem, optin);
            const int64_t ns = job->nsplit < 1 ? 1 : job->nsplit;
            const int64_t chunk = (job->Lk + ns - 1) / ns;
            em_cuda_sdpa j = *job;
            j.nsplit = ns;
            Scratch part(d->stream);
            if (ns > 1)
                EMC_TRY(part.alloc((size_t)(j.B * j.H * j.Lq * ns) *
                                   (size_t)(j.Dv + 2) * sizeof(C)));
            int rc;
            if (j.Dv <= 32)
                rc = launch_sdpa_nv<DTYPE, 1>(d, &j, smem, part.p, chunk);
            else if (j.Dv <= 64)
                rc = launch_sdpa_nv<DTYPE, 2>(d, &j, smem, part.p, chunk);
            else if (j.Dv <= 128)
                rc = launch_sdpa_nv<DTYPE, 4>(d, &j, smem, part.p, chunk);
            else
                rc = launch_sdpa_nv<DTYPE, 8>(d, &j, smem, part.p, chunk);
            if (rc || ns == 1)
                return rc;
            const int64_t nrows = j.B * j.H * j.Lq;
            const int64_t blocks = (nrows + 3) / 4;
            sdpa_combine_kernel<DTYPE>
                <<<(unsigned)blocks, 128, 0, d->stream>>>(j, part.p);
            EMC_LAUNCHED("sdpa combine kernel");
            return 0;
        }
    });
}

} // namespace emc
