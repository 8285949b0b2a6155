"""numpy oracle for the shape, join and creation ops.

Shape ops only move elements, so results must equal numpy's exactly, for
every dtype (each element size: 1, 2, 4, 8, 16 bytes), on contiguous and
strided inputs (transposed, sliced with steps, reversed views).
"""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, E, P, I64P, array, call, lib, shape_arg, to_bf16_bits, EmilyError

IP = C.POINTER(C.c_int)
OUT = C.POINTER(P)
lib.em_reshape.argtypes = [P, I64P, C.c_int, OUT]
lib.em_transpose.argtypes = [P, IP, C.c_int, OUT]
lib.em_broadcast_to.argtypes = [P, I64P, C.c_int, OUT]
lib.em_squeeze.argtypes = [P, IP, C.c_int, OUT]
lib.em_expand_dims.argtypes = [P, C.c_int, OUT]
lib.em_slice.argtypes = [P, I64P, I64P, I64P, OUT]
lib.em_reverse.argtypes = [P, IP, C.c_int, OUT]
lib.em_contiguous.argtypes = [P, OUT]
lib.em_put_slice.argtypes = [P, I64P, P, OUT]
lib.em_concatenate.argtypes = [C.POINTER(P), C.c_size_t, C.c_int, OUT]
lib.em_iota.argtypes = [I64P, C.c_int, C.c_int, C.c_int, OUT]
lib.em_eye.argtypes = [I64P, C.c_int, C.c_int64, C.c_int, OUT]
lib.em_full.argtypes = [P, I64P, C.c_int, C.c_int, OUT]
lib.em_array_is_evaluated.argtypes = [P]
lib.em_array_is_evaluated.restype = C.c_bool

# One dtype per element size, then the rest.
SIZES = ["u8", "s16", "f32", "f64", "c128"]


def ints(values):
    values = list(values)
    return (C.c_int * max(1, len(values)))(*values), len(values)


def i64s(values):
    values = list(values)
    return (C.c_int64 * max(1, len(values)))(*values)


def arr(x, dtype):
    """emily_ctypes.array, also for 0-d values (np.ascontiguousarray there
    turns them into shape (1,)): build [1] and reshape to []."""
    x = np.asarray(x)
    if x.ndim > 0:
        return array(x, dtype)
    s, n = shape_arg(())
    return call("em_reshape", array(x.reshape(1), dtype), s, n)


def rand(rng, dtype, shape):
    """Random values of `dtype` as numpy holds them (bf16: float32 values
    that bf16 represents exactly)."""
    shape = tuple(int(d) for d in shape)
    if shape == ():
        return rand(rng, dtype, (1,)).reshape(())
    if dtype == "pred":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype[0] in "us":
        info = np.iinfo(np.dtype(dtype.replace("u", "uint").replace("s", "int")))
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=info.dtype)
    if dtype in ("c64", "c128"):
        x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return x.astype(np.complex64 if dtype == "c64" else np.complex128)
    x = rng.standard_normal(shape) * 100
    if dtype == "bf16":
        bits = to_bf16_bits(x.astype(np.float32)).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return x.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype])


def read(e):
    """E, also for 0-d bf16 (E.numpy's widening view needs ndim >= 1)."""
    if e.shape == () and e.dtype == "bf16":
        s, n = shape_arg((1,))
        return call("em_reshape", e, s, n).numpy().reshape(())
    return e.numpy()


