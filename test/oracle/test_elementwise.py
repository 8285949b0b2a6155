"""Oracle tests of the elementwise family: em_unary, em_binary, em_select,
em_clip, em_as_type, em_bitcast, em_scalar_f64/s64.

Floats are compared with numpy computing in float64/complex128 on the values
as the engine stores them; integers with exact Python arithmetic under Nx's
rules (wrapping, truncating division, x/0 == 0, shifts out of range...).
"""
import math

import numpy as np

from emily_ctypes import (C, DTYPES, E, EmilyError, NP, P, array, call, lib,
                          shape_arg, to_bf16_bits)

PP = C.POINTER(P)
lib.em_unary.argtypes = [C.c_int, P, PP]
lib.em_binary.argtypes = [C.c_int, P, P, PP]
lib.em_select.argtypes = [P, P, P, PP]
lib.em_clip.argtypes = [P, P, P, PP]
lib.em_as_type.argtypes = [P, C.c_int, PP]
lib.em_bitcast.argtypes = [P, C.c_int, PP]
lib.em_scalar_f64.argtypes = [C.c_double, C.c_int, PP]
lib.em_scalar_s64.argtypes = [C.c_int64, C.c_int, PP]
lib.em_transpose.argtypes = [P, C.POINTER(C.c_int), C.c_int, PP]
lib.em_slice.argtypes = [P, C.POINTER(C.c_int64), C.POINTER(C.c_int64),
                         C.POINTER(C.c_int64), PP]

UNARY = ["negate", "abs", "sign", "floor", "ceil", "round", "sqrt", "rsqrt",
         "exp", "expm1", "log", "log1p", "sin", "cos", "tanh", "sigmoid",
         "erf", "logical_not", "bitwise_not", "is_nan", "is_infinity",
         "tan", "acos", "asin", "atan", "cosh", "sinh", "acosh", "asinh",
         "atanh", "cbrt", "erfc", "erf_inv", "real", "imag", "conjugate",
         "population_count", "count_leading_zeros"]
BINARY = ["add", "subtract", "multiply", "divide", "pow", "minimum",
          "maximum", "remainder", "quotient", "atan2", "bitwise_and",
          "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "equal",
          "not_equal", "less", "less_equal", "greater", "greater_equal",
          "logical_and", "logical_or", "logical_xor"]
