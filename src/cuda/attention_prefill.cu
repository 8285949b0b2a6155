// attention_prefill.cu — scaled dot-product attention for prefill (more than
// 16 queries) on the tensor cores: a flash-attention forward kernel for f16
// and bf16 with head dimension 32, 64, 96 or 128 (D == Dv; MiniLM has 32,
// Qwen3 128) and include/emily_attention.h's semantics (causal with offset,
// additive and boolean masks, sinks, grouped heads, fully masked rows give
// 0). src/engine/gpu/gpu_attention.c decides which jobs come here (dense
// rows, 16-byte aligned operands); everything else, and every query count
// up to 16, stays with attention.cu.
//
// A block of 4 warps takes 64 query rows of one (batch, head); each warp owns
// 16 rows. Keys go by in tiles of 64 that cp.async stages into shared memory,
// double buffered (the next tile is in flight while this one is used):
//   S = Q K^T   mma.sync m16n8k16 (f32 accumulators), the Q fragments kept
//               in registers for the whole walk, K's B fragments by ldmatrix;
//   softmax     in the exp2 domain (the scale and the additive mask are
//               multiplied by log2 e), the running max and denominator per
//               row, the denominator kept per thread (a quad shares a row)
//               and summed across the quad once at the end;
//   O += P V    P rounded to the input type straight from the S
//               accumulators (the C layout of two n8 tiles is the A layout
//               of one k16 step), V's B fragments by ldmatrix.trans.
// Shared rows are padded by 8 elements (16 bytes) so that the 8 rows an
// ldmatrix or a fragment load touches fall in distinct banks.
#include "common.cuh"

namespace emc {

constexpr int FP_WARPS = 4;
constexpr int FP_THREADS = FP_WARPS * 32;
constexpr int FP_BM = 16 * FP_WARPS; // query rows per block
constexpr int FP_BN = 64;            // keys per tile
constexpr int FP_PAD = 8;            // elements of padding per shared row
constexpr float FP_LOG2E = 1.4426950408889634f;

__device__ __forceinline__ void fp_cp_async16(void *smem, const void *gmem,
                                              bool valid) {
    // src-size 0 fills the 16 bytes with zeros (rows past the end)
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s),
                 "l"(gmem), "r"(n)
                 : "memory");
}

