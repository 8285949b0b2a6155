#!/usr/bin/env python3
"""Tiny random Qwen3 models and their greedy generations from Hugging Face
transformers, for test/emily/bumblebee/qwen3_test.exs.

    python scripts/qwen3_golden.py

Written with torch 2.15.0 and transformers 5.24.0 (CPU, float32); neither is
needed by CI, which reads the files this writes:

    test/fixtures/qwen3_tiny/         tied embeddings (as Qwen3-0.6B), 3 layers
    test/fixtures/qwen3_tiny_untied/  separate lm_head, 2 layers

each with config.json, model.safetensors, golden.json (prompt ids, the 32
greedily generated ids, the margin between the two best logits at each step)
and golden_logits.safetensors (the float32 logits of every step, one
{32, vocab} tensor per prompt, "case_<i>"; binary keeps them exact and small).

The models are Qwen3ForCausalLM as Qwen3 ships it (q/k RMS norms, grouped
query attention 4/2 heads of 32, SiLU-gated MLP, rope_theta 1e6), with
weights drawn from a seeded normal wider than transformers' init (std 0.1)
and RMS-norm weights drawn around 1, so that attention is not uniform,
logits are spread out (greedy margins are far above float rounding) and a
norm weight loaded into the wrong place would show. Generation uses the KV
cache, as Bumblebee's does, with no end-of-sequence token.

config.json gets a top-level "rope_theta" beside transformers 5's
"rope_parameters": the published Qwen3 configs have it there, and that is
where Bumblebee 0.7 reads it. The token ids the models do not have (bos,
eos, pad: null) are left out, as Bumblebee takes null for a malformed id.
"""
import json
import os

import numpy as np
import safetensors.torch
import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM

NEW_TOKENS = 32
VOCAB = 512
PROMPTS = [
    [1, 17, 242, 5, 99],
    [300, 12, 12, 7, 450, 33, 2, 19, 511, 64, 128],
    [8, 400, 77, 3, 260, 61, 140, 222, 9, 310, 45, 180, 7, 499, 23, 88, 301],
]
MODELS = {
    "qwen3_tiny": dict(num_hidden_layers=3, tie_word_embeddings=True, seed=20),
    "qwen3_tiny_untied": dict(num_hidden_layers=2, tie_word_embeddings=False, seed=21),
}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures")


def build(num_hidden_layers, tie_word_embeddings, seed):
    config = Qwen3Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
        num_hidden_layers=num_hidden_layers, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, max_position_embeddings=128, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=tie_word_embeddings, initializer_range=0.1,
        torch_dtype="float32", architectures=["Qwen3ForCausalLM"])
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).float().eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    return model


def generate(model, prompt):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                         eos_token_id=None, pad_token_id=0, use_cache=True,
                         output_logits=True, return_dict_in_generate=True)
    generated = out.sequences[0, len(prompt):].tolist()
    logits = torch.cat(out.logits, dim=0).float()  # {NEW_TOKENS, VOCAB}
    assert logits.argmax(-1).tolist() == generated
    top2 = logits.double().topk(2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1]).tolist()
    return generated, logits.contiguous(), margins


def main():
    for name, spec in MODELS.items():
        dest = os.path.join(ROOT, name)
        os.makedirs(dest, exist_ok=True)
        model = build(**spec)
        model.save_pretrained(dest, safe_serialization=True)
        config_path = os.path.join(dest, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config["rope_theta"] = config["rope_parameters"]["rope_theta"]
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if config.get(key) is None:
                config.pop(key, None)
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2, sort_keys=True)
        gen_config = os.path.join(dest, "generation_config.json")
        if os.path.exists(gen_config):
            os.remove(gen_config)

        cases, tensors = [], {}
        for i, prompt in enumerate(PROMPTS):
            generated, logits, margins = generate(model, prompt)
            tensors[f"case_{i}"] = logits
            cases.append({"prompt_ids": prompt, "generated_ids": generated,
                          "margins": [round(m, 5) for m in margins]})
            print(f"{name} case {i}: {generated[:12]}... min margin {min(margins):.4f}, "
                  f"max |logit| {logits.abs().max().item():.3f}")
        safetensors.torch.save_file(tensors, os.path.join(dest, "golden_logits.safetensors"))
        golden = {"reference": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                               "float32, CPU, greedy with KV cache",
                  "new_tokens": NEW_TOKENS, "cases": cases}
        with open(os.path.join(dest, "golden.json"), "w") as f:
            json.dump(golden, f, indent=1)
        print("wrote", os.path.normpath(dest))


if __name__ == "__main__":
    main()
