// fast.cu — Emily.Fast kernels: rms_norm, layer_norm and softmax over the
// last axis, and RoPE (one thread per element), with
// src/engine/ops/fast_norm.c and fast_rope.c's semantics.
//
// Row kernels. The rows are memory bound, so each element is read once
// from memory where possible:
//   - cached_rows_kernel: a group of G threads (a warp, or up to a whole
//     1024-thread block) holds one row in registers, VPT <= 8 packs per thread,
//     each pack one 16-byte load (or one element when the pointers or the
//     row length do not allow 16-byte packs). Short rows put several groups
//     in a block, so a block always has >= 256 threads. The statistics are
//     exact two-pass sums over the registers (softmax: max, then the sum of
//     exp(x - max); layer_norm: mean, then the squared deviations), then the
//     output is written from the registers: one read, one write.
//   - streaming_rows_kernel: rows longer than 1024 threads' packs (softmax:
//     32768 f32 or bf16/f16, norms: 16384 f32, 32768 bf16/f16; 4096 f64) do
//     not fit in registers; a 1024-thread block per
//     row reads the row twice (softmax folds (running max, running sum)
//     pairs in the first read; the second read comes from L2 when it can).
// Both accumulate in the dtype's compute type (float; double for f64).
//
// RoPE computes each element's angle in double (as the CPU's table) and
// rounds cos and sin to the compute type before rotating, so it matches
// the CPU up to the rounding of the last multiply-adds.
#include "common.cuh"

