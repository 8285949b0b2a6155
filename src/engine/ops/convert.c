/*
 * convert.c — value conversion between dtypes (em_as_type, em_scalar_f64,
 * em_scalar_s64) and reinterpretation of bytes (em_bitcast, a view).
 *
 * A conversion runs in two steps through a small block, so that no kernel
 * is needed per (source, destination) pair: the source is widened to one of
 * four wide types (u64 for pred and unsigned ints, s64 for signed ints, f64
 * for real floats, c128 for complex; all exact), and the wide values are
 * converted to the destination by rules written once per destination class.
 */
#include "elementwise.h"
#include "elementwise_internal.h"

/* ------------------------------------------------------------------------ */
/* Wide types                                                                */
/* ------------------------------------------------------------------------ */

enum cvt_wide { CVT_U, CVT_S, CVT_F, CVT_C, CVT_WIDE_COUNT };

static enum cvt_wide cvt_wide_of(em_dtype d) {
    if (em_dtype_is_complex(d))
        return CVT_C;
    if (em_dtype_is_float(d))
        return CVT_F;
    return em_dtype_is_signed(d) ? CVT_S : CVT_U;
}

/* The wide value of a compute value (every branch must compile for every
 * type; only the selected one is evaluated). */
#define CVT_WIDEN(x)                                                           \
    _Generic((x), float                                                        \
             : (double)(x), double                                             \
             : (double)(x), float complex                                      \
             : (double complex)(x), double complex                             \
             : (double complex)(x), int8_t                                     \
             : (int64_t)(x), int16_t                                           \
             : (int64_t)(x), int32_t                                           \
             : (int64_t)(x), int64_t                                           \
             : (int64_t)(x), default                                           \
             : (uint64_t)(x))

/* ------------------------------------------------------------------------ */
/* Rules: wide value -> destination compute value, per destination class    */
/* ------------------------------------------------------------------------ */

/*
 * Integers (and pred): from integers the value wraps (pred: nonzero is 1).
 * From floats it truncates; NaN gives 0, values at or beyond the type's
 * range saturate to its max/min (+-Inf included), written so that no
 * out-of-range float-to-int cast (undefined behaviour) ever runs. The
 * bounds max+1 and min are powers of two, exact in double.
 */
#define CVT_DEFINE_INT(E, sfx, S, C, L, ST)                                    \
    static inline C cvt_##sfx##_from_u(uint64_t v) {                           \
        return E == EM_PRED ? (C)(v != 0) : (C)v;                              \
    }                                                                          \
    static inline C cvt_##sfx##_from_s(int64_t v) {                            \
        return E == EM_PRED ? (C)(v != 0) : (C)(uint64_t)v;                    \
    }                                                                          \
    static inline C cvt_##sfx##_from_f(double v) {                             \
        if (E == EM_PRED)                                                      \
            return (C)(v != 0);                                                \
        const C max =                                                          \
            EM_EW_IS_SIGNED(C)                                                 \
                ? (C)((EM_UNSIGNED_OF(C)) ~(EM_UNSIGNED_OF(C))0 >> 1)          \
                : (C) ~(C)0;                                                   \
        const C min = EM_EW_IS_SIGNED(C) ? (C)(-max - 1) : (C)0;               \
        if (v != v)                                                            \
            return 0;                                                          \
        if (v >= (double)max + 1.0)                                            \
            return max;                                                        \
        if (v < (double)min)                                                   \
            return min;                                                        \
        return (C)v;                                                           \
    }                                                                          \
    static inline C cvt_##sfx##_from_c(double complex v) {                     \
        if (E == EM_PRED)                                                      \
            return (C)(v != 0);                                                \
        return cvt_##sfx##_from_f(creal(v));                                   \
    }

/* Real floats: C conversions (rounding to nearest; too large gives Inf);
 * complex keeps its real part. f16/bf16 round twice (to float, then to
 * half), which can differ from one rounding in rare ties. */
#define CVT_DEFINE_FLT(E, sfx, S, C, L, ST)                                    \
    static inline C cvt_##sfx##_from_u(uint64_t v) { return (C)v; }            \
    static inline C cvt_##sfx##_from_s(int64_t v) { return (C)v; }             \
    static inline C cvt_##sfx##_from_f(double v) { return (C)v; }              \
    static inline C cvt_##sfx##_from_c(double complex v) { return (C)creal(v); }

/* Complex: a real value gets imaginary part 0. */
#define CVT_DEFINE_CPX(E, sfx, S, C, L, ST)                                    \
    static inline C cvt_##sfx##_from_u(uint64_t v) { return (C)v; }            \
    static inline C cvt_##sfx##_from_s(int64_t v) { return (C)v; }             \
    static inline C cvt_##sfx##_from_f(double v) { return (C)v; }              \
    static inline C cvt_##sfx##_from_c(double complex v) { return (C)v; }

