"""numpy oracle for em_pad, em_dynamic_slice and em_dynamic_put_slice.

The reference pad is built by hand in numpy: place the input at
low + j*(interior+1) inside a canvas filled with the pad value that is
large enough for the positive widths, then crop the negative ones (np.pad
itself has no interior padding and no negative widths). Element moves must
match exactly, for one dtype per element size and every layout.
"""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, P, I64P, array, call, lib
from test_shape import SIZES, arr, i64s, layouts, rand, read, same

OUT = C.POINTER(P)
lib.em_pad.argtypes = [P, P, I64P, I64P, I64P, OUT]
lib.em_dynamic_slice.argtypes = [P, P, I64P, I64P, OUT]
lib.em_dynamic_put_slice.argtypes = [P, P, P, OUT]


def ref_pad(x, value, config):
    """numpy: pad x with value per [(low, high, interior)]."""
    canvas_shape, place, crop = [], [], []
    for d, (lo, hi, it) in zip(x.shape, config):
        inner = d + max(d - 1, 0) * it
        a, b = max(lo, 0), max(hi, 0)
        canvas_shape.append(a + inner + b)
        place.append(slice(a, a + inner, it + 1))
        crop.append(slice(a - lo, a + inner + hi if a + inner + hi >= a - lo else a - lo))
    canvas = np.full(canvas_shape, value, dtype=x.dtype)
    canvas[tuple(place)] = x
    return canvas[tuple(crop)]


def pad(a, value, config):
    lo = [c[0] for c in config]
    hi = [c[1] for c in config]
    it = [c[2] for c in config]
    return call("em_pad", a, value, i64s(lo), i64s(hi), i64s(it))


def random_config(rng, shape):
    config = []
    for d in shape:
        it = int(rng.integers(0, 3))
        inner = d + max(d - 1, 0) * it
        lo = int(rng.integers(-inner, 4))
        hi = int(rng.integers(-(inner + lo) if inner + lo > 0 else 0, 4)) if inner + lo > 0 else int(rng.integers(-min(0, inner + lo), 4))
        if inner + lo + hi < 0:
            hi = -(inner + lo)
        config.append((lo, hi, it))
    return config


def test_pad_random_configs_every_layout():
    rng = np.random.default_rng(7)
    for dtype in SIZES + ["bf16", "pred"]:
        for _ in range(12):
            shape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))
            x = rand(rng, dtype, shape)
            v = rand(rng, dtype, ())
            config = random_config(rng, shape)
            want = ref_pad(x, v, config)
            for name, a in layouts(x, dtype):
                got = pad(a, arr(v, dtype), config)
                assert got.shape == want.shape, (name, config, got.shape, want.shape)
                same(got, want)


def test_pad_examples():
    x = np.array([[1, 2, 3], [4, 5, 6]])
    same(pad(array(x, "s32"), arr(0, "s32"), [(0, 0, 1), (0, 0, 1)]),
         np.array([[1, 0, 2, 0, 3], [0, 0, 0, 0, 0], [4, 0, 5, 0, 6]], dtype=np.int32))
    t = np.array([[0, 1, 2, 3], [0, 4, 5, 6]])
    same(pad(array(t, "s32"), arr(0, "s32"), [(0, 0, 0), (-1, 1, 0)]),
         np.array([[1, 2, 3, 0], [4, 5, 6, 0]], dtype=np.int32))


def test_pad_matches_numpy_pad_for_edges():
    rng = np.random.default_rng(3)
    for _ in range(20):
        shape = tuple(int(d) for d in rng.integers(1, 6, 3))
        x = rng.standard_normal(shape)
        widths = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in shape]
        want = np.pad(x, widths, constant_values=2.5)
        got = pad(array(x, "f64"), arr(2.5, "f64"), [(a, b, 0) for a, b in widths])
        same(got, want)


def clamp(s, dim, size):
    return min(max(s, 0), dim - size)


def test_dynamic_slice_random():
    rng = np.random.default_rng(11)
    for dtype in SIZES:
        for idx_dtype in ["s32", "u8", "s64", "u64", "s8"]:
            shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
            x = rand(rng, dtype, shape)
            sizes = [int(rng.integers(0, d + 1)) for d in shape]
            strides = [int(rng.integers(1, 4)) for _ in shape]
            lo = 0 if idx_dtype[0] == "u" else -3
            starts = [int(rng.integers(lo, d + 3)) for d in shape]
            st = [clamp(s, d, n) for s, d, n in zip(starts, shape, sizes)]
            want = x[tuple(slice(s, s + n, k) for s, n, k in zip(st, sizes, strides))]
            for name, a in layouts(x, dtype):
                got = call("em_dynamic_slice", a, array(np.array(starts), idx_dtype),
                           i64s(sizes), i64s(strides))
                same(got, want)


def test_dynamic_put_slice_random():
    rng = np.random.default_rng(13)
    for dtype in SIZES + ["bf16"]:
        for _ in range(6):
            shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
            x = rand(rng, dtype, shape)
            ushape = tuple(int(rng.integers(1, d + 1)) for d in shape)
            u = rand(rng, dtype, ushape)
            starts = [int(rng.integers(-3, d + 3)) for d in shape]
            st = [clamp(s, d, n) for s, d, n in zip(starts, shape, ushape)]
            want = x.copy()
            want[tuple(slice(s, s + n) for s, n in zip(st, ushape))] = u
            for name, a in layouts(x, dtype):
                got = call("em_dynamic_put_slice", a, array(np.array(starts), "s64"), arr(u, dtype))
                same(got, want)
                same(read(a), x)
