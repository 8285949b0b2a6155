// reduce.cu — sum, product, max, min, all, any and argmax/argmin over any
// set of axes, with the CPU's semantics (src/engine/ops/reduce.c): integer
// sums and products wrap, f16/bf16 accumulate in float, max/min propagate
// NaN, argmax reports the first NaN, else the first (or, with tie_high, the
// last) extreme.
//
// Two kernel shapes, each optionally split along the reduced range into
// chunks whose partial accumulators a second kernel combines (so that one
// long reduction still fills the GPU):
//   - block per output: the block's threads stride through the reduced
//     range (coalesced when the innermost reduced axis is contiguous);
//   - thread per output: when the innermost kept axis is contiguous and the
//     reduced one is not (sum over axis 0), neighbouring threads read
//     neighbouring elements.
#include "ewlaunch.cuh"
#include "reduce_ops.cuh"

namespace emc {

struct RArgs {
    const void *in;
    void *out;
    int ko, kr;
    int64_t oshape[EM_CUDA_MAX_NDIM], ostride[EM_CUDA_MAX_NDIM];
    int64_t rshape[EM_CUDA_MAX_NDIM], rstride[EM_CUDA_MAX_NDIM];
    int64_t nout, rn;
};

__device__ __forceinline__ int64_t offset_of(int64_t flat, int nd,
                                             const int64_t *shape,
                                             const int64_t *stride) {
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (flat % shape[d]) * stride[d];
        flat /= shape[d];
    }
    return off;
}

// ---- kernels ----------------------------------------------------------------

constexpr int RT = 256;

template <class F, class Acc>
__device__ __forceinline__ Acc block_combine(const F &f, Acc acc) {
    // Raw storage: complex accumulators have constructors, which __shared__
    // variables may not run.
    __shared__ alignas(16) unsigned char raw[RT * sizeof(Acc)];
    Acc *shared = reinterpret_cast<Acc *>(raw);
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int w = RT / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            shared[threadIdx.x] =
                f.combine(shared[threadIdx.x], shared[threadIdx.x + w]);
        __syncthreads();
    }
    return shared[0];
}

// This thread's share of in[begin, end) (contiguous), read 16 bytes at a
// time, four loads in flight, after a scalar head up to 16-byte alignment.
template <class F>
__device__ __forceinline__ typename F::Acc
fold_contiguous(const F &f, const typename F::InS *in, int64_t begin,
                int64_t end) {
    using S = typename F::InS;
    constexpr int N = sizeof(S) >= 16 ? 1 : (int)(16 / sizeof(S));
    auto acc = f.identity(), acc1 = f.identity();
    int64_t mis = (int64_t)(((uintptr_t)(in + begin) % 16) / sizeof(S));
    int64_t head = mis ? N - mis : 0;
    if (head > end - begin)
        head = end - begin;
    int64_t vb = begin + head;
    if ((int64_t)threadIdx.x < head)
        acc = f.step(acc, in[begin + threadIdx.x], begin + threadIdx.x);
    int64_t nvec = (end - vb) / N;
    const Vec<S, N> *v = (const Vec<S, N> *)(in + vb);
    int64_t i = threadIdx.x;
    for (; i + 3 * RT < nvec; i += 4 * RT) {
        Vec<S, N> x = v[i], y = v[i + RT], z = v[i + 2 * RT],
                  w = v[i + 3 * RT];
#pragma unroll
        for (int k = 0; k < N; k++) {
            acc = f.step(acc, x.v[k], vb + i * N + k);
            acc1 = f.step(acc1, y.v[k], vb + (i + RT) * N + k);
            acc = f.step(acc, z.v[k], vb + (i + 2 * RT) * N + k);
            acc1 = f.step(acc1, w.v[k], vb + (i + 3 * RT) * N + k);
        }
    }
    for (; i < nvec; i += RT) {
        Vec<S, N> x = v[i];
#pragma unroll
        for (int k = 0; k < N; k++)
            acc = f.step(acc, x.v[k], vb + i * N + k);
    }
    for (int64_t r = vb + nvec * N + threadIdx.x; r < end; r += RT)
        acc = f.step(acc, in[r], r);
    return f.combine(acc, acc1);
}

