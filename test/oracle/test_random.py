"""Oracle tests for the random primitives: em_random_bits and em_threefry2x32
against a plain-Python Threefry-2x32-20 (written from the algorithm's
description), and em_random_erf_inv against an accurate inverse of math.erf
(over the range f32 inputs reach: Giles' approximation is a single-precision
one, and it is what Nx computes)."""
import ctypes as C
import math

import numpy as np

from emily_ctypes import DTYPES, array, call, lib, shape_arg

P = C.c_void_p
I64P = C.POINTER(C.c_int64)
lib.em_random_bits.argtypes = [P, I64P, C.c_int, C.c_int, C.POINTER(P)]
lib.em_threefry2x32.argtypes = [P, P, C.POINTER(P)]
lib.em_random_erf_inv.argtypes = [P, C.POINTER(P)]

M = 0xFFFFFFFF
ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry(k0, k1, x0, x1):
    """Vectorised over numpy uint64 arrays holding u32 values."""
    ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
    x0 = (x0 + ks[0]) & M
    x1 = (x1 + ks[1]) & M
    for g in range(5):
        for r in ROT[g % 2]:
            x0 = (x0 + x1) & M
            x1 = (((x1 << r) | (x1 >> (32 - r))) & M) ^ x0
        x0 = (x0 + ks[(g + 1) % 3]) & M
        x1 = (x1 + ks[(g + 2) % 3] + g + 1) & M
    return x0, x1


def ref_bits(k0, k1, n):
    """Nx.Random's u32 stream of n words."""
    half = (n + 1) // 2
    i = np.arange(half, dtype=np.uint64)
    x1 = np.where(i + half < n, i + half, 0).astype(np.uint64)
    o0, o1 = threefry(k0, k1, i, x1)
    return np.concatenate([o0, o1])[:n].astype(np.uint32)


def key(k0, k1):
    return array(np.array([k0, k1], dtype=np.uint32), "u32")


def bits(k, shape, dt):
    s, n = shape_arg(shape)
    return call("em_random_bits", k, s, n, DTYPES.index(dt)).numpy()


def test_bits_match_reference_for_many_sizes():
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 7, 64, 1001, 70_001):
        k0, k1 = (int(v) for v in rng.integers(0, 2**32, size=2))
        want = ref_bits(k0, k1, n)
        assert np.array_equal(bits(key(k0, k1), (n,), "u32"), want), n
        assert np.array_equal(bits(key(k0, k1), (n,), "u16"), want.astype(np.uint16))
        assert np.array_equal(bits(key(k0, k1), (n,), "u8"), want.astype(np.uint8))
        w64 = ref_bits(k0, k1, 2 * n)
        want64 = (w64[:n].astype(np.uint64) << np.uint64(32)) | w64[n:].astype(np.uint64)
        assert np.array_equal(bits(key(k0, k1), (n,), "u64"), want64), n


def test_shape_is_a_reshape_of_the_stream():
    want = ref_bits(3, 4, 60).reshape(3, 4, 5)
    assert np.array_equal(bits(key(3, 4), (3, 4, 5), "u32"), want)
    assert bits(key(3, 4), (0, 5), "u32").shape == (0, 5)
    assert bits(key(3, 4), (), "u32").shape == ()


def test_threefry_pairs_and_known_answers():
    rng = np.random.default_rng(6)
    c = rng.integers(0, 2**32, size=(10, 3, 2), dtype=np.uint64)
    got = call("em_threefry2x32", key(17, 99), array(c.astype(np.uint32), "u32")).numpy()
    o0, o1 = threefry(17, 99, c[..., 0], c[..., 1])
    assert np.array_equal(got, np.stack([o0, o1], axis=-1).astype(np.uint32))
    kat = call("em_threefry2x32", key(0, 0), array(np.zeros(2, np.uint32), "u32")).numpy()
    assert list(kat) == [0x6B200159, 0x99BA4EFE]


def accurate_erfinv(y):
    if y == 0:
        return 0.0
    x = math.copysign(math.sqrt(-math.log((1 - y) * (1 + y))), y) * 0.9
    for _ in range(60):
        f = math.erf(x) - y if abs(y) < 0.5 else ((1 - abs(y)) - math.erfc(abs(x))) * (1 if y > 0 else -1)
        step = f / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= step
        if abs(step) < 1e-17 * max(1.0, abs(x)):
            break
    return x


def test_erf_inv_close_to_exact():
    rng = np.random.default_rng(7)
    y = np.concatenate([rng.uniform(-0.999999, 0.999999, 2000),
                        1 - np.logspace(-7, -1, 50), [0.0, -0.5, 0.5]])
    got = call("em_random_erf_inv", array(y, "f64")).numpy()
    want = np.array([accurate_erfinv(float(v)) for v in y])
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    assert np.max(rel) < 5e-7, np.max(rel)
    y32 = y.astype(np.float32)
    f32 = call("em_random_erf_inv", array(y32, "f32")).numpy()
    want32 = np.array([accurate_erfinv(float(v)) for v in y32])
    assert np.allclose(f32, want32, rtol=1e-6, atol=1e-7)
    edge = call("em_random_erf_inv", array(np.array([1.0, -1.0, 2.0, np.nan]), "f64")).numpy()
    assert edge[0] == np.inf and edge[1] == -np.inf
    assert np.isnan(edge[2]) and np.isnan(edge[3])
