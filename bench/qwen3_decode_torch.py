#!/usr/bin/env python3
"""The Qwen3-0.6B-shaped decode step with a static KV cache: Emily
(bench/qwen3_decode_bench.c) against PyTorch, in one run.

    python3 bench/qwen3_decode_torch.py [path/to/qwen3_decode_bench] [B list] [L list] [modes]
    e.g. python3 bench/qwen3_decode_torch.py build/qwen3_decode_bench 1 128,512

The same step as the C benchmark: 28 layers, hidden 1024, 16 query / 8 KV
heads of 128, q/k RMS norms, RoPE (theta 1e6, half rotation) at pos = L - 1,
the new k / v written into the (B, 8, L, 128) caches in place (index_copy_),
attention of the B new tokens over the cache (SDPA, grouped heads), SiLU
MLP of 3072, final norm and the 151,936-word LM head; random bf16 weights.
PyTorch runs it eagerly, as one CUDA graph of the step (torch.cuda.graph)
and through torch.compile(mode="reduce-overhead"). Each figure is the host
wall clock of one step (launch + synchronize), median of 20 after warm-up,
as the C side measures it. The table prints ms/step and tokens/s (B tokens
per step) and each Emily mode's speed over PyTorch's CUDA graph and
torch.compile ("x graph", "x compile"; above 1: Emily faster).
DECODE_TORCH_COMPILE=0 leaves torch.compile out (it compiles per shape).
"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_torch import run_emily  # noqa: E402

LAYERS, D, H, HKV, HD, FF, VOCAB = 28, 1024, 16, 8, 128, 3072, 151936
THETA, EPS = 1e6, 1e-6
WARMUP, STEPS = 4, 20
BF16 = torch.bfloat16


def rand(*shape):
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(BF16)


class Weights:
    def __init__(self):
        self.layers = []
        for _ in range(LAYERS):
            self.layers.append(dict(
                norm1=rand(D), norm2=rand(D), q_norm=rand(HD), k_norm=rand(HD),
                wq=rand(H * HD, D), wk=rand(HKV * HD, D), wv=rand(HKV * HD, D),
                wo=rand(D, H * HD), w1=rand(FF, D), w3=rand(FF, D), w2=rand(D, FF)))
        self.final_norm = rand(D)
        self.lm_head = rand(VOCAB, D)
        inv = 1.0 / (THETA ** (torch.arange(0, HD, 2, device="cuda", dtype=torch.float64) / HD))
        self.inv_freq = inv.float()
        # Static for torch.compile's CUDA graphs: never copied in per replay.
        for t in [self.final_norm, self.lm_head, self.inv_freq] + [
                t for lw in self.layers for t in lw.values()]:
            torch._dynamo.mark_static_address(t)


def rope(x, pos, inv_freq):
    # x (B, heads, 1, HD); the half rotation at position pos (a 0-d tensor).
    ang = pos.float() * inv_freq
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    a, b = x[..., : HD // 2], x[..., HD // 2:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def step(w, x, pos, kcache, vcache):
    """x (B, 1, D); pos a 0-d long tensor; caches updated in place."""
    B = x.shape[0]
    h = x
    idx = pos.view(1)
    for l, lw in enumerate(w.layers):
        t = F.rms_norm(h, (D,), lw["norm1"], EPS)
        q = F.linear(t, lw["wq"]).view(B, 1, H, HD)
        k = F.linear(t, lw["wk"]).view(B, 1, HKV, HD)
        v = F.linear(t, lw["wv"]).view(B, 1, HKV, HD)
        q = rope(F.rms_norm(q, (HD,), lw["q_norm"], EPS).transpose(1, 2), pos, w.inv_freq)
        k = rope(F.rms_norm(k, (HD,), lw["k_norm"], EPS).transpose(1, 2), pos, w.inv_freq)
        v = v.transpose(1, 2)
        kcache[l].index_copy_(2, idx, k)
        vcache[l].index_copy_(2, idx, v)
        a = F.scaled_dot_product_attention(q, kcache[l], vcache[l], enable_gqa=True)
        h = h + F.linear(a.transpose(1, 2).reshape(B, 1, H * HD), lw["wo"])
        t2 = F.rms_norm(h, (D,), lw["norm2"], EPS)
        h = h + F.linear(F.silu(F.linear(t2, lw["w1"])) * F.linear(t2, lw["w3"]), lw["w2"])
    return F.linear(F.rms_norm(h, (D,), w.final_norm, EPS), w.lm_head)


def wall_ms(fn):
    times = []
    for it in range(WARMUP + STEPS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if it >= WARMUP:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


class Step(torch.nn.Module):
    """The step with the caches as buffers, weights and caches marked as
    static addresses: torch.compile's CUDA graphs (reduce-overhead) neither
    copy them in per replay nor refuse the in-place cache writes (as
    transformers' StaticCache)."""

    def __init__(self, w, B, L):
        super().__init__()
        self.w = w
        for l in range(LAYERS):
            self.register_buffer(f"k{l}", torch.full((B, HKV, L, HD), 0.01, device="cuda", dtype=BF16))
            self.register_buffer(f"v{l}", torch.full((B, HKV, L, HD), 0.02, device="cuda", dtype=BF16))
            torch._dynamo.mark_static_address(getattr(self, f"k{l}"))
            torch._dynamo.mark_static_address(getattr(self, f"v{l}"))

    def forward(self, x, pos):
        kc = [getattr(self, f"k{l}") for l in range(LAYERS)]
        vc = [getattr(self, f"v{l}") for l in range(LAYERS)]
        return step(self.w, x, pos, kc, vc)


def torch_modes(w, B, L):
    x = rand(B, 1, D)
    pos = torch.tensor(L - 1, device="cuda")
    model = Step(w, B, L)
    out = {}
    with torch.inference_mode():
        out["eager"] = wall_ms(lambda: model(x, pos))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(x, pos)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(x, pos)
        out["graph"] = wall_ms(g.replay)
        del g
    out["compile"] = float("nan")
    if os.environ.get("DECODE_TORCH_COMPILE", "1") != "0":
        compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        with torch.inference_mode():
            for _ in range(3):  # compile, record the graph
                compiled(x, pos)
            out["compile"] = wall_ms(lambda: compiled(x, pos))
        del compiled
    del model
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return out


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "qwen3_decode_bench")
    Bs = [int(b) for b in (sys.argv[2] if len(sys.argv) > 2 else "1,4,16").split(",")]
    Ls = [int(v) for v in (sys.argv[3] if len(sys.argv) > 3 else "128,512,2048,8192").split(",")]
    # An optional fourth argument: Emily's modes (e.g. "fast,fast+graph").
    modes = sys.argv[4:5]
    emily = run_emily([exe, ",".join(map(str, Bs)), ",".join(map(str, Ls))] + modes)
    torch.manual_seed(0)
    w = Weights()
    print(f"\nGPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'B':>3} {'L':>5} {'mode':>18} {'ms/step':>9} {'tok/s':>9} {'x graph':>8} {'x compile':>9}")
    for B in Bs:
        for L in Ls:
            t = torch_modes(w, B, L)
            for mode in ("eager", "graph", "compile"):
                print(f"{B:3} {L:5} {'torch ' + mode:>18} {t[mode]:9.3f} {B * 1e3 / t[mode]:9.0f}")
            for name, (ms, _, _) in emily.items():
                if name.endswith(f"_b{B}_l{L}"):
                    mode = name[len("decode_"): -len(f"_b{B}_l{L}")]
                    print(f"{B:3} {L:5} {'emily ' + mode:>18} {ms:9.3f} {B * 1e3 / ms:9.0f}"
                          f" {t['graph'] / ms:8.2f} {t['compile'] / ms:9.2f}")


if __name__ == "__main__":
    main()
