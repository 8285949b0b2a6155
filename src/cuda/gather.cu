// gather.cu — indexed reads (gather, take, take_along_axis) with the CPU's
// semantics (index.c): indices of any integer dtype, out-of-range values
// clamped into range (never a wild read), elements moved by size; and the
// strided copy the shape ops (pad, concatenate, put_slice, dynamic slices,
// eye) are made of, with the dynamic slices' starts read and clamped here.
#include "common.cuh"

namespace emc {

struct alignas(16) Elem16 {
    uint64_t lo, hi;
};
template <int SIZE>
using elem_t = std::conditional_t<
    SIZE == 1, uint8_t,
    std::conditional_t<
        SIZE == 2, uint16_t,
        std::conditional_t<SIZE == 4, uint32_t,
                           std::conditional_t<SIZE == 8, uint64_t, Elem16>>>>;

template <class I> __device__ __forceinline__ int64_t to_index(I v) {
    if constexpr (std::is_same_v<I, uint64_t>)
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    else
        return (int64_t)v;
}

template <class I, int SIZE>
__global__ void gather_kernel(em_cuda_gather g) {
    using E = elem_t<SIZE>;
    const E *a = (const E *)g.a;
    const I *idx = (const I *)g.indices;
    E *out = (E *)g.out;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < g.n;
         o += step) {
        int64_t rem = o, aoff = 0, ioff = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t c = rem % g.shape[d];
            rem /= g.shape[d];
            aoff += c * g.a_stride[d];
            ioff += c * g.i_stride[d];
        }
        for (int j = 0; j < g.k; j++) {
            int64_t v = to_index(idx[ioff + j * g.entry_stride]);
            int64_t dim = g.axis_dim[j];
            v = v < 0 ? 0 : v >= dim ? dim - 1 : v;
            aoff += v * g.axis_stride[j];
        }
        out[o] = a[aoff];
    }
}

int launch_gather(Device *d, const em_cuda_gather *g) {
    if (g->n == 0)
        return 0;
    return with_dtype(g->dtype_index, [&]<int D>() -> int {
        if constexpr (klass_of(D) != K_INT) {
            return fail(EM_ERR_ARGUMENT, "gather: indices of dtype %d", D);
        } else {
            return with_elem_size(g->elem_size, "gather", [&]<int S>() -> int {
                gather_kernel<typename DT<D>::S, S>
                    <<<grid_for(d, g->n), 256, 0, d->stream>>>(*g);
                EMC_LAUNCHED("gather kernel");
                return 0;
            });
        }
    });
}

// The extra offset of a copy with dynamic starts (dynamic_slice.c's
// clamp_start, on the device: one read per axis, shared by every thread).
template <class I>
__device__ __forceinline__ int64_t starts_offset(const em_cuda_copy &c) {
    const I *s = (const I *)c.starts;
    int64_t off = 0;
    for (int i = 0; i < c.nstarts; i++) {
        int64_t v = to_index(s[i * c.starts_stride]);
        int64_t hi = c.start_hi[i];
        v = v < 0 ? 0 : v > hi ? hi : v;
        off += v * c.start_mul[i];
    }
    return off;
}

template <class I, int SIZE> __global__ void copy_kernel(em_cuda_copy c) {
    using E = elem_t<SIZE>;
    const E *src = (const E *)c.src;
    E *dst = (E *)c.dst;
    if (c.starts_side) {
        int64_t off = starts_offset<I>(c);
        if (c.starts_side == 1)
            src += off;
        else
            dst += off;
    }
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < c.n;
         o += step) {
        int64_t rem = o, soff = 0, doff = 0;
        for (int d = c.ndim - 1; d >= 0; d--) {
            int64_t x = rem % c.shape[d];
            rem /= c.shape[d];
            soff += x * c.src_stride[d];
            doff += x * c.dst_stride[d];
        }
        dst[doff] = src[soff];
    }
}

int launch_copy(Device *d, const em_cuda_copy *c) {
    // Without starts the index type is irrelevant: instantiate with int32.
    int dt = c->starts_side ? c->dtype_starts : (int)EM_S32;
    return with_dtype(dt, [&]<int D>() -> int {
        if constexpr (klass_of(D) != K_INT) {
            return fail(EM_ERR_ARGUMENT, "copy: starts of dtype %d", D);
        } else {
            return with_elem_size(c->elem_size, "copy", [&]<int S>() -> int {
                copy_kernel<typename DT<D>::S, S>
                    <<<grid_for(d, c->n), 256, 0, d->stream>>>(*c);
                EMC_LAUNCHED("copy kernel");
                return 0;
            });
        }
    });
}

} // namespace emc
