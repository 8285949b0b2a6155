/*
 * unary.c — em_unary: the one-input elementwise ops listed in emily_ops.h.
 *
 * Each op is three expression rules below, one per dtype class it accepts
 * (UN_INT_<op>, UN_FLT_<op>, UN_CPX_<op>, over a compute value `x`); one
 * kernel per dtype switches over the ops and runs the rule in a contiguous
 * loop. em_ew_eval (elementwise.h) handles layout, broadcasting, donation and
 * threads.
 */
#include "elementwise.h"
#include "elementwise_internal.h"

/* ------------------------------------------------------------------------ */
/* Scalar helpers                                                            */
/* ------------------------------------------------------------------------ */

/* Real and complex libm calls picked by the argument's type. */
#define UN_RF(fn, x) _Generic((x), float : fn##f, default : fn)(x)
#define UN_CF(fn, x) _Generic((x), float complex : fn##f, default : fn)(x)

/*
 * exp for float, written so that the kernel loop vectorises (glibc's vector
 * expf is only declared under -ffast-math). exp(x) = 2^n * exp(r) with
 * n = round(x / ln2) and |r| <= ln2/2; exp(r) by its degree-7 Taylor
 * polynomial (truncation error below 1e-8 relative); 2^n is applied as two
 * factors so that subnormal results come out right. Out-of-range inputs are
 * fixed up with integer selects at the end: float selects on the way would
 * make GCC thread constant paths whose folded arithmetic "could trap",
 * which stops if-conversion and so vectorisation. NaN propagates through
 * the arithmetic. Measured over every 37th float: at most 1.22 ulp from the
 * correctly rounded result.
 */
static inline __attribute__((always_inline)) float un_expf(float x) {
    const float round_magic = 12582912.0f; /* 1.5 * 2^23 */
    float z = x * 1.44269504088896341f + round_magic;
    float n = z - round_magic;
    float r = x - n * 0.693145751953125f;  /* ln2, high part (exact) */
    r = r - n * 1.428606765330187045e-06f; /* ln2, low part */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* n sits in the low mantissa bits of z; read it without a float->int
     * conversion (undefined for NaN and huge values). */
    uint32_t zbits, magic_bits;
    memcpy(&zbits, &z, 4);
    memcpy(&magic_bits, &round_magic, 4);
    int32_t ni = (int32_t)(zbits - magic_bits);
    ni = ni < -150 ? -150 : ni;
    ni = ni > 128 ? 128 : ni;
    int32_t half = ni / 2;
    uint32_t b1 = (uint32_t)(half + 127) << 23;
    uint32_t b2 = (uint32_t)(ni - half + 127) << 23;
    float s1, s2, res;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    res = p * s1 * s2;
    /* exp overflows above 88.73 and rounds to 0 below -103.98. */
    uint32_t bits, over = 0u - (uint32_t)(x > 89.0f);
    uint32_t under = 0u - (uint32_t)(x < -104.0f);
    memcpy(&bits, &res, 4);
    bits = (bits & ~(over | under)) | (0x7f800000u & over);
    memcpy(&res, &bits, 4);
    return res;
}

/*
 * tanh for float, vectorisable like un_expf: an odd Taylor polynomial
 * (through x^19) for |x| < 0.625, where 1 - 2/(exp(2|x|) + 1) would lose
 * relative precision to cancellation, and that formula above, with x's
 * sign put back. The two results are blended with integer masks for the
 * same if-conversion reason as above. Measured: at most 1.35 ulp.
 */