// Block (blockIdx.x = output, blockIdx.y = chunk) folds a chunk.
template <class F>
__global__ void __launch_bounds__(RT)
    reduce_blocks(F f, RArgs a, int64_t chunk, typename F::Acc *partial) {
    int64_t o = blockIdx.x;
    int64_t base = offset_of(o, a.ko, a.oshape, a.ostride);
    int64_t begin = (int64_t)blockIdx.y * chunk;
    int64_t end = begin + chunk < a.rn ? begin + chunk : a.rn;
    auto acc = f.identity();
    const auto *in = (const typename F::InS *)a.in + base;
    if (a.kr == 1 && a.rstride[0] == 1) {
        acc = fold_contiguous(f, in, begin, end);
    } else if (a.kr == 1) {
        int64_t s = a.rstride[0];
        auto acc1 = f.identity(), acc2 = f.identity(), acc3 = f.identity();
        int64_t r = begin + threadIdx.x;
        for (; r + 3 * RT < end; r += 4 * RT) {
            auto x0 = in[r * s], x1 = in[(r + RT) * s];
            auto x2 = in[(r + 2 * RT) * s], x3 = in[(r + 3 * RT) * s];
            acc = f.step(acc, x0, r);
            acc1 = f.step(acc1, x1, r + RT);
            acc2 = f.step(acc2, x2, r + 2 * RT);
            acc3 = f.step(acc3, x3, r + 3 * RT);
        }
        for (; r < end; r += RT)
            acc = f.step(acc, in[r * s], r);
        acc = f.combine(f.combine(acc, acc1), f.combine(acc2, acc3));
    } else {
        for (int64_t r = begin + threadIdx.x; r < end; r += RT)
            acc = f.step(acc, in[offset_of(r, a.kr, a.rshape, a.rstride)], r);
    }
    acc = block_combine(f, acc);
    if (threadIdx.x == 0) {
        if (partial)
            partial[o * gridDim.y + blockIdx.y] = acc;
        else
            ((typename F::Out *)a.out)[o] = f.final(acc);
    }
}

// Thread per output (x: outputs, y: chunks of the reduced range).
template <class F>
__global__ void __launch_bounds__(RT)
    reduce_threads(F f, RArgs a, int64_t chunk, typename F::Acc *partial) {
    int64_t o = (int64_t)blockIdx.x * RT + threadIdx.x;
    if (o >= a.nout)
        return;
    int64_t base = offset_of(o, a.ko, a.oshape, a.ostride);
    int64_t begin = (int64_t)blockIdx.y * chunk;
    int64_t end = begin + chunk < a.rn ? begin + chunk : a.rn;
    const auto *in = (const typename F::InS *)a.in + base;
    auto acc = f.identity();
    if (a.kr == 1) {
        for (int64_t r = begin; r < end; r++)
            acc = f.step(acc, in[r * a.rstride[0]], r);
    } else {
        for (int64_t r = begin; r < end; r++)
            acc = f.step(acc, in[offset_of(r, a.kr, a.rshape, a.rstride)], r);
    }
    if (partial)
        partial[o * gridDim.y + blockIdx.y] = acc;
    else
        ((typename F::Out *)a.out)[o] = f.final(acc);
}

// One block per output folds its chunks' partials in chunk order.
template <class F>
__global__ void __launch_bounds__(RT)
    reduce_partials(F f, const typename F::Acc *partial, int nchunks,
                    void *out) {
    int64_t o = blockIdx.x;
    auto acc = f.identity();
    for (int c = threadIdx.x; c < nchunks; c += RT)
        acc = f.combine(acc, partial[o * nchunks + c]);
    acc = block_combine(f, acc);
    if (threadIdx.x == 0)
        ((typename F::Out *)out)[o] = f.final(acc);
}

template <class Base, int D> struct WithInput : Base {
    using InS = typename DT<D>::S;
};

