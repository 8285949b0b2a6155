"""Oracle tests for include/emily_quant.h: a numpy reference of MLX's affine
quantize/dequantize (mlx/ops.cpp's definition, step by step in float32) and
quantized_matmul against dequantize-then-matmul in float64."""
import ctypes as C

import numpy as np

from emily_ctypes import E, EmilyError, P, array, check, lib, to_bf16_bits

DT = {"f32": 11, "f16": 9, "bf16": 10}
lib.em_quantize.argtypes = [P, C.c_int, C.c_int, C.POINTER(P), C.POINTER(P), C.POINTER(P)]
lib.em_dequantize.argtypes = [P, P, P, C.c_int, C.c_int, C.c_int, C.POINTER(P)]
lib.em_quantized_matmul.argtypes = [P, P, P, P, C.c_bool, C.c_int, C.c_int, C.POINTER(P)]

BITS = [2, 3, 4, 5, 6, 8]
GROUPS = [32, 64, 128]


def bf16_round(x):
    b = to_bf16_bits(np.asarray(x, np.float32)).astype(np.uint32) << np.uint32(16)
    return b.view(np.float32)


def stored(x, dt):
    """The float32 values an array of dtype dt holds for x."""
    x = np.asarray(x, np.float32)
    if dt == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dt == "bf16":
        return bf16_round(x)
    return x


def round_to(x, dt):
    return stored(x, dt)