static inline __attribute__((always_inline)) float un_tanhf(float x) {
    uint32_t xbits, abits;
    memcpy(&xbits, &x, 4);
    abits = xbits & 0x7fffffffu;
    float ax;
    memcpy(&ax, &abits, 4);
    float x2 = x * x;
    float q = -443861162.0f / 1856156927625.0f;
    q = q * x2 + 6404582.0f / 10854718875.0f;
    q = q * x2 - 929569.0f / 638512875.0f;
    q = q * x2 + 21844.0f / 6081075.0f;
    q = q * x2 - 1382.0f / 155925.0f;
    q = q * x2 + 62.0f / 2835.0f;
    q = q * x2 - 17.0f / 315.0f;
    q = q * x2 + 2.0f / 15.0f;
    q = q * x2 - 1.0f / 3.0f;
    float small = x + x * x2 * q;
    float big = 1.0f - 2.0f / (un_expf(2.0f * ax) + 1.0f);
    uint32_t sbits, bbits, use_small = 0u - (uint32_t)(ax < 0.625f);
    memcpy(&sbits, &small, 4);
    memcpy(&bbits, &big, 4);
    /* tanh is odd: both branches take x's sign (the polynomial would
     * turn -0 into +0). */
    sbits = (sbits & 0x7fffffffu) | (xbits & 0x80000000u);
    bbits |= xbits & 0x80000000u;
    uint32_t rbits = (sbits & use_small) | (bbits & ~use_small);
    float r;
    memcpy(&r, &rbits, 4);
    return r;
}

#define UN_EXP(x) _Generic((x), float : un_expf, default : exp)(x)

/* exp(z) - 1 without cancellation for small z:
 * re = expm1(a) cos b - 2 sin^2(b/2), im = exp(a) sin b. */
#define UN_DEFINE_CEXPM1(sfx, CT, RT, F)                                       \
    static inline CT un_cexpm1_##sfx(CT z) {                                   \
        RT a = creal##F(z), b = cimag##F(z);                                   \
        RT h = sin##F(b / 2);                                                  \
        CT r;                                                                  \
        __real__ r = expm1##F(a) * cos##F(b) - 2 * h * h;                      \
        __imag__ r = exp##F(a) * sin##F(b);                                    \
        return r;                                                              \
    }
UN_DEFINE_CEXPM1(cf, float complex, float, f)
UN_DEFINE_CEXPM1(cd, double complex, double, )
#define UN_CEXPM1(x)                                                           \
    _Generic((x), float complex : un_cexpm1_cf, default : un_cexpm1_cd)(x)

/* Principal cube root of a complex: cbrt|z| at a third of the argument
 * (the root on the positive real axis for positive reals). A part whose
 * trigonometric factor is exactly 0 is that (signed) 0, not r·0: an
 * infinite modulus on the real axis (Inf+3i, arg 0) gives Inf+0i, as C99's
 * csqrt does, not Inf·0 = NaN. A NaN part still gives NaN+NaN·i. */
#define UN_DEFINE_CCBRT(sfx, CT, RT, F)                                        \
    static inline CT un_ccbrt_##sfx(CT z) {                                    \
        RT r = cbrt##F(cabs##F(z)), t = carg##F(z) / 3;                        \
        RT c = cos##F(t), s = sin##F(t);                                       \
        CT out;                                                                \
        __real__ out = c == 0 ? c : r * c;                                     \
        __imag__ out = s == 0 ? s : r * s;                                     \
        return out;                                                            \
    }
UN_DEFINE_CCBRT(cf, float complex, float, f)
UN_DEFINE_CCBRT(cd, double complex, double, )
#define UN_CCBRT(x)                                                            \
    _Generic((x), float complex : un_ccbrt_cf, default : un_ccbrt_cd)(x)

/*
 * Inverse error function, in double (float dtypes round the result). A
 * closed-form first guess good to a few parts in 1e3 (from inverting
 * erf(x)^2 ~ 1 - exp(-x^2 (4/pi + k x^2) / (1 + k x^2)) with k = 0.147),
 * then three Halley steps on f(x) = erf(x) - |y|, each roughly tripling the
 * correct digits. Above |y| = 0.5 f is evaluated as (1 - |y|) - erfc(x):
 * 1 - |y| is exact there, so the tail keeps its relative precision.
 * erf_inv(+-1) = +-Inf, |y| > 1 and NaN give NaN, and +-0 is kept.
 */