namespace emc {

constexpr int MAX_ROW_THREADS = 1024;
// Packs a thread caches: 8 x 16 bytes for f32 softmax, 4 for the rest,
// 2 for f64 (bf16/f16 unpacking, the weight/bias packs and f64's division
// need the registers: with more they spill under the 64 registers a
// 1024-thread block allows).
template <int D, int KIND> constexpr int max_packs_per_thread() {
    constexpr size_t size = sizeof(typename DT<D>::S);
    return size == 8 ? 2 : KIND == 2 && size == 4 ? 8 : 4;
}
constexpr int MIN_BLOCK_THREADS = 256;

// VEC elements of storage type S loaded or stored as one access (16 bytes
// when VEC * sizeof(S) == 16).
template <class S, int VEC> struct alignas(sizeof(S) * VEC) Pack {
    S e[VEC];
};

// Reduce v over the `group` threads [g * group, (g + 1) * group) of the
// block that hold one row (group a multiple of 32); every thread gets its
// group's result. Every thread of the block must call it (it syncs when
// group > 32). `slots` holds one value per warp of the block.
template <class C, class Op>
__device__ __forceinline__ C group_reduce(C v, int group, C *slots, C identity,
                                          Op op) {
    for (int o = 16; o > 0; o /= 2)
        v = op(v, (C)__shfl_xor_sync(0xffffffffu, v, o));
    if (group == 32)
        return v;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // slots may still be read from a previous call
    if (lane == 0)
        slots[warp] = v;
    __syncthreads();
    const int first = (threadIdx.x / group) * (group / 32);
    v = lane < group / 32 ? slots[first + lane] : identity;
    for (int o = 16; o > 0; o /= 2)
        v = op(v, (C)__shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

struct AddOp {
    template <class C> __device__ C operator()(C a, C b) const { return a + b; }
};
// NaN wins, so a row with a NaN gives NaN everywhere, as the CPU.
struct MaxOp {
    template <class C> __device__ C operator()(C a, C b) const {
        return a != a ? a : b != b ? b : a > b ? a : b;
    }
};

// The normalised value of element x (compute type) at column pack v,
// element e: shared by both kernels so their semantics are one.
template <int D, int KIND, int VEC> struct RowOut {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    using P = Pack<S, VEC>;
    // y = (x - shift) * scale [* w + b]; softmax: exp(x - shift) / scale
    C shift, scale;
    const P *w, *b;
    __device__ __forceinline__ P apply(const P &x, int64_t v) const {
        P o, wp{}, bp{};
        if (KIND != 2 && w)
            wp = w[v];
        if (KIND == 1 && b)
            bp = b[v];
#pragma unroll
        for (int e = 0; e < VEC; e++) {
            const C xv = DT<D>::load(x.e[e]);
            C y;
            if (KIND == 2) {
                // A division, as the composed exp(x - max) / sum: a fused
                // program's softmax runs here too (gpu_fusion.c).
                y = exp(xv - shift) / scale;
            } else {
                y = (xv - shift) * scale;
                if (w)
                    y = y * DT<D>::load(wp.e[e]);
                if (KIND == 1 && b)
                    y = y + DT<D>::load(bp.e[e]);
            }
            o.e[e] = DT<D>::store(y);
        }
        return o;
    }
};

template <int D, int KIND, int VEC, int VPT>
__global__ void __launch_bounds__(MAX_ROW_THREADS)
    cached_rows_kernel(em_cuda_fast_rows job, int group) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    using P = Pack<S, VEC>;
    __shared__ C slots[MAX_ROW_THREADS / 32];
    const int64_t n = job.D, npacks = n / VEC;
    const int rows_per_block = blockDim.x / group;
    const int t = threadIdx.x % group;
    for (int64_t base = (int64_t)blockIdx.x * rows_per_block; base < job.rows;
         base += (int64_t)gridDim.x * rows_per_block) {
        // Groups past the last row still take part in the block's syncs.
        const int64_t r = base + threadIdx.x / group;
        const bool row_ok = r < job.rows;
        const P *x = (const P *)job.x + (row_ok ? r : 0) * npacks;
        P *y = (P *)job.out + (row_ok ? r : 0) * npacks;
        P cache[VPT];
        bool have[VPT];
#pragma unroll
        for (int k = 0; k < VPT; k++) {
            const int64_t v = t + (int64_t)k * group;
            have[k] = row_ok && v < npacks;
            if (have[k])
                cache[k] = x[v];
        }
        RowOut<D, KIND, VEC> out;
        out.w = (const P *)job.weight;
        out.b = (const P *)job.bias;
        if (KIND == 2) {
            C m = -INFINITY;
#pragma unroll
            for (int k = 0; k < VPT; k++)
                if (have[k])
#pragma unroll
                    for (int e = 0; e < VEC; e++)
                        m = MaxOp()(m, DT<D>::load(cache[k].e[e]));
            m = group_reduce(m, group, slots, C(-INFINITY), MaxOp());
            // exp(x - m): +Inf gives NaN (Inf - Inf), as does a row of -Inf
            // only: the CPU's and the composed formula's answers.
            C s = 0;
#pragma unroll
            for (int k = 0; k < VPT; k++)
                if (have[k])
#pragma unroll
                    for (int e = 0; e < VEC; e++)
                        s += exp(DT<D>::load(cache[k].e[e]) - m);
            s = group_reduce(s, group, slots, C(0), AddOp());
            out.shift = m;
            out.scale = s;
        } else {
            C mean = 0;
            if (KIND == 1) {
                C sum = 0;
#pragma unroll
                for (int k = 0; k < VPT; k++)
                    if (have[k])
#pragma unroll
                        for (int e = 0; e < VEC; e++)
                            sum += DT<D>::load(cache[k].e[e]);
                mean = group_reduce(sum, group, slots, C(0), AddOp()) / (C)n;
            }
            C sq = 0;
#pragma unroll
            for (int k = 0; k < VPT; k++)
                if (have[k])
#pragma unroll
                    for (int e = 0; e < VEC; e++) {
                        const C d = DT<D>::load(cache[k].e[e]) - mean;
                        sq += d * d;
                    }
            sq = group_reduce(sq, group, slots, C(0), AddOp());
            out.shift = mean;
            out.scale = C(1) / sqrt(sq / (C)n + (C)job.eps);
        }
#pragma unroll
        for (int k = 0; k < VPT; k++)
            if (have[k]) {
                const int64_t v = t + (int64_t)k * group;
                y[v] = out.apply(cache[k], v);
            }
    }
}

// Online-softmax pairs: s is the sum of exp(x - m) over the elements seen,
// m their max. An empty pair (s = 0, m = -Inf: no element, or only -Inf)
// adds nothing (exp(-Inf - -Inf) would be NaN). A row of -Inf only ends
// with s = 0 and gives 0 * Inf = NaN, as the CPU and the composed formula.
template <class C> __device__ void merge_ms(C &m, C &s, C m2, C s2) {
    const C mx = m > m2 ? m : m2;
    const C a = s == C(0) ? C(0) : s * exp(m - mx);
    const C b = s2 == C(0) ? C(0) : s2 * exp(m2 - mx);
    m = mx;
    s = a + b;
}

template <class C> __device__ void block_max_sum(C &m, C &s, C *slots) {
    for (int o = 16; o > 0; o /= 2)
        merge_ms(m, s, (C)__shfl_xor_sync(0xffffffffu, m, o),
                 (C)__shfl_xor_sync(0xffffffffu, s, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) {
        slots[2 * warp] = m;
        slots[2 * warp + 1] = s;
    }
    __syncthreads();
    const int nwarps = blockDim.x / 32;
    m = lane < nwarps ? slots[2 * lane] : C(-INFINITY);
    s = lane < nwarps ? slots[2 * lane + 1] : C(0);
    for (int o = 16; o > 0; o /= 2)
        merge_ms(m, s, (C)__shfl_xor_sync(0xffffffffu, m, o),
                 (C)__shfl_xor_sync(0xffffffffu, s, o));
}

template <int D, int KIND, int VEC>
__global__ void __launch_bounds__(MAX_ROW_THREADS)
    streaming_rows_kernel(em_cuda_fast_rows job) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    using P = Pack<S, VEC>;
    __shared__ C slots[2 * MAX_ROW_THREADS / 32];
    const int64_t n = job.D, npacks = n / VEC;
    RowOut<D, KIND, VEC> out;
    out.w = (const P *)job.weight;
    out.b = (const P *)job.bias;
    for (int64_t r = blockIdx.x; r < job.rows; r += gridDim.x) {
        const P *x = (const P *)job.x + r * npacks;
        P *y = (P *)job.out + r * npacks;
        if (KIND == 2) {
            C m = -INFINITY, s = 0;
            for (int64_t v = threadIdx.x; v < npacks; v += blockDim.x) {
                const P p = x[v];
#pragma unroll
                for (int e = 0; e < VEC; e++) {
                    const C xv = DT<D>::load(p.e[e]);
                    if (xv > m) {
                        // xv's own term exp(xv - xv): 1, or NaN for +Inf
                        s = s * exp(m - xv) + (C(1) + (xv - xv));
                        m = xv;
                    } else if (!(xv == C(-INFINITY))) {
                        s += exp(xv - m); // -Inf adds 0; NaN makes s NaN
                    }
                }
            }
            block_max_sum(m, s, slots);
            out.shift = m;
            out.scale = s;
        } else {
            C mean = 0;
            if (KIND == 1) {
                C sum = 0;
                for (int64_t v = threadIdx.x; v < npacks; v += blockDim.x) {
                    const P p = x[v];
#pragma unroll
                    for (int e = 0; e < VEC; e++)
                        sum += DT<D>::load(p.e[e]);
                }
                mean = group_reduce(sum, (int)blockDim.x, slots, C(0),
                                    AddOp()) /
                       (C)n;
            }
            C sq = 0;
            for (int64_t v = threadIdx.x; v < npacks; v += blockDim.x) {
                const P p = x[v];
#pragma unroll
                for (int e = 0; e < VEC; e++) {
                    const C d = DT<D>::load(p.e[e]) - mean;
                    sq += d * d;
                }
            }
            sq = group_reduce(sq, (int)blockDim.x, slots, C(0), AddOp());
            out.shift = mean;
            out.scale = C(1) / sqrt(sq / (C)n + (C)job.eps);
        }
        for (int64_t v = threadIdx.x; v < npacks; v += blockDim.x)
            y[v] = out.apply(x[v], v);
    }
}

// The launch shape of one (dtype, kind, pack width): threads per row,
// packs per thread and blocks.
template <int D, int KIND, int VEC>
static int launch_rows(Device *d, const em_cuda_fast_rows *job) {
    const int64_t npacks = job->D / VEC;
    // Few threads per row while the row is short (more rows per block, no
    // block syncs for a warp), more packs per thread as it grows: up to 256
    // threads with 1, 2, 4 then 8 packs each, then up to 1024 threads.
    constexpr int max_vpt = max_packs_per_thread<D, KIND>();
    int vpt = 1;
    while (vpt < max_vpt && npacks > (int64_t)vpt * 256)
        vpt *= 2;
    if (npacks > (int64_t)max_vpt * MAX_ROW_THREADS) {
        int64_t blocks = job->rows < (int64_t)d->sms * 2 ? job->rows
                                                         : (int64_t)d->sms * 2;
        streaming_rows_kernel<D, KIND, VEC>
            <<<(unsigned)blocks, MAX_ROW_THREADS, 0, d->stream>>>(*job);
        EMC_LAUNCHED("fast_rows streaming kernel");
        return 0;
    }
    const int64_t per_thread = (npacks + vpt - 1) / vpt;
    const int group = (int)((per_thread + 31) / 32 * 32);
    const int rows_per_block =
        group >= MIN_BLOCK_THREADS ? 1 : MIN_BLOCK_THREADS / group;
    const int threads = group * rows_per_block;
    int64_t blocks = (job->rows + rows_per_block - 1) / rows_per_block;
    // Resident blocks per SM: 2048 threads each.
    const int64_t cap = (int64_t)d->sms * (2048 / threads) * 4;
    if (blocks > cap)
        blocks = cap;
    if (vpt == 1)
        cached_rows_kernel<D, KIND, VEC, 1>
            <<<(unsigned)blocks, threads, 0, d->stream>>>(*job, group);
    else if (vpt == 2)
        cached_rows_kernel<D, KIND, VEC, 2>
            <<<(unsigned)blocks, threads, 0, d->stream>>>(*job, group);
    else if constexpr (max_vpt >= 4) { // only the widths max_vpt allows
        if (vpt == 4)
            cached_rows_kernel<D, KIND, VEC, 4>
                <<<(unsigned)blocks, threads, 0, d->stream>>>(*job, group);
        else if constexpr (max_vpt == 8)
            cached_rows_kernel<D, KIND, VEC, 8>
                <<<(unsigned)blocks, threads, 0, d->stream>>>(*job, group);
    }
    EMC_LAUNCHED("fast_rows kernel");
    return 0;
}

// 16-byte packs when every pointer is 16-byte aligned and rows are a whole
// number of packs; single elements otherwise.
template <int D, int KIND>
static int launch_rows_aligned(Device *d, const em_cuda_fast_rows *job) {
    constexpr int VEC = (int)(16 / sizeof(typename DT<D>::S));
    const uintptr_t bits = (uintptr_t)job->x | (uintptr_t)job->out |
                           (uintptr_t)job->weight | (uintptr_t)job->bias;
    if (bits % 16 == 0 && job->D % VEC == 0)
        return launch_rows<D, KIND, VEC>(d, job);
    return launch_rows<D, KIND, 1>(d, job);
}

int fast_rows(int dev, const em_cuda_fast_rows *job) {
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    if (job->rows == 0 || job->D == 0)
        return 0;
    return with_dtype(job->dtype, [&]<int D>() -> int {
        if constexpr (klass_of(D) != K_FLT) {
            return fail(EM_ERR_ARGUMENT, "fast_rows: dtype %d", D);
        } else {
            switch (job->kind) {
            case 0:
                return launch_rows_aligned<D, 0>(d, job);
            case 1:
                return launch_rows_aligned<D, 1>(d, job);
            case 2:
                return launch_rows_aligned<D, 2>(d, job);
            default:
                return fail(EM_ERR_ARGUMENT, "fast_rows: kind %d", job->kind);
            }
        }
    });
}

template <int D> __global__ void rope_kernel(em_cuda_fast_rope job) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    const int64_t off = job.offset_dtype == EM_S32
                            ? (int64_t) * (const int32_t *)job.offset
                            : *(const int64_t *)job.offset;
    const int64_t half = job.dims / 2, n = job.rows * job.D;
    const S *x = (const S *)job.x;
    S *y = (S *)job.out;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += step) {
        const int64_t r = e / job.D, col = e % job.D;
        if (col >= job.dims) {
            y[e] = x[e];
            continue;
        }
        // pair i is (a, b) at (2i, 2i+1) or (i, i + half); role 1 is b
        const int64_t i = job.traditional ? col / 2 : col % half;
        const int role = job.traditional ? (int)(col % 2) : (int)(col / half);
        const int64_t ia = job.traditional ? 2 * i : i;
        const int64_t ib = job.traditional ? 2 * i + 1 : i + half;
        const double inv =
            job.freqs ? 1.0 / (double)job.freqs[i]
                      : pow(job.base, -2.0 * (double)i / (double)job.dims);
        const double theta = job.scale * (double)(off + r % job.L) * inv;
        double sd, cd;
        sincos(theta, &sd, &cd);
        const C c = (C)cd, s = (C)sd;
        const C a = DT<D>::load(x[r * job.D + ia]);
        const C b = DT<D>::load(x[r * job.D + ib]);
        y[e] = DT<D>::store(role == 0 ? a * c - b * s : a * s + b * c);
    }
}

int fast_rope(int dev, const em_cuda_fast_rope *job) {
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    const int64_t n = job->rows * job->D;
    if (n == 0)
        return 0;
    return with_dtype(job->dtype, [&]<int D>() -> int {
        if constexpr (klass_of(D) != K_FLT) {
            return fail(EM_ERR_ARGUMENT, "rope: dtype %d", D);
        } else {
            rope_kernel<D><<<grid_for(d, n), 256, 0, d->stream>>>(*job);
            EMC_LAUNCHED("rope kernel");
            return 0;
        }
    });
}

} // namespace emc
