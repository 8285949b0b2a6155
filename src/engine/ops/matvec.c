/*
 * matvec.c — matrix-vector products (a few rows of x times a weight
 * matrix) and half-precision widening, vectorised by hand.
 *
 * A decode step multiplies 1-4 rows by each weight matrix: the time is the
 * time to read the weights once, and sgemm on converted copies would read
 * and write them several times. Two kernels read the weights in place:
 *   - rows (x @ W^T, W stored (n, k)): one dot product per weight row, the
 *     x rows in registers beside it;
 *   - cols (x @ W, W stored (k, n)): four weight rows at a time stream
 *     into a block of float accumulators that stays in L1.
 * Both are split into units of output columns spread over the pool.
 *
 * Each kernel is written once, as a macro over a "vector family" (the
 * vector type of the compute type and its operations) and a loader from
 * the stored dtype, and instantiated for AVX-512, AVX2+FMA+F16C and plain
 * C; the instruction set is picked at run time from the CPU
 * (__builtin_cpu_supports), never from the build machine. bf16 widens to
 * float by a 16-bit shift, f16 through the F16C / AVX-512 conversions.
 * The sums are reassociated differently per instruction set (vector
 * lanes, FMA or not), so results agree across CPUs to rounding, not bits.
 *
 * AVX512_BF16 dot products (vdpbf16ps) and AMX tiles are not used here:
 * this kernel is bound by memory bandwidth, where widening costs nothing
 * (see dot.c for the GEMM side).
 */
#include "dot_cpu.h"

#include <stdlib.h>

#if defined(__x86_64__) && !defined(EM_SIMD_BASELINE)
#define MV_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* Unroll the loops over the rows of x (at most EM_MATVEC_MAX_M), so that
 * their accumulators live in registers: GCC at -O2 keeps them in memory. */
#define MV_UNROLL _Pragma("GCC unroll 4")

/* Float accumulators per unit of the cols kernel (its L1 block). */
#define MV_ACC_ELEMS 8192

/* ------------------------------------------------------------------------ */
/* Vector families: VF_V type, VF_W lanes, and the operations              */
/* ------------------------------------------------------------------------ */

/* Plain C, one lane: the baseline and the fallback on other CPUs. */
#define scalar_ps_V float
#define scalar_ps_W 1
#define scalar_ps_ZERO() 0.0f
#define scalar_ps_SET1(x) (x)
#define scalar_ps_LOAD(p) (*(p))
#define scalar_ps_STORE(p, v) (*(p) = (v))
#define scalar_ps_FMA(a, b, c) ((a) * (b) + (c))
#define scalar_ps_ADD(a, b) ((a) + (b))
#define scalar_ps_HSUM(v) (v)
#define scalar_pd_V double
#define scalar_pd_W 1
#define scalar_pd_ZERO() 0.0
#define scalar_pd_SET1(x) (x)
#define scalar_pd_LOAD(p) (*(p))
#define scalar_pd_STORE(p, v) (*(p) = (v))
#define scalar_pd_FMA(a, b, c) ((a) * (b) + (c))
#define scalar_pd_ADD(a, b) ((a) + (b))
#define scalar_pd_HSUM(v) (v)
#define scalar_load_f32(p) (*(p))
#define scalar_load_f64(p) (*(p))
#define scalar_load_bf16(p) em_bf16_to_f32(*(p))
#define scalar_load_f16(p) em_f16_to_f32(*(p))
#define MV_ATTR_scalar

#ifdef MV_X86
#define MV_ATTR_avx2 __attribute__((target("avx2,fma,f16c")))
#define MV_ATTR_avx512                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,"       \
                          "f16c")))

