"""numpy oracle for gather, take, take_along_axis, indexed_add/put and
indices_in_range: np.take, np.take_along_axis, fancy indexing and
np.add.at on the same inputs, every data dtype (each element size), every
integer index dtype, strided inputs, out-of-range indices (clamped)."""
import ctypes as C

import numpy as np

from emily_ctypes import DTYPES, P, call, lib, EmilyError
from test_shape import IP, OUT, arr, ints, layouts, rand, same

lib.em_gather.argtypes = [P, P, IP, C.c_int, OUT]
lib.em_take.argtypes = [P, P, C.c_int, OUT]
lib.em_take_along_axis.argtypes = [P, P, C.c_int, OUT]
lib.em_indexed_add.argtypes = [P, P, P, IP, C.c_int, OUT]
lib.em_indexed_put.argtypes = [P, P, P, IP, C.c_int, OUT]
lib.em_indices_in_range.argtypes = [P, C.c_int64, OUT]

INDEX_DTYPES = ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"]


def indices(rng, dim, shape, lo=0):
    """Random indices in [lo, dim) (lo < 0 or dim beyond the axis: out of
    range, to be clamped)."""
    return rng.integers(lo, max(dim, lo + 1), shape)


def clamp(i, dim):
    return np.clip(i, 0, dim - 1)


def test_take():
    rng = np.random.default_rng(20)
    for t, dtype in enumerate(DTYPES):
        x = rand(rng, dtype, (4, 5, 3))
        for axis in range(-3, 3):
            dim = x.shape[axis]
            for ishape in [(), (7,), (2, 3)]:
                idx = indices(rng, dim, ishape)
                idt = INDEX_DTYPES[(t + axis) % len(INDEX_DTYPES)]
                want = np.take(x, idx, axis)
                for name, a in layouts(x, dtype):
                    same(call("em_take", a, arr(idx, idt), axis), want)
    # out of range: clamped into [0, dim - 1]; u64 above INT64_MAX saturates
    x = rand(rng, "f32", (6, 4))
    idx = np.array([-5, 0, 9, 3, -1, 100])
    same(call("em_take", arr(x, "f32"), arr(idx, "s64"), 0), np.take(x, clamp(idx, 6), 0))
    big = np.array([2**64 - 1, 2**63, 1], dtype=np.uint64)
    same(call("em_take", arr(x, "f32"), arr(big, "u64"), 1), x[:, [3, 3, 1]])
    # large: threaded paths (element rows and block rows)
    x = rand(rng, "f64", (2000, 300))
    idx = indices(rng, 2000, (500,))
    same(call("em_take", arr(x, "f64"), arr(idx, "s32"), 0), x[idx])
    idx = indices(rng, 300, (400,))
    same(call("em_take", arr(x, "f64"), arr(idx, "u16"), 1), x[:, idx])


def test_gather():
    rng = np.random.default_rng(21)
    for t, dtype in enumerate(DTYPES):
        x = rand(rng, dtype, (3, 4, 5))
        for axes in [[0], [1], [2], [0, 1], [2, 0], [0, 1, 2], [-1, 1], []]:
            k = len(axes) if axes else 2
            real_axes = [a % 3 for a in axes] if axes else [0, 1]
            for prefix in [(), (6,), (2, 3)]:
                cols = [indices(rng, x.shape[ax], prefix + (1,), lo=-1) for ax in real_axes]
                idx = np.concatenate(cols, -1) if cols else np.zeros(prefix + (0,), np.int64)
                moved = np.moveaxis(x, real_axes, list(range(k)))
                want = moved[tuple(clamp(idx[..., j], x.shape[real_axes[j]]) for j in range(k))]
                idt = INDEX_DTYPES[(t + k) % 4 + 4]  # signed: the -1s
                p, n = ints(axes)
                for name, a in layouts(x, dtype):
                    same(call("em_gather", a, arr(idx, idt), p, n), want)
    # Nx's doc example: gather with axes: [1]
    t2 = np.array([[1, 2], [3, 4]])
    p, n = ints([1])
    same(call("em_gather", arr(t2, "s64"), arr(np.array([[1], [0]]), "s64"), p, n),
         np.array([[2, 4], [1, 3]]))


