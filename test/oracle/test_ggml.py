"""Oracle tests for include/emily_ggml.h.

Dequantization is checked bit for bit against golden values made by the
`gguf` package's numpy dequantizers (scripts/ggml_golden.py regenerates
test/oracle/golden/ggml_blocks.npz). em_ggml_matmul is checked against
float64 x @ W^T on the golden dequantized weights, within the bound of f32
accumulation: |err| <= 2 K 2^-24 sum_k |x_k w_k| (K roundings of at most
half an ulp each, doubled for the lane sums and the final adds), plus one
rounding of the result to x's dtype for f16/bf16.
"""
import ctypes as C
import pathlib

import numpy as np

from emily_ctypes import E, EmilyError, array, check, lib

P = C.c_void_p
lib.em_ggml_dequantize.argtypes = [P, C.c_int, C.c_int64, C.c_int, C.POINTER(P)]
lib.em_ggml_matmul.argtypes = [P, P, C.c_int, C.c_int64, C.POINTER(P)]

GOLDEN = np.load(pathlib.Path(__file__).parent / "golden" / "ggml_blocks.npz")
# name: (ggml type number, weights per block, bytes per block)
TYPES = {"q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22),
         "q5_1": (7, 32, 24), "q8_0": (8, 32, 34), "q4_k": (12, 256, 144),
         "q5_k": (13, 256, 176), "q6_k": (14, 256, 210)}
DT = {"f16": 9, "bf16": 10, "f32": 11, "f64": 12}


def dequantize(raw, t, k, dtype):
    out = P()
    check(lib.em_ggml_dequantize(raw.ptr, TYPES[t][0], k, DT[dtype], C.byref(out)))
    return E(out.value).numpy()


def matmul(x, raw, t, k):
    out = P()
    check(lib.em_ggml_matmul(x.ptr, raw.ptr, TYPES[t][0], k, C.byref(out)))
    return E(out.value).numpy()