EM_DTYPES_INT(CVT_DEFINE_INT)
EM_DTYPES_REALFLOAT(CVT_DEFINE_FLT)
EM_DTYPES_COMPLEX(CVT_DEFINE_CPX)

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

typedef void (*cvt_block_fn)(void *dst, const void *src, int64_t n);

/* Source dtype -> its wide type. */
#define CVT_DEFINE_WIDEN(E, sfx, S, C, L, ST)                                  \
    EM_CLONES static void cvt_widen_##sfx(void *dst, const void *src,          \
                                          int64_t n) {                         \
        __typeof__(CVT_WIDEN((C)0)) *d = dst;                                  \
        const S *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = CVT_WIDEN(L(s[i]));                                         \
    }
EM_DTYPES_ALL(CVT_DEFINE_WIDEN)

/* Wide type -> destination dtype, one function per wide type. */
#define CVT_DEFINE_NARROW_FROM(sfx, S, ST, W, from)                            \
    EM_CLONES static void cvt_narrow_##sfx##_##from(                           \
        void *dst, const void *src, int64_t n) {                               \
        S *d = dst;                                                            \
        const W *s = src;                                                      \
        for (int64_t i = 0; i < n; i++)                                        \
            d[i] = ST(cvt_##sfx##_from_##from(s[i]));                          \
    }
#define CVT_DEFINE_NARROW(E, sfx, S, C, L, ST)                                 \
    CVT_DEFINE_NARROW_FROM(sfx, S, ST, uint64_t, u)                            \
    CVT_DEFINE_NARROW_FROM(sfx, S, ST, int64_t, s)                             \
    CVT_DEFINE_NARROW_FROM(sfx, S, ST, double, f)                              \
    CVT_DEFINE_NARROW_FROM(sfx, S, ST, double complex, c)
EM_DTYPES_ALL(CVT_DEFINE_NARROW)

#define CVT_WIDEN_ENTRY(E, sfx, S, C, L, ST) [E] = cvt_widen_##sfx,
static const cvt_block_fn cvt_widen[EM_DTYPE_COUNT] = {
    EM_DTYPES_ALL(CVT_WIDEN_ENTRY)};

#define CVT_NARROW_ENTRY(E, sfx, S, C, L, ST)                                  \
    [E] = {cvt_narrow_##sfx##_u, cvt_narrow_##sfx##_s, cvt_narrow_##sfx##_f,   \
           cvt_narrow_##sfx##_c},
static const cvt_block_fn cvt_narrow[EM_DTYPE_COUNT][CVT_WIDE_COUNT] = {
    EM_DTYPES_ALL(CVT_NARROW_ENTRY)};

/* op = source dtype * EM_DTYPE_COUNT + destination dtype. */
static void cvt_kernel(int op, void *out, const void *const *in, int64_t n) {
    em_dtype src = (em_dtype)(op / EM_DTYPE_COUNT);
    em_dtype dst = (em_dtype)(op % EM_DTYPE_COUNT);
    cvt_block_fn widen = cvt_widen[src];
    cvt_block_fn narrow = cvt_narrow[dst][cvt_wide_of(src)];
    size_t ssize = em_dtype_size(src), dsize = em_dtype_size(dst);
    _Alignas(64) unsigned char wide[EM_EW_BLOCK * sizeof(double complex)];
    for (int64_t i = 0; i < n; i += EM_EW_BLOCK) {
        int64_t m = n - i < EM_EW_BLOCK ? n - i : EM_EW_BLOCK;
        widen(wide, (const char *)in[0] + (size_t)i * ssize, m);
        narrow((char *)out + (size_t)i * dsize, wide, m);
    }
}

/* ------------------------------------------------------------------------ */
/* as_type                                                                   */
/* ------------------------------------------------------------------------ */

static em_status as_type_eval(em_array *node) {
    int op = (int)node->inputs[0]->dtype * EM_DTYPE_COUNT + (int)node->dtype;
    return em_ew_eval(node, cvt_kernel, op, EM_PARALLEL_GRAIN);
}

static const em_prim as_type_prim = {"as_type", as_type_eval, em__vjp_as_type,
                                     em__gpu_cast_eval};

em_status em_as_type(em_array *a, em_dtype dtype, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "as_type: out is NULL");
    *out = NULL;
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "as_type: input is NULL");
    em_desc da;
    if (!em_dtype_is_valid((int)dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "as_type: invalid target dtype %d for %s", (int)dtype,
                        em__describe(a, &da));
    if (dtype == a->dtype) { /* nothing to convert: the same array */
        em_array_retain(a);
        *out = a;
        return EM_OK;
    }
    return em__node_new(&as_type_prim, dtype, a->shape, a->ndim, &a, 1, out);
}

/* ------------------------------------------------------------------------ */
/* bitcast                                                                   */
/* ------------------------------------------------------------------------ */

static em_status bitcast_eval(em_array *node) {
    em__share_buffer(node, node->inputs[0]);
    return EM_OK;
}

static const em_prim bitcast_prim = {"bitcast", bitcast_eval, NULL,
                                     bitcast_eval};

em_status em_bitcast(em_array *a, em_dtype dtype, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "bitcast: out is NULL");
    *out = NULL;
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "bitcast: input is NULL");
    em_desc da;
    if (!em_dtype_is_valid((int)dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "bitcast: invalid target dtype %d for %s", (int)dtype,
                        em__describe(a, &da));
    if (em_dtype_size(dtype) != em_dtype_size(a->dtype))
        return em__fail(EM_ERR_ARGUMENT,
                        "bitcast: expected a target dtype of %zu-byte "
                        "elements like %s, got %s (%zu bytes)",
                        em_dtype_size(a->dtype), em__describe(a, &da),
                        em_dtype_name(dtype), em_dtype_size(dtype));
    /* pred bytes must hold 0 or 1; other bytes would break pred kernels. */
    if (dtype == EM_PRED && a->dtype != EM_PRED)
        return em__fail(EM_ERR_ARGUMENT,
                        "bitcast: cannot reinterpret %s as pred (pred bytes "
                        "must be 0 or 1; use as_type or not_equal)",
                        em__describe(a, &da));
    if (dtype == a->dtype) {
        em_array_retain(a);
        *out = a;
        return EM_OK;
    }
    em_array *node = NULL;
    em_status st =
        em__node_new(&bitcast_prim, dtype, a->shape, a->ndim, &a, 1, &node);
    if (st != EM_OK)
        return st;
    /* A view of a's buffer: same element size, so a's layout (strides and
     * offset in elements, possibly non-contiguous) carries over as is. */
    memcpy(node->strides, a->strides, sizeof node->strides);
    node->offset = a->offset;
    node->row_contiguous = a->row_contiguous;
    *out = node;
    return EM_OK;
}

