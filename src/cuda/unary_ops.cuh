// unary_ops.cuh — the rule of every unary op of emily_ops.h for every dtype
// class, with the CPU's semantics (src/engine/ops/unary.c). The one
// definition: unary.cu's kernels and the fused kernels NVRTC compiles
// (fusion.cu) both use UnaryOp.
#pragma once

#include "dtype.cuh"

namespace emc {

// The output dtype of a unary op on dtype D.
constexpr int un_out_dtype(int op, int d) {
    return (op == EM_UNARY_is_nan || op == EM_UNARY_is_infinity ||
            op == EM_UNARY_logical_not)
               ? EM_PRED
           : (op == EM_UNARY_abs || op == EM_UNARY_real ||
              op == EM_UNARY_imag)
               ? real_dtype(d)
               : d;
}

template <class T> __device__ __forceinline__ T cpx_expm1(T z) {
    using R = typename T::value_type;
    R a = z.real(), b = z.imag();
    R h = sin(b / 2);
    return T(expm1(a) * cos(b) - 2 * h * h, exp(a) * sin(b));
}

// As the CPU's un_ccbrt: a trigonometric factor of exactly 0 gives that
// (signed) 0, so cbrt(Inf+3i) is Inf+0i, not Inf·0 = NaN.
template <class T> __device__ __forceinline__ T cpx_cbrt(T z) {
    using R = typename T::value_type;
    R r = cbrt(cuda::std::abs(z)), t = cuda::std::arg(z) / 3;
    R c = cos(t), s = sin(t);
    return T(c == R(0) ? c : r * c, s == R(0) ? s : r * s);
}

// libcu++'s complex<float> tanh, asin, asinh, log near |z| = 1 ... lose up to ~2e-4
// relative accuracy (tanh near its poles, asin/asinh of small imaginary
// values: measured against a float64 reference on H200, where glibc's
// c64 functions are within 1e-7): c64 computes them in double and rounds.
template <class T, class F>
__device__ __forceinline__ T cpx_via_double(T z, F f) {
    if constexpr (std::is_same_v<T, c64>) {
        c128 r = f(c128(z.real(), z.imag()));
        return T((float)r.real(), (float)r.imag());
    } else {
        return f(z);
    }
}
#define EMC_CPX_ACCURATE(fn, z)                                                \
    cpx_via_double(z, [](auto w) { return cuda::std::fn(w); })
template <class T> __device__ __forceinline__ T cpx_accurate_tanh(T z) {
    return EMC_CPX_ACCURATE(tanh, z);
}

// Leading zeros of an integer in its own width (pred: 1 bit).
template <int D, class C> __device__ __forceinline__ C int_clz(C x) {
    using U = std::make_unsigned_t<C>;
    uint64_t u = (uint64_t)(U)x;
    int bits = D == EM_PRED ? 1 : (int)sizeof(C) * 8;
    return (C)(u == 0 ? bits : __clzll((long long)u) - (64 - bits));
}

// The rule of op OP for dtype D on compute value x; returns the compute
// type of the output dtype.
template <int OP, int D>
__device__ __forceinline__ typename DT<un_out_dtype(OP, D)>::C
un_rule(typename DT<D>::C x) {
    using C = typename DT<D>::C;
    constexpr Klass K = klass_of(D);
    using R = typename DT<un_out_dtype(OP, D)>::C;
    if constexpr (OP == EM_UNARY_negate) {
        if constexpr (K == K_INT)
            return (C)(0u - (wide_u<C>)x);
        else
            return -x;
    } else if constexpr (OP == EM_UNARY_abs) {
        if constexpr (K == K_INT)
            return is_neg(x) ? (C)(0u - (wide_u<C>)x) : x;
        else if constexpr (K == K_FLT)
            return fabs(x);
        else
            return cuda::std::abs(x);
    } else if constexpr (OP == EM_UNARY_sign) {
        if constexpr (K == K_INT)
            return (C)(is_neg(x) ? (C)-1 : (C)(x != 0));
        else if constexpr (K == K_FLT)
            return x > 0 ? (C)1 : x < 0 ? (C)-1 : x;
        else
            return x == C(0) ? x : x / cuda::std::abs(x);
    } else if constexpr (OP == EM_UNARY_floor) {
        if constexpr (K == K_INT)
            return x;
        else
            return floor(x);
    } else if constexpr (OP == EM_UNARY_ceil) {
        if constexpr (K == K_INT)
            return x;
        else
            return ceil(x);
    } else if constexpr (OP == EM_UNARY_round) {
        if constexpr (K == K_INT)
            return x;
        else
            return round(x); // half away from zero, as the CPU
    } else if constexpr (OP == EM_UNARY_sqrt) {
        if constexpr (K == K_FLT)
            return sqrt(x);
        else
            return cuda::std::sqrt(x);
    } else if constexpr (OP == EM_UNARY_rsqrt) {
        if constexpr (K == K_FLT)
            return (C)1 / sqrt(x);
        else
            return C(1) / cuda::std::sqrt(x);
    } else if constexpr (OP == EM_UNARY_exp) {
        if constexpr (K == K_FLT)
            return exp(x);
        else
            return cuda::std::exp(x);
    } else if constexpr (OP == EM_UNARY_expm1) {
        if constexpr (K == K_FLT)
            return expm1(x);
        else
            return cpx_expm1(x);
    } else if constexpr (OP == EM_UNARY_log) {
        if constexpr (K == K_FLT)
            return log(x);
        else
            return EMC_CPX_ACCURATE(log, x);
    } else if constexpr (OP == EM_UNARY_log1p) {
        if constexpr (K == K_FLT)
            return log1p(x);
        else // 1 + z formed in double too: its real part cancels near -0
            return cpx_via_double(
                x, [](auto w) { return cuda::std::log(decltype(w)(1) + w); });
    } else if constexpr (OP == EM_UNARY_sin) {
        if constexpr (K == K_FLT)
            return sin(x);
        else
            return cuda::std::sin(x);
    } else if constexpr (OP == EM_UNARY_cos) {
        if constexpr (K == K_FLT)
            return cos(x);
        else
            return cuda::std::cos(x);
    } else if constexpr (OP == EM_UNARY_tanh) {
        if constexpr (K == K_FLT)
            return tanh(x);
        else
            return cpx_accurate_tanh(x);
    } else if constexpr (OP == EM_UNARY_sigmoid) {
        if constexpr (K == K_FLT)
            return (C)1 / ((C)1 + exp(-x));
        else
            return C(1) / (C(1) + cuda::std::exp(-x));
    } else if constexpr (OP == EM_UNARY_erf) {
        return erf(x);
    } else if constexpr (OP == EM_UNARY_logical_not) {
        return (R)(x == C(0));
    } else if constexpr (OP == EM_UNARY_bitwise_not) {
        return (C)(D == EM_PRED ? (x ^ 1) : ~x);
    } else if constexpr (OP == EM_UNARY_is_nan) {
        if constexpr (K == K_INT)
            return (R)0;
        else if constexpr (K == K_FLT)
            return (R)isnan(x);
        else
            return (R)(isnan(x.real()) || isnan(x.imag()));
    } else if constexpr (OP == EM_UNARY_is_infinity) {
        if constexpr (K == K_INT)
            return (R)0;
        else if constexpr (K == K_FLT)
            return (R)isinf(x);
        else
            return (R)(isinf(x.real()) || isinf(x.imag()));
    } else if constexpr (OP == EM_UNARY_tan) {
        if constexpr (K == K_FLT)
            return tan(x);
        else // tan z = -i tanh(i z)
            return C(0, -1) * cpx_accurate_tanh(C(0, 1) * x);
    } else if constexpr (OP == EM_UNARY_acos) {
        if constexpr (K == K_FLT)
            return acos(x);
        else
            return EMC_CPX_ACCURATE(acos, x);
    } else if constexpr (OP == EM_UNARY_asin) {
        if constexpr (K == K_FLT)
            return asin(x);
        else
            return EMC_CPX_ACCURATE(asin, x);
    } else if constexpr (OP == EM_UNARY_atan) {
        if constexpr (K == K_FLT)
            return atan(x);
        else
            return EMC_CPX_ACCURATE(atan, x);
    } else if constexpr (OP == EM_UNARY_cosh) {
        if constexpr (K == K_FLT)
            return cosh(x);
        else
            return cuda::std::cosh(x);
    } else if constexpr (OP == EM_UNARY_sinh) {
        if constexpr (K == K_FLT)
            return sinh(x);
        else
            return cuda::std::sinh(x);
    } else if constexpr (OP == EM_UNARY_acosh) {
        if constexpr (K == K_FLT)
            return acosh(x);
        else
            return EMC_CPX_ACCURATE(acosh, x);
    } else if constexpr (OP == EM_UNARY_asinh) {
        if constexpr (K == K_FLT)
            return asinh(x);
        else
            return EMC_CPX_ACCURATE(asinh, x);
    } else if constexpr (OP == EM_UNARY_atanh) {
        if constexpr (K == K_FLT)
            return atanh(x);
        else
            return EMC_CPX_ACCURATE(atanh, x);
    } else if constexpr (OP == EM_UNARY_cbrt) {
        if constexpr (K == K_FLT)
            return cbrt(x);
        else
            return cpx_cbrt(x);
    } else if constexpr (OP == EM_UNARY_erfc) {
        return erfc(x);
    } else if constexpr (OP == EM_UNARY_erf_inv) {
        // The CPU computes in double and rounds; so does this.
        return (C)erfinv((double)x);
    } else if constexpr (OP == EM_UNARY_real) {
        if constexpr (K == K_FLT)
            return x;
        else
            return x.real();
    } else if constexpr (OP == EM_UNARY_imag) {
        if constexpr (K == K_FLT)
            return (C)0;
        else
            return x.imag();
    } else if constexpr (OP == EM_UNARY_conjugate) {
        if constexpr (K == K_FLT)
            return x;
        else
            return cuda::std::conj(x);
    } else if constexpr (OP == EM_UNARY_population_count) {
        using U = std::make_unsigned_t<C>;
        return (C)__popcll((unsigned long long)(U)x);
    } else if constexpr (OP == EM_UNARY_count_leading_zeros) {
        return int_clz<D>(x);
    } else {
        static_assert(OP < 0, "a unary op without a GPU rule");
    }
}

template <int OP, int D> struct UnaryOp {
    static constexpr int NIN = 1;
    static constexpr int OD = un_out_dtype(OP, D);
    using In0 = typename DT<D>::S;
    using In1 = uint8_t;
    using In2 = uint8_t;
    using Out = typename DT<OD>::S;
    __device__ __forceinline__ Out operator()(In0 a, In1, In2) const {
        return DT<OD>::store(un_rule<OP, D>(DT<D>::load(a)));
    }
};

} // namespace emc
