"""Weight files against reference writers: the golden files under
golden/ were written by the `safetensors` and `gguf` PyPI packages
(scripts/io_golden.py regenerates them); the expected values are the numpy
arrays stored beside them. Only numpy is needed here."""
import ctypes as C
import hashlib
import json
import os
import pathlib
import tempfile

import numpy as np

from emily_ctypes import DTYPES, MAX_NDIM, E, NP, P, array, check, lib

GOLDEN = pathlib.Path(__file__).parent / "golden"


class StTensor(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype_name", C.c_char_p),
                ("dtype", C.c_int), ("ndim", C.c_int),
                ("shape", C.POINTER(C.c_int64)), ("begin", C.c_int64),
                ("end", C.c_int64)]


class GgufValue(C.Structure):
    _fields_ = [("type", C.c_int), ("data", C.c_void_p), ("len", C.c_uint64),
                ("elem_type", C.c_int), ("internal_", C.c_void_p)]


class GgufTensor(C.Structure):
    _fields_ = [("name", C.c_void_p), ("name_len", C.c_size_t),
                ("n_dims", C.c_int), ("dims", C.c_uint64 * MAX_NDIM),
                ("shape", C.c_int64 * MAX_NDIM), ("ggml_type", C.c_int),
                ("type_name", C.c_char_p), ("offset", C.c_uint64),
                ("nbytes", C.c_uint64)]


lib.em_safetensors_open.argtypes = [C.c_char_p, C.POINTER(P)]
lib.em_safetensors_close.argtypes = [P]
lib.em_safetensors_count.argtypes = [P]
lib.em_safetensors_count.restype = C.c_int64
lib.em_safetensors_tensor_at.argtypes = [P, C.c_int64, C.POINTER(StTensor)]
lib.em_safetensors_get.argtypes = [P, C.c_char_p, C.POINTER(P)]
lib.em_safetensors_metadata_count.argtypes = [P]
lib.em_safetensors_metadata_count.restype = C.c_int64
lib.em_safetensors_metadata_at.argtypes = [P, C.c_int64, C.POINTER(C.c_char_p),
                                           C.POINTER(C.c_char_p)]
lib.em_safetensors_save.argtypes = [C.c_char_p, C.POINTER(C.c_char_p),
                                    C.POINTER(P), C.c_size_t,
                                    C.POINTER(C.c_char_p),
                                    C.POINTER(C.c_char_p), C.c_size_t]
lib.em_safetensors_index_open.argtypes = [C.c_char_p, C.POINTER(P)]
lib.em_safetensors_index_close.argtypes = [P]
lib.em_safetensors_index_count.argtypes = [P]
lib.em_safetensors_index_count.restype = C.c_int64
lib.em_safetensors_index_at.argtypes = [P, C.c_int64, C.POINTER(C.c_char_p),
                                        C.POINTER(C.c_char_p)]
lib.em_gguf_open.argtypes = [C.c_char_p, C.POINTER(P)]
lib.em_gguf_close.argtypes = [P]
lib.em_gguf_version.argtypes = [P]
lib.em_gguf_version.restype = C.c_uint32
lib.em_gguf_find_kv.argtypes = [P, C.c_char_p, C.POINTER(GgufValue)]
lib.em_gguf_value_i64.argtypes = [C.POINTER(GgufValue), C.POINTER(C.c_int64)]
lib.em_gguf_value_u64.argtypes = [C.POINTER(GgufValue), C.POINTER(C.c_uint64)]
lib.em_gguf_value_f64.argtypes = [C.POINTER(GgufValue), C.POINTER(C.c_double)]
lib.em_gguf_value_string.argtypes = [C.POINTER(GgufValue),
                                     C.POINTER(C.c_void_p),
                                     C.POINTER(C.c_size_t)]
lib.em_gguf_value_element.argtypes = [C.POINTER(GgufValue), C.c_uint64,
                                      C.POINTER(GgufValue)]
lib.em_gguf_tensor_count.argtypes = [P]
lib.em_gguf_tensor_count.restype = C.c_int64
lib.em_gguf_find_tensor.argtypes = [P, C.c_char_p]
lib.em_gguf_find_tensor.restype = C.c_int64
lib.em_gguf_tensor_at.argtypes = [P, C.c_int64, C.POINTER(GgufTensor)]
lib.em_gguf_get.argtypes = [P, C.c_char_p, C.POINTER(P), C.POINTER(C.c_int)]


def raw_bytes(e):
    """The bytes of an E (any dtype) as a uint8 numpy array."""
    n = lib.em_array_nbytes(e.ptr)
    out = np.empty(n, np.uint8)
    check(lib.em_read(e.ptr, out.ctypes.data_as(P), n))
    return out


