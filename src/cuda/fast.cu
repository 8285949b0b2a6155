// fast.cu — Emily.Fast kernels: rms_norm, layer_norm and softmax over the
// last axis (one block per row, grid-stride over rows) and RoPE (one
// thread per element), with src/engine/ops/fast_norm.c and fast_rope.c's
// semantics.
//
// Row kernels accumulate in the dtype's compute type (float; double for
// f64): each thread folds a strided part of the row, then the block
// combines the threads' partials through warp shuffles and one shared
// slot per warp. Softmax folds (running max, running sum) pairs: one read
// of the row, then one write pass (the row is re-read from L2).
//
// RoPE computes each element's angle in double (as the CPU's table) and
// rounds cos and sin to the compute type before rotating, so it matches
// the CPU up to the rounding of the last multiply-adds.
#include "common.cuh"

namespace emc {

constexpr int ROW_THREADS = 256;

// Sum of v over the block; every thread gets the result. `slots` holds
// one value per warp.
template <class C> __device__ C block_sum(C v, C *slots) {
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // slots may still be read from a previous call
    if (lane == 0)
        slots[warp] = v;
    __syncthreads();
    const int nwarps = blockDim.x / 32;
    v = lane < nwarps ? slots[lane] : C(0);
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
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

template <int D, int KIND>
__global__ void __launch_bounds__(ROW_THREADS)
    rows_kernel(em_cuda_fast_rows job) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    __shared__ C slots[2 * ROW_THREADS / 32];
    const int64_t n = job.D;
    const S *w = (const S *)job.weight, *b = (const S *)job.bias;
    for (int64_t r = blockIdx.x; r < job.rows; r += gridDim.x) {
        const S *x = (const S *)job.x + r * n;
        S *y = (S *)job.out + r * n;
        if (KIND == 0) { // rms_norm
            C ss = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                C v = DT<D>::load(x[i]);
                ss += v * v;
            }
            ss = block_sum(ss, slots);
            const C rs = C(1) / sqrt(ss / (C)n + (C)job.eps);
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                C v = DT<D>::load(x[i]) * rs;
                if (w)
                    v = v * DT<D>::load(w[i]);
                y[i] = DT<D>::store(v);
            }
        } else if (KIND == 1) { // layer_norm
            C sum = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
                sum += DT<D>::load(x[i]);
            const C mean = block_sum(sum, slots) / (C)n;
            C sq = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                C v = DT<D>::load(x[i]) - mean;
                sq += v * v;
            }
            sq = block_sum(sq, slots);
            const C rs = C(1) / sqrt(sq / (C)n + (C)job.eps);
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                C v = (DT<D>::load(x[i]) - mean) * rs;
                if (w)
                    v = v * DT<D>::load(w[i]);
                if (b)
                    v = v + DT<D>::load(b[i]);
                y[i] = DT<D>::store(v);
            }
        } else { // softmax
            C m = -INFINITY, s = 0;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
                C v = DT<D>::load(x[i]);
                if (v > m) {
                    // v's own term exp(v - v): 1, or NaN for +Inf (as the CPU)
                    s = s * exp(m - v) + (C(1) + (v - v));
                    m = v;
                } else if (!(v == C(-INFINITY))) {
                    s += exp(v - m); // -Inf adds 0; NaN makes s NaN
                }
            }
            block_max_sum(m, s, slots);
            const C inv = C(1) / s;
            for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
                y[i] = DT<D>::store(exp(DT<D>::load(x[i]) - m) * inv);
        }
    }
}

int fast_rows(int dev, const em_cuda_fast_rows *job) {
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    if (job->rows == 0 || job->D == 0)
        return 0;
    int64_t blocks = job->rows < (int64_t)d->sms * 32 ? job->rows
                                                      : (int64_t)d->sms * 32;
    return with_dtype(job->dtype, [&]<int D>() -> int {
        if constexpr (klass_of(D) != K_FLT) {
            return fail(EM_ERR_ARGUMENT, "fast_rows: dtype %d", D);
        } else {
            switch (job->kind) {
            case 0:
                rows_kernel<D, 0>
                    <<<(unsigned)blocks, ROW_THREADS, 0, d->stream>>>(*job);
                break;
            case 1:
                rows_kernel<D, 1>
                    <<<(unsigned)blocks, ROW_THREADS, 0, d->stream>>>(*job);
                break;
            case 2:
                rows_kernel<D, 2>
                    <<<(unsigned)blocks, ROW_THREADS, 0, d->stream>>>(*job);
                break;
            default:
                return fail(EM_ERR_ARGUMENT, "fast_rows: kind %d", job->kind);
            }
            EMC_LAUNCHED("fast_rows kernel");
            return 0;
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
