"""Oracle tests for include/emily_attention.h against numpy in float64:
random shapes (GQA, causal with Lq != Lk, both mask kinds broadcast from
smaller shapes, sinks), the decode schedule (Lq = 1 over 4096 keys), every
dtype with its tolerance, and a KV-cache slice as input."""
import ctypes as C

import numpy as np

from emily_ctypes import E, array, check, lib

P = C.c_void_p


class Opts(C.Structure):
    _fields_ = [("scale", C.c_double), ("causal", C.c_bool),
                ("mask", P), ("sinks", P)]


lib.em_sdpa.argtypes = [P, P, P, C.POINTER(Opts), C.POINTER(P)]
lib.em_slice.argtypes = [P, C.POINTER(C.c_int64), C.POINTER(C.c_int64),
                         C.POINTER(C.c_int64), C.POINTER(P)]

# relative to the output's scale (|v| <= ~3)
TOL = {"f64": 1e-11, "f32": 3e-5, "f16": 5e-3, "bf16": 4e-2}


def rounded(x, dt):
    """The values an input of dtype dt holds, as float64."""
    return array(x, dt).numpy().astype(np.float64)


def ref_sdpa(q, k, v, scale=None, causal=False, mask=None, sinks=None):
    """float64 reference; mask: bool (False = masked) or additive."""
    B, H, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    G = H // Hkv
    scale = 1 / np.sqrt(D) if scale is None else scale
    kr = np.repeat(k, G, axis=1)
    vr = np.repeat(v, G, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, kr) * scale
    if mask is not None:
        if mask.dtype == np.bool_:
            s = np.where(mask, s, -np.inf)
        else:
            s = s + mask
    if causal:
        i = np.arange(Lq)[:, None]
        j = np.arange(Lk)[None, :]
        s = np.where(j <= i + Lk - Lq, s, -np.inf)
    m = s.max(axis=-1, keepdims=True) if Lk else np.full((B, H, Lq, 1), -np.inf)
    if sinks is not None:
        m = np.maximum(m, sinks.reshape(1, H, 1, 1))
    dead = np.isneginf(m)
    m = np.where(dead, 0, m)
    e = np.exp(s - m)
    den = e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        den = den + np.exp(sinks.reshape(1, H, 1, 1) - m)
    den = np.where(den == 0, 1, den)
    out = np.einsum("bhij,bhjd->bhid", e / den, vr)
    return np.where(dead, 0, out)


def sdpa(q, k, v, scale=0.0, causal=False, mask=None, sinks=None):
    o = Opts(scale, causal, mask.ptr if mask else None,
             sinks.ptr if sinks else None)
    out = P()
    check(lib.em_sdpa(q.ptr, k.ptr, v.ptr, C.byref(o), C.byref(out)))
    return E(out.value)


def run_case(rng, dt, B, H, Hkv, Lq, Lk, D, Dv, causal, mask_kind, with_sinks, scale=None):
    q = rounded(rng.normal(size=(B, H, Lq, D)), dt)
    k = rounded(rng.normal(size=(B, Hkv, Lk, D)), dt)
    v = rounded(rng.normal(size=(B, Hkv, Lk, Dv)), dt)
    mask = mask_arr = None
    if mask_kind:
        # broadcast from a smaller shape: (1, H, Lq, Lk) or (Lq, Lk)
        shape = (1, H, Lq, Lk) if rng.integers(0, 2) else (Lq, Lk)
        if mask_kind == "bool":
            mask = rng.random(shape) > 0.3
            mask_arr = array(mask, "pred")
        else:
            mask = rng.normal(size=shape)
            mask = np.where(rng.random(shape) > 0.8, -np.inf, mask)
            mask = rounded(mask, dt)
            mask_arr = array(mask, dt)
    sinks = sinks_arr = None
    if with_sinks:
        sinks = rounded(rng.normal(size=(H,)), dt)
        sinks_arr = array(sinks, dt)
    want = ref_sdpa(q, k, v, scale, causal, mask, sinks)
    got = sdpa(array(q, dt), array(k, dt), array(v, dt), scale or 0.0, causal,
               mask_arr, sinks_arr).numpy().astype(np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want).max() if got.size else 0
    assert err <= TOL[dt] * 3, (dt, B, H, Hkv, Lq, Lk, D, Dv, causal, mask_kind, with_sinks, err)


def test_sdpa_random_shapes_every_dtype():
    rng = np.random.default_rng(11)
    for n in range(24):
        Hkv = int(rng.integers(1, 4))
        H = Hkv * int(rng.integers(1, 4))
        Lq = int(rng.integers(1, 70))
        Lk = int(rng.integers(1, 150))
        D = int(rng.integers(1, 40))
        Dv = int(rng.integers(1, 40))
        causal = bool(rng.integers(0, 2))
        mask_kind = [None, "bool", "add"][n % 3]
        with_sinks = bool(rng.integers(0, 2))
        for dt in ("f64", "f32", "bf16", "f16"):
            run_case(rng, dt, int(rng.integers(1, 3)), H, Hkv, Lq, Lk, D, Dv,
                     causal, mask_kind, with_sinks, scale=float(rng.uniform(0.1, 1)) if n % 2 else None)


def test_sdpa_decode_4096_keys():
    rng = np.random.default_rng(12)
    for dt in ("f64", "f32", "bf16", "f16"):
        run_case(rng, dt, 1, 16, 8, 1, 4096, 128, 128, False, None, False)
        run_case(rng, dt, 1, 4, 1, 1, 4096, 64, 64, True, "bool", True)
        run_case(rng, dt, 2, 4, 2, 4, 4096, 32, 48, True, "add", False)


def test_sdpa_kv_cache_slice():
    """k, v as the first Lk positions of a longer cache (strided views)."""
    rng = np.random.default_rng(13)
    cap, Lk = 512, 300
    q = rng.normal(size=(1, 4, 1, 16))
    kc = rng.normal(size=(1, 2, cap, 16))
    vc = rng.normal(size=(1, 2, cap, 16))
    want = ref_sdpa(q, kc[:, :, :Lk], vc[:, :, :Lk])
    start = (C.c_int64 * 4)(0, 0, 0, 0)
    stop = (C.c_int64 * 4)(1, 2, Lk, 16)
    step = (C.c_int64 * 4)(1, 1, 1, 1)
    views = []
    for full in (kc, vc):
        out = P()
        a = array(full, "f32")
        check(lib.em_slice(a.ptr, start, stop, step, C.byref(out)))
        views.append((a, E(out.value)))
    got = sdpa(array(q, "f32"), views[0][1], views[1][1]).numpy()
    assert np.allclose(got, want, atol=1e-5)


def test_sdpa_errors():
    q = array(np.zeros((1, 4, 2, 8)), "f32")
    k = array(np.zeros((1, 3, 2, 8)), "f32")
    out = P()
    o = Opts(0.0, False, None, None)
    assert lib.em_sdpa(q.ptr, k.ptr, k.ptr, C.byref(o), C.byref(out)) == 1
    assert b"sdpa" in lib.em_last_error() and b"f32[1,3,2,8]" in lib.em_last_error()