def ref_quantize(w, gs, bits):
    """MLX's affine quantization of float32 rows (..., K): codes, scales and
    biases (float32, before rounding to w's dtype)."""
    g = w.reshape(w.shape[:-1] + (w.shape[-1] // gs, gs))
    hi = g.max(-1, keepdims=True)
    lo = g.min(-1, keepdims=True)
    n_bins = np.float32((1 << bits) - 1)
    mask = np.abs(lo) > np.abs(hi)
    s = np.maximum((hi - lo) / n_bins, np.float32(1e-7))
    s = np.where(mask, s, -s)
    edge = np.where(mask, lo, hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        q0 = np.rint(edge / s)
        s = np.where(q0 != 0, edge / q0, s).astype(np.float32)
    b = np.where(q0 == 0, np.float32(0), edge).astype(np.float32)
    q = np.clip(np.rint((g - b) / s), 0, n_bins).astype(np.uint32)
    return q.reshape(w.shape), s[..., 0], b[..., 0]


def pack(q, bits):
    """Codes (..., K) -> u32 words (..., K*bits/32), a little-endian stream."""
    K = q.shape[-1]
    words = np.zeros(q.shape[:-1] + (K * bits // 32,), np.uint64)
    for i in range(K):
        bit = i * bits
        wi, s = bit // 32, bit % 32
        v = q[..., i].astype(np.uint64) << np.uint64(s)
        words[..., wi] |= v & np.uint64(0xFFFFFFFF)
        if s + bits > 32:
            words[..., wi + 1] |= v >> np.uint64(32)
    return words.astype(np.uint32)


def unpack(words, bits, K):
    q = np.zeros(words.shape[:-1] + (K,), np.uint32)
    w64 = words.astype(np.uint64)
    for i in range(K):
        bit = i * bits
        wi, s = bit // 32, bit % 32
        v = w64[..., wi] >> np.uint64(s)
        if s + bits > 32:
            v |= w64[..., wi + 1] << np.uint64(32 - s)
        q[..., i] = v & np.uint64((1 << bits) - 1)
    return q


def ref_dequantize(q, s, b, gs, dt):
    """q * s rounded to dt, plus b, rounded again (s, b as stored)."""
    se = np.repeat(s, gs, axis=-1)
    be = np.repeat(b, gs, axis=-1)
    t = round_to(q.astype(np.float32) * se, dt)
    return round_to(t + be, dt)


def quantize(w, gs, bits):
    outs = [P(), P(), P()]
    check(lib.em_quantize(w.ptr, gs, bits, *[C.byref(o) for o in outs]))
    return [E(o.value) for o in outs]


def dequantize(wq, s, b, gs, bits, dt):
    out = P()
    check(lib.em_dequantize(wq.ptr, s.ptr, b.ptr, gs, bits, DT[dt], C.byref(out)))
    return E(out.value)


def qmm(x, wq, s, b, transpose, gs, bits):
    out = P()
    check(lib.em_quantized_matmul(x.ptr, wq.ptr, s.ptr, b.ptr, transpose, gs, bits,
                                  C.byref(out)))
    return E(out.value)


def test_quantize_matches_mlx_definition():
    rng = np.random.default_rng(1)
    for dt in ["f32", "f16", "bf16"]:
        for bits in BITS:
            for gs in GROUPS:
                w = rng.standard_normal((3, 2 * gs)).astype(np.float32)
                w[0, :gs] = 0.0  # a flat group: q0 == 0 path
                w[1, :gs] += 5.0  # an all-positive group
                wv = stored(w, dt)
                wq, s, b = quantize(array(w, dt), gs, bits)
                q, rs, rb = ref_quantize(wv, gs, bits)
                assert wq.dtype == "u32" and wq.shape == (3, 2 * gs * bits // 32)
                assert s.shape == (3, 2) and s.dtype == dt
                np.testing.assert_array_equal(wq.numpy(), pack(q, bits))
                np.testing.assert_array_equal(s.numpy().astype(np.float32), stored(rs, dt))
                np.testing.assert_array_equal(b.numpy().astype(np.float32), stored(rb, dt))


def test_dequantize_bit_exact():
    rng = np.random.default_rng(2)
    for dt in ["f32", "f16", "bf16"]:
        for bits in BITS:
            for gs in GROUPS:
                K = 2 * gs
                q = rng.integers(0, 1 << bits, (2, 3, K)).astype(np.uint32)
                s = stored(rng.standard_normal((2, 3, 2)) * 0.1, dt)
                b = stored(rng.standard_normal((2, 3, 2)), dt)
                words = pack(q, bits)
                np.testing.assert_array_equal(unpack(words, bits, K), q)
                out = dequantize(array(words, "u32"), array(s, dt), array(b, dt), gs, bits, dt)
                assert out.shape == (2, 3, K) and out.dtype == dt
                np.testing.assert_array_equal(out.numpy().astype(np.float32),
                                              ref_dequantize(q, s, b, gs, dt))


def test_quantized_matmul_vs_float64():
    rng = np.random.default_rng(3)
    cases = [("f32", 1e-5), ("f16", 2e-3), ("bf16", 1.6e-2)]
    for dt, rtol in cases:
        for bits in BITS:
            for gs in GROUPS:
                for transpose in (True, False):
                    for M in (1, 3, 64):
                        rows, length = (48, 2 * gs) if transpose else (96, 2 * gs)
                        w = rng.standard_normal((rows, length)).astype(np.float32)
                        wq, s, b = quantize(array(w, dt), gs, bits)
                        q = unpack(wq.numpy(), bits, length).astype(np.float64)
                        d = (q * np.repeat(s.numpy().astype(np.float64), gs, -1) +
                             np.repeat(b.numpy().astype(np.float64), gs, -1))
                        K = length if transpose else rows
                        x = stored(rng.standard_normal((M, K)), dt)
                        ref = x.astype(np.float64) @ (d.T if transpose else d)
                        out = qmm(array(x, dt), wq, s, b, transpose, gs, bits)
                        assert out.dtype == dt
                        got = out.numpy().astype(np.float64)
                        scale = np.abs(x).astype(np.float64) @ np.abs(d.T if transpose else d)
                        err = np.abs(got - ref) / (scale + 1e-30)
                        assert err.max() < rtol, (dt, bits, gs, transpose, M, err.max())


def test_quantized_matmul_batched_x():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((40, 64)).astype(np.float32)
    wq, s, b = quantize(array(w, "f32"), 32, 4)
    d = dequantize(wq, s, b, 32, 4, "f32").numpy().astype(np.float64)
    for shape in [(64,), (2, 3, 64), (2, 5, 64)]:
        x = rng.standard_normal(shape).astype(np.float32)
        got = qmm(array(x, "f32"), wq, s, b, True, 32, 4).numpy()
        assert got.shape == shape[:-1] + (40,)
        np.testing.assert_allclose(got, x.astype(np.float64) @ d.T, rtol=1e-4, atol=1e-4)


def test_quant_errors():
    w = array(np.zeros((4, 64), np.float32), "f32")
    for gs, bits, needle in [(16, 4, "group_size"), (64, 7, "bits"), (128, 4, "multiple")]:
        try:
            quantize(w, gs, bits)
            raise AssertionError("no error")
        except EmilyError as e:
            assert needle in e.message and "quantize" in e.message, e.message
    wq, s, b = quantize(w, 32, 4)
    x = array(np.zeros((2, 63), np.float32), "f32")
    try:
        qmm(x, wq, s, b, True, 32, 4)
        raise AssertionError("no error")
    except EmilyError as e:
        assert "quantized_matmul" in e.message and "f32[2,63]" in e.message, e.message
    try:
        qmm(array(np.zeros((2, 64), np.float16), "f16"), wq, s, b, True, 32, 4)
        raise AssertionError("no error")
    except EmilyError as e:
        assert "dtype" in e.message, e.message
    try:
        dequantize(wq, s, b, 64, 4, "f32")
        raise AssertionError("no error")
    except EmilyError as e:
        assert "do not match" in e.message, e.message
