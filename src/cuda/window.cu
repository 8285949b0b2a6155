// window.cu — window reductions (window_sum/product/max/min) and the
// window scatters (window_scatter_max/min) with window.c's semantics.
//
// Reductions: one thread per output element walks the in-bounds box of its
// window in row-major order (the CPU's order, so float sums and products
// round identically), padding never read (it is the op's identity); sum
// and product accumulate as the CPU: wrapping unsigned for integers, float
// for f16/bf16; max/min propagate NaN.
//
// Scatters, in two passes and deterministic: (1) one thread per window
// selects its max/min position as the CPU does (ties: the last in window
// order); (2) one thread per operand element walks the windows that can
// cover it, in row-major window order, and adds the source values of those
// that selected it to the init value, rounding after every addition as the
// CPU's sequential loop: the same additions in the same order, so the
// result is the CPU's bit for bit (no atomics).
#include "common.cuh"
#include "emily_window.h"

#include <cuda/std/limits>

namespace emc {

// The in-bounds box of the window at output coordinates idx: per axis
// k in [kmin, kmax). Returns false when empty; *off is the strided input
// offset and *flat the row-major input index of the box's first element.
__device__ __forceinline__ bool window_box(const em_cuda_window &w,
                                           const int64_t *idx, int64_t *kmin,
                                           int64_t *kmax, int64_t *off,
                                           int64_t *flat) {
    int64_t o = 0, f = 0, row = 1;
    for (int i = w.ndim - 1; i >= 0; i--) {
        const int64_t base = idx[i] * w.strides[i] - w.low[i];
        const int64_t d = w.dil[i], dim = w.in_shape[i];
        int64_t lo = base >= 0 ? 0 : (-base + d - 1) / d;
        int64_t last = dim - 1 - base;
        int64_t hi = last < 0 ? 0 : last / d + 1;
        if (hi > w.window[i])
            hi = w.window[i];
        if (lo >= hi)
            return false;
        kmin[i] = lo;
        kmax[i] = hi;
        o += (base + lo * d) * w.in_strides[i];
        f += (base + lo * d) * row;
        row *= dim;
    }
    *off = o;
    *flat = f;
    return true;
}

__device__ __forceinline__ void unravel(int64_t n, const int64_t *shape,
                                        int ndim, int64_t *idx) {
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = n % shape[i];
        n /= shape[i];
    }
}

// Visit the box row-major: f(strided offset, row-major flat index) per
// element, the last axis innermost.
template <class F>
__device__ __forceinline__ void walk_box(const em_cuda_window &w,
                                         const int64_t *kmin,
                                         const int64_t *kmax, int64_t off,
                                         int64_t flat, F &&f) {
    const int n = w.ndim;
    int64_t rowstr[EM_CUDA_MAX_NDIM], k[EM_CUDA_MAX_NDIM];
    int64_t row = 1;
    for (int i = n - 1; i >= 0; i--) {
        rowstr[i] = row;
        row *= w.in_shape[i];
        k[i] = kmin[i];
    }
    const int64_t cnt = kmax[n - 1] - kmin[n - 1];
    const int64_t step = w.dil[n - 1] * w.in_strides[n - 1];
    const int64_t fstep = w.dil[n - 1] * rowstr[n - 1];
    for (;;) {
        for (int64_t t = 0; t < cnt; t++)
            f(off + t * step, flat + t * fstep);
        int ax = n - 2;
        for (; ax >= 0; ax--) {
            const int64_t d = w.dil[ax];
            k[ax]++;
            off += d * w.in_strides[ax];
            flat += d * rowstr[ax];
            if (k[ax] < kmax[ax])
                break;
            const int64_t span = (kmax[ax] - kmin[ax]) * d;
            off -= span * w.in_strides[ax];
            flat -= span * rowstr[ax];
            k[ax] = kmin[ax];
        }
        if (ax < 0)
            return;
    }
}

// ---- reductions -------------------------------------------------------

template <int D, int OP> __global__ void window_kernel(em_cuda_window w) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    constexpr bool fold = OP == EM_WINDOW_SUM || OP == EM_WINDOW_PRODUCT;
    using A = std::conditional_t<fold, work_t<D>, C>;
    const S *in = (const S *)w.in;
    S *out = (S *)w.out;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < w.n;
         o += step) {
        int64_t idx[EM_CUDA_MAX_NDIM], kmin[EM_CUDA_MAX_NDIM],
            kmax[EM_CUDA_MAX_NDIM], off, flat;
        unravel(o, w.out_shape, w.ndim, idx);
        A acc;
        if constexpr (OP == EM_WINDOW_SUM)
            acc = A(0);
        else if constexpr (OP == EM_WINDOW_PRODUCT)
            acc = A(1);
        else if constexpr (klass_of(D) == K_FLT)
            acc = OP == EM_WINDOW_MAX ? -INFINITY : INFINITY;
        else
            acc = OP == EM_WINDOW_MAX ? cuda::std::numeric_limits<C>::lowest()
                                      : cuda::std::numeric_limits<C>::max();
        if (window_box(w, idx, kmin, kmax, &off, &flat))
            walk_box(w, kmin, kmax, off, flat, [&](int64_t p, int64_t) {
                A x = (A)DT<D>::load(in[p]);
                if constexpr (OP == EM_WINDOW_SUM)
                    acc = acc + x;
                else if constexpr (OP == EM_WINDOW_PRODUCT)
                    acc = acc * x;
                else if constexpr (OP == EM_WINDOW_MAX)
                    acc = (x > acc || x != x) ? x : acc;
                else
                    acc = (x < acc || x != x) ? x : acc;
            });
        out[o] = DT<D>::store((C)acc);
    }
}