PRED_OPS = set(BINARY[15:])
INTS = ["pred", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
COMPLEX = ["c64", "c128"]
CLASSES = {"NUMERIC": [d for d in DTYPES if d != "pred"],
           "REAL": INTS + FLOATS, "FLOATING": FLOATS + COMPLEX,
           "REALFLOAT": FLOATS, "INTEGER": INTS, "ANY": DTYPES}
UNARY_ACCEPTS = dict(zip(UNARY, ["NUMERIC"] * 3 + ["REAL"] * 3 +
                         ["FLOATING"] * 10 + ["REALFLOAT", "ANY", "INTEGER",
                                              "ANY", "ANY"] +
                         ["FLOATING"] * 10 + ["REALFLOAT"] * 2 +
                         ["FLOATING"] * 3 + ["INTEGER"] * 2))
REAL_OF = {"c64": "f32", "c128": "f64"}
# Ops whose output is the real dtype of a complex input.
TO_REAL_OPS = ("abs", "real", "imag")
BINARY_ACCEPTS = dict(zip(BINARY, ["NUMERIC"] * 5 + ["REAL"] * 3 +
                          ["INTEGER", "REALFLOAT"] + ["INTEGER"] * 5 +
                          ["ANY"] * 2 + ["REAL"] * 4 + ["ANY"] * 3))
RTOL = {"f16": 2e-3, "bf16": 1.6e-2, "f32": 4e-6, "f64": 1e-13,
        "c64": 2e-5, "c128": 1e-12}
ATOL = {"f16": 1e-3, "bf16": 1e-2, "f32": 1e-6, "f64": 1e-14,
        "c64": 1e-5, "c128": 1e-13}


def quiet(fn):
    """Run a test with numpy's overflow/invalid warnings off (the inputs
    include Inf, NaN and out-of-range values on purpose)."""
    def run():
        with np.errstate(all="ignore"):
            fn()
    run.__name__ = fn.__name__
    return run


def dt(name):
    return DTYPES.index(name)


def unary(op, a):
    return call("em_unary", UNARY.index(op), a)


def binary(op, a, b):
    return call("em_binary", BINARY.index(op), a, b)


def stored(x, dtype):
    """The values an array of `dtype` holds for numpy input x, as f64/c128
    (floats) or Python-int-exact numpy arrays (ints)."""
    x = np.asarray(x)
    if dtype == "bf16":
        bits = to_bf16_bits(x.astype(np.float32))
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype in COMPLEX:
        return x.astype(NP[dtype]).astype(np.complex128)
    if dtype in FLOATS:
        return x.astype(NP[dtype]).astype(np.float64)
    return x.astype(NP[dtype])


def round_to(ref, dtype):
    """Round a float64/complex128 reference to `dtype` (back as f64/c128)."""
    with np.errstate(all="ignore"):
        if dtype == "bf16":
            return stored(np.asarray(ref, np.float64).astype(np.float32), "bf16")
        if dtype in COMPLEX:
            return np.asarray(ref).astype(NP[dtype]).astype(np.complex128)
        return np.asarray(ref, np.float64).astype(NP[dtype]).astype(np.float64)


def got_values(e):
    v = e.numpy()
    if e.dtype in COMPLEX:
        return v.astype(np.complex128)
    if e.dtype in FLOATS:
        return v.astype(np.float64)
    return v


def assert_close(got, ref, dtype, what):
    got = np.asarray(got)
    ref = round_to(ref, dtype)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    ok = np.isclose(got, ref, rtol=RTOL[dtype], atol=ATOL[dtype],
                    equal_nan=True)
    if not ok.all():
        i = np.argwhere(~ok)[0]
        raise AssertionError(f"{what}: at {tuple(i)} got {got[tuple(i)]!r}, "
                             f"wanted {ref[tuple(i)]!r}")


def assert_equal(got, ref, what):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    same = (got == ref)
    if got.dtype.kind in "fc":
        same |= (np.isnan(got) & np.isnan(ref))
    if not same.all():
        i = tuple(np.argwhere(~same)[0])
        raise AssertionError(f"{what}: at {i} got {got[i]!r}, wanted {ref[i]!r}")


def expect_error(fn, needle):
    try:
        fn()
    except EmilyError as e:
        assert needle in e.message, (needle, e.message)
        return
    raise AssertionError(f"expected an error containing {needle!r}")


def scalar(v, dtype):
    """A 0-d array (emily_ctypes.array turns 0-d input into shape (1,))."""
    return call("em_scalar_f64", float(v), dt(dtype))


def transpose(a, perm):
    p = (C.c_int * len(perm))(*perm)
    return call("em_transpose", a, p, len(perm))


def slice_(a, start, stop, step):
    mk = lambda v: (C.c_int64 * len(v))(*v)
    return call("em_slice", a, mk(start), mk(stop), mk(step))


# ---------------------------------------------------------------------------
# Integer reference (exact Python ints)
# ---------------------------------------------------------------------------

def bits_of(dtype):
    return 1 if dtype == "pred" else np.iinfo(NP[dtype]).bits


def wrap(v, dtype):
    if dtype == "pred":
        return int(v != 0)
    b = bits_of(dtype)
    v &= (1 << b) - 1
    if dtype.startswith("s") and v >= 1 << (b - 1):
        v -= 1 << b
    return v


def tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def int_binary_ref(op, a, b, dtype):
    bits = bits_of(dtype)
    if op == "add":
        return wrap(a + b, dtype)
    if op == "subtract":
        return wrap(a - b, dtype)
    if op == "multiply":
        return wrap(a * b, dtype)
    if op in ("divide", "quotient"):
        return 0 if b == 0 else wrap(tdiv(a, b), dtype)
    if op == "remainder":
        return 0 if b == 0 else wrap(a - b * tdiv(a, b), dtype)
    if op == "pow":
        if b < 0:
            return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0
        return wrap(pow(a, b, 1 << 64), dtype)
    if op == "minimum":
        return min(a, b)
    if op == "maximum":
        return max(a, b)
    if op == "bitwise_and":
        return wrap(a & b, dtype)
    if op == "bitwise_or":
        return wrap(a | b, dtype)
    if op == "bitwise_xor":
        return wrap(a ^ b, dtype)
    if op == "left_shift":
        return 0 if b < 0 or b >= bits else wrap(a << b, dtype)
    if op == "right_shift":
        return (-1 if a < 0 else 0) if b < 0 or b >= bits else a >> b
    return int({"equal": a == b, "not_equal": a != b, "less": a < b,
                "less_equal": a <= b, "greater": a > b,
                "greater_equal": a >= b,
                "logical_and": a != 0 and b != 0,
                "logical_or": a != 0 or b != 0,
                "logical_xor": (a != 0) != (b != 0)}[op])


def int_values(dtype, n, rng, small=False):
    """Edge values first, then random ones, as Python ints."""
    if dtype == "pred":
        return [int(v) for v in rng.integers(0, 2, n)]
    info = np.iinfo(NP[dtype])
    edges = [0, 1, 2, 3, info.max, info.min, info.max - 1, 7]
    if info.min < 0:
        edges += [-1, -2, info.min + 1, -7]
    lo, hi = (-9, 70) if small else (int(info.min), int(info.max))
    lo = max(lo, int(info.min))
    rand = [int(v) for v in rng.integers(lo, hi, n, dtype=np.int64
                                         if hi <= 2**63 - 1 else np.uint64,
                                         endpoint=True)]
    return (edges + rand)[:n]


# ---------------------------------------------------------------------------
# Unary
# ---------------------------------------------------------------------------

def float_unary_ref(op, x):
    with np.errstate(all="ignore"):
        if op == "negate":
            return -x
        if op == "abs":
            return np.abs(x)
        if op == "sign":
            if np.iscomplexobj(x):
                m = np.abs(x)
                return np.where(m == 0, 0, x / np.where(m == 0, 1, m))
            return np.sign(x)
        if op == "floor":
            return np.floor(x)
        if op == "ceil":
            return np.ceil(x)
        if op == "round":
            return np.sign(x) * np.floor(np.abs(x) + 0.5)
        if op == "sqrt":
            return np.sqrt(x)
        if op == "rsqrt":
            return 1 / np.sqrt(x)
        if op == "exp":
            return np.exp(x)
        if op == "expm1":
            return np.exp(x) - 1 if np.iscomplexobj(x) else np.expm1(x)
        if op == "log":
            return np.log(x)
        if op == "log1p":
            return np.log(1 + x) if np.iscomplexobj(x) else np.log1p(x)
        if op == "sin":
            return np.sin(x)
        if op == "cos":
            return np.cos(x)
        if op == "tanh":
            return np.tanh(x)
        if op == "sigmoid":
            return 1 / (1 + np.exp(-x))
        if op == "erf":
            return np.vectorize(math.erf)(x)
        simple = {"tan": np.tan, "acos": np.arccos, "asin": np.arcsin,
                  "atan": np.arctan, "cosh": np.cosh, "sinh": np.sinh,
                  "acosh": np.arccosh, "asinh": np.arcsinh,
                  "atanh": np.arctanh, "real": np.real, "imag": np.imag,
                  "conjugate": np.conj}
        if op in simple:
            return simple[op](x)
        if op == "cbrt":  # complex: the principal root
            return x ** (1 / 3) if np.iscomplexobj(x) else np.cbrt(x)
        if op == "erfc":
            return np.vectorize(math.erfc)(x)
        if op == "erf_inv":
            return erfinv_ref(x)
        if op == "logical_not":
            return x == 0
        if op == "is_nan":
            return np.isnan(x)
        if op == "is_infinity":
            return np.isinf(x)
    raise KeyError(op)


def erfinv_ref(y):
    """erf_inv by bisection on math.erf / math.erfc (to adjacent doubles)."""
    def one(v):
        if math.isnan(v) or abs(v) > 1:
            return math.nan
        if abs(v) == 1:
            return math.copysign(math.inf, v)
        if v == 0:
            return v
        a, lo, hi = abs(v), 0.0, 6.0
        if a < 1e-9:  # the series' next term is below double precision
            return v * math.sqrt(math.pi) / 2
        for _ in range(2000):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            below = math.erf(mid) < a if a <= 0.5 else \
                math.erfc(mid) > 1 - a
            lo, hi = (mid, hi) if below else (lo, mid)
        return math.copysign(lo, v)
    return np.vectorize(one, otypes=[np.float64])(np.asarray(y, np.float64))


@quiet
def test_unary_floats_and_complex():
    rng = np.random.default_rng(1)
    base = rng.uniform(-4, 4, 61)
    special = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -2.5, np.nan, np.inf,
                        -np.inf, 1e-30, 80.0, -90.0, 88.5, -103.0])
    for dtype in FLOATS + COMPLEX:
        for op in UNARY:
            if dtype not in CLASSES[UNARY_ACCEPTS[op]]:
                continue
            if dtype in COMPLEX:
                x = base[:40] + 1j * rng.uniform(-3, 3, 40)
            else:
                x = np.concatenate([special, base])
                if op in ("sqrt", "rsqrt", "log", "log1p"):
                    x = np.abs(x)
                if op in ("acos", "asin", "atanh", "erf_inv"):
                    x = np.concatenate([special, base / 4, [1.0, -1.0]])
                if op == "acosh":
                    x = np.concatenate([special, np.abs(base) + 1])
            xs = stored(x, dtype).reshape(-1)
            out = unary(op, array(x, dtype))
            ref = float_unary_ref(op, xs)
            if ref.dtype == np.bool_:
                assert out.dtype == "pred", (op, dtype, out.dtype)
                assert_equal(out.numpy(), ref, f"{op} {dtype}")
                continue
            want = REAL_OF.get(dtype, dtype) if op in TO_REAL_OPS else dtype
            assert out.dtype == want, (op, dtype, out.dtype)
            assert_close(got_values(out), ref, want, f"{op} {dtype}")