__device__ __forceinline__ void fp_cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void fp_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// c += a b for one m16n8k16 step, f32 accumulators.
template <int DTYPE>
__device__ __forceinline__ void fp_mma(float c[4], const uint32_t a[4],
                                       uint32_t b0, uint32_t b1) {
    if constexpr (DTYPE == EM_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                       "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                       "r"(b1));
}

// Two floats rounded to the input type in one register, lo in the low half
// (the lower column of a fragment).
template <int DTYPE>
__device__ __forceinline__ uint32_t fp_pack(float lo, float hi) {
    const uint32_t a = DT<DTYPE>::store(lo), b = DT<DTYPE>::store(hi);
    return a | (b << 16);
}

__device__ __forceinline__ uint32_t fp_ld32(const uint16_t *p) {
    return *reinterpret_cast<const uint32_t *>(p);
}

// Four 8x8 matrices of 16-bit elements: lanes 8m..8m+7 give the row
// addresses of matrix m, r[m] receives its fragment (lane l: row l / 4,
// columns 2 (l % 4) and + 1 — the B fragment of K rows as stored).
__device__ __forceinline__ void fp_ldmatrix_x4(uint32_t r[4],
                                               const uint16_t *p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

// As fp_ldmatrix_x4, transposed on the way (lane l: column l / 4, rows
// 2 (l % 4) and + 1 — the B fragment of V rows as stored).
__device__ __forceinline__ void fp_ldmatrix_x4_trans(uint32_t r[4],
                                                     const uint16_t *p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

template <int HD> constexpr size_t fp_smem_bytes() {
    // Q tile, then two stages of K and two of V
    return (size_t)(FP_BM + 4 * FP_BN) * (HD + FP_PAD) * sizeof(uint16_t);
}

template <int DTYPE, int HD>
__global__ void __launch_bounds__(FP_THREADS)
    sdpa_prefill_kernel(em_cuda_sdpa j, float scale_log2) {
    using S = uint16_t;
    constexpr int LD = HD + FP_PAD; // elements per shared row
    constexpr int CH = HD / 8;      // 16-byte chunks per row
    constexpr int NT = FP_BN / 8;   // n8 tiles of scores per key tile
    constexpr int KS = HD / 16;     // k16 steps over the head dimension
    constexpr int OT = HD / 8;      // n8 tiles of the output
    const float ninf = -INFINITY;
    extern __shared__ __align__(16) unsigned char fp_smem[];
    S *Qs = reinterpret_cast<S *>(fp_smem);
    S *Ks = Qs + FP_BM * LD;
    S *Vs = Ks + 2 * FP_BN * LD;

    // heaviest (causal) query blocks first: they have the most key tiles
    const int64_t qt = (int64_t)gridDim.x - 1 - blockIdx.x;
    const int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (j.H / j.Hkv);
    const int64_t i0 = qt * FP_BM;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane >> 2, t4 = lane & 3; // fragment row / column pair
    const int64_t shift = j.Lk - j.Lq; // causal: row i sees keys <= i + shift
    int64_t kend = j.Lk;
    if (j.causal) {
        const int64_t last = i0 + FP_BM + shift; // one past the last row's
        kend = last < kend ? last : kend;
        kend = kend < 0 ? 0 : kend;
    }
    const int ntiles = (int)((kend + FP_BN - 1) / FP_BN);

    const S *qb = (const S *)j.q + b * j.q_st[0] + h * j.q_st[1];
    const S *kb = (const S *)j.k + b * j.k_st[0] + kvh * j.k_st[1];
    const S *vb = (const S *)j.v + b * j.v_st[0] + kvh * j.v_st[1];
    for (int c = tid; c < FP_BM * CH; c += FP_THREADS) {
        const int r = c / CH, cc = c % CH;
        const int64_t i = i0 + r;
        const bool ok = i < j.Lq;
        fp_cp_async16(Qs + r * LD + cc * 8,
                      ok ? qb + i * j.q_st[2] + cc * 8 : qb, ok);
    }
    auto load_kv = [&](int tile, int stage) {
        const int64_t k0 = (int64_t)tile * FP_BN;
        S *kd = Ks + stage * FP_BN * LD, *vd = Vs + stage * FP_BN * LD;
        for (int c = tid; c < FP_BN * CH; c += FP_THREADS) {
            const int r = c / CH, cc = c % CH;
            const int64_t key = k0 + r;
            const bool ok = key < j.Lk; // zeros past the end: 0 * p, no NaN
            fp_cp_async16(kd + r * LD + cc * 8,
                          ok ? kb + key * j.k_st[2] + cc * 8 : kb, ok);
            fp_cp_async16(vd + r * LD + cc * 8,
                          ok ? vb + key * j.v_st[2] + cc * 8 : vb, ok);
        }
    };
    if (ntiles > 0)
        load_kv(0, 0);
    fp_cp_async_commit(); // group 0: Q and the first tile

    float o[OT][4];
#pragma unroll
    for (int t = 0; t < OT; t++)
        o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
    float m[2] = {ninf, ninf}, l[2] = {0.f, 0.f};
    uint32_t qf[KS][4];
    const int rw = warp * 16; // the warp's first row in the block
    const int64_t row_i[2] = {i0 + rw + g, i0 + rw + g + 8};

    for (int tile = 0; tile < ntiles; tile++) {
        const int stage = tile & 1;
        if (tile + 1 < ntiles)
            load_kv(tile + 1, stage ^ 1);
        fp_cp_async_commit();
        fp_cp_async_wait<1>(); // everything but the tile just queued
        __syncthreads();
        if (tile == 0) {
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const S *q0 = Qs + (rw + g) * LD + ks * 16 + 2 * t4;
                qf[ks][0] = fp_ld32(q0);
                qf[ks][1] = fp_ld32(q0 + 8 * LD);
                qf[ks][2] = fp_ld32(q0 + 8);
                qf[ks][3] = fp_ld32(q0 + 8 * LD + 8);
            }
        }
        const S *Kt = Ks + stage * FP_BN * LD, *Vt = Vs + stage * FP_BN * LD;
        const int64_t k0 = (int64_t)tile * FP_BN;

        float s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt += 2) {
                // keys nt*8.. and (nt+1)*8.., dims ks*16 + 0..7 and 8..15
                uint32_t bk[4];
                fp_ldmatrix_x4(
                    bk, Kt + (nt * 8 + (lane & 7) + (lane >> 4) * 8) * LD +
                            ks * 16 + ((lane >> 3) & 1) * 8);
                fp_mma<DTYPE>(s[nt], qf[ks], bk[0], bk[1]);
                fp_mma<DTYPE>(s[nt + 1], qf[ks], bk[2], bk[3]);
            }
        }

        // scale (log2 domain), then the limits: keys past the end, causal,
        // the mask — only on tiles that have any of them
        const bool edge = k0 + FP_BN > j.Lk || j.mask_kind != 0 ||
                          (j.causal && k0 + FP_BN - 1 > i0 + rw + shift);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = s[nt][e] * scale_log2;
                if (edge) {
                    const int64_t i = row_i[e >> 1];
                    const int64_t key = k0 + nt * 8 + 2 * t4 + (e & 1);
                    if (key >= j.Lk || (j.causal && key > i + shift))
                        x = ninf;
                    else if (j.mask_kind != 0 && i < j.Lq) {
                        const int64_t off =
                            b * j.mask_st[0] + h * j.mask_st[1] +
                            i * j.mask_st[2] + key * j.mask_st[3];
                        if (j.mask_kind == 2)
                            x = ((const uint8_t *)j.mask)[off] ? x : ninf;
                        else
                            x += DT<DTYPE>::load(((const S *)j.mask)[off]) *
                                 FP_LOG2E;
                    }
                }
                s[nt][e] = x;
            }
        }

        // online softmax, rows g (e = 0, 1) and g + 8 (e = 2, 3)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = ninf;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mnew = fmaxf(m[r], mx);
            // nothing unmasked yet: exponents against 0 give exact zeros
            const float base = mnew == ninf ? 0.f : mnew;
            const float corr = exp2f(m[r] - base);
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                s[nt][2 * r] = exp2f(s[nt][2 * r] - base);
                s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - base);
                sum += s[nt][2 * r] + s[nt][2 * r + 1];
            }
            l[r] = l[r] * corr + sum;
            m[r] = mnew;
