"""Greedy generation timed in Hugging Face transformers, shared by the
PyTorch counterparts of the Bumblebee benchmarks (bench/qwen3_torch.py,
bench/smollm2_torch.py): prompt processing is a generation of one new
token, decoding the extra time of `tokens` more (no end-of-sequence token,
so every run generates them all); median of `runs` after a warm-up."""
import statistics
import time

import torch


def report_generation(model, prompt, device, tokens, runs, title, **kwargs):
    """Times `model.generate` on `prompt` (1, n) and prints the two rows
    under "PyTorch <version> (<device>, <kwargs' label>): <title>"."""
    label = kwargs.pop("label")
    mask = torch.ones_like(prompt)
    n = prompt.shape[1]

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def time_generate(new_tokens):
        def run():
            sync()
            start = time.perf_counter()
            out = model.generate(prompt, attention_mask=mask, do_sample=False,
                                 max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                 eos_token_id=None, pad_token_id=0, **kwargs)
            sync()
            assert out.shape[1] == n + new_tokens
            return (time.perf_counter() - start) * 1e3

        run()
        return statistics.median(run() for _ in range(runs))

    # generate runs under torch.no_grad itself.
    prefill_ms = time_generate(1)
    decode_ms = time_generate(tokens + 1) - prefill_ms
    print(f"PyTorch {torch.__version__} ({device}, {label}): {title}\n"
          f"  {f'prompt {n} tokens + first token':<32}{prefill_ms:10.1f} ms"
          f"{n / (prefill_ms / 1e3):10.0f} tok/s\n"
          f"  {f'decode {tokens} tokens':<32}{decode_ms:10.1f} ms"
          f"{tokens / (decode_ms / 1e3):10.1f} tok/s", flush=True)
