#!/usr/bin/env python3
"""SmolLM2-135M-Instruct in Hugging Face transformers on the dequantized
weights of the Q4_1 GGUF that bench/smollm2_bench.exs runs: the PyTorch
counterpart of `mix run bench/smollm2_bench.exs --gpu`. Greedy generation
at batch 1, prompt processing timed as a generation of one new token,
decoding as the extra time of N more tokens (no end-of-sequence token),
median of --runs after a warm-up; eager, then (on CUDA) a static KV cache
with CompileConfig(mode="reduce-overhead") as bench/qwen3_torch.py does.

    python3 bench/smollm2_torch.py [--gguf PATH] [--cpu] [--dtype f32|bf16]
                                   [--tokens N] [--prompt N] [--runs N]

The GGUF is read here (numpy; the `gguf` package is not needed): the
header, the metadata for the Llama config, and each tensor dequantized
with ggml's formulas (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k,
q6_k). llama.cpp's converter interleaves the rows of the query and key
projections for its RoPE; they are put back in Hugging Face's order, as
Emily.Bumblebee.GGUF does. The prompt: --prompt token ids spread over the
vocabulary (the Emily benchmark's ChatML prompt is about 117 tokens).
"""
import argparse
import os
import struct
import sys
import time

import numpy as np

# ---- GGUF ------------------------------------------------------------------

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
          10: "<Q", 11: "<q", 12: "<d"}
# ggml type: (name, weights per block, bytes per block)
GGML = {0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20),
        6: ("q5_0", 32, 22), 7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34),
        12: ("q4_k", 256, 144), 14: ("q6_k", 256, 210), 30: ("bf16", 1, 2)}


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def scalar(self, t):
        fmt = SCALAR[t]
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.scalar(10)
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.scalar(4), self.scalar(10)
            return [self.value(et) for _ in range(n)]
        return self.scalar(t)


def read_gguf(path):
    """(metadata dict, {name: (ggml type, dims (ne0 first), byte view)})."""
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    r = Reader(buf)
    if bytes(buf[:4]) != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    r.pos = 4
    version, n_tensors, n_kv = r.scalar(4), r.scalar(10), r.scalar(10)
    if version < 2:
        sys.exit(f"{path}: GGUF version {version} is not read here")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.scalar(4))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.scalar(10) for _ in range(r.scalar(4))]
        infos.append((name, dims, r.scalar(4), r.scalar(10)))
    align = meta.get("general.alignment", 32)
    data = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, t, off in infos:
        if t not in GGML:
            sys.exit(f"{name}: ggml type {t} is not read here")
        _, be, bb = GGML[t]
        n = int(np.prod(dims))
        tensors[name] = (t, dims, buf[data + off:data + off + n // be * bb])
    return meta, tensors


def f16(b, at):
    """The half floats at byte `at` of each block row of b, as f32 columns."""
    return b[:, at:at + 2].copy().view(np.float16).astype(np.float32)


def nibbles(qs):
    """q4 bytes (nb, 16) -> (nb, 32): low nibbles first, then high."""
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32)


def dequantize(t, dims, raw):
    name, be, bb = GGML[t]
    n = int(np.prod(dims))
    shape = tuple(reversed(dims))
    if name == "f32":
        return raw.view(np.float32).reshape(shape)
    if name == "f16":
        return raw.view(np.float16).astype(np.float32).reshape(shape)
    if name == "bf16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    b = np.asarray(raw).reshape(n // be, bb)
    if name in ("q4_0", "q4_1", "q5_0", "q5_1"):
        has_min, five = name.endswith("1"), name.startswith("q5")
        d = f16(b, 0)
        qs_at = 2 + 2 * has_min + 4 * five
        q = nibbles(b[:, qs_at:qs_at + 16])
        if five:
            qh = b[:, qs_at - 4:qs_at].copy().view(np.uint32)
            q += ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.float32) * 16
        w = d * q + f16(b, 2) if has_min else d * (q - (16 if five else 8))
    elif name == "q8_0":
        w = f16(b, 0) * b[:, 2:].view(np.int8).astype(np.float32)
    elif name == "q4_k":
        d, dmin, sc = f16(b, 0), f16(b, 2), b[:, 4:16].astype(np.int32)
        # the 6-bit scales and mins of the 8 sub-blocks
        s = np.concatenate([sc[:, 0:4] & 63, (sc[:, 8:12] & 15) | ((sc[:, 0:4] >> 6) << 4)], 1)
        m = np.concatenate([sc[:, 4:8] & 63, (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)], 1)
        qs = b[:, 16:].reshape(-1, 4, 32)
        q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
        w = ((d * s)[:, :, None] * q - (dmin * m)[:, :, None]).reshape(-1, 256)
    elif name == "q6_k":
        ql, qh = b[:, 0:128].reshape(-1, 2, 64), b[:, 128:192].reshape(-1, 2, 32)
        sc = b[:, 192:208].view(np.int8).astype(np.float32).reshape(-1, 2, 8)
        d = f16(b, 208)[:, :, None]
        low = np.stack([ql[:, :, :32] & 15, ql[:, :, 32:] & 15, ql[:, :, :32] >> 4,
                        ql[:, :, 32:] >> 4], axis=2)                    # (nb, 2, 4, 32)
        high = np.stack([(qh >> s) & 3 for s in (0, 2, 4, 6)], axis=2)  # (nb, 2, 4, 32)
        q = (low | (high << 4)).astype(np.float32) - 32
        # scale of weight l of quarter t: sc[l // 16 + 2 t]
        scale = sc.reshape(-1, 2, 4, 2)[:, :, :, :, None].repeat(16, 4).reshape(-1, 2, 4, 32)
        w = (d[:, :, :, None] * scale * q).reshape(-1, 256)
    else:
        sys.exit(f"ggml type {name} is not dequantized here")
    return w.astype(np.float32).reshape(shape)