int launch_window(Device *d, const em_cuda_window *w) {
    if (w->n == 0)
        return 0;
    return with_dtype(w->dtype, [&]<int D>() -> int {
        auto go = [&]<int OP>() -> int {
            window_kernel<D, OP><<<grid_for(d, w->n), 256, 0, d->stream>>>(*w);
            EMC_LAUNCHED("window reduce kernel");
            return 0;
        };
        switch (w->op) {
        case EM_WINDOW_SUM:
            return go.template operator()<EM_WINDOW_SUM>();
        case EM_WINDOW_PRODUCT:
            return go.template operator()<EM_WINDOW_PRODUCT>();
        default:
            if constexpr (klass_of(D) == K_CPX) {
                return fail(EM_ERR_ARGUMENT,
                            "window max/min: complex dtype %d", D);
            } else {
                if (w->op == EM_WINDOW_MAX)
                    return go.template operator()<EM_WINDOW_MAX>();
                if (w->op == EM_WINDOW_MIN)
                    return go.template operator()<EM_WINDOW_MIN>();
                return fail(EM_ERR_ARGUMENT, "window_reduce: op %d", w->op);
            }
        }
    });
}

// ---- scatters -----------------------------------------------------------

// Pass 1: sel[o] = the row-major operand index window o selects, or -1.
template <int D, bool MAX>
__global__ void select_kernel(em_cuda_window w, int64_t *sel) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    const S *in = (const S *)w.in;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < w.n;
         o += step) {
        int64_t idx[EM_CUDA_MAX_NDIM], kmin[EM_CUDA_MAX_NDIM],
            kmax[EM_CUDA_MAX_NDIM], off, flat, pick = -1;
        unravel(o, w.out_shape, w.ndim, idx);
        C cur = C(0);
        if (window_box(w, idx, kmin, kmax, &off, &flat))
            walk_box(w, kmin, kmax, off, flat, [&](int64_t p, int64_t f) {
                C x = DT<D>::load(in[p]);
                if (pick < 0 || (MAX ? x >= cur : x <= cur)) {
                    cur = x;
                    pick = f;
                }
            });
        sel[o] = pick;
    }
}

__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Pass 2: out[e] = init + the source values of the windows that selected
// operand element e, in row-major window order, rounded per addition.
template <int D>
__global__ void scatter_add_kernel(em_cuda_window w, int64_t nout,
                                   const int64_t *sel, const void *source,
                                   const void *init, void *outp) {
    using S = typename DT<D>::S;
    using C = typename DT<D>::C;
    using A = work_t<D>;
    const S *src = (const S *)source;
    S *out = (S *)outp;
    const S first = *(const S *)init;
    const int n = w.ndim;
    int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < nout;
         e += step) {
        int64_t x[EM_CUDA_MAX_NDIM], olo[EM_CUDA_MAX_NDIM],
            ohi[EM_CUDA_MAX_NDIM], o[EM_CUDA_MAX_NDIM];
        unravel(e, w.in_shape, n, x);
        S acc = first;
        bool any = w.n > 0;
        // Windows o with o * s - low <= x <= o * s - low + (window-1) * dil.
        for (int i = 0; i < n && any; i++) {
            const int64_t top = x[i] + w.low[i];
            int64_t lo = -floor_div(-(top - (w.window[i] - 1) * w.dil[i]),
                                    w.strides[i]);
            int64_t hi = floor_div(top, w.strides[i]);
            if (lo < 0)
                lo = 0;
            if (hi > w.out_shape[i] - 1)
                hi = w.out_shape[i] - 1;
            olo[i] = lo;
            ohi[i] = hi;
            o[i] = lo;
            any = lo <= hi;
        }
        while (any) {
            int64_t wf = 0;
            for (int i = 0; i < n; i++)
                wf = wf * w.out_shape[i] + o[i];
            if (sel[wf] == e) {
                A sum = (A)DT<D>::load(acc) + (A)DT<D>::load(src[wf]);
                acc = DT<D>::store((C)sum);
            }
            int i = n - 1;
            for (; i >= 0; i--) {
                if (++o[i] <= ohi[i])
                    break;
                o[i] = olo[i];
            }
            any = i >= 0;
        }
        out[e] = acc;
    }
}

int launch_window_scatter(Device *d, const em_cuda_window_scatter *s) {
    const em_cuda_window *w = &s->win;
    if (w->n > 0) {
        int rc = with_dtype(w->dtype, [&]<int D>() -> int {
            if constexpr (klass_of(D) == K_CPX) {
                return fail(EM_ERR_ARGUMENT,
                            "window_scatter: complex operand dtype %d", D);
            } else {
                unsigned g = grid_for(d, w->n);
                if (w->op == 0)
                    select_kernel<D, true><<<g, 256, 0, d->stream>>>(*w, s->sel);
                else
                    select_kernel<D, false>
                        <<<g, 256, 0, d->stream>>>(*w, s->sel);
                EMC_LAUNCHED("window select kernel");
                return 0;
            }
        });
        if (rc)
            return rc;
    }
    if (s->nout == 0)
        return 0;
    return with_dtype(s->src_dtype, [&]<int D>() -> int {
        scatter_add_kernel<D><<<grid_for(d, s->nout), 256, 0, d->stream>>>(
            *w, s->nout, s->sel, s->source, s->init, s->out);
        EMC_LAUNCHED("window scatter-add kernel");
        return 0;
    });
}

} // namespace emc