template <class F> static int run(Device *d, const em_cuda_reduce *job, F f) {
    RArgs a;
    a.in = job->in;
    a.out = job->out;
    a.ko = job->ko;
    a.kr = job->kr;
    for (int i = 0; i < EM_CUDA_MAX_NDIM; i++) {
        a.oshape[i] = job->oshape[i];
        a.ostride[i] = job->ostride[i];
        a.rshape[i] = job->rshape[i];
        a.rstride[i] = job->rstride[i];
    }
    a.nout = job->nout;
    a.rn = job->rn;
    bool by_thread = a.ko > 0 && a.ostride[a.ko - 1] == 1 &&
                     (a.kr == 0 || a.rstride[a.kr - 1] != 1) &&
                     a.nout >= 32;
    // Chunks so that about 8 blocks' worth of work per multiprocessor
    // exists even for one long reduction; at least 4096 elements a chunk.
    int64_t units = by_thread ? (a.nout + RT - 1) / RT : a.nout;
    int64_t want = (int64_t)d->sms * 8;
    int64_t nchunks = 1;
    if (units < want && a.rn >= 8192) {
        nchunks = (want + units - 1) / units;
        int64_t max_chunks = (a.rn + 4095) / 4096;
        if (nchunks > max_chunks)
            nchunks = max_chunks;
        if (nchunks > 65535)
            nchunks = 65535;
    }
    if (units > 0x7fffffff)
        return fail(EM_ERR_UNSUPPORTED, "reduce: %lld outputs is too many",
                    (long long)a.nout);
    int64_t chunk = nchunks > 1 ? (a.rn + nchunks - 1) / nchunks : a.rn;
    if (nchunks > 1)
        nchunks = (a.rn + chunk - 1) / chunk;
    using Acc = typename F::Acc;
    Acc *partial = nullptr;
    if (nchunks > 1)
        EMC_TRY(cudaMallocAsync((void **)&partial,
                                sizeof(Acc) * (size_t)(a.nout * nchunks),
                                d->stream));
    dim3 grid((unsigned)units, (unsigned)nchunks);
    if (by_thread)
        reduce_threads<F><<<grid, RT, 0, d->stream>>>(f, a, chunk, partial);
    else
        reduce_blocks<F><<<grid, RT, 0, d->stream>>>(f, a, chunk, partial);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && partial) {
        reduce_partials<F><<<(unsigned)a.nout, RT, 0, d->stream>>>(
            f, partial, (int)nchunks, a.out);
        e = cudaGetLastError();
    }
    if (partial)
        cudaFreeAsync(partial, d->stream);
    return e == cudaSuccess ? 0 : cuda_fail(e, "reduce kernel");
}

int launch_reduce(Device *d, const em_cuda_reduce *job) {
    if (!job->is_arg) {
        int op = job->op;
        return with_dtype(job->dtype_in, [&]<int D>() -> int {
            switch (op) {
#define EMC_RED_CASE(name, acc)                                                \
    case EM_REDUCE_##name:                                                     \
        if constexpr (accepts_##acc(D))                                        \
            return run(d, job, WithInput<Fold<D, EM_REDUCE_##name>, D>{});     \
        else                                                                   \
            break;
                EM_REDUCE_OPS(EMC_RED_CASE)
#undef EMC_RED_CASE
            default:
                break;
            }
            return fail(EM_ERR_ARGUMENT, "reduce op %d: no GPU kernel for dtype %d",
                        op, D);
        });
    }
    if (klass_of(job->dtype_out) != K_INT || job->dtype_out == EM_PRED)
        return fail(EM_ERR_ARGUMENT,
                    "argreduce: index dtype must be an integer");
    em_cuda_reduce as_s64 = *job;
    void *tmp = nullptr;
    if (job->dtype_out != EM_S64) {
        EMC_TRY(cudaMallocAsync(&tmp, sizeof(int64_t) * (size_t)job->nout,
                                d->stream));
        as_s64.out = tmp;
    }
    bool is_max = job->op == EM_ARGMAX;
    int rc = with_dtype(job->dtype_in, [&]<int D>() -> int {
        if constexpr (klass_of(D) == K_CPX) {
            return fail(EM_ERR_ARGUMENT, "argreduce: complex dtype");
        } else if (is_max) {
            WithInput<ArgFold<D, true>, D> f;
            f.tie_high = job->tie_high;
            return run(d, &as_s64, f);
        } else {
            WithInput<ArgFold<D, false>, D> f;
            f.tie_high = job->tie_high;
            return run(d, &as_s64, f);
        }
    });
    if (rc == 0 && tmp) {
        em_cuda_ew cast = {};
        cast.family = EM_CUDA_CAST;
        cast.dtype_in = cast.dtype_pred = EM_S64;
        cast.dtype_out = job->dtype_out;
        cast.nin = 1;
        cast.ndim = 1;
        cast.n = job->nout;
        cast.shape[0] = job->nout;
        cast.strides[0][0] = 1;
        cast.in[0] = tmp;
        cast.out = job->out;
        rc = launch_misc(d, &cast);
    }
    if (tmp)
        cudaFreeAsync(tmp, d->stream);
    return rc;
}

} // namespace emc
