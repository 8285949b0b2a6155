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
 *
 * un_expf_hl(x, xlo) is exp(x + xlo) for a small correction xlo (|xlo| <=
 * |x| / 1024), added to the reduced argument where it is not lost: erfc
 * needs exp(-x^2) with x^2 split exactly into two floats. un_expf passes
 * xlo = -0.0f, which folds away (x + -0.0f is x for every x, -0 included),
 * so exp's code is what it was before the split.
 */
static inline __attribute__((always_inline)) float un_expf_hl(float x,
                                                             float xlo) {
    const float round_magic = 12582912.0f; /* 1.5 * 2^23 */
    float z = (x + xlo) * 1.44269504088896341f + round_magic;
    float n = z - round_magic;
    float r = x - n * 0.693145751953125f;  /* ln2, high part (exact) */
    r = r + xlo;
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

static inline __attribute__((always_inline)) float un_expf(float x) {
    return un_expf_hl(x, -0.0f);
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

/* ---- erf, erfc and erf_inv for float ------------------------------------
 * Branch-free like un_expf so that the kernel loops vectorise: every range's
 * formula is evaluated and the results are blended with integer masks. The
 * polynomial coefficients are minimax fits of relative error made by
 * scripts/fit_erf.py (which prints them; the ranges and fitted forms are
 * documented there). Measured ulp errors (test elementwise_erf_f32_ulp: every
 * 1531st bit pattern, a dense grid over [-10, 10], erfc's subnormal end, and
 * for erf_inv every 97th float in (-1, 1) and the 2^16 next to +-1; against
 * libm's double
 * erf/erfc and the f64 erf_inv below (un_erfinv), measured from the double
 * value): see each function; the figures are the worst over the AVX-512,
 * AVX2 and baseline builds, which round differently (FMA contraction). f16
 * and bf16 compute through these; f64 stays on libm (erf, erfc) and
 * un_erfinv. */

static inline __attribute__((always_inline)) uint32_t un_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline __attribute__((always_inline)) float un_u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* mask ? a : b, mask all ones or all zeros. */
static inline __attribute__((always_inline)) float un_blendf(uint32_t mask,
                                                             float a, float b) {
    return un_u2f((un_f2u(a) & mask) | (un_f2u(b) & ~mask));
}

/* An all-ones mask when c holds. */
static inline __attribute__((always_inline)) uint32_t un_mask(int c) {
    return 0u - (uint32_t)c;
}

/* erf(x) for |x| < 0.875, odd (keeps -0): x + x * Pm(x^2), where
 * Pm = erf(x)/x - 1, so 2/sqrt(pi) is never rounded to float. */
static inline __attribute__((always_inline)) float un_erf_smallf(float x) {
    float s = x * x;
    float p = 7.842241757e-05f;
    p = p * s - 8.021723479e-04f;
    p = p * s + 5.190635566e-03f;
    p = p * s - 2.685528249e-02f;
    p = p * s + 1.128362194e-01f;
    p = p * s - 3.761262894e-01f;
    p = p * s + 1.283791661e-01f;
    return x + x * p;
}

/* exp(-a^2) for a >= 0 (+Inf gives 0), with a^2 split exactly into hi + lo
 * (hi = ah^2 with ah the top 12 bits of a, exact): rounding a^2 to float
 * alone would cost up to 2^-24 a^2 relative, 60 ulp at a = 10. */
static inline __attribute__((always_inline)) float un_exp_negsqf(float a) {
    float ah = un_u2f(un_f2u(a) & 0xfffff000u);
    float al = a - ah;
    return un_expf_hl(-(ah * ah), -(al * (a + ah)));
}

/* erfc(a) for a >= 0.5 to an ABSOLUTE error of a few 1e-9 (what erf's
 * 1 - erfc(a) needs; +Inf gives 0, NaN gives NaN): exp(-a^2) Q(t) with
 * t = 1 / (1 + a/2), Q(t) ~ erfc(a) exp(a^2). One polynomial, cheap; its
 * relative error (5 ulp: t's rounding and Horner's) is too large for erfc
 * itself, which has un_erfcf's two ranges. */
static inline __attribute__((always_inline)) float un_erf_tailf(float a) {
    float t = 1.0f / (1.0f + 0.5f * a);
    float q = -7.446258515e-02f;
    q = q * t + 3.514513075e-01f;
    q = q * t - 6.113654971e-01f;
    q = q * t + 4.068413675e-01f;
    q = q * t - 1.084831879e-01f;
    q = q * t + 2.356147021e-01f;
    q = q * t + 2.347573191e-01f;
    q = q * t + 2.836560309e-01f;
    q = q * t + 2.819787860e-01f;
    q = q * t + 3.766437203e-06f;
    return un_exp_negsqf(a) * q;
}

/* erf: the odd polynomial below |x| = 0.875, 1 - erfc(|x|) above, with x's
 * sign. +-Inf give +-1 (erfc(Inf) = 0), NaN propagates through the tail.
 * Measured: at most 1.37 ulp (bound tested: 1.5). */
static inline __attribute__((always_inline)) float un_erff(float x) {
    uint32_t sign = un_f2u(x) & 0x80000000u;
    float a = un_u2f(un_f2u(x) & 0x7fffffffu);
    float small = un_erf_smallf(x);
    float big = un_u2f(un_f2u(1.0f - un_erf_tailf(a)) | sign);
    return un_blendf(un_mask(a < 0.875f), small, big);
}

/* erfc: 1 - erf(x) below |x| = 0.5 (erfc > 0.47 there, so no
 * cancellation); above, exp(-a^2) erfcx(a) (a = |x|, erfcx(a) = erfc(a)
 * exp(a^2)) with erfcx by a polynomial in the exact a - 1.25 up to a = 2
 * and as u G(u^2), u = 1/a, beyond; reflected for negative x as
 * 2 - erfc(a). erfc(-Inf) = 2, erfc(+Inf) = 0 (exp gives 0), NaN
 * propagates. Measured: at most 3.16 ulp, in the far range (exp's 1.2 ulp
 * and four roundings); bound tested: 3.5. */
static inline __attribute__((always_inline)) float un_erfcf(float x) {
    float a = un_u2f(un_f2u(x) & 0x7fffffffu);
    float v = a - 1.25f;
    float c = -1.838888857e-04f;
    c = c * v + 5.541037535e-04f;
    c = c * v - 1.319335774e-03f;
    c = c * v + 3.514864482e-03f;
    c = c * v - 9.081521071e-03f;
    c = c * v + 2.201836184e-02f;
    c = c * v - 5.021849647e-02f;
    c = c * v + 1.067951918e-01f;
    c = c * v - 2.088218629e-01f;
    c = c * v + 3.678229153e-01f;
    float u2 = 1.0f / (a * a);
    float g = -9.769582748e+00f;
    g = g * u2 + 1.230314350e+01f;
    g = g * u2 - 7.237380505e+00f;
    g = g * u2 + 2.870216370e+00f;
    g = g * u2 - 1.009827971e+00f;
    g = g * u2 + 4.215389788e-01f;
    g = g * u2 - 2.820686102e-01f;
    g = g * u2 + 5.641894341e-01f;
    /* u G(u^2) as G / a: one rounding instead of two. */
    uint32_t mid = un_mask(a < 2.0f);
    float tail =
        un_exp_negsqf(a) * un_blendf(mid, c, g) / un_blendf(mid, 1.0f, a);
    float big = un_blendf(un_mask(x < 0.0f), 2.0f - tail, tail);
    return un_blendf(un_mask(a < 0.5f), 1.0f - un_erf_smallf(x), big);
}

/* glibc's double cbrt is off by 1 ulp for about half of all inputs, exact
 * cubes included (cbrt(27) = 3.0000000000000004). One Newton step on
 * y^3 - x, with the residual computed exactly through fma (y^3 = y3 + the
 * error terms, and y3 - x is exact since y3 is close to x), gives the
 * correctly rounded root but for rare near-halfway cases. Zero, infinities,
 * NaN and a step that overflows keep libm's value. (cbrtf is exact enough:
 * glibc computes it in double.) */
static inline double un_cbrt(double x) {
    double y = cbrt(x);
    if (y == 0.0 || !isfinite(y))
        return y;
    double y2 = y * y, e2 = fma(y, y, -y2);
    double y3 = y2 * y, e3 = fma(y2, y, -y3);
    double z = y - ((y3 - x) + (e3 + e2 * y)) / (3.0 * y2);
    return isfinite(z) ? z : y;
}

/* log(q) for a positive normal float q (other inputs give garbage, without
 * undefined behaviour): q = 2^e m with m in [sqrt(1/2), sqrt(2)), read from
 * the bits, and log(m) = f + f^2 R(f) with f = m - 1 (exact). */
static inline __attribute__((always_inline)) float un_logf_pos(float q) {
    int32_t k = (int32_t)(un_f2u(q) - 0x3f3504f3u); /* sqrt(1/2)'s bits */
    float e = (float)(k >> 23);
    float f = un_u2f(((uint32_t)k & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    float r = -7.623170316e-02f;
    r = r * f + 1.291472912e-01f;
    r = r * f - 1.324750036e-01f;
    r = r * f + 1.418059617e-01f;
    r = r * f - 1.660843045e-01f;
    r = r * f + 2.000201344e-01f;
    r = r * f - 2.500160933e-01f;
    r = r * f + 3.333332539e-01f;
    r = r * f - 4.999998808e-01f;
    /* ln2 in two parts: e * 0.693145751953125f is exact. */
    return e * 0.693145751953125f +
           (f + (f * f * r + e * 1.428606765330187045e-06f));
}

/* erf_inv: with w = -log((1 - |y|)(1 + |y|)) (1 - |y| is exact where it
 * matters, near 1), |y| + |y| M(w) for w < 5 (|y| < 0.9966) and
 * |y| B(sqrt(w) - 3.25) above, with y's sign. +-1 give +-Inf, |y| > 1 and
 * NaN give NaN, +-0 is kept. Measured: at most 0.93 ulp (bound tested:
 * 1.5). */
static inline __attribute__((always_inline)) float un_erfinvf(float y) {
    uint32_t sign = un_f2u(y) & 0x80000000u;
    float a = un_u2f(un_f2u(y) & 0x7fffffffu);
    float w = -un_logf_pos((1.0f - a) * (1.0f + a));
    float m = -8.806630980e-09f;
    m = m * w + 2.214022174e-07f;
    m = m * w - 1.980189609e-06f;
    m = m * w + 4.003704817e-06f;
    m = m * w + 4.449839616e-05f;
    m = m * w - 1.273497473e-04f;
    m = m * w - 2.334448975e-03f;
    m = m * w + 1.154874917e-02f;
    m = m * w + 2.320137918e-01f;
    m = m * w - 1.137730777e-01f;
    float mid = a + a * m;
    float r = sqrtf(w) - 3.25f;
    float b = 1.205032750e-04f;
    b = b * r - 3.554229988e-05f;
    b = b * r - 4.167770676e-04f;
    b = b * r + 9.745130083e-04f;
    b = b * r - 1.662374474e-03f;
    b = b * r + 2.491994528e-03f;
    b = b * r - 3.754732432e-03f;
    b = b * r + 5.369842984e-03f;
    b = b * r + 1.005259037e+00f;
    b = b * r + 3.083885670e+00f;
    /* On |y|, y's sign put back (a + a M keeps 0's sign, y + y M would
     * not). Outside (-1, 1) the log saw 0 or a negative number: +-Inf at
     * +-1, NaN beyond and for NaN. */
    float res = un_blendf(un_mask(w < 5.0f), mid, a * b);
    uint32_t inside = un_mask(a < 1.0f), one = un_mask(a == 1.0f);
    uint32_t edge = (0x7f800000u & one) | (0x7fc00000u & ~one);
    return un_u2f(((un_f2u(res) & inside) | (edge & ~inside)) | sign);
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
#define UN_FLT_erf(x) _Generic((x), float : un_erff, default : erf)(x)

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
#define UN_FLT_cbrt(x) _Generic((x), float : cbrtf, default : un_cbrt)(x)
#define UN_CPX_cbrt(x) UN_CCBRT(x)
#define UN_FLT_erfc(x) _Generic((x), float : un_erfcf, default : erfc)(x)
#define UN_FLT_erf_inv(x)                                                      \
    _Generic((x), float : un_erfinvf, default : un_erfinv)(x)

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
    EM_CLONES static void un_kernel_##sfx(int op, void *out,                   \
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
