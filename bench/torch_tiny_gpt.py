#!/usr/bin/python3
"""PyTorch eager baseline for bench/tiny_gpt.sh: the same GPT-2 config,
batch, optimizer and thread count as the llmc run; prints tokens/s over the
timed steps (after warm-up)."""
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "reference"))
from torch_reference import gpt2_loss  # the same model the reference test checks
from gpt_bench_args import parse_args


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    C, L, V, T = args.n_embd, args.n_layer, args.vocab, args.seq
    p = {"wte.weight": torch.randn(V, C) * 0.02, "wpe.weight": torch.randn(T, C) * 0.02,
         "ln_f.weight": torch.ones(C), "ln_f.bias": torch.zeros(C)}
    for l in range(L):
        pre = f"h.{l}."
        p.update({pre + "ln_1.weight": torch.ones(C), pre + "ln_1.bias": torch.zeros(C),
                  pre + "attn.c_attn.weight": torch.randn(C, 3 * C) * 0.02,
                  pre + "attn.c_attn.bias": torch.zeros(3 * C),
                  pre + "attn.c_proj.weight": torch.randn(C, C) * 0.02,
                  pre + "attn.c_proj.bias": torch.zeros(C),
                  pre + "ln_2.weight": torch.ones(C), pre + "ln_2.bias": torch.zeros(C),
                  pre + "mlp.c_fc.weight": torch.randn(C, 4 * C) * 0.02,
                  pre + "mlp.c_fc.bias": torch.zeros(4 * C),
                  pre + "mlp.c_proj.weight": torch.randn(4 * C, C) * 0.02,
                  pre + "mlp.c_proj.bias": torch.zeros(C)})
    for t in p.values():
        t.requires_grad_(True)
    opt = torch.optim.AdamW(list(p.values()), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    cfg = {"n_layer": L, "n_head": args.n_head, "n_embd": C, "eps": 1e-5}
    x = torch.randint(0, V, (args.batch, T))
    y = torch.randint(0, V, (args.batch, T))
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = gpt2_loss(p, cfg, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    timed = sorted(times[args.warmup:])
    median = timed[len(timed) // 2]
    print(json.dumps({"tokens_per_s": args.batch * T / median, "median_ms": median * 1000,
                      "torch": torch.__version__, "threads": args.threads}))


if __name__ == "__main__":
    main()