static double un_erfinv(double y) {
    if (!(y > -1.0 && y < 1.0)) {
        if (y == 1.0)
            return INFINITY;
        if (y == -1.0)
            return -INFINITY;
        return NAN;
    }
    if (y == 0.0)
        return y;
    const double k = 0.147, two_over_sqrt_pi = 1.1283791670955126;
    double a = fabs(y);
    double l = log((1.0 - a) * (1.0 + a));
    double t = 2.0 / (3.14159265358979323846 * k) + l / 2.0;
    double x = sqrt(sqrt(t * t - l / k) - t);
    for (int i = 0; i < 3; i++) {
        double f = a <= 0.5 ? erf(x) - a : (1.0 - a) - erfc(x);
        double d = two_over_sqrt_pi * exp(-x * x);
        x -= f / (d + x * f);
    }
    return copysign(x, y);
}

/* Leading zeros of an integer in its width (pred: a 1-bit integer). */
static inline int un_clz64(uint64_t u, int bits) {
    return u == 0 ? bits : __builtin_clzll(u) - (64 - bits);
}

#define UN_T(x) __typeof__(x)

/* ------------------------------------------------------------------------ */
/* The rules: UN_<class>_<op>(x). Same-dtype ops return x's type exactly;   */
/* pred results are _Bool; abs, real and imag of a complex return its real */
/* type.                                                                     */
/* ------------------------------------------------------------------------ */

/* Integers wrap (through the unsigned type: signed overflow is UB). */
#define UN_INT_negate(x) ((UN_T(x))(0u - (EM_EW_WIDE_U(UN_T(x)))(x)))
#define UN_FLT_negate(x) (-(x))
#define UN_CPX_negate(x) (-(x))

/* abs of the most negative integer wraps to itself. */
#define UN_INT_abs(x) ((UN_T(x))(EM_EW_IS_NEG(x) ? UN_INT_negate(x) : (x)))
#define UN_FLT_abs(x) UN_RF(fabs, x)
#define UN_CPX_abs(x) UN_CF(cabs, x)

/* Floats keep +-0 and NaN; complex gives z/|z| (0 for 0). */
#define UN_INT_sign(x) ((UN_T(x))(EM_EW_IS_NEG(x) ? -1 : (x) != 0))
#define UN_FLT_sign(x) ((x) > 0 ? (UN_T(x))1 : (x) < 0 ? (UN_T(x)) - 1 : (x))
#define UN_CPX_sign(x) ((x) == 0 ? (x) : (x) / UN_CF(cabs, x))

/* Rounding: the identity on integers; round is half away from zero. */
#define UN_INT_floor(x) (x)
#define UN_FLT_floor(x) UN_RF(floor, x)
#define UN_INT_ceil(x) (x)
#define UN_FLT_ceil(x) UN_RF(ceil, x)
#define UN_INT_round(x) (x)
#define UN_FLT_round(x) UN_RF(round, x)

#define UN_FLT_sqrt(x) UN_RF(sqrt, x)
#define UN_CPX_sqrt(x) UN_CF(csqrt, x)
#define UN_FLT_rsqrt(x) ((UN_T(x))1 / UN_RF(sqrt, x))
#define UN_CPX_rsqrt(x) ((UN_T(x))1 / UN_CF(csqrt, x))
#define UN_FLT_exp(x) UN_EXP(x)
#define UN_CPX_exp(x) UN_CF(cexp, x)
#define UN_FLT_expm1(x) UN_RF(expm1, x)
#define UN_CPX_expm1(x) UN_CEXPM1(x)
#define UN_FLT_log(x) UN_RF(log, x)
#define UN_CPX_log(x) UN_CF(clog, x)
#define UN_FLT_log1p(x) UN_RF(log1p, x)
#define UN_CPX_log1p(x) UN_CF(clog, (UN_T(x))1 + (x))
#define UN_FLT_sin(x) UN_RF(sin, x)
#define UN_CPX_sin(x) UN_CF(csin, x)
#define UN_FLT_cos(x) UN_RF(cos, x)
#define UN_CPX_cos(x) UN_CF(ccos, x)
#define UN_FLT_tanh(x) _Generic((x), float : un_tanhf, default : tanh)(x)
#define UN_CPX_tanh(x) UN_CF(ctanh, x)
/* exp(-x) overflows to +Inf for very negative x, giving exactly 0. */
#define UN_FLT_sigmoid(x) ((UN_T(x))1 / ((UN_T(x))1 + UN_EXP(-(x))))
#define UN_CPX_sigmoid(x) ((UN_T(x))1 / ((UN_T(x))1 + UN_CF(cexp, -(x))))
#define UN_FLT_erf(x) UN_RF(erf, x)

