#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (Q4_1 GGUF) on llama.cpp, the counterpart of
bench/smollm2_bench.exs: the same prompt (about 100 tokens), greedy, 2
threads; prompt processing and decoding of 64 tokens, median of 5.

    python3 bench/smollm2_llama_cpp.py [path to the .gguf]

Needs llama-cpp-python (PyPI sdist; on Intel CPUs with AMX build it with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
-DGGML_AVX512=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF").
"""
import os
import statistics
import sys
import time

import llama_cpp

path = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    "~/.cache/emily/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
llm = llama_cpp.Llama(path, n_ctx=512, n_threads=2, n_batch=512, verbose=False)
prompt = ("<|im_start|>user\n" + "Tensors are arrays of numbers with a shape and a type. " * 8 +
          "Summarise this.<|im_end|>\n<|im_start|>assistant\n")
tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)


def run(n_new):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(tokens)
    t1 = time.perf_counter()
    for _ in range(n_new):
        tok = llm.sample(top_k=1, temp=0)
        llm.eval([tok])
    return t1 - t0, time.perf_counter() - t1


run(4)
prompt_s, decode_s = zip(*(run(64) for _ in range(5)))
p, d = statistics.median(prompt_s), statistics.median(decode_s)
print(f"llama.cpp {llama_cpp.__version__}: SmolLM2-135M Q4_1, {len(tokens)} prompt tokens: "
      f"prompt {p * 1e3:.1f} ms ({len(tokens) / p:.0f} tok/s), decode {64 / d:.1f} tok/s")