@quiet
def test_unary_exp_accuracy_f32():
    # The vectorised float exp over its whole range, subnormals included.
    x = np.linspace(-104, 89, 200001).astype(np.float32)
    got = unary("exp", array(x, "f32")).numpy().astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    with np.errstate(all="ignore"):
        ref32 = ref.astype(np.float32).astype(np.float64)
    normal = (ref32 >= 1.2e-38) & np.isfinite(ref32)
    ulp = np.spacing(ref32[normal].astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got[normal] - ref[normal]) <= 1.5 * ulp)
    sub = ref32 < 1.2e-38
    assert np.allclose(got[sub], ref32[sub], rtol=0, atol=3e-45)
    assert np.array_equal(np.isinf(got), np.isinf(ref32))


@quiet
def test_unary_tanh_sigmoid_accuracy_f32():
    # The vectorised float tanh (polynomial below 0.625, exp formula above).
    x = np.concatenate([np.linspace(-12, 12, 200001),
                        [0.0, -0.0, 1e-30, -1e-8, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    got = unary("tanh", array(x, "f32")).numpy().astype(np.float64)
    ref = np.tanh(x.astype(np.float64))
    ref32 = ref.astype(np.float32)
    tiny = np.abs(ref32) < 1.2e-38
    ulp = np.spacing(np.abs(ref32[~tiny])).astype(np.float64)
    fin = ~np.isnan(ref[~tiny])
    assert np.all(np.abs(got[~tiny] - ref[~tiny])[fin] <= 1.5 * ulp[fin])
    assert np.array_equal(got[tiny], ref32[tiny])
    assert np.isnan(got[-1])
    got = unary("sigmoid", array(x, "f32")).numpy().astype(np.float64)
    assert np.allclose(got[:-1], 1 / (1 + np.exp(-x[:-1].astype(np.float64))),
                       rtol=5e-7, atol=1e-38)


def test_unary_integers():
    rng = np.random.default_rng(2)
    for dtype in INTS:
        vals = int_values(dtype, 40, rng)
        x = np.array(vals, dtype=NP[dtype])
        a = array(x, dtype)
        for op in UNARY:
            if dtype not in CLASSES[UNARY_ACCEPTS[op]]:
                continue
            out = unary(op, a)
            if op == "negate":
                ref = [wrap(-v, dtype) for v in vals]
            elif op == "abs":
                ref = [wrap(abs(v), dtype) for v in vals]
            elif op == "sign":
                ref = [(v > 0) - (v < 0) for v in vals]
            elif op in ("floor", "ceil", "round"):
                ref = vals
            elif op == "logical_not":
                ref = [int(v == 0) for v in vals]
            elif op == "bitwise_not":
                ref = [1 - v if dtype == "pred" else wrap(~v, dtype)
                       for v in vals]
            elif op in ("is_nan", "is_infinity"):
                ref = [0] * len(vals)
            elif op == "population_count":
                ref = [bin(v & ((1 << bits_of(dtype)) - 1)).count("1")
                       for v in vals]
            elif op == "count_leading_zeros":
                ref = [bits_of(dtype) -
                       (v & ((1 << bits_of(dtype)) - 1)).bit_length()
                       for v in vals]
            want = "pred" if op in ("logical_not", "is_nan", "is_infinity") \
                else dtype
            assert out.dtype == want, (op, dtype, out.dtype)
            assert_equal(out.numpy().astype(object),
                         np.array(ref, dtype=object), f"{op} {dtype}")


def test_unary_rejects_wrong_dtypes():
    a = array(np.ones(3), "c64")
    expect_error(lambda: unary("floor", a), "floor: expected a non-complex")
    expect_error(lambda: unary("erf", a), "c64[3]")
    expect_error(lambda: unary("exp", array([1, 2], "s32")),
                 "exp: expected a float or complex dtype")
    expect_error(lambda: unary("negate", array([1], "pred")), "negate")
    expect_error(lambda: call("em_unary", 99, a), "unknown op")
    expect_error(lambda: unary("erf_inv", a), "erf_inv: expected a real float")
    expect_error(lambda: unary("population_count", array([1.0], "f32")),
                 "population_count: expected an integer dtype")
    expect_error(lambda: unary("real", array([1], "u8")),
                 "real: expected a float or complex dtype")


@quiet
def test_unary_erf_inv_accuracy():
    # Dense over (-1, 1), the tails near +-1 and the edges.
    y = np.concatenate([np.linspace(-1, 1, 2001), 1 - np.logspace(-16, -1, 60),
                        -np.logspace(-300, -1, 60), [0.0, -0.0, 1.0, -1.0,
                                                     1.5, np.nan, 1e-310]])
    ref = erfinv_ref(y)
    got = unary("erf_inv", array(y, "f64")).numpy()
    fin = np.isfinite(ref)
    assert np.all(np.abs(got[fin] - ref[fin]) <=
                  4 * np.spacing(np.abs(ref[fin]))), "erf_inv f64 ulp"
    assert_equal(got[~fin], ref[~fin], "erf_inv f64 edges")
    assert np.signbit(got[y.size - 6]) and not np.signbit(got[y.size - 7])
    # f32 has its own vectorised kernel (un_erfinvf in unary.c), within
    # 1.5 ulp of the exact value; its edges are exact.
    y32 = y.astype(np.float32)
    got = unary("erf_inv", array(y32, "f32")).numpy().astype(np.float64)
    ref = erfinv_ref(y32.astype(np.float64))
    fin = np.isfinite(ref)
    ulp = np.spacing(np.abs(ref[fin]).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got[fin] - ref[fin]) <= 1.5 * ulp), "erf_inv f32 ulp"
    assert_equal(got[~fin], ref[~fin], "erf_inv f32 edges")


@quiet
def test_unary_new_ops_strided_and_edges():
    rng = np.random.default_rng(11)
    m = rng.uniform(-0.9, 0.9, (5, 7))
    for dtype in FLOATS:
        t = transpose(array(m, dtype), [1, 0])
        ms = stored(m, dtype).T
        for op in ("tan", "asin", "atanh", "cbrt", "erfc", "erf_inv", "sinh"):
            assert_close(got_values(unary(op, t)), float_unary_ref(op, ms),
                         dtype, f"strided {op} {dtype}")
    # -0.0 and infinities keep their IEEE results.
    x = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan])
    a = array(x, "f64")
    assert_equal(unary("tan", a).numpy(), np.tan(x), "tan edges")
    assert np.signbit(unary("asinh", a).numpy()[0])
    assert np.signbit(unary("cbrt", a).numpy()[0])
    assert np.signbit(unary("erf_inv", a).numpy()[0])
    for dtype in FLOATS:  # the f32 polynomial tanh used to lose -0's sign
        assert np.signbit(unary("tanh", array([-0.0], dtype)).numpy()[0])
    assert_equal(unary("cosh", a).numpy(), np.cosh(x), "cosh edges")
    assert_equal(unary("erfc", a).numpy(), [1, 1, 0, 2, np.nan], "erfc edges")
    # Complex parts.
    z = np.array([1 + 2j, -3.5 - 0.25j, np.inf - 1j], np.complex128)
    c = array(z, "c128")
    assert unary("real", c).dtype == "f64"
    assert_equal(unary("real", c).numpy(), z.real, "real")
    assert_equal(unary("imag", array(z, "c64")).numpy(),
                 z.imag.astype(np.float32), "imag c64")
    assert_equal(unary("conjugate", c).numpy(), np.conj(z), "conjugate")
    assert unary("conjugate", c).dtype == "c128"
    assert_close(unary("cbrt", array([8 + 0j, -8 + 0j], "c128")).numpy(),
                 np.array([8 + 0j, -8 + 0j]) ** (1 / 3), "c128", "complex cbrt")


