"""Hugging Face interop against `transformers` itself (docs/huggingface.md).

For each model — GPT-2 (tied head) and Llama (GQA, untied head; tied
head), vocabulary 257, in fp32, a bf16 Llama, an fp16 GPT-2 and a Llama
saved in shards (model.safetensors.index.json); both at width 72 with 6
heads (3 key/value heads); and a Llama with Llama 3.1's RoPE scaling
(rope_scaling llama3, its three frequency bands all present) — builds a
transformers model from a small config with random weights,
`save_pretrained`s it (safetensors), and checks that

  * HF -> llmc -> HF is bit-exact: `llmc-run --weights hf/ --steps 0
    --ckpt-dir ck` then `llmc export-hf ck` gives back every tensor byte for
    byte, under the same names, with config.json's rope_scaling, and
    transformers loads the export;
  * llmc's logits on a batch equal transformers' (eval mode, fp32) within
    1e-5 relative to the largest logit;
  * training from the HF directory starts at transformers' loss on the
    first batch (1e-5 relative), and the loss then falls.

Run by run_hf.sh with the venv's python; no network, no downloaded models.
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import transformers
from safetensors.torch import load_file

TOL = 1e-5


def run(*cmd):
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


# Llama 3.1's scaling shrunk to a small model: at head dim 16 and θ = 10⁴
# the wavelengths 2π·10⁴^(i/8) are 6.3 (below 48/4: kept), 19.9 (between:
# blended) and 63 and up (above 48/1: stretched 8 times).
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 48}


def hf_model(family, tied, width=64, heads=4, rope_scaling=None):
    torch.manual_seed(1234)
    if family == "gpt2":
        config = transformers.GPT2Config(vocab_size=257, n_positions=32, n_embd=width, n_layer=2,
                                         n_head=heads, layer_norm_epsilon=1e-5)
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(vocab_size=257, hidden_size=width, intermediate_size=96,
                                          num_hidden_layers=2, num_attention_heads=heads,
                                          num_key_value_heads=heads // 2,
                                          max_position_embeddings=128 if rope_scaling else 64,
                                          rms_norm_eps=1e-6, rope_theta=10000.0,
                                          rope_scaling=rope_scaling,
                                          tie_word_embeddings=tied)
        model = transformers.LlamaForCausalLM(config)
    # HF initialises biases to 0 and norm weights to 1, which would hide a
    # misplaced one: every parameter gets noise of its own.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def load_dir(path):
    """Every tensor of a model directory, from one file or its shards."""
    index = os.path.join(path, "model.safetensors.index.json")
    files = (sorted(set(json.load(open(index))["weight_map"].values()))
             if os.path.exists(index) else ["model.safetensors"])
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(path, f)))
    return tensors


def check(name, family, tied, args, dtype=torch.float32, shard=None, width=64, heads=4,
          rope_scaling=None):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    model = hf_model(family, tied, width, heads, rope_scaling)
    hf_in, hf_out = os.path.join(work, "hf"), os.path.join(work, "hf-out")
    # A half-precision file loads into fp32 parameters exactly; the
    # reference is transformers' fp32 model loaded from the same file (its
    # own buffers, such as RoPE's inverse frequencies, in fp32).
    model.to(dtype).save_pretrained(hf_in, safe_serialization=True,
                                    **({"max_shard_size": shard} if shard else {}))
    if shard:
        assert os.path.exists(os.path.join(hf_in, "model.safetensors.index.json"))
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_in, torch_dtype=torch.float32)
    llmc, llmc_run = os.path.join(args.bin, "llmc"), os.path.join(args.bin, "llmc-run")
    artifact = os.path.join(work, "m.llmc")
    run(llmc, "compile", "--model", family, "--config", os.path.join(hf_in, "config.json"),
        "--set", "seq_len=16", "--set", "batch_size=4", "--set", "dropout=0",
        "--lr", "1e-3", "--warmup", "0", "--lr-schedule", "constant", "-o", artifact)

    # HF -> llmc checkpoint -> HF.
    ck, dump = os.path.join(work, "ck"), os.path.join(work, "logits.safetensors")
    run(llmc_run, artifact, "--weights", hf_in, "--steps", "0", "--ckpt-dir", ck,
        "--dump-logits", dump, "--data", args.data, "--quiet")
    run(llmc, "export-hf", ck, artifact, "-o", hf_out, "--dtype", str(dtype).split(".")[1])
    before, after = load_dir(hf_in), load_dir(hf_out)
    assert sorted(before) == sorted(after), (sorted(before), sorted(after))
    for key in before:
        a, b = before[key], after[key]
        assert a.dtype == b.dtype and a.shape == b.shape, key
        # numpy has no bf16: compare the raw 16-bit patterns.
        bits = (lambda t: t.view(torch.int16)) if a.element_size() == 2 else (lambda t: t)
        assert torch.equal(bits(a), bits(b)), f"{key} differs after the round trip"
    # transformers writes rope_scaling null when unscaled; export leaves it out.
    config_in, config_out = (json.load(open(os.path.join(d, "config.json")))
                             for d in (hf_in, hf_out))
    assert config_in.get("rope_scaling") == config_out.get("rope_scaling"), (
        config_in.get("rope_scaling"), config_out.get("rope_scaling"))
    assert config_in.get("rope_scaling") == rope_scaling
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        hf_out, torch_dtype=torch.float32).eval()

    # Logits on the batch llmc dumped.
    got = load_file(dump)
    tokens, targets, logits = got["tokens"].long(), got["targets"].long(), got["logits"]
    model.eval()
    with torch.no_grad():
        ref = model(tokens, use_cache=False).logits
        again = reloaded(tokens, use_cache=False).logits
    scale = ref.abs().max().item()
    err = (logits - ref).abs().max().item() / scale
    assert torch.equal(ref, again), "the exported model computes other logits"
    assert err <= TOL, f"{name}: logits differ by {err:.3g} relative (> {TOL})"

    # Greedy generation: llmc's --sample at temperature 0 against
    # transformers' generate; the context stays within seq_len, so neither
    # side drops tokens.
    prompt, n = b"Once", 12
    out = subprocess.run([llmc_run, artifact, "--weights", hf_in, "--steps", "0", "--sample",
                          str(n), "--prompt", prompt.decode(), "--temperature", "0",
                          "--eval-batches", "1", "--data", args.data],
                         check=True, capture_output=True).stdout
    start = out.index(b"sample: " + prompt) + len(b"sample: " + prompt)
    with torch.no_grad():
        want = model.generate(torch.tensor([list(prompt)]), max_new_tokens=n, do_sample=False,
                              pad_token_id=0)[0, len(prompt):].tolist()
    got_tokens = list(out[start:start + n])
    assert got_tokens == want, f"{name}: greedy {got_tokens} vs transformers' {want}"

    # Training from the HF directory: step 1 runs on batch 0.
    metrics = os.path.join(work, "train.jsonl")
    run(llmc_run, artifact, "--weights", hf_in, "--steps", "5", "--metrics", metrics,
        "--data", args.data, "--quiet")
    losses = [json.loads(line)["loss"] for line in open(metrics)]
    with torch.no_grad():
        ref_loss = torch.nn.functional.cross_entropy(ref.reshape(-1, ref.shape[-1]),
                                                     targets.reshape(-1)).item()
    loss_err = abs(losses[0] - ref_loss) / ref_loss
    assert loss_err <= TOL, f"{name}: first loss {losses[0]} vs transformers {ref_loss}"
    assert losses[-1] < losses[0], f"{name}: loss did not fall: {losses}"
    print(f"{name}: {len(before)} tensors bit-exact after HF -> llmc -> HF; logits max rel "
          f"err {err:.2e} ({tokens.numel()} tokens x {logits.shape[-1]}); first loss "
          f"{losses[0]:.6f} vs transformers {ref_loss:.6f} (rel {loss_err:.1e}), "
          f"step {len(losses)} {losses[-1]:.6f}; greedy tokens as transformers' {want}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--data", required=True)
    args = p.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(2)
    check("gpt2", "gpt2", True, args)
    check("llama", "llama", False, args)
    check("llama-tied", "llama", True, args)
    check("llama-bf16", "llama", False, args, torch.bfloat16)
    check("gpt2-fp16", "gpt2", True, args, torch.float16)
    check("llama-sharded", "llama", False, args, shard="40KB")
    check("gpt2-width72", "gpt2", True, args, width=72, heads=6)
    check("llama-width72", "llama", False, args, width=72, heads=6)
    check("llama3-rope-scaling", "llama", False, args, rope_scaling=LLAMA3_SCALING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
