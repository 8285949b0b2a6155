#!/usr/bin/env python3
"""A Qwen3-0.6B-shaped model in Hugging Face transformers with random bf16
weights, the counterpart of bench/qwen3_bench.exs (same shapes, prompt and
flags): greedy generation at batch 1, prompt processing timed as a
generation of one new token, decoding as the extra time of N more tokens
(no end-of-sequence token), median of --runs after a warm-up.

    python3 bench/qwen3_torch.py [--gpu] [--tokens N] [--prompt N] [--layers N] [--runs N]

Runs eager PyTorch, then (on CUDA, or anywhere with --compile) generation
with a static KV cache and a CompileConfig(mode="reduce-overhead"), as
transformers recommends for compiled decoding: generate then runs the
decoding steps through torch.compile (CUDA graphs on CUDA), the prefill
eagerly. The compiled row's warm-up includes the compilation. Written
against torch 2.15 and transformers 5.24.
"""
import argparse
import statistics
import time

import torch
from transformers import CompileConfig, Qwen3Config, Qwen3ForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--gpu", action="store_true")
parser.add_argument("--tokens", type=int, default=64)
parser.add_argument("--prompt", type=int, default=128)
parser.add_argument("--layers", type=int, default=28)
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--compile", action="store_true",
                    help="also time torch.compile on the CPU (always done on CUDA)")
args = parser.parse_args()
device = "cuda" if args.gpu else "cpu"

config = Qwen3Config(
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=args.layers,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
    rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
    tie_word_embeddings=True, initializer_range=0.02)
torch.manual_seed(0)
with torch.device(device):
    model = Qwen3ForCausalLM(config).to(torch.bfloat16).eval()

# The same token ids as the Emily benchmark: spread over the vocabulary.
prompt = (torch.arange(args.prompt) * 7919 % 151936).unsqueeze(0).to(device)
mask = torch.ones_like(prompt)


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def time_generate(new_tokens, **kwargs):
    def run():
        sync()
        t0 = time.perf_counter()
        out = model.generate(prompt, attention_mask=mask, do_sample=False,
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             eos_token_id=None, pad_token_id=0, **kwargs)
        sync()
        assert out.shape[1] == args.prompt + new_tokens
        return (time.perf_counter() - t0) * 1e3

    run()
    return statistics.median(run() for _ in range(args.runs))


def report(label, **kwargs):
    # generate runs under torch.no_grad itself.
    prefill_ms = time_generate(1, **kwargs)
    total_ms = time_generate(args.tokens + 1, **kwargs)
    decode_ms = total_ms - prefill_ms
    print(f"PyTorch {torch.__version__} ({device}, {label}): Qwen3-0.6B-shaped, {args.layers} layers, "
          f"random bf16, batch 1\n"
          f"  {f'prompt {args.prompt} tokens + first token':<32}{prefill_ms:10.1f} ms"
          f"{args.prompt / (prefill_ms / 1e3):10.0f} tok/s\n"
          f"  {f'decode {args.tokens} tokens':<32}{decode_ms:10.1f} ms"
          f"{args.tokens / (decode_ms / 1e3):10.1f} tok/s")


report("eager")
if device == "cuda" or args.compile:
    compile_config = CompileConfig(mode="reduce-overhead")
    # transformers compiles on CUDA only, unless told (for testing) otherwise.
    compile_config._compile_all_devices = device != "cuda"
    report("torch.compile reduce-overhead, static cache", cache_implementation="static",
           compile_config=compile_config)
