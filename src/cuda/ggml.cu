// ggml.cu — ggml's block formats on the GPU (emily_ggml.h): dequantization
// and x @ W^T read straight from the raw blocks.
//
// One device function decodes weight j of a block of each format with the
// CPU's f32 operations in the CPU's order, written with round-to-nearest
// intrinsics (__fmul_rn, __fadd_rn) so that nvcc cannot contract them into
// FMAs: dequantization is bit-exact with the CPU and with ggml.
//
// Matrix products: up to QMV_MAX_M (16) rows of x (decoding) in
// ggml_matvec.cu's kernels, which stream the blocks. More rows: tiles of W decoded
// to f32 in stream-ordered scratch, multiplied by cuBLAS (gemm.cu) as
// out^T (rows, m) = W_tile (rows, k) @ x^T so that each tile's results are
// contiguous, then transposed into out in x's dtype.
#include "qmv.cuh"

#include "emily_ggml.h"

#include <cstring>

namespace emc {

namespace {

__device__ __forceinline__ float half_at(const uint8_t *p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

__device__ __forceinline__ uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

// The 6-bit scale and min of sub-block s of a q4_k/q5_k block (12 bytes).
__device__ __forceinline__ void k_scale_min(const uint8_t *sc, int s, int &scale,
                                            int &min) {
    if (s < 4) {
        scale = sc[s] & 63;
        min = sc[s + 4] & 63;
    } else {
        scale = (sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4);
        min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
}

// Weight i of 32-weight group g of block b of type T (weight 32 g + i;
// layouts: include/emily_ggml.h). Everything but the quant depends on g
// alone, so a loop over i unrolled by the caller shares the scales.
template <int T>
__device__ __forceinline__ float weight(const uint8_t *b, int g, int i) {
    if constexpr (T == EM_GGML_Q4_0 || T == EM_GGML_Q4_1 || T == EM_GGML_Q5_0 ||
                  T == EM_GGML_Q5_1) {
        constexpr bool has_min = T == EM_GGML_Q4_1 || T == EM_GGML_Q5_1;
        constexpr bool five = T == EM_GGML_Q5_0 || T == EM_GGML_Q5_1;
        constexpr int qs_at = 2 + (has_min ? 2 : 0) + (five ? 4 : 0);
        const float d = half_at(b);
        const int byte = b[qs_at + (i & 15)];
        int q = i < 16 ? (byte & 15) : (byte >> 4);
        if constexpr (five)
            q |= (int)((u32_at(b + qs_at - 4) >> i) & 1u) << 4;
        if constexpr (has_min)
            return __fadd_rn(__fmul_rn(d, (float)q), half_at(b + 2));
        else
            return __fmul_rn(d, (float)(q - (five ? 16 : 8)));
    } else if constexpr (T == EM_GGML_Q8_0) {
        return __fmul_rn(half_at(b), (float)(int8_t)b[2 + i]);
    } else if constexpr (T == EM_GGML_Q4_K || T == EM_GGML_Q5_K) {
        constexpr int qs_at = T == EM_GGML_Q4_K ? 16 : 48;
        const int byte = b[qs_at + 32 * (g / 2) + i];
        int q = (g & 1) ? (byte >> 4) : (byte & 15);
        if constexpr (T == EM_GGML_Q5_K)
            q |= ((b[16 + i] >> g) & 1) << 4;
        int sc, mn;
        k_scale_min(b + 4, g, sc, mn);
        const float d1 = __fmul_rn(half_at(b), (float)sc);
        const float o1 = __fmul_rn(half_at(b + 2), (float)mn);
        return __fsub_rn(__fmul_rn(d1, (float)q), o1);
    } else { // q6_k: group g = 4 h + t, quarter t of half h
        const int h = g / 4, t = g % 4;
        const int byte = b[64 * h + i + 32 * (t & 1)];
        const int low = t < 2 ? (byte & 15) : (byte >> 4);
        const int high = (b[128 + 32 * h + i] >> (2 * t)) & 3;
        const int q = (low | (high << 4)) - 32;
        const int sc = (int8_t)b[192 + 8 * h + i / 16 + 2 * t];
        return __fmul_rn(__fmul_rn(half_at(b + 208), (float)sc), (float)q);
    }
}

template <int T> struct Block;
#define EMC_GGML_BLOCK(T_, BE, BB)                                             \
    template <> struct Block<T_> {                                             \
        static constexpr int elems = BE, bytes = BB;                           \
    };
EMC_GGML_BLOCK(EM_GGML_Q4_0, 32, 18)
EMC_GGML_BLOCK(EM_GGML_Q4_1, 32, 20)
EMC_GGML_BLOCK(EM_GGML_Q5_0, 32, 22)
EMC_GGML_BLOCK(EM_GGML_Q5_1, 32, 24)
EMC_GGML_BLOCK(EM_GGML_Q8_0, 32, 34)
EMC_GGML_BLOCK(EM_GGML_Q4_K, 256, 144)
EMC_GGML_BLOCK(EM_GGML_Q5_K, 256, 176)
EMC_GGML_BLOCK(EM_GGML_Q6_K, 256, 210)
#undef EMC_GGML_BLOCK

// out (rows, k) in dtype D: a thread per weight (coalesced writes).
template <int T, int D>
__global__ void dequantize_kernel(const uint8_t *__restrict__ raw, int64_t n,
                                  int64_t k, typename DT<D>::S *__restrict__ out) {
    constexpr int BE = Block<T>::elems, BB = Block<T>::bytes;
    const int64_t row_bytes = k / BE * BB;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / k, c = e % k;
        const int j = (int)(c % BE);
        const float w = weight<T>(raw + r * row_bytes + c / BE * BB, j / 32, j % 32);
        out[e] = DT<D>::store((typename DT<D>::C)w);
    }
}

// x (m, k) of dtype D -> f32.
template <int D>
__global__ void widen_kernel(const typename DT<D>::S *__restrict__ x, float *out,
                             int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        out[i] = (float)DT<D>::load(x[i]);
}

// out (m, rows) in D from out^T (rows, m) in f32.
template <int D>
__global__ void transpose_kernel(const float *__restrict__ t,
                                 typename DT<D>::S *__restrict__ out, int64_t rows,
                                 int64_t m) {
    const int64_t n = rows * m;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = e / rows, r = e % rows;
        out[e] = DT<D>::store((typename DT<D>::C)t[r * m + i]);
    }
}

// f(integral_constant<T>) for the job's block type.
template <class F> int with_ggml_type(int type, F &&f) {
    switch (type) {
#define EMC_CASE(T_)                                                           \
    case T_:                                                                   \
        return f.template operator()<T_>();
        EMC_CASE(EM_GGML_Q4_0)
        EMC_CASE(EM_GGML_Q4_1)
        EMC_CASE(EM_GGML_Q5_0)
        EMC_CASE(EM_GGML_Q5_1)
        EMC_CASE(EM_GGML_Q8_0)
        EMC_CASE(EM_GGML_Q4_K)
        EMC_CASE(EM_GGML_Q5_K)
        EMC_CASE(EM_GGML_Q6_K)
#undef EMC_CASE
    default:
        return fail(EM_ERR_ARGUMENT, "ggml: type %d is not a block format", type);
    }
}

// f.template operator()<D>() for the float dtypes the ops take.
template <class F> int with_float_dtype(int dtype, bool f64, F &&f) {
    switch (dtype) {
    case EM_F32:
        return f.template operator()<EM_F32>();
    case EM_F16:
        return f.template operator()<EM_F16>();
    case EM_BF16:
        return f.template operator()<EM_BF16>();
    case EM_F64:
        if (f64)
            return f.template operator()<EM_F64>();
        [[fallthrough]];
    default:
        return fail(EM_ERR_ARGUMENT, "ggml: dtype %d has no GPU kernel", dtype);
    }
}

// Weight rows per decoded f32 tile of the GEMM path (at most 256 MiB).
constexpr int64_t TILE_BYTES = (int64_t)256 << 20;

} // namespace

int ggml_dequantize(int dev, const em_cuda_ggml *job) {
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    const int64_t n = job->rows * job->k;
    if (n == 0)
        return 0;
    return with_ggml_type(job->type, [&]<int T>() -> int {
        return with_float_dtype(job->dtype, true, [&]<int D>() -> int {
            dequantize_kernel<T, D><<<grid_for(d, n), 256, 0, d->stream>>>(
                (const uint8_t *)job->raw, n, job->k,
                (typename DT<D>::S *)job->out);
            EMC_LAUNCHED("ggml dequantize kernel");
            return 0;
        });
    });
}

int ggml_matmul(int dev, const em_cuda_ggml *job) {
    Device *d = device(dev);
    if (!d)
        return EM_ERR_RUNTIME;
    const int64_t rows = job->rows, k = job->k, m = job->m;
    if (rows == 0 || m == 0)
        return 0;
    const size_t es = job->dtype == EM_F32 ? 4 : 2;
    if (k == 0) {
        EMC_TRY(cudaMemsetAsync(job->out, 0, (size_t)(rows * m) * es, d->stream));
        return 0;
    }
    return with_ggml_type(job->type, [&]<int T>() -> int {
        return with_float_dtype(job->dtype, false, [&]<int D>() -> int {
            using S = typename DT<D>::S;
            if (m <= QMV_MAX_M)
                return ggml_matvec(d, job);
            // x as f32, W in f32 tiles, out^T (rows, m) in f32.
            int64_t tile = TILE_BYTES / (k * 4);
            if (tile < 1)
                tile = 1;
            if (tile > rows)
                tile = rows;
            Scratch xs(d->stream), ws(d->stream), ts(d->stream);
            const float *x32 = (const float *)job->x;
            if (D != EM_F32) {
                EMC_TRY(xs.alloc((size_t)(m * k) * 4));
                widen_kernel<D><<<grid_for(d, m * k), 256, 0, d->stream>>>(
                    (const S *)job->x, (float *)xs.p, m * k);
                EMC_LAUNCHED("ggml widen kernel");
                x32 = (const float *)xs.p;
            }
            EMC_TRY(ws.alloc((size_t)(tile * k) * 4));
            EMC_TRY(ts.alloc((size_t)(rows * m) * 4));
            const int64_t row_bytes = k / Block<T>::elems * Block<T>::bytes;
            for (int64_t r0 = 0; r0 < rows; r0 += tile) {
                const int64_t tr = rows - r0 < tile ? rows - r0 : tile;
                dequantize_kernel<T, EM_F32>
                    <<<grid_for(d, tr * k), 256, 0, d->stream>>>(
                        (const uint8_t *)job->raw + r0 * row_bytes, tr * k, k,
                        (float *)ws.p);
                EMC_LAUNCHED("ggml dequantize kernel");
                em_cuda_gemm g;
                memset(&g, 0, sizeof g);
                g.dtype = EM_F32;
                g.batch = 1;
                g.m = tr;
                g.n = m;
                g.k = k;
                g.a = ws.p;
                g.lda = k;
                g.b = x32;
                g.trans_b = 1;
                g.ldb = k;
                g.c = (float *)ts.p + r0 * m;
                int rc = launch_gemm(dev, d, &g);
                if (rc)
                    return rc;
            }
            transpose_kernel<D><<<grid_for(d, rows * m), 256, 0, d->stream>>>(
                (const float *)ts.p, (S *)job->out, rows, m);
            EMC_LAUNCHED("ggml transpose kernel");
            return 0;
        });
    });
}

} // namespace emc