# ---------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------

def test_binary_integers_exact():
    rng = np.random.default_rng(3)
    n = 48
    for dtype in INTS:
        for op in BINARY:
            if dtype not in CLASSES[BINARY_ACCEPTS[op]]:
                continue
            av = int_values(dtype, n, rng, small=(op == "pow"))
            if op in ("left_shift", "right_shift"):
                bv = [int(v) for v in rng.integers(
                    -2 if dtype.startswith("s") else 0,
                    min(bits_of(dtype) + 3, np.iinfo(NP[dtype]).max
                        if dtype != "pred" else 2), n)]
            elif op == "pow":
                bv = [int(v) for v in rng.integers(
                    -3 if dtype.startswith("s") else 0,
                    min(70, np.iinfo(NP[dtype]).max) if dtype != "pred"
                    else 2, n)]
            else:
                bv = list(reversed(int_values(dtype, n, rng)))
            a = array(np.array(av, dtype=NP[dtype]), dtype)
            b = array(np.array(bv, dtype=NP[dtype]), dtype)
            out = binary(op, a, b)
            assert out.dtype == ("pred" if op in PRED_OPS else dtype)
            ref = [int_binary_ref(op, x, y, dtype) for x, y in zip(av, bv)]
            assert_equal(out.numpy().astype(object),
                         np.array(ref, dtype=object), f"{op} {dtype}")


