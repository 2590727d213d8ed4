"""PyTorch eager baseline for bench/moe_train.sh: transformers'
MixtralForCausalLM (its MixtralSparseMoeBlock: softmax top-k routing, a
loop over the experts with index_select / index_add_) with the same
config, batch, load-balancing loss, AdamW and threads as the llmc run;
prints the median step time over the timed steps (after warm-up) as JSON."""
import argparse
import json
import statistics
import time

import torch
import transformers


def main():
    p = argparse.ArgumentParser()
    for key in ("layers", "heads", "kv_heads", "width", "ffn", "experts", "top_k", "vocab",
                "batch", "seq", "steps", "threads"):
        p.add_argument("--" + key.replace("_", "-"), type=int, required=True)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=a.vocab, hidden_size=a.width, intermediate_size=a.ffn,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        max_position_embeddings=a.seq, num_local_experts=a.experts, num_experts_per_tok=a.top_k,
        output_router_logits=True, router_aux_loss_coef=0.02, tie_word_embeddings=False,
        sliding_window=None, attn_implementation="eager")
    model = transformers.MixtralForCausalLM(config).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=x, labels=x, use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append((time.perf_counter() - t0) * 1000)
    ms = statistics.median(times)
    print(json.dumps({"median_ms": ms, "tokens_per_s": a.batch * a.seq / ms * 1000,
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
