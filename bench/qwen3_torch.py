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

import torch
from support.torch_generation import report_generation
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
title = f"Qwen3-0.6B-shaped, {args.layers} layers, random bf16, batch 1"


def report(label, **kwargs):
    report_generation(model, prompt, device, args.tokens, args.runs, title, label=label, **kwargs)


report("eager")
if device == "cuda" or args.compile:
    compile_config = CompileConfig(mode="reduce-overhead")
    # transformers compiles on CUDA only, unless told (for testing) otherwise.
    compile_config._compile_all_devices = device != "cuda"
    report("torch.compile reduce-overhead, static cache", cache_implementation="static",
           compile_config=compile_config)
