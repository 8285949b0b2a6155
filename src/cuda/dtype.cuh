// dtype.cuh — the dtype traits that let each kernel be written once for
// every dtype. Device code only: besides nvcc's .cu files, the fusion
// compiler (fusion.cu) hands this header to NVRTC, so it includes nothing
// NVRTC lacks (emily.h's C headers are given to NVRTC as small shims).
//
// Dtypes mirror the engine's tables (src/engine/internal.h): a storage type
// S and a compute type C with load/store between them. f16/bf16 compute in
// float; pred computes in uint8_t and stores 0/1; complex numbers are
// cuda::std::complex, laid out as the engine's (real, imaginary).
#pragma once

#include "emily.h"

#include <cuda/std/complex>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifdef __CUDACC_RTC__
// NVRTC has no C++ standard library: libcu++ stands in for the parts the
// op rules use (type traits, limits).
#include <cuda/std/limits>
#include <cuda/std/type_traits>
namespace std {
using namespace cuda::std;
}
#else
#include <cstdint>
#include <limits>
#include <type_traits>
#endif

namespace emc {

// ---- dtypes -------------------------------------------------------------

using c64 = cuda::std::complex<float>;
using c128 = cuda::std::complex<double>;

enum Klass { K_INT, K_FLT, K_CPX };

constexpr Klass klass_of(int d) {
    return d <= EM_S64 ? K_INT : d <= EM_F64 ? K_FLT : K_CPX;
}

template <int D> struct DT;
#define EMC_PLAIN_DT(E, T)                                                     \
    template <> struct DT<E> {                                                 \
        using S = T;                                                           \
        using C = T;                                                           \
        static __device__ __forceinline__ C load(S v) { return v; }            \
        static __device__ __forceinline__ S store(C v) { return v; }           \
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
#undef EMC_PLAIN_DT

template <> struct DT<EM_PRED> {
    using S = uint8_t;
    using C = uint8_t;
    static __device__ __forceinline__ C load(S v) { return v; }
    static __device__ __forceinline__ S store(C v) { return v != 0; }
};
template <> struct DT<EM_F16> {
    using S = uint16_t;
    using C = float;
    static __device__ __forceinline__ C load(S v) {
        return __half2float(__ushort_as_half(v));
    }
    static __device__ __forceinline__ S store(C v) {
        return __half_as_ushort(__float2half_rn(v));
    }
};
template <> struct DT<EM_BF16> {
    using S = uint16_t;
    using C = float;
    static __device__ __forceinline__ C load(S v) {
        return __bfloat162float(__ushort_as_bfloat16(v));
    }
    static __device__ __forceinline__ S store(C v) {
        return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
};

// Bytes per element. The plugin links nothing of libemily (the engine may
// be linked statically into a program that exports none of its symbols).
constexpr size_t dtype_bytes(int d) {
    return d <= EM_U8 || d == EM_S8   ? 1
           : d == EM_U16 || d == EM_S16 || d == EM_F16 || d == EM_BF16 ? 2
           : d == EM_U32 || d == EM_S32 || d == EM_F32 ? 4
           : d == EM_C128                               ? 16
                                                        : 8;
}

// The real dtype of a complex one (others unchanged).
constexpr int real_dtype(int d) {
    return d == EM_C64 ? EM_F32 : d == EM_C128 ? EM_F64 : d;
}

// Unsigned type integer arithmetic wraps in: at least unsigned int, so that
// u8/u16 products never overflow a promoted int.
template <class T>
using wide_u = decltype(std::make_unsigned_t<T>(0) + 0u);

// What sums of products and window sums accumulate in, as the CPU's work
// types (conv.c's CONV_WORK, window.c's WIN_WORK): integers wrap in a 32-
// or 64-bit unsigned type; other dtypes use their compute type.
template <int D>
using work_t = std::conditional_t<
    klass_of(D) == K_INT,
    std::conditional_t<sizeof(typename DT<D>::S) == 8, uint64_t, uint32_t>,
    typename DT<D>::C>;

template <class T> __device__ __forceinline__ bool is_neg(T x) {
    if constexpr (std::is_signed_v<T>)
        return x < 0;
    else
        return false;
}

// The `accepts` column of emily_ops.h as a compile-time predicate.
constexpr bool accepts_NUMERIC(int d) { return d != EM_PRED; }
constexpr bool accepts_REAL(int d) { return klass_of(d) != K_CPX; }
constexpr bool accepts_FLOATING(int d) { return klass_of(d) != K_INT; }
constexpr bool accepts_REALFLOAT(int d) { return klass_of(d) == K_FLT; }
constexpr bool accepts_INTEGER(int d) { return klass_of(d) == K_INT; }
constexpr bool accepts_ANY(int) { return true; }

// Float max/min as the CPU: NaN wins, -0 orders below +0.
template <class C> __device__ __forceinline__ C flt_max(C a, C b) {
    return a != a ? a : b != b ? b : (a > b || (a == b && !signbit(a))) ? a : b;
}
template <class C> __device__ __forceinline__ C flt_min(C a, C b) {
    return a != a ? a : b != b ? b : (a < b || (a == b && signbit(a))) ? a : b;
}

} // namespace emc