def float_binary_ref(op, x, y):
    with np.errstate(all="ignore"):
        f = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
             "divide": np.divide, "pow": np.power, "minimum": np.minimum,
             "maximum": np.maximum, "remainder": np.fmod,
             "atan2": np.arctan2, "equal": np.equal,
             "not_equal": np.not_equal, "less": np.less,
             "less_equal": np.less_equal, "greater": np.greater,
             "greater_equal": np.greater_equal,
             "logical_and": np.logical_and, "logical_or": np.logical_or,
             "logical_xor": np.logical_xor}[op]
        return f(x, y)


@quiet
def test_binary_floats_and_complex():
    rng = np.random.default_rng(4)
    xa = np.concatenate([[np.nan, 1.0, np.inf, -np.inf, 0.0, -0.0, 2.0, 3.0],
                         rng.uniform(-5, 5, 40)])
    xb = np.concatenate([[1.0, np.nan, np.inf, 2.0, 0.0, 0.0, -0.0, 3.0],
                         rng.uniform(-5, 5, 40)])
    for dtype in FLOATS + COMPLEX:
        for op in BINARY:
            if dtype not in CLASSES[BINARY_ACCEPTS[op]]:
                continue
            a_in, b_in = xa, xb
            if dtype in COMPLEX:
                a_in = xa + 1j * rng.uniform(-2, 2, xa.size)
                b_in = xb - 1j * rng.uniform(-2, 2, xb.size)
                if op == "pow":  # keep cpow away from its branch cuts/Inf
                    a_in, b_in = a_in[8:], b_in[8:] / 4
            elif op == "pow":
                a_in = np.abs(xa)
            xs, ys = stored(a_in, dtype), stored(b_in, dtype)
            out = binary(op, array(a_in, dtype), array(b_in, dtype))
            ref = float_binary_ref(op, xs, ys)
            if op in PRED_OPS:
                assert out.dtype == "pred"
                assert_equal(out.numpy(), ref, f"{op} {dtype}")
            else:
                assert_close(got_values(out), ref, dtype, f"{op} {dtype}")


