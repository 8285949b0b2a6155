// binary_ops.cuh — the rule of every binary op of emily_ops.h for every
// dtype class, with the CPU's semantics (src/engine/ops/binary.c): integer
// arithmetic wraps, division and remainder by zero give 0, out-of-range
// shifts give 0 (or -1), float max/min propagate NaN. The one definition:
// binary.cu's kernels and the fused kernels (fusion.cu) use BinaryOp.
#pragma once

#include "dtype.cuh"

namespace emc {

constexpr bool bin_is_pred(int op) {
    switch (op) {
#define EMC_PRED_CASE(name, acc) case EM_BINARY_##name:
        EM_BINARY_PRED_OPS(EMC_PRED_CASE)
#undef EMC_PRED_CASE
        return true;
    default:
        return false;
    }
}

template <class C> __device__ __forceinline__ bool is_minus_one(C b) {
    if constexpr (std::is_signed_v<C>)
        return b == (C)-1;
    else
        return false;
}

template <int D, class C> __device__ __forceinline__ C int_pow(C base, C e) {
    using W = wide_u<C>;
    W acc = 1, sq = (W)base;
    if (is_neg(e))
        return (C)(base == 1              ? 1
                   : is_minus_one(base) ? ((e & 1) ? sq : 1)
                                        : 0);
    while (e != 0) {
        if (e & 1)
            acc *= sq;
        sq *= sq;
        e = (C)(e >> 1);
    }
    return (C)acc;
}

template <int D, class C>
__device__ __forceinline__ bool shift_out_of_range(C b) {
    constexpr uint64_t width = D == EM_PRED ? 1 : sizeof(C) * 8;
    return is_neg(b) || (uint64_t)b >= width;
}

template <int OP, int D>
__device__ __forceinline__ auto bin_rule(typename DT<D>::C a,
                                         typename DT<D>::C b) {
    using C = typename DT<D>::C;
    constexpr Klass K = klass_of(D);
    using W = std::conditional_t<K == K_INT, wide_u<std::conditional_t<K == K_INT, C, int>>, C>;
    if constexpr (OP == EM_BINARY_add) {
        if constexpr (K == K_INT)
            return (C)((W)a + (W)b);
        else
            return a + b;
    } else if constexpr (OP == EM_BINARY_subtract) {
        if constexpr (K == K_INT)
            return (C)((W)a - (W)b);
        else
            return a - b;
    } else if constexpr (OP == EM_BINARY_multiply) {
        if constexpr (K == K_INT)
            return (C)((W)a * (W)b);
        else
            return a * b;
    } else if constexpr (OP == EM_BINARY_divide ||
                         OP == EM_BINARY_quotient) {
        if constexpr (K == K_INT)
            return (C)(b == 0            ? (C)0
                       : is_minus_one(b) ? (C)(0u - (W)a)
                                         : (C)(a / b));
        else
            return a / b;
    } else if constexpr (OP == EM_BINARY_remainder) {
        if constexpr (K == K_INT)
            return (C)(b == 0 || is_minus_one(b) ? (C)0 : (C)(a % b));
        else
            return fmod(a, b);
    } else if constexpr (OP == EM_BINARY_pow) {
        if constexpr (K == K_INT)
            return int_pow<D>(a, b);
        else if constexpr (K == K_FLT)
            return pow(a, b);
        else
            return cuda::std::pow(a, b);
    } else if constexpr (OP == EM_BINARY_minimum) {
        if constexpr (K == K_INT)
            return a < b ? a : b;
        else
            return flt_min(a, b);
    } else if constexpr (OP == EM_BINARY_maximum) {
        if constexpr (K == K_INT)
            return a > b ? a : b;
        else
            return flt_max(a, b);
    } else if constexpr (OP == EM_BINARY_atan2) {
        return atan2(a, b);
    } else if constexpr (OP == EM_BINARY_bitwise_and) {
        return (C)(a & b);
    } else if constexpr (OP == EM_BINARY_bitwise_or) {
        return (C)(a | b);
    } else if constexpr (OP == EM_BINARY_bitwise_xor) {
        return (C)(a ^ b);
    } else if constexpr (OP == EM_BINARY_left_shift) {
        return (C)(shift_out_of_range<D>(b) ? (C)0 : (C)((W)a << b));
    } else if constexpr (OP == EM_BINARY_right_shift) {
        return (C)(shift_out_of_range<D>(b) ? (is_neg(a) ? (C)-1 : (C)0)
                                            : (C)(a >> b));
    } else if constexpr (OP == EM_BINARY_equal) {
        return (uint8_t)(a == b);
    } else if constexpr (OP == EM_BINARY_not_equal) {
        return (uint8_t)(a != b);
    } else if constexpr (OP == EM_BINARY_less) {
        return (uint8_t)(a < b);
    } else if constexpr (OP == EM_BINARY_less_equal) {
        return (uint8_t)(a <= b);
    } else if constexpr (OP == EM_BINARY_greater) {
        return (uint8_t)(a > b);
    } else if constexpr (OP == EM_BINARY_greater_equal) {
        return (uint8_t)(a >= b);
    } else if constexpr (OP == EM_BINARY_logical_and) {
        return (uint8_t)(a != C(0) && b != C(0));
    } else if constexpr (OP == EM_BINARY_logical_or) {
        return (uint8_t)(a != C(0) || b != C(0));
    } else if constexpr (OP == EM_BINARY_logical_xor) {
        return (uint8_t)((a != C(0)) != (b != C(0)));
    } else {
        static_assert(OP < 0, "a binary op without a GPU rule");
    }
}

template <int OP, int D> struct BinaryOp {
    static constexpr int NIN = 2;
    static constexpr int OD = bin_is_pred(OP) ? EM_PRED : D;
    using In0 = typename DT<D>::S;
    using In1 = typename DT<D>::S;
    using In2 = uint8_t;
    using Out = typename DT<OD>::S;
    __device__ __forceinline__ Out operator()(In0 a, In1 b, In2) const {
        return DT<OD>::store(
            (typename DT<OD>::C)bin_rule<OP, D>(DT<D>::load(a), DT<D>::load(b)));
    }
};

} // namespace emc
