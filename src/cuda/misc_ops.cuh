// misc_ops.cuh — select, clip and dtype conversion element rules, with the
// CPU's semantics (select.c, convert.c). The one definition: misc.cu's
// kernels and the fused kernels (fusion.cu) use these functors.
#pragma once

#include "dtype.cuh"

namespace emc {

// ---- select: values are moved by size, the predicate read as its dtype ----

struct alignas(16) Bytes16 {
    uint64_t lo, hi;
};
template <int SIZE>
using raw_t = std::conditional_t<
    SIZE == 1, uint8_t,
    std::conditional_t<
        SIZE == 2, uint16_t,
        std::conditional_t<SIZE == 4, uint32_t,
                           std::conditional_t<SIZE == 8, uint64_t, Bytes16>>>>;

// t where the predicate (dtype P) is nonzero, else f: values of any type.
template <int P, class T>
__device__ __forceinline__ T select_rule(typename DT<P>::S p, T t, T f) {
    using C = typename DT<P>::C;
    return DT<P>::load(p) != C(0) ? t : f;
}

template <int P, int SIZE> struct SelectOp {
    static constexpr int NIN = 3;
    using In0 = typename DT<P>::S;
    using In1 = raw_t<SIZE>;
    using In2 = raw_t<SIZE>;
    using Out = raw_t<SIZE>;
    __device__ __forceinline__ Out operator()(In0 p, In1 t, In2 f) const {
        return select_rule<P>(p, t, f);
    }
};

// ---- clip ----------------------------------------------------------------

template <int D> struct ClipOp {
    static constexpr int NIN = 3;
    using S = typename DT<D>::S;
    using In0 = S;
    using In1 = S;
    using In2 = S;
    using Out = S;
    __device__ __forceinline__ Out operator()(S x, S lo, S hi) const {
        using C = typename DT<D>::C;
        C v = DT<D>::load(x), l = DT<D>::load(lo), h = DT<D>::load(hi);
        if constexpr (klass_of(D) == K_INT) {
            C m = v > l ? v : l;
            return DT<D>::store(m < h ? m : h);
        } else {
            return DT<D>::store(flt_min(flt_max(v, l), h));
        }
    }
};

// ---- conversion: widen to a 64-bit class, then narrow (as the CPU) --------

template <int D>
using wide_t = std::conditional_t<
    klass_of(D) == K_CPX, c128,
    std::conditional_t<
        klass_of(D) == K_FLT, double,
        std::conditional_t<std::is_signed_v<typename DT<D>::C>, int64_t,
                           uint64_t>>>;

template <int TO, class W>
__device__ __forceinline__ typename DT<TO>::C narrow(W v) {
    using C = typename DT<TO>::C;
    constexpr bool from_cpx = std::is_same_v<W, c128>;
    if constexpr (TO == EM_PRED) {
        return (C)(v != W(0));
    } else if constexpr (klass_of(TO) == K_INT) {
        if constexpr (from_cpx) {
            return narrow<TO>(v.real());
        } else if constexpr (std::is_same_v<W, double>) {
            constexpr C max = std::numeric_limits<C>::max();
            constexpr C min = std::numeric_limits<C>::min();
            if (v != v)
                return 0;
            if (v >= (double)max + 1.0)
                return max;
            if (v < (double)min)
                return min;
            return (C)v;
        } else {
            return (C)(std::make_unsigned_t<C>)(uint64_t)v;
        }
    } else if constexpr (klass_of(TO) == K_FLT) {
        if constexpr (from_cpx)
            return (C)v.real();
        else
            return (C)v;
    } else {
        using R = typename C::value_type;
        if constexpr (from_cpx)
            return C((R)v.real(), (R)v.imag());
        else
            return C((R)v, (R)0);
    }
}

template <int FROM, int TO> struct CastOp {
    static constexpr int NIN = 1;
    using In0 = typename DT<FROM>::S;
    using In1 = uint8_t;
    using In2 = uint8_t;
    using Out = typename DT<TO>::S;
    __device__ __forceinline__ Out operator()(In0 a, In1, In2) const {
        if constexpr (FROM == TO) {
            return a;
        } else {
            auto c = DT<FROM>::load(a);
            wide_t<FROM> w;
            if constexpr (klass_of(FROM) == K_CPX)
                w = c128(c.real(), c.imag());
            else
                w = (wide_t<FROM>)c;
            return DT<TO>::store(narrow<TO>(w));
        }
    }
};

template <int SIZE> struct CopyOp {
    static constexpr int NIN = 1;
    using In0 = raw_t<SIZE>;
    using In1 = uint8_t;
    using In2 = uint8_t;
    using Out = raw_t<SIZE>;
    __device__ __forceinline__ Out operator()(In0 a, In1, In2) const {
        return a;
    }
};


} // namespace emc