def golden_npz(name):
    with np.load(GOLDEN / name) as z:
        return {k.replace("__dot__", "."): z[k] for k in z.files}


# ---- safetensors ------------------------------------------------------------

ST_NAMES = {"bool": "BOOL", "u8": "U8", "i8": "I8", "u16": "U16",
            "i16": "I16", "u32": "U32", "i32": "I32", "u64": "U64",
            "i64": "I64", "f16": "F16", "bf16": "BF16", "f32": "F32",
            "f64": "F64", "scalar": "F32", "empty": "F32",
            "layer.0.weight\u00e9": "F32", "f8": "F8_E4M3"}


def test_safetensors_golden_every_dtype():
    expected = golden_npz("st_dtypes.npz")
    f = P()
    check(lib.em_safetensors_open(str(GOLDEN / "st_dtypes.safetensors").encode(),
                                  C.byref(f)))
    try:
        n = lib.em_safetensors_count(f)
        seen = {}
        for i in range(n):
            t = StTensor()
            check(lib.em_safetensors_tensor_at(f, i, C.byref(t)))
            seen[t.name.decode()] = (t.dtype_name.decode(),
                                     tuple(t.shape[d] for d in range(t.ndim)))
        assert set(seen) == set(expected), (set(seen), set(expected))
        for name, want in expected.items():
            dtype_name, shape = seen[name]
            assert dtype_name == ST_NAMES[name], (name, dtype_name)
            assert shape == want.shape, (name, shape, want.shape)
            out = P()
            st = lib.em_safetensors_get(f, name.encode(), C.byref(out))
            if name == "f8":
                assert st == 6 and b"F8_E4M3" in lib.em_last_error(), st
                continue
            check(st)
            e = E(out.value)
            assert e.shape == want.shape
            assert np.array_equal(raw_bytes(e),
                                  np.ascontiguousarray(want).view(np.uint8).reshape(-1)), name
            if name != "bf16":
                np.testing.assert_array_equal(e.numpy(), want)
        meta = {}
        for i in range(lib.em_safetensors_metadata_count(f)):
            k, v = C.c_char_p(), C.c_char_p()
            check(lib.em_safetensors_metadata_at(f, i, C.byref(k), C.byref(v)))
            meta[k.value.decode()] = v.value.decode()
        assert meta == {"format": "np", "note": "golden \u00e9"}, meta
    finally:
        lib.em_safetensors_close(f)


def test_safetensors_sharded_index():
    ix = P()
    path = GOLDEN / "st_sharded" / "model.safetensors.index.json"
    check(lib.em_safetensors_index_open(str(path).encode(), C.byref(ix)))
    try:
        got = {}
        for i in range(lib.em_safetensors_index_count(ix)):
            t, f = C.c_char_p(), C.c_char_p()
            check(lib.em_safetensors_index_at(ix, i, C.byref(t), C.byref(f)))
            got[t.value.decode()] = f.value.decode()
    finally:
        lib.em_safetensors_index_close(ix)
    assert got == json.loads(path.read_text())["weight_map"], got


def roundtrip_tensors():
    """What the golden round trip writes through em_safetensors_save."""
    rng = np.random.default_rng(3)
    return {
        "w": rng.standard_normal((3, 4)).astype(np.float32),
        "ids": np.array([[1, -2], [3, 2**40]], np.int64),
        "mask": np.array([True, False, True]),
        "half": rng.standard_normal(5).astype(np.float16),
        "bytes": np.arange(7, dtype=np.uint8),
        "scalar": np.array(-1.5, np.float64),
        "empty": np.zeros((0, 3), np.int32),
    }


def emily_save(path, tensors, metadata):
    np_to_dtype = {np.dtype(v): k for k, v in NP.items() if k != "bf16"}
    arrays = [array(v, np_to_dtype[v.dtype]) for v in tensors.values()]
    names = (C.c_char_p * len(tensors))(*[k.encode() for k in tensors])
    ptrs = (P * len(arrays))(*[a.ptr for a in arrays])
    keys = (C.c_char_p * len(metadata))(*[k.encode() for k in metadata])
    vals = (C.c_char_p * len(metadata))(*[v.encode() for v in metadata.values()])
    check(lib.em_safetensors_save(str(path).encode(), names, ptrs, len(arrays),
                                  keys, vals, len(metadata)))