#pragma unroll
            for (int t = 0; t < OT; t++) {
                o[t][2 * r] *= corr;
                o[t][2 * r + 1] *= corr;
            }
        }

        // O += P V, 16 keys per step
#pragma unroll
        for (int kk = 0; kk < FP_BN / 16; kk++) {
            uint32_t a[4];
            a[0] = fp_pack<DTYPE>(s[2 * kk][0], s[2 * kk][1]);
            a[1] = fp_pack<DTYPE>(s[2 * kk][2], s[2 * kk][3]);
            a[2] = fp_pack<DTYPE>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = fp_pack<DTYPE>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
            const S *vrow = Vt + (kk * 16 + (lane & 15)) * LD + (lane >> 4) * 8;
#pragma unroll
            for (int dn = 0; dn < HD / 16; dn++) {
                uint32_t bv[4];
                fp_ldmatrix_x4_trans(bv, vrow + dn * 16);
                fp_mma<DTYPE>(o[2 * dn], a, bv[0], bv[1]);
                fp_mma<DTYPE>(o[2 * dn + 1], a, bv[2], bv[3]);
            }
        }
        __syncthreads(); // this stage is read before the next load reuses it
    }
    fp_cp_async_wait<0>();

    // finish: 1 / l, with a sink exp(m - M) / (l exp(m - M) + exp(sink -
    // M)), M = max(m, sink); 0 for a row that attended to nothing
    const float sink =
        j.sinks
            ? DT<DTYPE>::load(((const S *)j.sinks)[h * j.sinks_st]) * FP_LOG2E
            : 0.f;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lr = l[r];
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        float f;
        if (m[r] == ninf)
            f = 0.f;
        else if (!j.sinks)
            f = 1.f / lr;
        else {
            const float M = fmaxf(m[r], sink), a = exp2f(m[r] - M);
            f = a / (lr * a + exp2f(sink - M));
        }
        const int64_t i = row_i[r];
        if (i >= j.Lq)
            continue;
        S *out = (S *)j.out + ((b * j.H + h) * j.Lq + i) * HD + 2 * t4;
