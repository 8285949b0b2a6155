// scatter.cu — indexed_add and indexed_put with the CPU's semantics
// (index.c): indices of any integer dtype clamped into range; add
// accumulates duplicates (atomically: a compare-and-swap loop on the
// aligned 32- or 64-bit word holding the element, so every dtype, with the
// CPU's rounding and wrapping per update); put keeps the last row's value,
// made deterministic by an atomicMax of the row number per target first.
#include "common.cuh"

namespace emc {

template <class I> __device__ __forceinline__ int64_t index_of(I v) {
    if constexpr (std::is_same_v<I, uint64_t>)
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    else
        return (int64_t)v;
}

// Offsets of update element o: into the updates, into the output (target
// included), and its row number.
struct Where {
    int64_t u, out, row;
};

template <class I>
__device__ __forceinline__ Where locate(const em_cuda_scatter &s, int64_t o) {
    const I *idx = (const I *)s.indices;
    int64_t rem = o, u = 0, out = 0, ioff = 0, row = 0, row_span = 1;
    for (int d = s.ndim - 1; d >= 0; d--) {
        int64_t c = rem % s.shape[d];
        rem /= s.shape[d];
        u += c * s.u_stride[d];
        out += c * s.o_stride[d];
        ioff += c * s.i_stride[d];
        if (d < s.nrow_dims) {
            row += c * row_span;
            row_span *= s.shape[d];
        }
    }
    for (int j = 0; j < s.k; j++) {
        int64_t v = index_of(idx[ioff + j * s.entry_stride]);
        int64_t dim = s.axis_dim[j];
        v = v < 0 ? 0 : v >= dim ? dim - 1 : v;
        out += v * s.axis_stride[j];
    }
    return {u, out, row};
}

// a + b in the dtype's compute type, as the CPU's add_elem: integers wrap.
template <int D>
__device__ __forceinline__ typename DT<D>::S add_stored(typename DT<D>::S a,
                                                        typename DT<D>::S b) {
    using C = typename DT<D>::C;
    C x = DT<D>::load(a), y = DT<D>::load(b);
    if constexpr (klass_of(D) == K_INT)
        return DT<D>::store((C)((wide_u<C>)x + (wide_u<C>)y));
    else
        return DT<D>::store(x + y);
}

// *p += v atomically, for any dtype of 1 to 8 bytes: compare-and-swap on
// the aligned word that holds the element (2- and 1-byte elements share a
// 32-bit word with their neighbours, which the loop leaves unchanged).
template <int D>
__device__ __forceinline__ void atomic_add(typename DT<D>::S *p,
                                           typename DT<D>::S v) {
    using S = typename DT<D>::S;
    if constexpr (D == EM_F32 || D == EM_F64 || D == EM_U32 || D == EM_S32) {
        atomicAdd(p, v);
    } else if constexpr (D == EM_U64 || D == EM_S64) {
        atomicAdd((unsigned long long *)p, (unsigned long long)v);
    } else if constexpr (D == EM_C64 || D == EM_C128) {
        // Componentwise: each part is an independent float sum.
        using R = std::conditional_t<D == EM_C64, float, double>;
        R *parts = (R *)p;
        atomicAdd(parts, v.real());
        atomicAdd(parts + 1, v.imag());
    } else if constexpr (sizeof(S) == 8) {
        unsigned long long *w = (unsigned long long *)p;
        unsigned long long old = *w, seen;
        do {
            seen = old;
            S cur;
            memcpy(&cur, &seen, 8);
            S next = add_stored<D>(cur, v);
            unsigned long long bits;
            memcpy(&bits, &next, 8);
            old = atomicCAS(w, seen, bits);
        } while (old != seen);
    } else {
        // 1 or 2 bytes inside an aligned 32-bit word.
        uintptr_t addr = (uintptr_t)p;
        unsigned *w = (unsigned *)(addr & ~(uintptr_t)3);
        unsigned shift = (unsigned)(addr & 3) * 8;
        unsigned mask = sizeof(S) == 1 ? 0xffu : 0xffffu;
        unsigned old = *w, seen;
        do {
            seen = old;
            S cur = (S)((seen >> shift) & mask);
            S next = add_stored<D>(cur, v);
            unsigned bits =
                (seen & ~(mask << shift)) | (((unsigned)next & mask) << shift);
            old = atomicCAS(w, seen, bits);
        } while (old != seen);
    }
}

template <class I, int D> __global__ void scatter_add_kernel(em_cuda_scatter s) {
    using S = typename DT<D>::S;
    const S *upd = (const S *)s.updates;
    S *out = (S *)s.out;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < s.n;
         o += step) {
        Where w = locate<I>(s, o);
        atomic_add<D>(out + w.out, upd[w.u]);
    }
}

// put, pass 1: the highest row per target.
template <class I> __global__ void scatter_claim_kernel(em_cuda_scatter s) {
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < s.n;
         o += step) {
        Where w = locate<I>(s, o);
        atomicMax((long long *)s.winner + w.out, (long long)w.row);
    }
}

// put, pass 2: only the winning row writes (one writer per target).
template <class I, int D> __global__ void scatter_put_kernel(em_cuda_scatter s) {
    using S = typename DT<D>::S;
    const S *upd = (const S *)s.updates;
    S *out = (S *)s.out;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < s.n;
         o += step) {
        Where w = locate<I>(s, o);
        if (s.winner[w.out] == w.row)
            out[w.out] = upd[w.u];
    }
}

int launch_scatter(Device *d, const em_cuda_scatter *s) {
    return with_dtype(s->dtype_index, [&]<int X>() -> int {
        if constexpr (klass_of(X) != K_INT) {
            return fail(EM_ERR_ARGUMENT, "scatter: indices of dtype %d", X);
        } else {
            using I = typename DT<X>::S;
            return with_dtype(s->dtype, [&]<int D>() -> int {
                unsigned grid = grid_for(d, s->n);
                if (s->add) {
                    scatter_add_kernel<I, D><<<grid, 256, 0, d->stream>>>(*s);
                } else {
                    scatter_claim_kernel<I><<<grid, 256, 0, d->stream>>>(*s);
                    EMC_LAUNCHED("scatter claim kernel");
                    scatter_put_kernel<I, D><<<grid, 256, 0, d->stream>>>(*s);
                }
                EMC_LAUNCHED("scatter kernel");
                return 0;
            });
        }
    });
}

} // namespace emc