def test_binary_broadcast_and_strided():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 1, 5))
    y = rng.standard_normal((4, 1))
    out = binary("add", array(x, "f64"), array(y, "f64"))
    assert out.shape == (3, 4, 5)
    assert_equal(out.numpy(), x + y, "broadcast add")

    # A transposed and a step-2 sliced input (strided, non-contiguous).
    m = rng.standard_normal((6, 4)).astype(np.float32)
    t = transpose(array(m, "f32"), [1, 0])  # (4, 6)
    big = rng.standard_normal((4, 12)).astype(np.float32)
    s = slice_(array(big, "f32"), [0, 1], [4, 12], [1, 2])  # (4, 6)
    out = binary("multiply", t, s)
    assert_equal(out.numpy(), m.T * big[:, 1::2], "strided multiply")
    out = binary("less", s, t)
    assert_equal(out.numpy(), big[:, 1::2] < m.T, "strided less")

    # 0-d with anything, and empty shapes.
    sc = scalar(2.5, "f32")
    assert_equal(binary("subtract", sc, t).numpy(), 2.5 - m.T, "scalar")
    assert binary("add", sc, sc).shape == ()
    e = binary("add", array(np.zeros((0, 3)), "f32"), array(np.ones(3), "f32"))
    assert e.shape == (0, 3) and e.numpy().size == 0

    # Large enough to run on several threads, broadcast + transposed.
    n = 700
    p = rng.integers(-1000, 1000, (n, n)).astype(np.int32)
    row = rng.integers(-1000, 1000, (n,)).astype(np.int32)
    out = binary("add", transpose(array(p, "s32"), [1, 0]), array(row, "s32"))
    assert_equal(out.numpy(), p.T + row, "large strided add")
    q = rng.standard_normal(300001).astype(np.float32)
    got = unary("exp", array(q, "f32")).numpy()
    assert np.allclose(got, np.exp(q.astype(np.float64)), rtol=4e-7)
    got = binary("maximum", array(q, "f32"), scalar(0, "f32")).numpy()
    assert_equal(got, np.maximum(q, 0), "large relu")


def test_binary_errors():
    a = array(np.ones((2, 3)), "f32")
    expect_error(lambda: binary("add", a, array(np.ones(3), "f64")),
                 "add: expected inputs of one dtype, got f32[2,3] and f64[3]")
    expect_error(lambda: binary("add", a, array(np.ones(4), "f32")), "add")
    expect_error(lambda: binary("quotient", a, a),
                 "quotient: expected an integer dtype")
    expect_error(lambda: binary("less", array([1j], "c64"), array([1j], "c64")),
                 "less: expected a non-complex dtype")
    expect_error(lambda: call("em_binary", -1, a, a), "unknown op")