def hf_order(heads, head_size):
    half = head_size // 2
    return [h * head_size + 2 * i + j for h in range(heads) for j in range(2) for i in range(half)]


# ---- the model -------------------------------------------------------------

def build_model(path, device, dtype):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    meta, tensors = read_gguf(path)
    if meta.get("general.architecture") != "llama":
        sys.exit(f"{path}: architecture {meta.get('general.architecture')!r}, not llama")
    m = lambda key: meta["llama." + key]
    hidden, heads = m("embedding_length"), m("attention.head_count")
    kv_heads = meta.get("llama.attention.head_count_kv", heads)
    vocab = tensors["token_embd.weight"][1][1]
    tied = "output.weight" not in tensors
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=m("feed_forward_length"),
        num_hidden_layers=m("block_count"), num_attention_heads=heads,
        num_key_value_heads=kv_heads, max_position_embeddings=m("context_length"),
        rms_norm_eps=m("attention.layer_norm_rms_epsilon"),
        rope_parameters={"rope_type": "default",
                         "rope_theta": meta.get("llama.rope.freq_base", 10000.0)},
        tie_word_embeddings=tied)
    head_size = hidden // heads
    names = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
                 "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                 "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
                 "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    state = {}
    for name, (t, dims, raw) in tensors.items():
        w = dequantize(t, dims, raw)
        parts = name.split(".")
        if parts[0] == "blk":
            kind = parts[2]
            if kind == "attn_q":
                w = w[hf_order(heads, head_size)]
            elif kind == "attn_k":
                w = w[hf_order(kv_heads, head_size)]
            target = f"model.layers.{parts[1]}.{per_layer[kind]}.weight"
        elif name in names:
            target = names[name]
        else:
            continue
        state[target] = torch.from_numpy(np.array(w, dtype=np.float32))  # a writable copy
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model.load_state_dict(state, strict=False, assign=True)
    if tied:
        model.tie_weights()
    # Buffers made on the meta device (the rotary frequencies), for real.
    model.model.rotary_emb = type(model.model.rotary_emb)(config)
    missing = [k for k, v in model.state_dict().items() if v.device.type == "meta"]
    if missing:
        sys.exit(f"weights not in the file: {missing[:5]}")
    return model.to(device=device, dtype=dtype).eval(), config


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gguf", default=os.path.expanduser(
        "~/.cache/emily/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=117)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import torch
    from support.torch_generation import report_generation
    from transformers import CompileConfig

    device = "cpu" if args.cpu or not torch.cuda.is_available() else "cuda"
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    t0 = time.perf_counter()
    model, config = build_model(args.gguf, device, dtype)
    print(f"loaded and dequantized {args.gguf} in {time.perf_counter() - t0:.1f} s")
    prompt = (torch.arange(args.prompt) * 7919 % config.vocab_size).unsqueeze(0).to(device)
    title = f"SmolLM2-135M dequantized Q4_1 in {args.dtype}, batch 1"

    def report(label, **kwargs):
        report_generation(model, prompt, device, args.tokens, args.runs, title, label=label,
                          **kwargs)

    report("eager")
    if device == "cuda":
        report("torch.compile reduce-overhead, static cache", cache_implementation="static",
               compile_config=CompileConfig(mode="reduce-overhead"))


if __name__ == "__main__":
    main()