def same(got, want):
    if isinstance(got, E):
        got = read(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype.kind in "fc":
        assert np.array_equal(g, w, equal_nan=True), (g, w)
    else:
        assert np.array_equal(g, w), (g, w)


def transpose(a, perm):
    p, n = ints(perm)
    return call("em_transpose", a, p, n)


def reverse(a, axes):
    p, n = ints(axes)
    return call("em_reverse", a, p, n)


def slice_(a, start, stop, strides):
    return call("em_slice", a, i64s(start), i64s(stop), i64s(strides))


def layouts(x, dtype):
    """(name, em_array) pairs that all hold x, through different layouts."""
    out = [("contiguous", arr(x, dtype))]
    if x.ndim == 0:
        return out
    perm = list(range(x.ndim))[::-1]
    out.append(("transposed", transpose(array(np.ascontiguousarray(np.transpose(x, perm)), dtype), perm)))
    big = np.zeros(tuple(2 * d + 1 for d in x.shape), dtype=x.dtype)
    big[tuple(slice(1, 2 * d + 1, 2) for d in x.shape)] = x
    out.append(("sliced", slice_(array(big, dtype), [1] * x.ndim, [2 * d + 1 for d in x.shape], [2] * x.ndim)))
    out.append(("reversed", reverse(array(np.ascontiguousarray(np.flip(x)), dtype), range(x.ndim))))
    return out


def test_layouts_read_back_all_dtypes():
    rng = np.random.default_rng(1)
    for dtype in DTYPES:
        x = rand(rng, dtype, (3, 4, 5))
        for name, a in layouts(x, dtype):
            same(a, x)
            same(call("em_contiguous", a), x)


def test_reshape():
    rng = np.random.default_rng(2)
    for dtype in DTYPES:
        x = rand(rng, dtype, (2, 3, 4))
        for name, a in layouts(x, dtype):
            for shape in [(24,), (4, 6), (2, 12, 1), (1, 2, 3, 1, 4), (-1, 4), (6, -1), ()]:
                if shape == ():
                    continue
                s, n = shape_arg(shape)
                got = call("em_reshape", a, s, n)
                same(got, x.reshape(shape))
    # reshape chains that keep views (sliced rows stay contiguous inside)
    x = rand(rng, "f32", (6, 8))
    a = slice_(array(x, "f32"), [1, 0], [5, 8], [1, 1])
    s, n = shape_arg((2, 2, 8))
    same(call("em_reshape", a, s, n), x[1:5].reshape(2, 2, 8))
    s, n = shape_arg((4, 4, 3))
    b = call("em_reshape", transpose(array(x, "f32"), [1, 0]), s, n)
    same(b, x.T.reshape(4, 4, 3))
    # 0-d and empty
    z = arr(np.float64(3.5), "f64")
    s, n = shape_arg((1, 1))
    same(call("em_reshape", z, s, n), np.full((1, 1), 3.5))
    e = array(np.zeros((0, 4)), "f32")
    s, n = shape_arg((2, 0, 3))
    assert call("em_reshape", e, s, n).shape == (2, 0, 3)


def test_transpose_ranks_0_to_8():
    rng = np.random.default_rng(3)
    for rank in range(9):
        for dtype in SIZES + ["pred", "bf16"]:
            shape = tuple(rng.integers(1, 4, rank))
            x = rand(rng, dtype, shape)
            perm = list(rng.permutation(rank))
            for name, a in layouts(x, dtype):
                same(transpose(a, perm), np.transpose(x, perm))
    # negative axes
    x = rand(rng, "s32", (2, 3, 4))
    same(transpose(array(x, "s32"), [-1, 0, -2]), np.transpose(x, [2, 0, 1]))


def test_broadcast_to():
    rng = np.random.default_rng(4)
    cases = [((), (3, 2)), ((3,), (2, 3)), ((2, 1), (2, 5)), ((1, 3, 1), (4, 2, 3, 6)),
             ((2, 1), (0, 2, 0)), ((1,), (7,))]
    for dtype in DTYPES:
        for src, dst in cases:
            x = rand(rng, dtype, src)
            for name, a in layouts(x, dtype):
                s, n = shape_arg(dst)
                b = call("em_broadcast_to", a, s, n)
                same(b, np.broadcast_to(x, dst))
                same(call("em_contiguous", b), np.broadcast_to(x, dst))
    try:
        s, n = shape_arg((4,))
        call("em_broadcast_to", array(np.zeros(3), "f32"), s, n)
        assert False
    except EmilyError as e:
        assert e.status == 1 and "broadcast_to" in e.message


def test_squeeze_expand_dims():
    rng = np.random.default_rng(5)
    for dtype in SIZES:
        x = rand(rng, dtype, (1, 3, 1, 4, 1))
        for name, a in layouts(x, dtype):
            p, n = ints([])
            same(call("em_squeeze", a, p, n), np.squeeze(x))
            p, n = ints([0, -1])
            same(call("em_squeeze", a, p, n), np.squeeze(x, (0, 4)))
            for axis in range(-6, 6):
                same(call("em_expand_dims", a, axis), np.expand_dims(x, axis))


def test_slice_random():
    rng = np.random.default_rng(6)
    for trial in range(120):
        dtype = DTYPES[trial % len(DTYPES)]
        rank = int(rng.integers(1, 5))
        shape = tuple(int(d) for d in rng.integers(0, 6, rank))
        x = rand(rng, dtype, shape)
        start, stop, step = [], [], []
        for d in shape:
            a0 = int(rng.integers(0, d + 1))
            b0 = int(rng.integers(a0, d + 1))
            start.append(a0), stop.append(b0), step.append(int(rng.integers(1, 4)))
        want = x[tuple(slice(a0, b0, s) for a0, b0, s in zip(start, stop, step))]
        for name, a in layouts(x, dtype):
            got = slice_(a, start, stop, step)
            same(got, want)
            # a view of a view: reverse then slice again
            r = reverse(got, [0])
            same(r, np.flip(want, 0))


def test_reverse():
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        x = rand(rng, dtype, (2, 3, 4))
        for name, a in layouts(x, dtype):
            for axes in [[0], [1], [2], [0, 2], [-1, -2, -3], []]:
                same(reverse(a, axes), np.flip(x, axes) if axes else x)


def test_large_strided_copies():
    # Above the parallel grain: the threaded copy paths.
    rng = np.random.default_rng(8)
    for dtype in SIZES:
        x = rand(rng, dtype, (700, 301))
        a = array(x, dtype)
        same(call("em_contiguous", transpose(a, [1, 0])), x.T)
        same(call("em_contiguous", reverse(a, [1])), x[:, ::-1])
        same(slice_(a, [1, 3], [700, 301], [3, 2]), x[1::3, 3::2])
        # tiled transposes with outer axes and partial tiles
        y = rand(rng, dtype, (3, 40, 2, 50))
        for perm in ([0, 3, 2, 1], [3, 1, 0, 2], [2, 3, 0, 1]):
            same(call("em_contiguous", transpose(array(y, dtype), perm)), np.transpose(y, perm))
    x = rand(rng, "f32", (1 << 21,))
    same(reverse(array(x, "f32"), [0]), x[::-1])
    s, n = shape_arg((512, 2048))
    same(call("em_broadcast_to", array(x[:2048], "f32"), s, n), np.broadcast_to(x[:2048], (512, 2048)))


def test_put_slice():
    rng = np.random.default_rng(9)
    for dtype in DTYPES:
        x = rand(rng, dtype, (5, 6, 3))
        u = rand(rng, dtype, (2, 4, 3))
        want = x.copy()
        want[3:5, 1:5, 0:3] = u
        for name, a in layouts(x, dtype):
            for uname, b in layouts(u, dtype):
                same(call("em_put_slice", a, i64s([3, 1, 0]), b), want)
    # 0-d and empty updates
    same(call("em_put_slice", arr(np.int32(1), "s32"), i64s([]), arr(np.int32(7), "s32")), np.int32(7))
    x = rand(rng, "f32", (3, 3))
    same(call("em_put_slice", array(x, "f32"), i64s([3, 1]), array(np.zeros((0, 2)), "f32")), x)
    for start in ([-1, 0], [2, 0], [0, 3]):
        try:
            call("em_put_slice", array(x, "f32"), i64s(start), array(np.zeros((2, 1)), "f32"))
            assert start == [0, 3] and False
        except EmilyError as e:
            assert e.status == 1 and "put_slice" in e.message


def test_concatenate():
    rng = np.random.default_rng(10)
    for dtype in DTYPES:
        for axis in range(-3, 3):
            parts = []
            for i in range(3):
                shape = [2, 3, 4]
                shape[axis] = [1, 0, 3][i]
                parts.append(rand(rng, dtype, tuple(shape)))
            ems = []
            for i, x in enumerate(parts):
                ems.append(layouts(x, dtype)[(i + axis) % 4][1])
            arr = (P * len(ems))(*[e.ptr for e in ems])
            got = call("em_concatenate", arr, len(ems), axis)
            same(got, np.concatenate(parts, axis))
    x = rand(rng, "f32", (300, 400))
    y = rand(rng, "f32", (300, 500))
    ems = [array(x, "f32"), transpose(array(np.ascontiguousarray(y.T), "f32"), [1, 0])]
    arr = (P * 2)(*[e.ptr for e in ems])
    same(call("em_concatenate", arr, 2, 1), np.concatenate([x, y], 1))


def test_iota_eye_full():
    for dtype in DTYPES:
        d = DTYPES.index(dtype)
        for shape, axis in [((4, 3), 0), ((4, 3), -1), ((2, 300, 2), 1), ((5,), 0), ((0, 2), 1)]:
            s, n = shape_arg(shape)
            got = call("em_iota", s, n, axis, d).numpy()
            count = np.arange(shape[axis]).reshape([-1 if i == axis % len(shape) else 1 for i in range(len(shape))])
            want = np.broadcast_to(count, shape)
            if dtype == "pred":
                want = want != 0
            elif dtype == "bf16":
                want = (to_bf16_bits(want.astype(np.float32)).astype(np.uint32) << 16).view(np.float32)
            elif dtype[0] in "us":
                want = want.astype(np.int64).astype(np.dtype(dtype.replace("u", "uint").replace("s", "int")))
            else:
                want = want.astype(got.dtype)
            same(got, want)
        for shape, k in [((3, 3), 0), ((3, 5), 1), ((2, 4, 3), -1), ((4, 2), 5), ((4, 2), -9), ((1, 0, 2), 0)]:
            s, n = shape_arg(shape)
            got = call("em_eye", s, n, k, d).numpy()
            want = np.broadcast_to(np.eye(shape[-2], shape[-1], k), shape)
            same(got, want.astype(got.dtype))
        v = rand(np.random.default_rng(d), dtype, (3,))
        s, n = shape_arg((2, 3))
        got = call("em_full", array(v, dtype), s, n, d)
        assert lib.em_array_is_evaluated(got.ptr) is False
        same(got, np.broadcast_to(v, (2, 3)))
