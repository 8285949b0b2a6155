"""Regenerates the weight-file golden files under test/oracle/golden/.

Needs the PyPI packages `safetensors`, `gguf` and `numpy` (a scratch venv is
enough) and build/libemily.so (for the round trip through our writer):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install safetensors gguf numpy
    make build/libemily.so && /tmp/venv/bin/python scripts/io_golden.py

Writes (all a few KB):
  st_dtypes.safetensors   one tensor of every safetensors dtype the engine
                          reads, plus an F8_E4M3 one, a 0-d and an empty one,
                          and __metadata__, written by the reference writer
  st_dtypes.npz           the expected values (bf16 as raw uint16 bits)
  st_sharded/             a two-shard checkpoint with its index JSON
  gguf_types.gguf         GGUF v3 from gguf-py's writer: a metadata key of
                          every value type (arrays, nested arrays too) and
                          f32, f16, bf16 and q8_0 tensors
  gguf_types.npz          expected tensors (q8_0 as its raw blocks, and the
                          values gguf-py dequantizes them to)
  emily_written.safetensors  written by libemily's em_safetensors_save from
                          st_dtypes.npz's tensors, then checked here with
                          safetensors.numpy.load_file; roundtrip.json records
                          that check and the file's sha256 (the oracle test
                          writes again and compares the bytes)
CI reads these files; it never needs the pip packages. Last generated with
safetensors 0.8.0, gguf 0.19.0 and numpy 2.4.
"""
import ctypes as C
import hashlib
import json
import os
import pathlib
import sys

import numpy as np
from safetensors import TensorSpec, serialize_file
from safetensors.numpy import load_file

import gguf

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "oracle" / "golden"
sys.path.insert(0, str(ROOT / "test" / "oracle"))


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def st_tensors():
    rng = np.random.default_rng(7)
    t = {
        "bool": rng.integers(0, 2, (2, 3)).astype(np.bool_),
        "u8": rng.integers(0, 256, (4,), dtype=np.uint8),
        "i8": rng.integers(-128, 128, (2, 2), dtype=np.int8),
        "u16": rng.integers(0, 65536, (3,), dtype=np.uint16),
        "i16": rng.integers(-32768, 32768, (3, 1), dtype=np.int16),
        "u32": np.array([0, 1, 2**32 - 1], np.uint32),
        "i32": np.array([[-(2**31), 0], [5, 2**31 - 1]], np.int32),
        "u64": np.array([2**64 - 1, 0, 12345678901234], np.uint64),
        "i64": np.array([-(2**63), 2**63 - 1], np.int64),
        "f16": rng.standard_normal((2, 3)).astype(np.float16),
        "f32": rng.standard_normal((3, 2, 2)).astype(np.float32),
        "f64": np.array([np.pi, -0.0, 1e300], np.float64),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "layer.0.weight\u00e9": rng.standard_normal((2, 2)).astype(np.float32),
    }
    return t