/* ------------------------------------------------------------------------ */
/* Scalars                                                                   */
/* ------------------------------------------------------------------------ */

/* An integral double taken modulo 2^64 (for em_scalar_f64's wrapping
 * integer conversion); NaN and +-Inf give 0. */
static uint64_t cvt_wrap_f64(double v) {
    if (!isfinite(v))
        return 0;
    double t = fmod(trunc(v), 18446744073709551616.0); /* 2^64 */
    if (t >= 0)
        return (uint64_t)t;
    if (t >= -9223372036854775808.0) /* -2^63: exact as int64 */
        return (uint64_t)(int64_t)t;
    return (uint64_t)(t + 18446744073709551616.0); /* in (0, 2^63), exact */
}

em_status em_scalar_f64(double value, em_dtype dtype, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "scalar_f64: out is NULL");
    *out = NULL;
    if (!em_dtype_is_valid((int)dtype))
        return em__fail(EM_ERR_ARGUMENT, "scalar_f64: invalid dtype %d",
                        (int)dtype);
    _Alignas(16) unsigned char bytes[16];
    if (em_dtype_is_integer(dtype)) {
        uint64_t w =
            dtype == EM_PRED ? (uint64_t)(value != 0) : cvt_wrap_f64(value);
        cvt_narrow[dtype][CVT_U](bytes, &w, 1);
    } else {
        cvt_narrow[dtype][CVT_F](bytes, &value, 1);
    }
    return em_scalar(bytes, dtype, out);
}

em_status em_scalar_s64(int64_t value, em_dtype dtype, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "scalar_s64: out is NULL");
    *out = NULL;
    if (!em_dtype_is_valid((int)dtype))
        return em__fail(EM_ERR_ARGUMENT, "scalar_s64: invalid dtype %d",
                        (int)dtype);
    _Alignas(16) unsigned char bytes[16];
    cvt_narrow[dtype][CVT_S](bytes, &value, 1);
    return em_scalar(bytes, dtype, out);
}

/* ---- for the fusion pass (elementwise_internal.h) ---------------------- */

bool em__as_type_op_of(const em_array *node, int *op, em_dtype *kernel_dtype) {
    if (node->prim != &as_type_prim)
        return false;
    *op = (int)node->inputs[0]->dtype * EM_DTYPE_COUNT + (int)node->dtype;
    *kernel_dtype = node->inputs[0]->dtype;
    return true;
}

em_ew_kernel em__as_type_kernel(void) { return cvt_kernel; }