def test_safetensors_writer_matches_recorded_round_trip():
    """Our writer's bytes are those that the reference reader accepted when
    the golden files were made (scripts/io_golden.py loads them with
    safetensors.numpy.load_file and records the file's hash)."""
    record = json.loads((GOLDEN / "roundtrip.json").read_text())
    assert record["python_safetensors_load_file"] == "ok"
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "out.safetensors"
        emily_save(path, roundtrip_tensors(), {"writer": "emily"})
        data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == record["sha256"]
    assert data == (GOLDEN / "emily_written.safetensors").read_bytes()
    header_len = int.from_bytes(data[:8], "little")
    assert header_len % 8 == 0
    header = json.loads(data[8:8 + header_len])
    assert header["__metadata__"] == {"writer": "emily"}
    assert sorted(k for k in header if k != "__metadata__") == record["tensors"]


# ---- GGUF -------------------------------------------------------------------

def gguf_value(f, key):
    v = GgufValue()
    check(lib.em_gguf_find_kv(f, key.encode(), C.byref(v)))
    return v


def decode_value(v):
    if v.type == 8:
        p, n = C.c_void_p(), C.c_size_t()
        check(lib.em_gguf_value_string(C.byref(v), C.byref(p), C.byref(n)))
        return C.string_at(p, n.value).decode()
    if v.type == 9:
        out = []
        for i in range(v.len):
            e = GgufValue()
            check(lib.em_gguf_value_element(C.byref(v), i, C.byref(e)))
            out.append(decode_value(e))
        return out
    if v.type in (6, 12):
        x = C.c_double()
        check(lib.em_gguf_value_f64(C.byref(v), C.byref(x)))
        return x.value
    if v.type == 7:
        x = C.c_int64()
        check(lib.em_gguf_value_i64(C.byref(v), C.byref(x)))
        return bool(x.value)
    if v.type == 10:
        x = C.c_uint64()
        check(lib.em_gguf_value_u64(C.byref(v), C.byref(x)))
        return x.value
    x = C.c_int64()
    check(lib.em_gguf_value_i64(C.byref(v), C.byref(x)))
    return x.value


def test_gguf_golden_metadata_and_tensors():
    f = P()
    check(lib.em_gguf_open(str(GOLDEN / "gguf_types.gguf").encode(), C.byref(f)))
    try:
        assert lib.em_gguf_version(f) == 3
        want = {"t.u8": 200, "t.i8": -5, "t.u16": 60000, "t.i16": -30000,
                "t.u32": 4000000000, "t.i32": -2000000000, "t.f32": 0.25,
                "t.bool": True, "t.string": "h\u00e9llo", "t.u64": 2**64 - 1,
                "t.i64": -(2**63), "t.f64": -1.5, "t.arr_i32": [1, -2, 3],
                "t.arr_str": ["a", "", "\u00e9t\u00e9"],
                "t.arr_f32": [0.5, -1.0], "t.arr_bool": [True, False],
                "t.nested": [[1, 2], [3]],
                "general.architecture": "llama"}
        for key, value in want.items():
            got = decode_value(gguf_value(f, key))
            assert got == value and type(got) is type(value), (key, got, value)
        assert gguf_value(f, "t.u8").type == 0 and gguf_value(f, "t.i64").type == 11
        expected = golden_npz("gguf_types.npz")
        assert lib.em_gguf_tensor_count(f) == 4
        for name, dtype in [("f32", "f32"), ("f16", "f16"), ("bf16", "bf16"),
                            ("q8_0", "u8")]:
            out, typ = P(), C.c_int()
            check(lib.em_gguf_get(f, f"w.{name}".encode(), C.byref(out),
                                  C.byref(typ)))
            e = E(out.value)
            want_arr = expected[name]
            assert e.dtype == dtype, (name, e.dtype)
            assert e.shape == want_arr.shape, (name, e.shape, want_arr.shape)
            assert np.array_equal(raw_bytes(e), want_arr.view(np.uint8).reshape(-1)), name
            assert typ.value == {"f32": 0, "f16": 1, "bf16": 30, "q8_0": 8}[name]
        # The q8_0 blocks decode (scale * int8) to what gguf-py dequantizes.
        q = expected["q8_0"].reshape(2, 2, 34)
        scale = q[:, :, :2].copy().view(np.float16).astype(np.float32)
        vals = q[:, :, 2:].view(np.int8).astype(np.float32)
        np.testing.assert_array_equal((scale * vals).reshape(2, 64),
                                      expected["q8_0_dequantized"])
        t = GgufTensor()
        check(lib.em_gguf_tensor_at(f, lib.em_gguf_find_tensor(f, b"w.q8_0"),
                                    C.byref(t)))
        assert t.type_name == b"q8_0" and t.n_dims == 2
        assert (t.dims[0], t.dims[1]) == (64, 2) and t.nbytes == 2 * 68
    finally:
        lib.em_gguf_close(f)