def blocks(t, rows, k):
    """The golden rows [0, rows) and their first k weights."""
    _, be, bb = TYPES[t]
    raw = GOLDEN[t + "_raw"][:rows, : k // be * bb]
    return np.ascontiguousarray(raw), GOLDEN[t + "_deq"][:rows, :k]


def test_ggml_dequantize_bit_exact():
    for t in TYPES:
        raw, want = blocks(t, 8, 512)
        got = dequantize(array(raw, "u8"), t, 512, "f32")
        assert got.dtype == np.float32 and got.shape == want.shape
        bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        assert bad.size == 0, (t, bad[:5], got.ravel()[bad[:5]], want.ravel()[bad[:5]])
        # The other dtypes are the f32 values converted.
        assert np.array_equal(dequantize(array(raw, "u8"), t, 512, "f64"), want.astype(np.float64))
        f16 = dequantize(array(raw, "u8"), t, 512, "f16")
        assert np.array_equal(f16.view(np.uint16), want.astype(np.float16).view(np.uint16)), t
        bf = dequantize(array(raw, "u8"), t, 512, "bf16")
        from emily_ctypes import to_bf16_bits
        want_bf = (to_bf16_bits(want).astype(np.uint32) << np.uint32(16)).view(np.float32)
        assert np.array_equal(bf.view(np.uint32), want_bf.view(np.uint32)), t


def check_matmul(t, m, n, k, dtype, rng, batch=()):
    raw, w = blocks(t, n, k)
    x = rng.standard_normal(batch + (m, k)).astype(np.float32)
    if dtype == "f16":
        x = x.astype(np.float16).astype(np.float32)
    elif dtype == "bf16":
        from emily_ctypes import to_bf16_bits
        x = (to_bf16_bits(x).astype(np.uint32) << np.uint32(16)).view(np.float32)
    got = matmul(array(x, dtype), array(raw, "u8"), t, k).astype(np.float64)
    w64 = w.astype(np.float64)
    want = x.astype(np.float64) @ w64.T
    bound = 2.0 * k * 2.0 ** -24 * (np.abs(x.astype(np.float64)) @ np.abs(w64).T)
    if dtype != "f32":
        rel = 2.0 ** -11 if dtype == "f16" else 2.0 ** -8
        bound = bound * (1 + rel) + rel * np.abs(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want)
    assert (err <= bound + 1e-30).all(), (t, m, n, k, dtype, float((err - bound).max()))


def test_ggml_matmul_f32_against_float64():
    rng = np.random.default_rng(1)
    for t in TYPES:
        be = TYPES[t][1]
        for m in (1, 2, 17):
            for n, k in ((1, 256), (5, 512), (8, 256), (8, 512)):
                if k % be == 0:
                    check_matmul(t, m, n, k, "f32", rng)
        if be == 32:
            check_matmul(t, 3, 7, 96, "f32", rng)


def test_ggml_matmul_streaming_rows():
    # The streaming kernels decode several weight rows per pass (tails when
    # N is not a multiple) and have one variant per number of x rows (1..8);
    # N * K past 2^19 weights splits the rows over the thread pool.
    rng = np.random.default_rng(4)
    for t in TYPES:
        for m in range(1, 9):
            check_matmul(t, m, 13, 512, "f32", rng)
        check_matmul(t, 1, 1031, 512, "f32", rng)
        check_matmul(t, 3, 1031, 512, "f32", rng)


def test_ggml_matmul_half_inputs_and_batches():
    rng = np.random.default_rng(2)
    for t in ("q4_0", "q6_k", "q5_1"):
        for dtype in ("f16", "bf16"):
            for m in (1, 17):
                check_matmul(t, m, 8, 512, dtype, rng)
        check_matmul(t, 3, 8, 256, "f32", rng, batch=(2,))
        check_matmul(t, 9, 4, 256, "f32", rng, batch=(2, 1))


def test_ggml_matmul_vector_and_empty():
    rng = np.random.default_rng(3)
    raw, w = blocks("q8_0", 8, 256)
    x = rng.standard_normal(256).astype(np.float32)
    got = matmul(array(x, "f32"), array(raw, "u8"), "q8_0", 256)
    assert got.shape == (8,)
    assert np.allclose(got, w.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)
    got = matmul(array(np.zeros((0, 256), np.float32), "f32"), array(raw, "u8"), "q8_0", 256)
    assert got.shape == (0, 8)
    got = matmul(array(np.zeros((2, 0), np.float32), "f32"),
                 array(np.zeros((3, 0), np.uint8), "u8"), "q4_k", 0)
    assert got.shape == (2, 3) and (got == 0).all()


def expect_error(fn, *words):
    try:
        fn()
    except EmilyError as e:
        for w in words:
            assert w in e.message, (w, e.message)
        return
    raise AssertionError("no error")


def test_ggml_validation():
    raw, _ = blocks("q4_0", 4, 64)
    r = array(raw, "u8")
    x = array(np.zeros((1, 64), np.float32), "f32")
    expect_error(lambda: matmul(x, r, "q4_1", 64), "ggml_matmul", "q4_1", "u8[4,36]", "(N, 40)")
    expect_error(lambda: matmul(x, array(raw.astype(np.int8), "s8"), "q4_0", 64), "u8 matrix", "s8[4,36]")
    expect_error(lambda: matmul(array(np.zeros((1, 32), np.float32), "f32"), r, "q4_0", 64),
                 "f32[1,32]", "K = 64")
    expect_error(lambda: matmul(array(np.zeros((1, 64), np.float64), "f64"), r, "q4_0", 64),
                 "f64[1,64]", "f32, f16 or bf16")
    expect_error(lambda: dequantize(r, "q4_0", 48, "f32"), "ggml_dequantize", "multiple", "32")
    out = P()
    st = lib.em_ggml_dequantize(r.ptr, 99, 64, DT["f32"], C.byref(out))
    assert st != 0 and b"99" in lib.em_last_error()
    st = lib.em_ggml_dequantize(r.ptr, 1, 64, DT["f32"], C.byref(out))
    assert st != 0 and b"f16" in lib.em_last_error()
    expect_error(lambda: dequantize(r, "q4_0", 64, "bf16") if False else
                 check(lib.em_ggml_dequantize(r.ptr, 2, 64, 5, C.byref(P()))), "s8", "f32, f16, bf16, f64")