# ---------------------------------------------------------------------------
# select and clip
# ---------------------------------------------------------------------------

@quiet
def test_select():
    rng = np.random.default_rng(6)
    conds = {
        "pred": rng.integers(0, 2, (4, 5)).astype(bool),
        "f32": np.where(rng.random((4, 5)) < 0.5, 0.0,
                        rng.choice([np.nan, -1.5, 2.0, 1e-30], (4, 5))),
        "s8": rng.integers(-2, 3, (4, 5)),
        "c64": rng.integers(0, 2, (4, 5)) * 1j,
        "bf16": np.where(rng.random((4, 5)) < 0.5, -0.0, 3.0),
    }
    for pd, cv in conds.items():
        truth = stored(cv, pd) != 0
        for vd in ["u8", "s16", "f32", "f64", "c128"]:
            t = rng.integers(-50, 50, (4, 5)).astype(NP[vd])
            f = rng.integers(-50, 50, (1, 5)).astype(NP[vd])
            out = call("em_select", array(cv, pd), array(t, vd), array(f, vd))
            assert out.dtype == vd
            assert_equal(out.numpy(), np.where(truth, t, f), f"select {pd} {vd}")
    # Scalar predicate, broadcast values, a transposed branch.
    tv = rng.standard_normal((3, 2))
    out = call("em_select", scalar(1, "pred"),
               transpose(array(tv, "f64"), [1, 0]), array(np.zeros(3), "f64"))
    assert_equal(out.numpy(), tv.T, "select scalar pred")
    expect_error(lambda: call("em_select", array([1], "pred"),
                              array([1.0], "f32"), array([1.0], "f64")),
                 "select: expected on_true and on_false of one dtype")
    expect_error(lambda: call("em_select", array([1, 0, 1], "pred"),
                              array([1.0, 2.0], "f32"), array([1.0], "f32")),
                 "select")


@quiet
def test_clip():
    x = np.array([[-3.0, 0.5, np.nan, 7.0], [2.0, -0.0, 9.0, -9.0]])
    lo = np.array([-1.0, 0.0, 0.0, 8.0])
    for dtype in ["f32", "f64", "f16", "bf16"]:
        out = call("em_clip", array(x, dtype), array(lo, dtype),
                   scalar(5.0, dtype))
        with np.errstate(invalid="ignore"):
            ref = np.minimum(np.maximum(stored(x, dtype), stored(lo, dtype)), 5.0)
        assert_equal(got_values(out), ref, f"clip {dtype}")
    xi = np.array([-128, -5, 0, 5, 127], np.int8)
    out = call("em_clip", array(xi, "s8"), scalar(-10, "s8"),
               scalar(100, "s8"))
    assert_equal(out.numpy(), np.clip(xi, -10, 100), "clip s8")
    xu = np.array([0, 2**64 - 1, 5], np.uint64)
    out = call("em_clip", array(xu, "u64"), array(np.uint64(3), "u64"),
               array(np.uint64(2**63), "u64"))
    assert_equal(out.numpy(), np.minimum(np.maximum(xu, np.uint64(3)),
                                         np.uint64(2**63)), "clip u64")
    expect_error(lambda: call("em_clip", array([1.0], "f32"),
                              array(np.zeros(3), "f32"), scalar(2.0, "f32")),
                 "clip: expected lo and hi to broadcast to a's shape")
    expect_error(lambda: call("em_clip", array([1j], "c64"), scalar(0, "c64"),
                              scalar(1, "c64")), "clip: expected a non-complex")
    expect_error(lambda: call("em_clip", array([1.0], "f32"),
                              scalar(0.0, "f64"), scalar(1.0, "f32")),
                 "clip: expected lo and hi of a's dtype")


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

FLOAT_SRC = [0.0, -0.0, 0.5, -0.5, 1.7, -1.7, 100.6, -100.6, 255.9, 300.0,
             -300.0, 65504.0, 7e4, -7e4, 3e9, -3e9, 1e19, -1e19, 1e30,
             np.nan, np.inf, -np.inf, 2.0**63, -(2.0**63), 2.0**64]


def convert_ref(v, src, dst):
    """Python value -> what as_type(dst) should hold (Python number)."""
    if dst == "pred":
        return int(v != 0)
    if src in COMPLEX and dst not in COMPLEX:
        v = v.real
    if dst in INTS:
        if isinstance(v, int):
            return wrap(v, dst)
        if math.isnan(v):
            return 0
        info = np.iinfo(NP[dst])
        if v >= int(info.max) + 1:
            return int(info.max)
        if v < int(info.min):
            return int(info.min)
        return int(v)  # truncates
    if dst in COMPLEX:
        return complex(v)
    return float(v)