def test_take_along_axis():
    rng = np.random.default_rng(22)
    for t, dtype in enumerate(DTYPES):
        x = rand(rng, dtype, (3, 4, 5))
        for axis in range(-3, 3):
            ishape = list(x.shape)
            ishape[axis] = 6
            if t % 2:  # broadcast the indices along another axis
                ishape[(axis + 1) % 3] = 1
            idx = indices(rng, x.shape[axis], tuple(ishape), lo=-2)
            want = np.take_along_axis(x, clamp(idx, x.shape[axis]), axis)
            for name, a in layouts(x, dtype):
                same(call("em_take_along_axis", a, arr(idx, "s16"), axis), want)
    # a broadcast against the indices (size-1 axis of a)
    x = rand(rng, "f32", (1, 5))
    idx = indices(rng, 5, (3, 2))
    same(call("em_take_along_axis", arr(x, "f32"), arr(idx, "u8"), 1),
         np.take_along_axis(np.broadcast_to(x, (3, 5)), idx, 1))
    x = rand(rng, "s32", (400, 500))
    idx = indices(rng, 500, (400, 300))
    same(call("em_take_along_axis", arr(x, "s32"), arr(idx, "s64"), 1), np.take_along_axis(x, idx, 1))


def add_at(x, axes, idx, upd):
    out = x.copy()
    k = idx.shape[-1]
    moved = np.moveaxis(out, axes, list(range(k)))
    np.add.at(moved, tuple(clamp(idx[..., j], x.shape[axes[j]]) for j in range(k)), upd)
    return out


def test_indexed_add():
    rng = np.random.default_rng(23)
    for t, dtype in enumerate(DTYPES):
        x = rand(rng, dtype, (4, 3, 5))
        for axes in [[0], [2], [0, 1], [1, 0], [0, 1, 2], []]:
            real = axes if axes else [0]
            k = len(real)
            rest = tuple(d for i, d in enumerate(x.shape) if i not in real)
            for prefix in [(), (9,), (3, 4)]:
                idx = np.concatenate([indices(rng, x.shape[ax], prefix + (1,), lo=-1) for ax in real], -1)
                upd = rand(rng, dtype, prefix + rest)
                if dtype in ("f16", "bf16", "f32", "c64"):
                    upd = upd / 16  # keep the sums' rounding small
                    if dtype == "bf16":
                        upd = rand(rng, "bf16", prefix + rest)
                want = add_at(x.astype(np.float64) if dtype == "bf16" else x, real, idx, upd)
                p, n = ints(axes)
                idt = INDEX_DTYPES[(t + k) % 4 + 4]
                for name, a in layouts(x, dtype)[:2]:
                    got = call("em_indexed_add", a, arr(idx, idt), arr(upd, dtype), p, n)
                    if dtype in ("f16", "bf16", "f32", "c64"):
                        g = got.numpy()
                        tol = {"f16": 1e-2, "bf16": 6e-2, "f32": 1e-5, "c64": 1e-5}[dtype]
                        assert np.allclose(g.astype(np.complex128), want.astype(np.complex128),
                                           rtol=tol, atol=tol * np.abs(want).max()), (dtype, axes, g, want)
                    else:
                        same(got, want)
    # integer sums wrap
    x = np.array([250, 10], dtype=np.uint8)
    idx = np.array([[0], [0], [1]])
    upd = np.array([3, 4, 255], dtype=np.uint8)
    p, n = ints([])
    same(call("em_indexed_add", arr(x, "u8"), arr(idx, "s32"), arr(upd, "u8"), p, n),
         np.array([1, 9], dtype=np.uint8))
    x = np.array([127, -128], dtype=np.int8)
    upd = np.array([1, 1, -1], dtype=np.int8)
    same(call("em_indexed_add", arr(x, "s8"), arr(idx, "u8"), arr(upd, "s8"), p, n),
         np.array([-127, 127], dtype=np.int8))
    # large rows: the threaded path over rest positions
    x = rand(rng, "f64", (50, 4000))
    idx = indices(rng, 50, (40, 1))
    upd = rand(rng, "f64", (40, 4000))
    got = call("em_indexed_add", arr(x, "f64"), arr(idx, "s64"), arr(upd, "f64"), p, n)
    assert np.allclose(got.numpy(), add_at(x, [0], idx, upd))


