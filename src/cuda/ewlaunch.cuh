// ewlaunch.cuh — the two elementwise kernel shapes every elementwise family
// (unary, binary, select, clip, cast) is instantiated into:
//   - contiguous: one collapsed axis, each input contiguous or a broadcast
//     scalar; each thread moves 16 bytes of the widest operand per step
//     (vector loads and stores), grid-stride;
//   - strided: any layout (transposed, sliced, broadcast views), one
//     element per step with the index decomposed over the collapsed axes.
// An Op functor gives NIN (1..3), the storage types In0..In2 and Out, and
// `Out operator()(In0, In1, In2) const`; unused inputs are uint8_t.
#pragma once

#include "common.cuh"

namespace emc {

struct EwArgs {
    const void *in[EM_CUDA_MAX_IN];
    void *out;
    int64_t n;
    int ndim;
    int64_t shape[EM_CUDA_MAX_NDIM];
    int64_t strides[EM_CUDA_MAX_IN][EM_CUDA_MAX_NDIM];
};

template <class T, int N> struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

template <class Op>
__global__ void __launch_bounds__(256) ew_strided(Op op, EwArgs a) {
    using I0 = typename Op::In0;
    using I1 = typename Op::In1;
    using I2 = typename Op::In2;
    const I0 *p0 = (const I0 *)a.in[0];
    const I1 *p1 = (const I1 *)a.in[1];
    const I2 *p2 = (const I2 *)a.in[2];
    auto *o = (typename Op::Out *)a.out;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n;
         i += step) {
        int64_t rem = i, o0 = 0, o1 = 0, o2 = 0;
        for (int d = a.ndim - 1; d >= 0; d--) {
            int64_t s = a.shape[d];
            int64_t idx = rem % s;
            rem /= s;
            o0 += idx * a.strides[0][d];
            if constexpr (Op::NIN > 1)
                o1 += idx * a.strides[1][d];
            if constexpr (Op::NIN > 2)
                o2 += idx * a.strides[2][d];
        }
        I1 x1{};
        I2 x2{};
        if constexpr (Op::NIN > 1)
            x1 = p1[o1];
        if constexpr (Op::NIN > 2)
            x2 = p2[o2];
        o[i] = op(p0[o0], x1, x2);
    }
}

// Elements per thread step: 16 bytes of the widest operand.
template <class Op> constexpr int ew_vec() {
    size_t m = sizeof(typename Op::Out);
    if (sizeof(typename Op::In0) > m)
        m = sizeof(typename Op::In0);
    if (Op::NIN > 1 && sizeof(typename Op::In1) > m)
        m = sizeof(typename Op::In1);
    if (Op::NIN > 2 && sizeof(typename Op::In2) > m)
        m = sizeof(typename Op::In2);
    return m >= 16 ? 1 : (int)(16 / m);
}

// Loads N elements at vector index v, or replicates a broadcast scalar.
template <class T, int N>
__device__ __forceinline__ void ew_load(T (&x)[N], const T *p, int64_t v,
                                        bool scalar) {
    if (scalar) {
        T s = p[0];
#pragma unroll
        for (int k = 0; k < N; k++)
            x[k] = s;
    } else {
        Vec<T, N> t = ((const Vec<T, N> *)p)[v];
#pragma unroll
        for (int k = 0; k < N; k++)
            x[k] = t.v[k];
    }
}

template <class Op, int N>
__global__ void __launch_bounds__(256)
    ew_contig(Op op, const void *in0, const void *in1, const void *in2,
              void *out, int64_t n, int scalar_mask) {
    using I0 = typename Op::In0;
    using I1 = typename Op::In1;
    using I2 = typename Op::In2;
    using O = typename Op::Out;
    const I0 *p0 = (const I0 *)in0;
    const I1 *p1 = (const I1 *)in1;
    const I2 *p2 = (const I2 *)in2;
    O *o = (O *)out;
    bool s0 = scalar_mask & 1, s1 = scalar_mask & 2, s2 = scalar_mask & 4;
    int64_t nv = n / N;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t v = tid; v < nv; v += step) {
        I0 x0[N];
        I1 x1[N] = {};
        I2 x2[N] = {};
        ew_load<I0, N>(x0, p0, v, s0);
        if constexpr (Op::NIN > 1)
            ew_load<I1, N>(x1, p1, v, s1);
        if constexpr (Op::NIN > 2)
            ew_load<I2, N>(x2, p2, v, s2);
        Vec<O, N> r;
#pragma unroll
        for (int k = 0; k < N; k++)
            r.v[k] = op(x0[k], x1[k], x2[k]);
        ((Vec<O, N> *)o)[v] = r;
    }
    for (int64_t i = nv * N + tid; i < n; i += step) {
        I1 x1{};
        I2 x2{};
        if constexpr (Op::NIN > 1)
            x1 = p1[s1 ? 0 : i];
        if constexpr (Op::NIN > 2)
            x2 = p2[s2 ? 0 : i];
        o[i] = op(p0[s0 ? 0 : i], x1, x2);
    }
}

template <class Op> int launch_ew(Device *d, const em_cuda_ew *job, Op op) {
    constexpr int N = ew_vec<Op>();
    bool contig = job->ndim == 1;
    int mask = 0;
    size_t in_size[3] = {sizeof(typename Op::In0), sizeof(typename Op::In1),
                         sizeof(typename Op::In2)};
    bool aligned = ((uintptr_t)job->out % (sizeof(typename Op::Out) * N)) == 0;
    for (int k = 0; k < Op::NIN; k++) {
        int64_t s = job->strides[k][0];
        if (s == 0)
            mask |= 1 << k;
        else if (s != 1)
            contig = false;
        else if ((uintptr_t)job->in[k] % (in_size[k] * N) != 0)
            aligned = false;
    }
    if (contig && aligned) {
        ew_contig<Op, N><<<grid_for(d, job->n / N + 1), 256, 0, d->stream>>>(
            op, job->in[0], job->in[1], job->in[2], job->out, job->n, mask);
        EMC_LAUNCHED("elementwise kernel (contiguous)");
        return 0;
    }
    EwArgs a;
    for (int k = 0; k < EM_CUDA_MAX_IN; k++)
        a.in[k] = job->in[k];
    a.out = job->out;
    a.n = job->n;
    a.ndim = job->ndim;
    for (int i = 0; i < job->ndim; i++) {
        a.shape[i] = job->shape[i];
        for (int k = 0; k < EM_CUDA_MAX_IN; k++)
            a.strides[k][i] = job->strides[k][i];
    }
    ew_strided<Op><<<grid_for(d, job->n), 256, 0, d->stream>>>(op, a);
    EMC_LAUNCHED("elementwise kernel (strided)");
    return 0;
}

} // namespace emc
