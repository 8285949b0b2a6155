// scan.cu — cumulative sum, product, max and min along one axis with the
// CPU's semantics (scan.c): one thread per lane walking the axis, the
// running value rounded to the dtype at each step (so f16 sums match the
// CPU's step by step), integers wrapping, max/min keeping a NaN.
//
// Lanes next to each other in memory (a scan over any axis but the last)
// are read by neighbouring threads, so those loads coalesce. Few, long
// lanes (one 1-D cumulative sum of millions) run on few threads: a
// blocked scan is future work.
#include "common.cuh"

#include "emily_scan.h"

namespace emc {

template <int D, int OP>
__device__ __forceinline__ typename DT<D>::C scan_step(typename DT<D>::C a,
                                                       typename DT<D>::C b) {
    using C = typename DT<D>::C;
    if constexpr (OP == EM_SCAN_SUM || OP == EM_SCAN_PRODUCT) {
        if constexpr (klass_of(D) == K_INT) {
            using W = wide_u<C>;
            return OP == EM_SCAN_SUM ? (C)((W)a + (W)b) : (C)((W)a * (W)b);
        } else {
            return OP == EM_SCAN_SUM ? a + b : a * b;
        }
    } else if constexpr (OP == EM_SCAN_MAX) {
        return (a > b || a != a) ? a : b;
    } else {
        return (a < b || a != a) ? a : b;
    }
}

template <int D, int OP>
__global__ void scan_kernel(em_cuda_scan s) {
    using S = typename DT<D>::S;
    const S *in = (const S *)s.in;
    S *out = (S *)s.out;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
         l < s.nlanes; l += step) {
        int64_t rem = l, io = 0, oo = 0;
        for (int d = s.nlane_dims - 1; d >= 0; d--) {
            int64_t c = rem % s.lane_shape[d];
            rem /= s.lane_shape[d];
            io += c * s.lane_in[d];
            oo += c * s.lane_out[d];
        }
        S v = DT<D>::store(DT<D>::load(in[io]));
        out[oo] = v;
        auto acc = DT<D>::load(v);
        for (int64_t t = 1; t < s.n; t++) {
            v = DT<D>::store(
                scan_step<D, OP>(acc, DT<D>::load(in[io + t * s.step_in])));
            out[oo + t * s.step_out] = v;
            acc = DT<D>::load(v);
        }
    }
}

int launch_scan(Device *d, const em_cuda_scan *s) {
    int op = s->op;
    return with_dtype(s->dtype, [&]<int D>() -> int {
        auto go = [&]<int OP>() -> int {
            scan_kernel<D, OP><<<grid_for(d, s->nlanes), 256, 0, d->stream>>>(
                *s);
            EMC_LAUNCHED("scan kernel");
            return 0;
        };
        switch (op) {
        case EM_SCAN_SUM:
            if constexpr (D != EM_PRED)
                return go.template operator()<EM_SCAN_SUM>();
            break;
        case EM_SCAN_PRODUCT:
            if constexpr (D != EM_PRED)
                return go.template operator()<EM_SCAN_PRODUCT>();
            break;
        case EM_SCAN_MAX:
            if constexpr (klass_of(D) != K_CPX)
                return go.template operator()<EM_SCAN_MAX>();
            break;
        case EM_SCAN_MIN:
            if constexpr (klass_of(D) != K_CPX)
                return go.template operator()<EM_SCAN_MIN>();
            break;
        default:
            break;
        }
        return fail(EM_ERR_ARGUMENT, "scan op %d: no GPU kernel for dtype %d",
                    op, D);
    });
}

} // namespace emc
