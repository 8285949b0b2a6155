#!/usr/bin/env python3
"""all-MiniLM-L6-v2 on onnxruntime (CPU), the comparison for
bench/minilm_bench.exs: batch 16 x 128 tokens, token embeddings + mean
pooling + L2 norm, as Bumblebee's text_embedding serving computes them.

    python3 bench/minilm_ort.py [model dir] [--export]

Needs `pip install onnxruntime` (and, once, `torch transformers onnx` for
--export, which writes <model dir>/onnx/model.onnx from the safetensors
weights with torch.onnx.export). Prints ms per batch (median of 20 after 3
warm-ups) with 2 intra-op threads, like the 2-core machines Emily is
measured on.
"""
import os
import sys
import time

import numpy as np


def export(model_dir, path):
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(model_dir).eval().requires_grad_(False)

    class Hidden(torch.nn.Module):
        def forward(self, ids, mask, types):
            return bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    model = Hidden()
    ids = torch.ones(16, 128, dtype=torch.int64)
    mask = torch.ones(16, 128, dtype=torch.int64)
    types = torch.zeros(16, 128, dtype=torch.int64)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(model, (ids, mask, types), path, dynamo=False,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in
                                    ("input_ids", "attention_mask", "token_type_ids")},
                      opset_version=17)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    model_dir = args[0] if args else os.path.expanduser("~/.cache/emily/models/all-minilm-l6-v2")
    path = os.path.join(model_dir, "onnx", "model.onnx")
    if "--export" in sys.argv or not os.path.exists(path):
        export(model_dir, path)
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, size=(16, 128), dtype=np.int64)
    mask = np.ones((16, 128), dtype=np.int64)
    types = np.zeros((16, 128), dtype=np.int64)

    def run():
        (hidden,) = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(1) / m.sum(1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    for _ in range(3):
        run()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(f"onnxruntime {ort.__version__}: MiniLM 16 x 128 {times[10]:.1f} ms per batch (median of 20)")


if __name__ == "__main__":
    main()
