// Host emulation of the CUDA backend's common.cuh (scripts/cuda_emulate.sh):
// kernels run as plain functions for every (block, thread) in turn. Only
// for checking the kernels' logic and the engine's job structs without a GPU.
#pragma once
#include "emily.h"
#include "emily_device.h"
#include "emily_cuda.h"
#include "emily_window.h"

#include <cmath>
#include <complex>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline dim3 blockIdx, threadIdx, blockDim, gridDim;
namespace cuda {
namespace std {
using ::std::complex;
using ::std::numeric_limits;
} // namespace std
} // namespace cuda
template <class F> void emu_launch(dim3 g, dim3 b, F &&f) {
    gridDim = g;
    blockDim = b;
    for (unsigned bz = 0; bz < g.z; bz++)
        for (unsigned by = 0; by < g.y; by++)
            for (unsigned bx = 0; bx < g.x; bx++)
                for (unsigned tx = 0; tx < b.x; tx++)
                    for (unsigned ty = 0; ty < b.y; ty++) {
                        blockIdx = dim3(bx, by, bz);
                        threadIdx = dim3(tx, ty, 0);
                        f();
                    }
}

namespace emc {
int fail(int status, const char *fmt, ...);
#define EMC_LAUNCHED(what)                                                     \
    do {                                                                       \
    } while (0)
struct Device {
    int stream;
    int sms;
};
inline unsigned grid_for(const Device *d, int64_t work, int threads = 256) {
    int64_t blocks = (work + threads - 1) / threads;
    int64_t cap = (int64_t)d->sms * 16;
    if (blocks > cap)
        blocks = cap;
    return (unsigned)(blocks < 1 ? 1 : blocks);
}
using c64 = std::complex<float>;
using c128 = std::complex<double>;
enum Klass { K_INT, K_FLT, K_CPX };
constexpr Klass klass_of(int d) {
    return d <= EM_S64 ? K_INT : d <= EM_F64 ? K_FLT : K_CPX;
}
template <int D> struct DT;
#define EMC_PLAIN_DT(E, T)                                                     \
    template <> struct DT<E> {                                                 \
        using S = T;                                                           \
        using C = T;                                                           \
        static C load(S v) { return v; }                                       \
        static S store(C v) { return v; }                                      \
    };
EMC_PLAIN_DT(EM_U8, uint8_t)
EMC_PLAIN_DT(EM_U16, uint16_t)
EMC_PLAIN_DT(EM_U32, uint32_t)
EMC_PLAIN_DT(EM_U64, uint64_t)
EMC_PLAIN_DT(EM_S8, int8_t)
EMC_PLAIN_DT(EM_S16, int16_t)
EMC_PLAIN_DT(EM_S32, int32_t)
EMC_PLAIN_DT(EM_S64, int64_t)
EMC_PLAIN_DT(EM_F32, float)
EMC_PLAIN_DT(EM_F64, double)
EMC_PLAIN_DT(EM_C64, c64)
EMC_PLAIN_DT(EM_C128, c128)
template <> struct DT<EM_PRED> {
    using S = uint8_t;
    using C = uint8_t;
    static C load(S v) { return v; }
    static S store(C v) { return v != 0; }
};
template <> struct DT<EM_F16> {
    using S = uint16_t;
    using C = float;
    static C load(S v) {
        _Float16 h;
        memcpy(&h, &v, 2);
        return (float)h;
    }
    static S store(C v) {
        _Float16 h = (_Float16)v;
        S s;
        memcpy(&s, &h, 2);
        return s;
    }
};
template <> struct DT<EM_BF16> {
    using S = uint16_t;
    using C = float;
    static C load(S v) {
        uint32_t u = (uint32_t)v << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    static S store(C v) {
        uint32_t u;
        memcpy(&u, &v, 4);
        if (v != v)
            return (S)((u >> 16) | 0x40);
        u += 0x7fff + ((u >> 16) & 1);
        return (S)(u >> 16);
    }
};
template <class F> static int with_elem_size(size_t size, const char *op, F &&f) {
    switch (size) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 4: return f.template operator()<4>();
    case 8: return f.template operator()<8>();
    case 16: return f.template operator()<16>();
    default: return fail(EM_ERR_ARGUMENT, "%s: size %zu", op, size);
    }
}
constexpr size_t dtype_bytes(int d) {
    return d <= EM_U8 || d == EM_S8   ? 1
           : d == EM_U16 || d == EM_S16 || d == EM_F16 || d == EM_BF16 ? 2
           : d == EM_U32 || d == EM_S32 || d == EM_F32 ? 4
           : d == EM_C128                               ? 16
                                                        : 8;
}
template <class T> using wide_u = decltype(std::make_unsigned_t<T>(0) + 0u);
template <int D>
using work_t = std::conditional_t<
    klass_of(D) == K_INT,
    std::conditional_t<sizeof(typename DT<D>::S) == 8, uint64_t, uint32_t>,
    typename DT<D>::C>;
template <class F> inline int with_dtype(int d, F &&f) {
    switch (d) {
#define EMC_CASE(E)                                                            \
    case E:                                                                    \
        return f.template operator()<E>();
        EMC_CASE(EM_PRED) EMC_CASE(EM_U8) EMC_CASE(EM_U16) EMC_CASE(EM_U32)
        EMC_CASE(EM_U64) EMC_CASE(EM_S8) EMC_CASE(EM_S16) EMC_CASE(EM_S32)
        EMC_CASE(EM_S64) EMC_CASE(EM_F16) EMC_CASE(EM_BF16) EMC_CASE(EM_F32)
        EMC_CASE(EM_F64) EMC_CASE(EM_C64) EMC_CASE(EM_C128)
#undef EMC_CASE
    default:
        return fail(EM_ERR_ARGUMENT, "unknown dtype %d", d);
    }
}
int launch_window(Device *d, const em_cuda_window *w);
int launch_window_scatter(Device *d, const em_cuda_window_scatter *s);
int launch_erf_inv(Device *d, int dtype, const void *in, void *out, int64_t n);
int launch_im2col(Device *d, const em_cuda_im2col *j);
int launch_depthwise(Device *d, const em_cuda_depthwise *j);
} // namespace emc