def test_indexed_put():
    rng = np.random.default_rng(24)
    for t, dtype in enumerate(DTYPES):
        x = rand(rng, dtype, (5, 3, 4))
        for axes in [[0], [1, 2], [2, 0, 1]]:
            k = len(axes)
            rest = tuple(d for i, d in enumerate(x.shape) if i not in axes)
            # distinct rows so numpy's assignment order does not matter
            space = np.stack(np.meshgrid(*[np.arange(x.shape[a]) for a in axes], indexing="ij"), -1).reshape(-1, k)
            idx = space[rng.permutation(len(space))[:4]]
            upd = rand(rng, dtype, (4,) + rest)
            want = x.copy()
            moved = np.moveaxis(want, axes, list(range(k)))
            moved[tuple(idx[:, j] for j in range(k))] = upd
            p, n = ints(axes)
            for name, a in layouts(x, dtype):
                for uname, u in layouts(upd, dtype)[:2]:
                    same(call("em_indexed_put", a, arr(idx, INDEX_DTYPES[t % 8]), u, p, n), want)
    # duplicates: the last write wins; out of range is clamped
    x = np.zeros(4, dtype=np.int16)
    idx = np.array([[1], [1], [9], [-3]])
    upd = np.array([5, 6, 7, 8], dtype=np.int16)
    p, n = ints([0])
    same(call("em_indexed_put", arr(x, "s16"), arr(idx, "s64"), arr(upd, "s16"), p, n),
         np.array([8, 6, 0, 7], dtype=np.int16))


def test_indices_in_range():
    for idt in INDEX_DTYPES + ["pred"]:
        for vals, bound, want in [([0, 1, 2], 3, True), ([0, 3], 3, False), ([], 0, True), ([1], 0, False)]:
            v = np.array(vals, dtype=np.int64)
            got = call("em_indices_in_range", arr(v.astype(np.bool_) if idt == "pred" else v, idt), bound)
            if idt == "pred":
                want = bool(np.all((v != 0) < bound)) if len(v) else True
            assert bool(got.numpy()) == want, (idt, vals, bound)
    assert bool(call("em_indices_in_range", arr(np.array([-1, 0]), "s8"), 5).numpy()) is False
    assert bool(call("em_indices_in_range", arr(np.array([2**63]), "u64"), 2**62).numpy()) is False
    x = np.arange(12).reshape(3, 4)
    a = layouts(x, "s32")[1][1]
    assert bool(call("em_indices_in_range", a, 12).numpy()) is True
    assert bool(call("em_indices_in_range", a, 11).numpy()) is False


def test_errors():
    x = arr(np.zeros((3, 4)), "f32")
    p, n = ints([])
    for fn, args, text in [
        ("em_take", (x, arr(np.zeros(2), "f32"), 0), "integer dtype"),
        ("em_take", (x, arr(np.zeros(2), "s32"), 2), "axis 2"),
        ("em_gather", (x, arr(np.zeros((2, 3)), "s32"), p, n), "address 3 axes"),
        ("em_take_along_axis", (x, arr(np.zeros((3,)), "s32"), 0), "rank"),
        ("em_take_along_axis", (x, arr(np.zeros((2, 2)), "s32"), 0), "broadcast"),
        ("em_indexed_add", (x, arr(np.zeros((2, 1)), "s32"), arr(np.zeros((2, 3)), "f32"), p, n), "expected updates of shape [2,4]"),
        ("em_indexed_put", (x, arr(np.zeros((2, 1)), "s32"), arr(np.zeros((2, 4)), "f64"), p, n), "dtype"),
        ("em_take", (arr(np.zeros((0, 2)), "f32"), arr(np.zeros(2), "s32"), 0), "empty"),
    ]:
        try:
            call(fn, *args)
            assert False, fn
        except EmilyError as e:
            assert e.status == 1 and text in e.message, (fn, e.message)