#define UN_FLT_tan(x) UN_RF(tan, x)
#define UN_CPX_tan(x) UN_CF(ctan, x)
#define UN_FLT_acos(x) UN_RF(acos, x)
#define UN_CPX_acos(x) UN_CF(cacos, x)
#define UN_FLT_asin(x) UN_RF(asin, x)
#define UN_CPX_asin(x) UN_CF(casin, x)
#define UN_FLT_atan(x) UN_RF(atan, x)
#define UN_CPX_atan(x) UN_CF(catan, x)
#define UN_FLT_cosh(x) UN_RF(cosh, x)
#define UN_CPX_cosh(x) UN_CF(ccosh, x)
#define UN_FLT_sinh(x) UN_RF(sinh, x)
#define UN_CPX_sinh(x) UN_CF(csinh, x)
#define UN_FLT_acosh(x) UN_RF(acosh, x)
#define UN_CPX_acosh(x) UN_CF(cacosh, x)
#define UN_FLT_asinh(x) UN_RF(asinh, x)
#define UN_CPX_asinh(x) UN_CF(casinh, x)
#define UN_FLT_atanh(x) UN_RF(atanh, x)
#define UN_CPX_atanh(x) UN_CF(catanh, x)
#define UN_FLT_cbrt(x) UN_RF(cbrt, x)
#define UN_CPX_cbrt(x) UN_CCBRT(x)
#define UN_FLT_erfc(x) UN_RF(erfc, x)
#define UN_FLT_erf_inv(x) ((UN_T(x))un_erfinv((double)(x)))

/* real and imag of a complex give its real type; on real floats they are
 * the value and zero (of the same dtype). conjugate of a real is itself. */
#define UN_FLT_real(x) (x)
#define UN_CPX_real(x) UN_CF(creal, x)
#define UN_FLT_imag(x) ((UN_T(x))((void)(x), 0))
#define UN_CPX_imag(x) UN_CF(cimag, x)
#define UN_FLT_conjugate(x) (x)
#define UN_CPX_conjugate(x) UN_CF(conj, x)

/* Bit counts in the integer's own width (pred counts as 1 bit wide). */
#define UN_INT_population_count(x)                                             \
    ((UN_T(x))__builtin_popcountll(                                            \
        (unsigned long long)(EM_UNSIGNED_OF(UN_T(x)))(x)))
#define UN_INT_count_leading_zeros(x)                                          \
    ((UN_T(x))un_clz64((uint64_t)(EM_UNSIGNED_OF(UN_T(x)))(x),                 \
                       ew_dtype == EM_PRED ? 1 : EM_EW_BITS(x)))

/* Nonzero is true (NaN is nonzero; a complex is zero when both parts are). */
#define UN_INT_logical_not(x) ((_Bool)((x) == 0))
#define UN_FLT_logical_not(x) ((_Bool)((x) == 0))
#define UN_CPX_logical_not(x) ((_Bool)((x) == 0))

/* pred is a 1-bit integer: its complement flips 0 and 1. */
#define UN_INT_bitwise_not(x) ((UN_T(x))(ew_dtype == EM_PRED ? (x) ^ 1 : ~(x)))

#define UN_INT_is_nan(x) ((_Bool)((void)(x), 0))
#define UN_FLT_is_nan(x) ((_Bool)isnan(x))
#define UN_CPX_is_nan(x) ((_Bool)(isnan(creal(x)) || isnan(cimag(x))))
#define UN_INT_is_infinity(x) ((_Bool)((void)(x), 0))
#define UN_FLT_is_infinity(x) ((_Bool)isinf(x))
#define UN_CPX_is_infinity(x) ((_Bool)(isinf(creal(x)) || isinf(cimag(x))))

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* The output is stored as pred for _Bool results, through the dtype's store
 * for same-type results, and as the raw result type otherwise (abs of a
 * complex). The dead branches fold away at compile time. Integer rules must
 * cast their result back to x's type (C promotes narrow integers to int);
 * the static assertion catches a rule that forgets. */