def write_safetensors():
    t = st_tensors()
    specs = {k: TensorSpec(dtype=v.dtype.name, shape=v.shape,
                           data_ptr=v.ctypes.data, data_len=v.nbytes)
             for k, v in t.items()}
    bf = bf16_bits(np.array([1.0, -2.5, 3.14159, 1e-3], np.float32))
    e4m3 = np.array([0x38, 0xC0, 0x00], np.uint8)  # 1.0, -2.0, 0.0
    specs["bf16"] = TensorSpec(dtype="bfloat16", shape=(2, 2),
                               data_ptr=bf.ctypes.data, data_len=bf.nbytes)
    specs["f8"] = TensorSpec(dtype="float8_e4m3fn", shape=(3,),
                             data_ptr=e4m3.ctypes.data, data_len=e4m3.nbytes)
    serialize_file(specs, str(OUT / "st_dtypes.safetensors"),
                   metadata={"format": "np", "note": "golden \u00e9"})
    expected = dict(t)
    expected["bf16"] = bf.reshape(2, 2)
    expected["f8"] = e4m3
    np.savez(OUT / "st_dtypes.npz",
             **{k.replace(".", "__dot__"): v for k, v in expected.items()})

    shard = OUT / "st_sharded"
    shard.mkdir(exist_ok=True)
    a = {"a.weight": np.arange(6, dtype=np.float32).reshape(2, 3)}
    b = {"b.bias": np.array([1, 2, 3], np.int64),
         "b.weight": np.ones((2, 2), np.float16)}
    from safetensors.numpy import save_file
    save_file(a, str(shard / "model-00001-of-00002.safetensors"))
    save_file(b, str(shard / "model-00002-of-00002.safetensors"))
    index = {"metadata": {"total_size": 24 + 24 + 8},
             "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                            "b.bias": "model-00002-of-00002.safetensors",
                            "b.weight": "model-00002-of-00002.safetensors"}}
    (shard / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def write_gguf():
    path = OUT / "gguf_types.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    T = gguf.GGUFValueType
    w.add_key_value("t.u8", 200, T.UINT8)
    w.add_key_value("t.i8", -5, T.INT8)
    w.add_key_value("t.u16", 60000, T.UINT16)
    w.add_key_value("t.i16", -30000, T.INT16)
    w.add_key_value("t.u32", 4000000000, T.UINT32)
    w.add_key_value("t.i32", -2000000000, T.INT32)
    w.add_key_value("t.f32", 0.25, T.FLOAT32)
    w.add_key_value("t.bool", True, T.BOOL)
    w.add_key_value("t.string", "h\u00e9llo", T.STRING)
    w.add_key_value("t.u64", 2**64 - 1, T.UINT64)
    w.add_key_value("t.i64", -(2**63), T.INT64)
    w.add_key_value("t.f64", -1.5, T.FLOAT64)
    w.add_key_value("t.arr_i32", [1, -2, 3], T.ARRAY, T.INT32)
    w.add_key_value("t.arr_str", ["a", "", "\u00e9t\u00e9"], T.ARRAY, T.STRING)
    w.add_key_value("t.arr_f32", [0.5, -1.0], T.ARRAY, T.FLOAT32)
    w.add_key_value("t.arr_bool", [True, False], T.ARRAY, T.BOOL)
    w.add_key_value("t.nested", [[1, 2], [3]], T.ARRAY, T.ARRAY)
    rng = np.random.default_rng(11)
    f32 = rng.standard_normal((3, 4)).astype(np.float32)
    f16 = rng.standard_normal((2, 8)).astype(np.float16)
    bf = bf16_bits(rng.standard_normal((2, 4)).astype(np.float32))
    q_src = rng.standard_normal((2, 64)).astype(np.float32)
    q8 = gguf.quants.quantize(q_src, gguf.GGMLQuantizationType.Q8_0)
    q8_deq = gguf.quants.dequantize(q8, gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("w.f32", f32)
    w.add_tensor("w.f16", f16)
    w.add_tensor("w.bf16", bf, raw_shape=(2, 4),
                 raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.add_tensor("w.q8_0", q8, raw_shape=q8.shape,
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    np.savez(OUT / "gguf_types.npz", f32=f32, f16=f16, bf16=bf, q8_0=q8,
             q8_0_dequantized=q8_deq.astype(np.float32))
    # Read it back with gguf-py as a check of the generator itself.
    r = gguf.GGUFReader(str(path))
    assert {t.name for t in r.tensors} == {"w.f32", "w.f16", "w.bf16", "w.q8_0"}


def write_roundtrip():
    os.environ.setdefault("EMILY_LIB", str(ROOT / "build" / "libemily.so"))
    import test_io  # the oracle test's bindings and writer
    path = OUT / "emily_written.safetensors"
    tensors = test_io.roundtrip_tensors()
    test_io.emily_save(path, tensors, {"writer": "emily"})
    back = load_file(str(path))
    assert set(back) == set(tensors), (set(back), set(tensors))
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape, k
        assert np.array_equal(back[k], v), k
    record = {"python_safetensors_load_file": "ok",
              "tensors": sorted(tensors),
              "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    (OUT / "roundtrip.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    write_safetensors()
    write_gguf()
    write_roundtrip()
    for p in sorted(OUT.rglob("*")):
        if p.is_file():
            print(f"{p.relative_to(ROOT)}: {p.stat().st_size} bytes")
