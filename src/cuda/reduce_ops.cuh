// reduce_ops.cuh — the folds of the reductions (identity, step, combine,
// final), with the CPU's semantics (reduce.c). The one definition:
// reduce.cu's kernels and the fused kernels (fusion.cu) use Fold.
#pragma once

#include "dtype.cuh"

namespace emc {

// ---- the folds ------------------------------------------------------------

template <int D, int OP> struct Fold {
    using C = typename DT<D>::C;
    static constexpr Klass K = klass_of(D);
    static constexpr int OD =
        (OP == EM_REDUCE_all || OP == EM_REDUCE_any) ? EM_PRED : D;
    using Acc = std::conditional_t<
        OP == EM_REDUCE_all || OP == EM_REDUCE_any, uint8_t,
        std::conditional_t<(OP == EM_REDUCE_sum || OP == EM_REDUCE_product) &&
                               K == K_INT,
                           std::make_unsigned_t<std::conditional_t<K == K_INT, C, int>>,
                           C>>;
    using Out = typename DT<OD>::S;

    __device__ __forceinline__ Acc identity() const {
        if constexpr (OP == EM_REDUCE_sum)
            return Acc(0);
        else if constexpr (OP == EM_REDUCE_product)
            return Acc(1);
        else if constexpr (OP == EM_REDUCE_max)
            return K == K_INT ? std::numeric_limits<C>::lowest()
                              : (C)-INFINITY;
        else if constexpr (OP == EM_REDUCE_min)
            return K == K_INT ? std::numeric_limits<C>::max() : (C)INFINITY;
        else if constexpr (OP == EM_REDUCE_all)
            return 1;
        else
            return 0;
    }
    __device__ __forceinline__ Acc combine(Acc a, Acc x) const {
        if constexpr (OP == EM_REDUCE_sum)
            return a + x;
        else if constexpr (OP == EM_REDUCE_product) {
            if constexpr (K == K_INT)
                return (Acc)((wide_u<Acc>)a * (wide_u<Acc>)x);
            else
                return a * x;
        } else if constexpr (OP == EM_REDUCE_max)
            return (x > a || x != x) ? x : a;
        else if constexpr (OP == EM_REDUCE_min)
            return (x < a || x != x) ? x : a;
        else if constexpr (OP == EM_REDUCE_all)
            return a & x;
        else
            return a | x;
    }
    __device__ __forceinline__ Acc step(Acc a, typename DT<D>::S s,
                                        int64_t) const {
        C x = DT<D>::load(s);
        if constexpr (OP == EM_REDUCE_all || OP == EM_REDUCE_any)
            return combine(a, (Acc)(x != C(0)));
        else
            return combine(a, (Acc)x);
    }
    __device__ __forceinline__ Out final(Acc a) const {
        return DT<OD>::store((typename DT<OD>::C)a);
    }
};

template <class C> struct ArgAcc {
    C v;
    int64_t i; // < 0: nothing seen
};

// Order-free combination with the sequential scan's result: any NaN wins
// (the first one), else the extreme, ties by index.
// Indices are written as s64 (other index dtypes are converted after).
template <int D, bool MAX> struct ArgFold {
    using C = typename DT<D>::C;
    using Acc = ArgAcc<C>;
    using Out = int64_t;
    bool tie_high;
    __device__ __forceinline__ Acc identity() const { return Acc{C(0), -1}; }
    __device__ __forceinline__ Acc combine(Acc a, Acc b) const {
        if (a.i < 0)
            return b;
        if (b.i < 0)
            return a;
        bool an = a.v != a.v, bn = b.v != b.v;
        if (an || bn) {
            if (an && bn)
                return a.i < b.i ? a : b;
            return an ? a : b;
        }
        bool better = MAX ? b.v > a.v : b.v < a.v;
        if (better)
            return b;
        if (b.v == a.v && (tie_high ? b.i > a.i : b.i < a.i))
            return b;
        return a;
    }
    __device__ __forceinline__ Acc step(Acc a, typename DT<D>::S s,
                                        int64_t r) const {
        return combine(a, Acc{DT<D>::load(s), r});
    }
    __device__ __forceinline__ Out final(Acc a) const { return a.i; }
};

} // namespace emc