#define UN_LOOP(RULE)                                                          \
    {                                                                          \
        typedef __typeof__(RULE(ew_load(a[0]))) res_t;                         \
        _Static_assert(__builtin_types_compatible_p(res_t, _Bool) ||           \
                           __builtin_types_compatible_p(res_t, ew_comp) ||     \
                           ((__builtin_types_compatible_p(res_t, float) ||     \
                             __builtin_types_compatible_p(res_t, double)) &&   \
                            2 * sizeof(res_t) == sizeof(ew_comp)),             \
                       "a rule's result must be _Bool, the compute type, or "  \
                       "the real type of a complex compute type");             \
        if (__builtin_types_compatible_p(res_t, _Bool)) {                      \
            uint8_t *o = out;                                                  \
            for (int64_t i = 0; i < n; i++) {                                  \
                ew_comp x = ew_load(a[i]);                                     \
                o[i] = (uint8_t)RULE(x);                                       \
            }                                                                  \
        } else if (__builtin_types_compatible_p(res_t, ew_comp)) {             \
            ew_stor *o = out;                                                  \
            for (int64_t i = 0; i < n; i++) {                                  \
                ew_comp x = ew_load(a[i]);                                     \
                o[i] = ew_store(RULE(x));                                      \
            }                                                                  \
        } else {                                                               \
            res_t *o = out;                                                    \
            for (int64_t i = 0; i < n; i++) {                                  \
                ew_comp x = ew_load(a[i]);                                     \
                o[i] = (res_t)RULE(x);                                         \
            }                                                                  \
        }                                                                      \
    }

