"""PyTorch eager with a KV cache: transformers' GPT2LMHeadModel, the peer of
bench/decode_cpu.sh. Prefill of each prompt, then greedy decode one token
at a time through `past_key_values`, timed apart; prints one line per phase
as `prefill|decode <tokens> <seconds>`. Also the machine's copy bandwidth
(numpy, 512 MiB arrays) as `copy <GB/s>`."""
import argparse
import time

import numpy as np
import torch
import transformers


def copy_bandwidth():
    a = np.ones(128 << 20, dtype=np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - start)
    return 2 * a.nbytes / best / 1e9  # bytes read + written


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    model = transformers.GPT2LMHeadModel(config).eval()
    prompts = torch.randint(0, config.vocab_size, (args.batch, args.prompt))
    with torch.no_grad():
        model(prompts[:, :8])  # warm-up
        start = time.perf_counter()
        out = model(prompts, use_cache=True)
        prefill = time.perf_counter() - start
        past, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(args.new - 1):
            out = model(token, past_key_values=past, use_cache=True)
            past, token = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        decode = time.perf_counter() - start
    print(f"prefill {args.batch * args.prompt} {prefill:.4f}")
    print(f"decode {args.batch * (args.new - 1)} {decode:.4f}")
    print(f"copy {copy_bandwidth():.2f}")


if __name__ == "__main__":
    main()