MV_ATTR_avx2 static inline float hsum_avx2_ps(__m256 v) {
    __m128 s =
        _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
MV_ATTR_avx2 static inline double hsum_avx2_pd(__m256d v) {
    __m128d s =
        _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

#define avx2_ps_V __m256
#define avx2_ps_W 8
#define avx2_ps_ZERO() _mm256_setzero_ps()
#define avx2_ps_SET1(x) _mm256_set1_ps(x)
#define avx2_ps_LOAD(p) _mm256_loadu_ps(p)
#define avx2_ps_STORE(p, v) _mm256_storeu_ps(p, v)
#define avx2_ps_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define avx2_ps_ADD(a, b) _mm256_add_ps(a, b)
#define avx2_ps_HSUM(v) hsum_avx2_ps(v)
#define avx2_pd_V __m256d
#define avx2_pd_W 4
#define avx2_pd_ZERO() _mm256_setzero_pd()
#define avx2_pd_SET1(x) _mm256_set1_pd(x)
#define avx2_pd_LOAD(p) _mm256_loadu_pd(p)
#define avx2_pd_STORE(p, v) _mm256_storeu_pd(p, v)
#define avx2_pd_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define avx2_pd_ADD(a, b) _mm256_add_pd(a, b)
#define avx2_pd_HSUM(v) hsum_avx2_pd(v)
#define avx2_load_f32(p) _mm256_loadu_ps(p)
#define avx2_load_f64(p) _mm256_loadu_pd(p)
#define avx2_load_bf16(p)                                                      \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                     \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define avx2_load_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))

#define avx512_ps_V __m512
#define avx512_ps_W 16
#define avx512_ps_ZERO() _mm512_setzero_ps()
#define avx512_ps_SET1(x) _mm512_set1_ps(x)
#define avx512_ps_LOAD(p) _mm512_loadu_ps(p)
#define avx512_ps_STORE(p, v) _mm512_storeu_ps(p, v)
#define avx512_ps_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define avx512_ps_ADD(a, b) _mm512_add_ps(a, b)
#define avx512_ps_HSUM(v) _mm512_reduce_add_ps(v)
#define avx512_pd_V __m512d
#define avx512_pd_W 8
#define avx512_pd_ZERO() _mm512_setzero_pd()
#define avx512_pd_SET1(x) _mm512_set1_pd(x)
#define avx512_pd_LOAD(p) _mm512_loadu_pd(p)
#define avx512_pd_STORE(p, v) _mm512_storeu_pd(p, v)
#define avx512_pd_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define avx512_pd_ADD(a, b) _mm512_add_pd(a, b)
#define avx512_pd_HSUM(v) _mm512_reduce_add_pd(v)
#define avx512_load_f32(p) _mm512_loadu_ps(p)
#define avx512_load_f64(p) _mm512_loadu_pd(p)
#define avx512_load_bf16(p)                                                    \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                     \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define avx512_load_f16(p)                                                     \
    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#endif

/* The vector family of each stored dtype's compute type. */
#define MV_FAMILY_f32 ps
#define MV_FAMILY_bf16 ps
#define MV_FAMILY_f16 ps
#define MV_FAMILY_f64 pd

#define MV_CAT3_(a, b, c) a##_##b##_##c
#define MV_CAT3(a, b, c) MV_CAT3_(a, b, c)
#define MV_CAT_(a, b) a##_##b
#define MV_CAT(a, b) MV_CAT_(a, b)
/* MV_OP(isa, sfx, OP): the operation OP of sfx's vector family on isa. */
#define MV_OP(isa, sfx, OP) MV_CAT3(isa, MV_FAMILY_##sfx, OP)

/* ------------------------------------------------------------------------ */
/* The kernels, once                                                         */
/* ------------------------------------------------------------------------ */

/* x: m rows of k (row stride ldx) in the compute type; out: m rows (row
 * stride ldo) of the dtype, or of the compute type when raw (partial sums
 * of a split K, added up by mv_reduce). */
typedef void (*mv_kernel_fn)(const void *x, int64_t m, int64_t ldx,
                             const void *w, int64_t ldw, int64_t k, void *out,
                             int64_t ldo, int64_t j0, int64_t j1, bool raw);

/*
 * rows: out[r, j] = sum_p x[r, p] * W[j, p] for j in [j0, j1), r < M, the
 * weight row W[j, :] contiguous (stride ldw between rows). Two accumulators
 * per x row hide the FMA latency.
 *
 * cols: the same sums with W[p, j] contiguous along j: four weight rows at a
 * time are folded into acc[r, j - j0] (float or double, in L1), then the
 * block is rounded to the output dtype.
 *
 * Both take M as a constant (1..EM_MATVEC_MAX_M) so that the per-row
 * accumulators unroll into registers.
 */
#define DEFINE_MV_KERNELS(isa, sfx, T, C, NARROW)                              \
    MV_ATTR_##isa static inline                                                \
        __attribute__((always_inline)) void mv_rows_body_##isa##_##sfx(        \
            const int M, const C *x, int64_t ldx, const T *w, int64_t ldw,     \
            int64_t k, void *outp, int64_t ldo, int64_t j0, int64_t j1,        \
            bool raw) {                                                        \
        T *out = outp;                                                         \
        C *raw_out = outp;                                                     \
        enum { W = MV_OP(isa, sfx, W) };                                       \
        for (int64_t j = j0; j < j1; j++) {                                    \
            const T *row = w + j * ldw;                                        \
            MV_OP(isa, sfx, V) acc0[EM_MATVEC_MAX_M], acc1[EM_MATVEC_MAX_M];   \
            MV_UNROLL for (int r = 0; r < M; r++) acc0[r] = acc1[r] =          \
                MV_OP(isa, sfx, ZERO)();                                       \
            int64_t p = 0;                                                     \
            for (; p + 2 * W <= k; p += 2 * W) {                               \
                MV_OP(isa, sfx, V) w0 = MV_CAT(isa, load_##sfx)(row + p);      \
                MV_OP(isa, sfx, V) w1 = MV_CAT(isa, load_##sfx)(row + p + W);  \
                MV_UNROLL for (int r = 0; r < M; r++) {                        \
                    acc0[r] = MV_OP(isa, sfx, FMA)(                            \
                        MV_OP(isa, sfx, LOAD)(x + r * ldx + p), w0, acc0[r]);  \
                    acc1[r] = MV_OP(isa, sfx, FMA)(                            \
                        MV_OP(isa, sfx, LOAD)(x + r * ldx + p + W), w1,        \
                        acc1[r]);                                              \
                }                                                              \
            }                                                                  \
            C sum[EM_MATVEC_MAX_M];                                            \
            MV_UNROLL for (int r = 0; r < M; r++) sum[r] =                     \
                MV_OP(isa, sfx, HSUM)(MV_OP(isa, sfx, ADD)(acc0[r], acc1[r])); \
            for (; p < k; p++) {                                               \
                C wv = scalar_load_##sfx(row + p);                             \
                MV_UNROLL for (int r = 0; r < M; r++) sum[r] +=                \
                    x[r * ldx + p] * wv;                                       \
            }                                                                  \
            MV_UNROLL for (int r = 0; r < M; r++) if (raw)                     \
                raw_out[r * ldo + j] = sum[r];                                 \
            else out[r * ldo + j] = NARROW(sum[r]);                            \
        }                                                                      \
    }                                                                          \
    MV_ATTR_##isa static inline                                                \
        __attribute__((always_inline)) void mv_cols_body_##isa##_##sfx(        \
            const int M, const C *x, int64_t ldx, const T *w, int64_t ldw,     \
            int64_t k, void *outp, int64_t ldo, int64_t j0, int64_t j1,        \
            bool raw) {                                                        \
        T *out = outp;                                                         \
        C *raw_out = outp;                                                     \
        enum { W = MV_OP(isa, sfx, W) };                                       \
        C acc[MV_ACC_ELEMS];                                                   \
        const int64_t nb = j1 - j0; /* <= MV_ACC_ELEMS / M */                  \
        for (int64_t i = 0; i < M * nb; i++)                                   \
            acc[i] = 0;                                                        \
        int64_t p = 0;                                                         \
        for (; p + 4 <= k; p += 4) {                                           \
            const T *w0 = w + p * ldw + j0, *w1 = w0 + ldw;                    \
            const T *w2 = w1 + ldw, *w3 = w2 + ldw;                            \
            MV_OP(isa, sfx, V) xb[EM_MATVEC_MAX_M][4];                         \
            MV_UNROLL for (int r = 0; r < M; r++)                              \
                MV_UNROLL for (int q = 0; q < 4; q++) xb[r][q] =               \
                    MV_OP(isa, sfx, SET1)(x[r * ldx + p + q]);                 \
            int64_t j = 0;                                                     \
            for (; j + W <= nb; j += W) {                                      \
                MV_OP(isa, sfx, V) a0 = MV_CAT(isa, load_##sfx)(w0 + j);       \
                MV_OP(isa, sfx, V) a1 = MV_CAT(isa, load_##sfx)(w1 + j);       \
                MV_OP(isa, sfx, V) a2 = MV_CAT(isa, load_##sfx)(w2 + j);       \
                MV_OP(isa, sfx, V) a3 = MV_CAT(isa, load_##sfx)(w3 + j);       \
                MV_UNROLL for (int r = 0; r < M; r++) {                        \
                    C *ar = acc + r * nb + j;                                  \
                    MV_OP(isa, sfx, V) s = MV_OP(isa, sfx, LOAD)(ar);          \
                    s = MV_OP(isa, sfx, FMA)(xb[r][0], a0, s);                 \
                    s = MV_OP(isa, sfx, FMA)(xb[r][1], a1, s);                 \
                    s = MV_OP(isa, sfx, FMA)(xb[r][2], a2, s);                 \
                    s = MV_OP(isa, sfx, FMA)(xb[r][3], a3, s);                 \
                    MV_OP(isa, sfx, STORE)(ar, s);                             \
                }                                                              \
            }                                                                  \
            for (; j < nb; j++) {                                              \
                C b0 = scalar_load_##sfx(w0 + j),                              \
                  b1 = scalar_load_##sfx(w1 + j);                              \
                C b2 = scalar_load_##sfx(w2 + j),                              \
                  b3 = scalar_load_##sfx(w3 + j);                              \
                MV_UNROLL for (int r = 0; r < M; r++) {                        \
                    const C *xr = x + r * ldx + p;                             \
                    acc[r * nb + j] +=                                         \
                        xr[0] * b0 + xr[1] * b1 + xr[2] * b2 + xr[3] * b3;     \
                }                                                              \
            }                                                                  \
        }                                                                      \
        for (; p < k; p++) {                                                   \
            const T *w0 = w + p * ldw + j0;                                    \
            for (int64_t j = 0; j < nb; j++) {                                 \
                C b0 = scalar_load_##sfx(w0 + j);                              \
                MV_UNROLL for (int r = 0; r < M; r++) acc[r * nb + j] +=       \
                    x[r * ldx + p] * b0;                                       \
            }                                                                  \
        }                                                                      \
        MV_UNROLL for (int r = 0; r < M; r++) for (int64_t j = 0; j < nb;      \
                                                   j++) if (raw)               \
            raw_out[r * ldo + j0 + j] = acc[r * nb + j];                       \
        else out[r * ldo + j0 + j] = NARROW(acc[r * nb + j]);                  \
    }                                                                          \
    MV_ATTR_##isa static void mv_rows_##isa##_##sfx(                           \
        const void *x, int64_t m, int64_t ldx, const void *w, int64_t ldw,     \
        int64_t k, void *out, int64_t ldo, int64_t j0, int64_t j1, bool raw) { \
        switch (m) {                                                           \
        case 1:                                                                \
            mv_rows_body_##isa##_##sfx(1, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        case 2:                                                                \
            mv_rows_body_##isa##_##sfx(2, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        case 3:                                                                \
            mv_rows_body_##isa##_##sfx(3, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        default:                                                               \
            mv_rows_body_##isa##_##sfx(4, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        }                                                                      \
    }                                                                          \
    MV_ATTR_##isa static void mv_cols_##isa##_##sfx(                           \
        const void *x, int64_t m, int64_t ldx, const void *w, int64_t ldw,     \
        int64_t k, void *out, int64_t ldo, int64_t j0, int64_t j1, bool raw) { \
        switch (m) {                                                           \
        case 1:                                                                \
            mv_cols_body_##isa##_##sfx(1, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        case 2:                                                                \
            mv_cols_body_##isa##_##sfx(2, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        case 3:                                                                \
            mv_cols_body_##isa##_##sfx(3, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        default:                                                               \
            mv_cols_body_##isa##_##sfx(4, x, ldx, w, ldw, k, out, ldo, j0, j1, \
                                       raw);                                   \
            break;                                                             \
        }                                                                      \
    }

/* dst[i] = (float)src[i]: the half-precision operands of sgemm. */
#define DEFINE_WIDEN(isa, sfx, T)                                              \
    MV_ATTR_##isa static void widen_##isa##_##sfx(const void *srcp,            \
                                                  float *dst, int64_t n) {     \
        const T *src = srcp;                                                   \
        enum { W = MV_OP(isa, sfx, W) };                                       \
        int64_t i = 0;                                                         \
        for (; i + W <= n; i += W)                                             \
            MV_OP(isa, sfx, STORE)(dst + i, MV_CAT(isa, load_##sfx)(src + i)); \
        for (; i < n; i++)                                                     \
            dst[i] = scalar_load_##sfx(src + i);                               \
    }

#define MV_STORE_ID(x) (x)
#define DEFINE_MV_ISA(isa)                                                     \
    DEFINE_MV_KERNELS(isa, f32, float, float, MV_STORE_ID)                     \
    DEFINE_MV_KERNELS(isa, f64, double, double, MV_STORE_ID)                   \
    DEFINE_MV_KERNELS(isa, bf16, em_bf16_t, float, em_f32_to_bf16)             \
    DEFINE_MV_KERNELS(isa, f16, em_f16_t, float, em_f32_to_f16)                \
    DEFINE_WIDEN(isa, bf16, em_bf16_t)                                         \
    DEFINE_WIDEN(isa, f16, em_f16_t)

DEFINE_MV_ISA(scalar)
#ifdef MV_X86
DEFINE_MV_ISA(avx2)
DEFINE_MV_ISA(avx512)
#endif

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct mv_kernels {
    mv_kernel_fn rows, cols;
    size_t csize; /* bytes of the compute type */
} mv_kernels;

#define MV_TABLE(isa)                                                          \
    {                                                                          \
        [EM_F32] = {mv_rows_##isa##_f32, mv_cols_##isa##_f32, 4},              \
        [EM_F64] = {mv_rows_##isa##_f64, mv_cols_##isa##_f64, 8},              \
        [EM_BF16] = {mv_rows_##isa##_bf16, mv_cols_##isa##_bf16, 4},           \
        [EM_F16] = {mv_rows_##isa##_f16, mv_cols_##isa##_f16, 4},              \
    }
static const mv_kernels mv_scalar[EM_DTYPE_COUNT] = MV_TABLE(scalar);
#ifdef MV_X86
static const mv_kernels mv_avx2[EM_DTYPE_COUNT] = MV_TABLE(avx2);
static const mv_kernels mv_avx512[EM_DTYPE_COUNT] = MV_TABLE(avx512);
#endif

#ifdef MV_X86
enum mv_isa { ISA_SCALAR, ISA_AVX2, ISA_AVX512 };

/* The best instruction set of this CPU (the compiler's cpu model also
 * checks that the OS saves the wider registers). F16C is read from CPUID:
 * clang's __builtin_cpu_supports does not know it (every AVX2 CPU so far
 * has it, but nothing promises that). */
static enum mv_isa mv_isa(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return ISA_AVX512;
    unsigned eax, ebx, ecx = 0, edx;
    bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
        return ISA_AVX2;
    return ISA_SCALAR;
}
#endif

static const mv_kernels *mv_table(void) {
#ifdef MV_X86
    switch (mv_isa()) {
    case ISA_AVX512:
        return mv_avx512;
    case ISA_AVX2:
        return mv_avx2;
    default:
        break;
    }
#endif
    return mv_scalar;
}

bool em__matvec_dtype(em_dtype dtype) {
    return dtype == EM_F32 || dtype == EM_F64 || dtype == EM_BF16 ||
           dtype == EM_F16;
}

void em__widen_half(em_dtype dtype, const void *src, float *dst, int64_t n) {
    void (*fn)(const void *, float *, int64_t) =
        dtype == EM_BF16 ? widen_scalar_bf16 : widen_scalar_f16;
#ifdef MV_X86
    switch (mv_isa()) {
    case ISA_AVX512:
        fn = dtype == EM_BF16 ? widen_avx512_bf16 : widen_avx512_f16;
        break;
    case ISA_AVX2:
        fn = dtype == EM_BF16 ? widen_avx2_bf16 : widen_avx2_f16;
        break;
    default:
        break;
    }
#endif
    fn(src, dst, n);
}

/* ------------------------------------------------------------------------ */
/* Threading                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct mv_task {
    const em_matvec_job *job;
    mv_kernel_fn fn;
    size_t esize, csize;
    int64_t block, nblocks; /* output columns per unit, blocks per batch */
    int64_t kchunk, nsplit; /* weight rows (K) per unit, units along K */
    char *partial; /* nsplit x [nbatch][m][n] sums (compute type), or NULL */
} mv_task;

/* Unit u: K slice u % nsplit of column block (u / nsplit) % nblocks of
 * batch u / (nsplit * nblocks). */
static void mv_run(void *ctx, int64_t begin, int64_t end) {
    const mv_task *t = ctx;
    const em_matvec_job *j = t->job;
    for (int64_t u = begin; u < end; u++) {
        int64_t s = u % t->nsplit, rest = u / t->nsplit;
        int64_t bi = rest / t->nblocks, j0 = (rest % t->nblocks) * t->block;
        int64_t j1 = j0 + t->block < j->n ? j0 + t->block : j->n;
        int64_t p0 = s * t->kchunk;
        int64_t p1 = p0 + t->kchunk < j->k ? p0 + t->kchunk : j->k;
        const char *x =
            (const char *)j->x + (size_t)(bi * j->m * j->k + p0) * t->csize;
        int64_t w_off = j->w_offset[bi] + p0 * (j->w_transposed ? 1 : j->ldw);
        const char *w = j->w + w_off * (int64_t)t->esize;
        size_t slice = (size_t)(bi * j->m * j->n);
        char *out =
            t->partial
                ? t->partial +
                      ((size_t)s * (size_t)(j->nbatch * j->m * j->n) + slice) *
                          t->csize
                : (char *)j->out + slice * t->esize;
        t->fn(x, j->m, j->k, w, j->ldw, p1 - p0, out, j->n, j0, j1,
              t->partial != NULL);
    }
}

/* out[i] = the sum of the K slices' partial sums, in slice order (the
 * result does not depend on which thread ran which slice). */
#define DEFINE_MV_REDUCE(E, sfx, T, C, LOAD, STORE)                            \
    static void mv_reduce_##sfx(const mv_task *t, int64_t begin,               \
                                int64_t end) {                                 \
        const em_matvec_job *j = t->job;                                       \
        const C *part = (const C *)(const void *)t->partial;                   \
        int64_t total = j->nbatch * j->m * j->n;                               \
        T *out = j->out;                                                       \
        for (int64_t i = begin; i < end; i++) {                                \
            C sum = part[i];                                                   \
            for (int64_t s = 1; s < t->nsplit; s++)                            \
                sum += part[s * total + i];                                    \
            out[i] = STORE(sum);                                               \
        }                                                                      \
    }
EM_DTYPES_REALFLOAT(DEFINE_MV_REDUCE)

static void mv_reduce(void *ctx, int64_t begin, int64_t end) {
    const mv_task *t = ctx;
    switch (t->job->dtype) {
    case EM_F16:
        mv_reduce_f16(t, begin, end);
        break;
    case EM_BF16:
        mv_reduce_bf16(t, begin, end);
        break;
    case EM_F32:
        mv_reduce_f32(t, begin, end);
        break;
    default:
        mv_reduce_f64(t, begin, end);
        break;
    }
}

void em__matvec(const em_matvec_job *job) {
    const mv_kernels *kern = &mv_table()[job->dtype];
    mv_task t = {job,
                 job->w_transposed ? kern->rows : kern->cols,
                 em_dtype_size(job->dtype),
                 kern->csize,
                 0,
                 0,
                 job->k,
                 1,
                 NULL};
    int threads = em__num_threads();
    int64_t block;
    if (job->w_transposed) {
        /* rows: each unit reads whole weight rows, contiguous whatever its
         * size; about four units per thread over all batches, so a thread
         * slowed by the rest of the machine is made up for by the others. */
        int64_t per_batch = (4 * threads + job->nbatch - 1) / job->nbatch;
        block = (job->n + per_batch - 1) / per_batch;
        block = (block + 15) & ~(int64_t)15;
    } else {
        /* cols: a unit reads a stripe of every weight row it covers; the
         * widest stripe its accumulators allow, so that the weights stream
         * through memory in long runs. Threads then split K instead. */
        int64_t widest = (MV_ACC_ELEMS / job->m) & ~(int64_t)15;
        int64_t nblocks = (job->n + widest - 1) / widest;
        block = (job->n + nblocks - 1) / nblocks;
        block = (block + 15) & ~(int64_t)15;
        if (block > widest)
            block = widest;
    }
    if (block < 16)
        block = 16;
    t.block = block;
    t.nblocks = (job->n + block - 1) / block;
    /* Too few units for the threads: split K too, into slices of >= 256
     * rows, each summed into its own partial result. */
    int64_t units = job->nbatch * t.nblocks;
    if (threads > 1 && units < 2 * threads && job->k >= 512) {
        int64_t nsplit = (4 * threads + units - 1) / units;
        if (nsplit > job->k / 256)
            nsplit = job->k / 256;
        t.kchunk = (job->k + nsplit - 1) / nsplit;
        t.nsplit = (job->k + t.kchunk - 1) / t.kchunk;
        size_t bytes =
            (size_t)(t.nsplit * job->nbatch * job->m * job->n) * t.csize;
        t.partial = malloc(bytes); /* small: a few output rows per slice */
        if (!t.partial) {          /* no memory for the split: run unsplit */
            t.kchunk = job->k;
            t.nsplit = 1;
        }
    }
    em__parallel_units(units * t.nsplit, block * t.kchunk * job->m, mv_run, &t);
    if (t.partial) {
        em__parallel_for(job->nbatch * job->m * job->n, EM_PARALLEL_GRAIN,
                         mv_reduce, &t);
        free(t.partial);
    }
}