#define UN_CASE(cls, name)                                                     \
    case EM_UNARY_##name:                                                      \
        UN_LOOP(UN_##cls##_##name) break;
#define UN_CASE_INT(name, accepts) EM_EW_INT_##accepts(UN_CASE(INT, name))
#define UN_CASE_FLT(name, accepts) EM_EW_FLT_##accepts(UN_CASE(FLT, name))
#define UN_CASE_CPX(name, accepts) EM_EW_CPX_##accepts(UN_CASE(CPX, name))

#define UN_DEFINE_KERNEL(cls, E, sfx, S, C)                                    \
    EM_EW_HOT static void un_kernel_##sfx(int op, void *out,                   \
                                          const void *const *in, int64_t n) {  \
        EM_EW_DTYPE_SCOPE(E, sfx, S, C);                                       \
        const ew_stor *a = in[0];                                              \
        switch ((em_unary_op)op) {                                             \
            EM_UNARY_OPS(UN_CASE_##cls)                                        \
        default:                                                               \
            break;                                                             \
        }                                                                      \
    }
#define UN_KERNEL_INT(E, sfx, S, C, L, ST) UN_DEFINE_KERNEL(INT, E, sfx, S, C)
#define UN_KERNEL_FLT(E, sfx, S, C, L, ST) UN_DEFINE_KERNEL(FLT, E, sfx, S, C)
#define UN_KERNEL_CPX(E, sfx, S, C, L, ST) UN_DEFINE_KERNEL(CPX, E, sfx, S, C)
EM_DTYPES_INT(UN_KERNEL_INT)
EM_DTYPES_REALFLOAT(UN_KERNEL_FLT)
EM_DTYPES_COMPLEX(UN_KERNEL_CPX)

#define UN_KERNEL_ENTRY(E, sfx, S, C, L, ST) [E] = un_kernel_##sfx,
static const em_ew_kernel unary_kernels[EM_DTYPE_COUNT] = {
    EM_DTYPES_ALL(UN_KERNEL_ENTRY)};

/* ------------------------------------------------------------------------ */
/* Build and eval                                                            */
/* ------------------------------------------------------------------------ */

static em_status unary_eval(em_array *node);

/* One primitive per op, so a node's prim names its op (params hold the op
 * number too, for code that walks graphs). */
static const em_prim unary_prims[EM_UNARY_COUNT] = {
#define EM_X(name, accepts)                                                    \
    {#name, unary_eval, em__vjp_unary, em__gpu_unary_eval},
    EM_UNARY_OPS(EM_X)
#undef EM_X
};

const char *em_unary_name(em_unary_op op) {
    return (unsigned)op < EM_UNARY_COUNT ? unary_prims[op].name : "unknown";
}

/* Ops that cost about as much as a copy: one thread handles more of them. */
static bool unary_is_cheap(em_unary_op op, em_dtype dtype) {
    if (em_dtype_is_complex(dtype) || dtype == EM_F16 || dtype == EM_BF16)
        return false;
    switch (op) {
    case EM_UNARY_negate:
    case EM_UNARY_abs:
    case EM_UNARY_sign:
    case EM_UNARY_floor:
    case EM_UNARY_ceil:
    case EM_UNARY_round:
    case EM_UNARY_logical_not:
    case EM_UNARY_bitwise_not:
    case EM_UNARY_is_nan:
    case EM_UNARY_is_infinity:
    case EM_UNARY_real:
    case EM_UNARY_imag:
    case EM_UNARY_conjugate:
    case EM_UNARY_population_count:
    case EM_UNARY_count_leading_zeros:
        return true;
    default:
        return false;
    }
}

static em_status unary_eval(em_array *node) {
    em_unary_op op = (em_unary_op)(node->prim - unary_prims);
    em_dtype dtype = node->inputs[0]->dtype;
    int64_t grain =
        unary_is_cheap(op, dtype) ? EM_PARALLEL_GRAIN : EM_PARALLEL_GRAIN / 16;
    return em_ew_eval(node, unary_kernels[dtype], (int)op, grain);
}

em_status em_unary(em_unary_op op, em_array *a, em_array **out) {
    if (!out)
        return em__fail(EM_ERR_ARGUMENT, "em_unary: out is NULL");
    *out = NULL;
    if ((unsigned)op >= EM_UNARY_COUNT)
        return em__fail(EM_ERR_ARGUMENT,
                        "em_unary: unknown op %d (expected 0..%d)", (int)op,
                        EM_UNARY_COUNT - 1);
    const char *name = unary_prims[op].name;
    if (!a)
        return em__fail(EM_ERR_ARGUMENT, "%s: input is NULL", name);

    bool ok = false;
    const char *accepts = "ANY";
    switch (op) {
#define EM_X(opname, acc)                                                      \
    case EM_UNARY_##opname:                                                    \
        ok = EM_ACCEPTS_##acc(a->dtype);                                       \
        accepts = #acc;                                                        \
        break;
        EM_UNARY_OPS(EM_X)
#undef EM_X
    default:
        break;
    }
    em_desc da;
    if (!ok)
        return em__fail(EM_ERR_ARGUMENT, "%s: expected %s, got %s", name,
                        em_ew_accepts_text(accepts), em__describe(a, &da));

    em_dtype odt = a->dtype;
    if (op == EM_UNARY_is_nan || op == EM_UNARY_is_infinity ||
        op == EM_UNARY_logical_not)
        odt = EM_PRED;
    else if (op == EM_UNARY_abs || op == EM_UNARY_real || op == EM_UNARY_imag)
        odt = em__real_dtype(a->dtype);

    int param = (int)op;
    return em__node_new_params(&unary_prims[op], odt, a->shape, a->ndim, &a, 1,
                               &param, sizeof param, out);
}

/* ---- for the fusion pass (elementwise_internal.h) ---------------------- */

bool em__unary_op_of(const em_array *node, int *op, em_dtype *kernel_dtype) {
    if (!node->prim || node->prim->eval != unary_eval)
        return false;
    *op = (int)(node->prim - unary_prims);
    *kernel_dtype = node->inputs[0]->dtype;
    return true;
}

em_ew_kernel em__unary_kernel(em_dtype dtype) { return unary_kernels[dtype]; }