@quiet
def test_as_type_all_pairs():
    rng = np.random.default_rng(7)
    for src in DTYPES:
        if src in INTS:
            vals = int_values(src, 24, rng)
            host = np.array(vals, dtype=NP[src])
        elif src in FLOATS:
            host = np.array(FLOAT_SRC)
        else:
            host = np.empty(len(FLOAT_SRC), np.complex128)
            host.real, host.imag = FLOAT_SRC, FLOAT_SRC[::-1]
        sv = stored(host, src)
        a = array(host, src)
        for dst in DTYPES:
            out = call("em_as_type", a, dt(dst))
            assert out.dtype == dst and out.shape == host.shape
            got = got_values(out)
            pyvals = [int(v) if src in INTS else
                      (complex(v) if src in COMPLEX else float(v)) for v in sv]
            ref = [convert_ref(v, src, dst) for v in pyvals]
            what = f"as_type {src}->{dst}"
            if dst in INTS:
                assert_equal(got.astype(object), np.array(ref, dtype=object), what)
                continue
            # The engine rounds to half precision through float32.
            with np.errstate(all="ignore"):
                if dst in ("f16", "bf16"):
                    r32 = np.array([complex(r).real for r in ref]).astype(np.float32)
                    want = stored(r32, dst) if dst == "bf16" else \
                        r32.astype(np.float16).astype(np.float64)
                elif dst in COMPLEX:
                    want = np.array(ref, dtype=np.complex128).astype(NP[dst])
                else:
                    want = np.array(ref, dtype=np.float64).astype(NP[dst])
            assert_equal(got, np.asarray(want).astype(got.dtype), what)


def test_as_type_strided_and_same_dtype():
    m = np.arange(12, dtype=np.int32).reshape(3, 4) - 6
    t = transpose(array(m, "s32"), [1, 0])
    out = call("em_as_type", t, dt("f64"))
    assert_equal(out.numpy(), m.T.astype(np.float64), "strided as_type")
    same = call("em_as_type", t, dt("s32"))
    assert_equal(same.numpy(), m.T, "as_type same dtype")
    expect_error(lambda: call("em_as_type", t, 99), "as_type: invalid")


def test_bitcast():
    x = np.array([[1.0, -2.5, np.inf], [0.0, -0.0, 3.25]], np.float32)
    a = array(x, "f32")
    out = call("em_bitcast", a, dt("s32"))
    assert out.dtype == "s32"
    assert_equal(out.numpy(), x.view(np.int32), "bitcast f32->s32")
    t = transpose(a, [1, 0])
    out = call("em_bitcast", t, dt("u32"))
    assert_equal(out.numpy(), x.T.view(np.uint32), "bitcast of a transposed view")
    back = call("em_bitcast", out, dt("f32"))
    assert_equal(back.numpy(), x.T, "bitcast round trip")
    c = np.array([1 + 2j, -3j], np.complex64)
    out = call("em_bitcast", array(c, "c64"), dt("u64"))
    assert_equal(out.numpy(), c.view(np.uint64), "bitcast c64->u64")
    expect_error(lambda: call("em_bitcast", a, dt("f64")),
                 "bitcast: expected a target dtype of 4-byte")
    expect_error(lambda: call("em_bitcast", array([1], "u8"), dt("pred")),
                 "as pred")


def test_scalars():
    def f64(v, d):
        e = call("em_scalar_f64", v, dt(d))
        if d == "bf16":  # read bf16 back through f32
            e = call("em_as_type", e, dt("f32"))
        return e.numpy()[()]

    def s64(v, d):
        return call("em_scalar_s64", v, dt(d)).numpy()[()]

    assert f64(300.0, "s8") == 44
    assert f64(-1.0, "u8") == 255
    assert f64(-1.9, "s32") == -1
    assert f64(2.0**64 + 4096, "u64") == 4096
    assert f64(-(2.0**64), "s64") == 0
    assert f64(float("nan"), "s16") == 0
    assert f64(0.25, "pred") == 1 and f64(0.0, "pred") == 0
    assert f64(1.1, "f32") == np.float32(1.1)
    assert f64(1e6, "f16") == np.inf
    assert f64(3.0, "bf16") == 3.0
    assert f64(-2.5, "c64") == -2.5 + 0j
    assert s64(-1, "u64") == 2**64 - 1
    assert s64(2**62 + 1, "f64") == float(2**62)
    assert s64(5, "c128") == 5 + 0j
    assert s64(-2, "pred") == 1
    assert s64(257, "u8") == 1
    expect_error(lambda: call("em_scalar_f64", 1.0, 42), "invalid dtype")
