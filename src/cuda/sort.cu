// sort.cu — sort and argsort along one axis with the CPU's order (sort.c):
// each element becomes an unsigned key of its width whose order is Nx's
// (unsigned as is, signed with the sign bit flipped, floats sign-folded
// with -0 as +0 and every NaN the all-ones key; descending inverts every
// key, which keeps ties in their original order). The rows are then sorted
// as segments by CUB's stable segmented sort of (key, index) pairs, and the
// values (moved by bytes: NaN payloads and -0 kept) or the indices are
// written out. Scratch memory is stream-ordered (cudaMallocAsync on the
// device's stream), so it needs no synchronisation.
#include "common.cuh"

#include <cub/device/device_segmented_sort.cuh>

namespace emc {

template <int D> using key_t = std::make_unsigned_t<
    std::conditional_t<sizeof(typename DT<D>::S) == 1, int8_t,
    std::conditional_t<sizeof(typename DT<D>::S) == 2, int16_t,
    std::conditional_t<sizeof(typename DT<D>::S) == 4, int32_t, int64_t>>>>;

template <int D> constexpr uint64_t inf_bits() {
    return D == EM_F16    ? 0x7c00u
           : D == EM_BF16 ? 0x7f80u
           : D == EM_F32  ? 0x7f800000u
           : D == EM_F64  ? 0x7ff0000000000000ull
                          : 0;
}

template <int D>
__device__ __forceinline__ key_t<D> key_of(typename DT<D>::S v, bool desc) {
    using K = key_t<D>;
    K raw;
    memcpy(&raw, &v, sizeof raw);
    constexpr K sign = (K)((K)1 << (sizeof(K) * 8 - 1));
    constexpr K mask = (K)~(K)0;
    K key;
    if constexpr (klass_of(D) == K_FLT) {
        K mag = (K)(raw & (K)(sign - 1));
        key = mag > (K)inf_bits<D>() ? mask
              : mag == 0             ? sign
              : (raw & sign)         ? (K)~raw
                                     : (K)(raw | sign);
    } else if constexpr (std::is_signed_v<typename DT<D>::S>) {
        key = (K)(raw ^ sign);
    } else {
        key = raw;
    }
    return desc ? (K)~key : key;
}

// Offsets of row r in the input and the output.
__device__ __forceinline__ void row_offsets(const em_cuda_sort &s, int64_t r,
                                            int64_t *in, int64_t *out) {
    int64_t i = 0, o = 0;
    for (int d = s.nouter - 1; d >= 0; d--) {
        int64_t c = r % s.oshape[d];
        r /= s.oshape[d];
        i += c * s.istride[d];
        o += c * s.ostride[d];
    }
    *in = i;
    *out = o;
}

template <int D>
__global__ void sort_keys_kernel(em_cuda_sort s, key_t<D> *keys,
                                 int64_t *vals, int64_t *offsets) {
    using S = typename DT<D>::S;
    const S *in = (const S *)s.in;
    int64_t total = s.n * s.rows, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += step) {
        int64_t r = t / s.n, i = t % s.n, ioff, ooff;
        row_offsets(s, r, &ioff, &ooff);
        keys[t] = key_of<D>(in[ioff + i * s.in_axis_stride], s.descending);
        vals[t] = i;
        if (i == 0)
            offsets[r] = t;
        if (t == total - 1)
            offsets[s.rows] = total;
    }
}

// out[row, k] = the value (by bytes) or the index at sorted position k.
template <class O, bool INDICES>
__global__ void sort_write_kernel(em_cuda_sort s, const int64_t *perm) {
    const O *in = (const O *)s.in;
    O *out = (O *)s.out;
    int64_t total = s.n * s.rows, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += step) {
        int64_t r = t / s.n, k = t % s.n, ioff, ooff;
        row_offsets(s, r, &ioff, &ooff);
        int64_t i = perm[t];
        if constexpr (INDICES)
            out[ooff + k * s.out_axis_stride] = (O)i;
        else
            out[ooff + k * s.out_axis_stride] = in[ioff + i * s.in_axis_stride];
    }
}

int launch_sort(Device *d, const em_cuda_sort *s) {
    return with_dtype(s->dtype, [&]<int D>() -> int {
        if constexpr (klass_of(D) == K_CPX) {
            return fail(EM_ERR_ARGUMENT, "sort: complex dtype %d", D);
        } else {
            using K = key_t<D>;
            int64_t total = s->n * s->rows;
            Scratch keys(d->stream), keys2(d->stream), vals(d->stream),
                vals2(d->stream), offsets(d->stream), temp(d->stream);
            EMC_TRY(keys.alloc((size_t)total * sizeof(K)));
            EMC_TRY(keys2.alloc((size_t)total * sizeof(K)));
            EMC_TRY(vals.alloc((size_t)total * sizeof(int64_t)));
            EMC_TRY(vals2.alloc((size_t)total * sizeof(int64_t)));
            EMC_TRY(offsets.alloc((size_t)(s->rows + 1) * sizeof(int64_t)));
            unsigned grid = grid_for(d, total);
            sort_keys_kernel<D><<<grid, 256, 0, d->stream>>>(
                *s, (K *)keys.p, (int64_t *)vals.p, (int64_t *)offsets.p);
            EMC_LAUNCHED("sort keys kernel");
            const int64_t *off = (const int64_t *)offsets.p;
            size_t temp_bytes = 0;
            EMC_TRY(cub::DeviceSegmentedSort::StableSortPairs(
                nullptr, temp_bytes, (const K *)keys.p, (K *)keys2.p,
                (const int64_t *)vals.p, (int64_t *)vals2.p, total, s->rows,
                off, off + 1, d->stream));
            EMC_TRY(temp.alloc(temp_bytes));
            EMC_TRY(cub::DeviceSegmentedSort::StableSortPairs(
                temp.p, temp_bytes, (const K *)keys.p, (K *)keys2.p,
                (const int64_t *)vals.p, (int64_t *)vals2.p, total, s->rows,
                off, off + 1, d->stream));
            const int64_t *perm = (const int64_t *)vals2.p;
            if (s->indices) {
                return with_dtype(s->out_dtype, [&]<int O>() -> int {
                    if constexpr (klass_of(O) != K_INT) {
                        return fail(EM_ERR_ARGUMENT, "argsort: dtype %d", O);
                    } else {
                        sort_write_kernel<typename DT<O>::S, true>
                            <<<grid, 256, 0, d->stream>>>(*s, perm);
                        EMC_LAUNCHED("argsort write kernel");
                        return 0;
                    }
                });
            }
            sort_write_kernel<typename DT<D>::S, false>
                <<<grid, 256, 0, d->stream>>>(*s, perm);
            EMC_LAUNCHED("sort write kernel");
            return 0;
        }
    });
}

} // namespace emc