#pragma unroll
        for (int t = 0; t < OT; t++)
            *reinterpret_cast<uint32_t *>(out + t * 8) =
                fp_pack<DTYPE>(o[t][2 * r] * f, o[t][2 * r + 1] * f);
    }
}

// The job's layout as the kernel needs it; the engine checks the same
// before choosing this path (gpu_attention.c), so a failure here is a bug
// there, reported rather than computed wrongly.
static bool fp_head_dim(int64_t d) {
    return d == 32 || d == 64 || d == 96 || d == 128;
}
static bool fp_aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }
static bool fp_dense(const int64_t st[4], const int64_t shape[4]) {
    if (st[3] != 1)
        return false;
    for (int a = 0; a < 3; a++)
        if (shape[a] != 1 && st[a] % 8 != 0)
            return false;
    return true;
}

template <int DTYPE, int HD>
static int launch_prefill_hd(Device *d, const em_cuda_sdpa *j) {
    auto kernel = sdpa_prefill_kernel<DTYPE, HD>;
    constexpr size_t smem = fp_smem_bytes<HD>();
    if (smem > 48 * 1024)
        EMC_TRY(cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int64_t qtiles = (j->Lq + FP_BM - 1) / FP_BM;
    dim3 grid((unsigned)qtiles, (unsigned)j->H, (unsigned)j->B);
    kernel<<<grid, FP_THREADS, smem, d->stream>>>(
        *j, (float)(j->scale * 1.4426950408889634));
    EMC_LAUNCHED("sdpa prefill kernel");
    return 0;
}

int launch_sdpa_prefill(Device *d, const em_cuda_sdpa *job) {
    if (job->B == 0 || job->H == 0 || job->Lq == 0)
        return 0;
    const int64_t qs[4] = {job->B, job->H, job->Lq, job->D},
                  ks[4] = {job->B, job->Hkv, job->Lk, job->D};
    if ((job->dtype != EM_F16 && job->dtype != EM_BF16) || job->D != job->Dv ||
        !fp_head_dim(job->D) || job->nsplit > 1 || job->Hkv <= 0 ||
        job->H % job->Hkv != 0 || !fp_dense(job->q_st, qs) ||
        !fp_dense(job->k_st, ks) || !fp_dense(job->v_st, ks) ||
        !fp_aligned(job->q) || !fp_aligned(job->k) || !fp_aligned(job->v) ||
        !fp_aligned(job->out))
        return fail(EM_ERR_UNSUPPORTED,
                    "sdpa prefill: no tensor-core kernel for dtype %d, head "
                    "dims %lld / %lld, strided or unaligned operands",
                    job->dtype, (long long)job->D, (long long)job->Dv);
    const int64_t qtiles = (job->Lq + FP_BM - 1) / FP_BM;
    if (job->H > 65535 || job->B > 65535 || qtiles > INT32_MAX)
        return fail(EM_ERR_UNSUPPORTED,
                    "sdpa prefill: batch %lld x heads %lld x query blocks "
                    "too large for one GPU grid",
                    (long long)job->B, (long long)job->H);
    const bool bf = job->dtype == EM_BF16;
    switch (job->D) {
    case 32:
        return bf ? launch_prefill_hd<EM_BF16, 32>(d, job)
                  : launch_prefill_hd<EM_F16, 32>(d, job);
    case 64:
        return bf ? launch_prefill_hd<EM_BF16, 64>(d, job)
                  : launch_prefill_hd<EM_F16, 64>(d, job);
    case 96:
        return bf ? launch_prefill_hd<EM_BF16, 96>(d, job)
                  : launch_prefill_hd<EM_F16, 96>(d, job);
    default:
        return bf ? launch_prefill_hd<EM_BF16, 128>(d, job)
                  : launch_prefill_hd<EM_F16, 128>(d, job);
    }
}

} // namespace emc
