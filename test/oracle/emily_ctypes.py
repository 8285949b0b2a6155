"""ctypes bindings to libemily for the numpy oracle tests.

Each oracle test builds inputs with numpy, runs the op through libemily and
compares with numpy computing in float64. `E` wraps an em_array* and frees
it when garbage collected.
"""
import ctypes as C
import os

import numpy as np

lib = C.CDLL(os.environ.get("EMILY_LIB", "build/libemily.so"))

# EM_MAX_NDIM of include/emily.h: the length of the axis arrays in the
# engine's option structs.
MAX_NDIM = 16

DTYPES = ["pred", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
          "f16", "bf16", "f32", "f64", "c64", "c128"]
NP = {"pred": np.bool_, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
      "u64": np.uint64, "s8": np.int8, "s16": np.int16, "s32": np.int32,
      "s64": np.int64, "f16": np.float16, "f32": np.float32,
      "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
      "bf16": np.uint16}  # bf16 travels as raw uint16 bits

P = C.c_void_p
I64P = C.POINTER(C.c_int64)
lib.em_last_error.restype = C.c_char_p
lib.em_array_release.argtypes = [P]
lib.em_array_ndim.argtypes = [P]
lib.em_array_shape.argtypes = [P]
lib.em_array_shape.restype = I64P
lib.em_array_dtype.argtypes = [P]
lib.em_array_nbytes.argtypes = [P]
lib.em_array_nbytes.restype = C.c_size_t
lib.em_from_data.argtypes = [P, C.c_size_t, I64P, C.c_int, C.c_int, C.POINTER(P)]
lib.em_read.argtypes = [P, P, C.c_size_t]


class EmilyError(Exception):
    def __init__(self, status, message):
        super().__init__(f"status {status}: {message}")
        self.status = status
        self.message = message


def check(status):
    if status != 0:
        raise EmilyError(status, lib.em_last_error().decode())


class E:
    """An owned em_array*."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        if self.ptr:
            lib.em_array_release(self.ptr)

    @property
    def shape(self):
        n = lib.em_array_ndim(self.ptr)
        s = lib.em_array_shape(self.ptr)
        return tuple(s[i] for i in range(n))

    @property
    def dtype(self):
        return DTYPES[lib.em_array_dtype(self.ptr)]

    def numpy(self):
        """Evaluate and read back (bf16 comes back widened to float32)."""
        dt = self.dtype
        out = np.empty(self.shape, dtype=NP[dt])
        check(lib.em_read(self.ptr, out.ctypes.data_as(P), out.nbytes))
        if dt == "bf16":
            return np.asarray(out.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return out


def shape_arg(shape):
    arr = (C.c_int64 * max(1, len(shape)))(*shape)
    return arr, len(shape)


def to_bf16_bits(x):
    """float32 array -> uint16 bf16 bits, round to nearest even."""
    f = np.array(x, dtype=np.float32)  # a copy, 0-d kept
    b = f.view(np.uint32).astype(np.uint64)
    u = np.uint64
    r = np.asarray((b + u(0x7FFF) + ((b >> u(16)) & u(1))) >> u(16)).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FC0), r).astype(np.uint16)


def array(x, dtype):
    """numpy values -> em_array of `dtype` (a DTYPES name)."""
    if dtype == "bf16":
        host = to_bf16_bits(x)
    else:
        host = np.asarray(x).astype(NP[dtype])
    # np.array(order="C") keeps 0-d arrays 0-d (ascontiguousarray would not).
    host = np.array(host, order="C", copy=True)
    out = P()
    s, n = shape_arg(host.shape)
    check(lib.em_from_data(host.ctypes.data_as(P), host.nbytes, s, n,
                           DTYPES.index(dtype), C.byref(out)))
    return E(out.value)


def call(fname, *args):
    """Call an em_* op whose last argument is em_array** and wrap the result.
    Array arguments may be E objects; the rest are passed as given."""
    out = P()
    conv = [a.ptr if isinstance(a, E) else a for a in args]
    fn = getattr(lib, fname)
    check(fn(*conv, C.byref(out)))
    return E(out.value)


def enum_index(names, name):
    return names.index(name)
