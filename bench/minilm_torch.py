#!/usr/bin/env python3
"""all-MiniLM-L6-v2 on PyTorch (GPU), the counterpart of
`mix run bench/minilm_bench.exs --gpu`: batch 32 x 128 tokens, the
sentence-transformers model loaded from the local model directory,
token embeddings + mean pooling + L2 norm (the model's own Pooling and
Normalize modules), the tokenizer outside the timed region. Eager and
torch.compile (default mode and reduce-overhead), in f32 (TF32 matmuls off,
as Emily computes f32), bf16 and f16.

    python3 bench/minilm_torch.py [model dir] [--types f32,bf16,f16] [--no-compile]

Prints ms per batch: median of 50 CUDA-event-timed calls after warm-up.
"""
import os
import sys

import torch


def median_ms(fn, warmup=10, iters=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    model_dir = args[0] if args else os.path.expanduser("~/.cache/emily/models/all-minilm-l6-v2")
    types = opts.get("types", "f32,bf16,f16").split(",")
    from sentence_transformers import SentenceTransformer

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    words = ("the model embeds every sentence of this batch into a vector of "
             "three hundred eighty four numbers").split()
    texts = [" ".join(words[(j + i) % len(words)] for j in range(128)) for i in range(1, 33)]
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'case':36} {'ms/batch':>9}")
    for name in types:
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]
        model = SentenceTransformer(model_dir, device="cuda")
        model.max_seq_length = 128
        model = model.to(dtype).eval()
        # Tokenized once (padded / truncated to 128), outside the timed region.
        feats = model.tokenize(texts)
        ids = torch.full((32, 128), 0, dtype=torch.int64)
        mask = torch.zeros((32, 128), dtype=torch.int64)
        n = min(128, feats["input_ids"].shape[1])
        ids[:, :n] = feats["input_ids"][:, :n]
        mask[:, :n] = feats["attention_mask"][:, :n]
        batch = {"input_ids": ids.cuda(), "attention_mask": mask.cuda(),
                 "token_type_ids": torch.zeros_like(ids).cuda()}

        def forward(m):
            with torch.inference_mode():
                return m(dict(batch))["sentence_embedding"]

        t = median_ms(lambda: forward(model))
        print(f"{'minilm_32x128_' + name + '_eager':36} {t:9.3f}", flush=True)
        if opts.get("no-compile"):
            continue
        for mode in ("default", "reduce-overhead"):
            compiled = torch.compile(model, mode=mode)
            t = median_ms(lambda: forward(compiled), warmup=20)
            print(f"{'minilm_32x128_' + name + '_compile_' + mode:36} {t:9.3f}", flush=True)
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
