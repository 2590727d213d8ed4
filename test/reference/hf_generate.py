"""`llmc generate` against `transformers` (docs/inference.md).

For GPT-2, Llama (grouped-query attention) and Llama with Llama 3.1's
RoPE scaling (rope_scaling llama3), a transformers model with
random weights is saved as a Hugging Face directory and compiled with
`llmc compile --inference` (small pages and prefill chunks, so prompts span
several chunks and pages). Prompts of different lengths, more of them than
the decode batch has rows, are generated greedily in one `llmc generate`
run (continuous batching), and

  * the logits each token was sampled from equal transformers' logits of
    the whole sequence, recomputed without a cache, at every position
    (fp32, 1e-5 relative to the largest logit): paged cache = recompute;
  * the greedy tokens equal transformers' `generate` (its own contiguous
    KV cache);
  * each prompt alone gives the same tokens and logits as in the batch;
  * under tensor parallelism (`--mesh tp=2`, two ranks) the same tokens and
    logits again;
  * a bf16 artifact (bf16 weights and cache) keeps within bf16's rounding;
  * an int8 KV cache (`kv=int8`: codes and an fp32 scale per token slot and
    kv head; fp32 weights) keeps within KV_INT8_TOL of the recompute and
    gives the same logits under `--mesh tp=2`; an fp8 E4M3 cache
    (`kv=fp8`, the same layout) within KV_FP8_TOL; a bf16 cache under fp32
    weights within KV_BF16_TOL; how many prompts' greedy tokens equal
    transformers' is printed.

Run by run_hf.sh with the venv's python; no network, no downloaded models.
"""
import argparse
import os
import subprocess
import sys

import torch
import transformers
from safetensors.torch import load_file

from hf_interop import LLAMA3_SCALING, hf_model

TOL = 1e-5
# Reduced-precision caches under fp32 weights, relative to the largest
# logit. Measured 2026-11-26: int8 5.9e-3 (GPT-2), 9.8e-3 (GQA Llama),
# 9.3e-3 (llama3 RoPE); bf16 1.9e-3, 3.7e-3, 3.9e-3. Greedy tokens equal
# transformers' for 6, 6 and 5 of the 6 prompts with int8 (llama3 RoPE's
# last prompt turns at its 7th new token, where the fp32 top two logits
# differ by 2.8e-4 of the largest), 6/6 with bf16; printed, not asserted.
KV_INT8_TOL = 2e-2
KV_BF16_TOL = 1e-2
# fp8 E4M3 (3 mantissa bits: a step of 2^-3 of each value's power of two,
# where int8's is 1/127 of the row's largest value). Measured 2026-12-01:
# 3.4e-2 (GPT-2), 6.2e-2 (GQA Llama), 5.0e-2 (llama3 RoPE); greedy tokens
# equal transformers' for 6, 5 and 2 of the 6 prompts (these random models'
# top logits are close; printed, not asserted).
KV_FP8_TOL = 1e-1
PROMPTS = [[5], [17, 3, 250, 9, 100], list(range(40, 53)), [7] * 9, list(range(200, 222)), [1, 2]]
NEW_TOKENS = 10


def generate(args, artifact, weights, prompts, work, name, ranks=1):
    dump = os.path.join(work, name + ".safetensors")
    cmd = [os.path.join(args.bin, "llmc"), "generate", artifact, "--weights", weights,
           "--max-new-tokens", str(NEW_TOKENS), "--temperature", "0", "--dump-logits", dump,
           "--quiet"]
    for p in prompts:
        cmd += ["--prompt-tokens", ",".join(map(str, p))]
    if ranks > 1:
        cmd = [args.mpirun, "-np", str(ranks)] + cmd
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    got = load_file(dump)
    return [(got[f"tokens.{i}"].tolist(), got[f"logits.{i}"]) for i in range(len(prompts))]


def relative(a, b):
    return (a - b).abs().max().item() / b.abs().max().item()


def check(name, family, args, width=64, heads=4, rope_scaling=None):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    model = hf_model(family, tied=family == "gpt2", width=width, heads=heads,
                     rope_scaling=rope_scaling).eval()
    hf = os.path.join(work, "hf")
    model.save_pretrained(hf, safe_serialization=True)
    llmc = os.path.join(args.bin, "llmc")
    spec = "max-batch=3,max-context=32,page=4,chunk=8"

    def compile_(out, *flags, kv=None):
        subprocess.run([llmc, "compile", "--model", family, "--config",
                        os.path.join(hf, "config.json"), "--inference",
                        spec + (f",kv={kv}" if kv else ""), *flags, "-o", out],
                       check=True)
        return out

    def recompute(prompt, tokens):
        with torch.no_grad():
            return model(torch.tensor([prompt + tokens]), use_cache=False).logits[0, len(prompt) - 1:-1]

    artifact = compile_(os.path.join(work, "m.llmc"))
    batched = generate(args, artifact, hf, PROMPTS, work, "batched")
    worst = 0.0
    for prompt, (tokens, logits) in zip(PROMPTS, batched):
        assert len(tokens) == NEW_TOKENS, (prompt, tokens)
        full = torch.tensor([prompt + tokens])
        with torch.no_grad():
            ref = model(full, use_cache=False).logits[0, len(prompt) - 1:-1]
            want = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS,
                                  do_sample=False, pad_token_id=0)[0, len(prompt):].tolist()
        err = relative(logits, ref)
        worst = max(worst, err)
        assert err <= TOL, f"{name} prompt {prompt}: logits differ by {err:.3g} (> {TOL})"
        assert tokens == want, f"{name} prompt {prompt}: {tokens} vs transformers' {want}"

    for i, prompt in enumerate(PROMPTS):
        alone = generate(args, artifact, hf, [prompt], work, f"alone{i}")[0]
        assert alone[0] == batched[i][0], f"{name}: prompt {i} alone {alone[0]} vs {batched[i][0]}"
        err = relative(alone[1], batched[i][1])
        assert err <= TOL, f"{name}: prompt {i} alone differs by {err:.3g}"

    tp = compile_(os.path.join(work, "tp2.llmc"), "--mesh", "tp=2")
    for (tokens, logits), (want, ref) in zip(generate(args, tp, hf, PROMPTS, work, "tp2", 2),
                                             batched):
        assert tokens == want, f"{name} tp=2: {tokens} vs one rank's {want}"
        err = relative(logits, ref)
        assert err <= TOL, f"{name} tp=2: logits differ from one rank's by {err:.3g}"

    bf16 = compile_(os.path.join(work, "bf16.llmc"), "--precision", "bf16")
    bf16_worst = 0.0
    for prompt, (tokens, logits) in zip(PROMPTS, generate(args, bf16, hf, PROMPTS, work, "bf16")):
        with torch.no_grad():
            ref = model(torch.tensor([prompt + tokens]), use_cache=False).logits[0, len(prompt) - 1:-1]
        bf16_worst = max(bf16_worst, relative(logits, ref))
    assert bf16_worst <= 3e-2, f"{name} bf16: logits differ by {bf16_worst:.3g} (> 3e-2)"

    # Reduced-precision caches under fp32 weights: the logits each token was
    # sampled from against the recompute of the sequence llmc generated.
    kv_worst, kv_same = {}, {}
    for kv, tol in (("int8", KV_INT8_TOL), ("fp8", KV_FP8_TOL), ("bf16", KV_BF16_TOL)):
        artifact_kv = compile_(os.path.join(work, f"kv-{kv}.llmc"), kv=kv)
        runs = generate(args, artifact_kv, hf, PROMPTS, work, f"kv-{kv}")
        kv_worst[kv], kv_same[kv] = 0.0, 0
        for prompt, (tokens, logits), (want, _) in zip(PROMPTS, runs, batched):
            kv_worst[kv] = max(kv_worst[kv], relative(logits, recompute(prompt, tokens)))
            kv_same[kv] += tokens == want
        assert kv_worst[kv] <= tol, f"{name} kv={kv}: logits differ by {kv_worst[kv]:.3g} (> {tol})"
        if kv == "int8":
            # Each rank quantizes its own kv heads: the codes are the one
            # rank's up to the keys' last bits, so the logits agree closely.
            tp_kv = compile_(os.path.join(work, "kv-int8-tp2.llmc"), "--mesh", "tp=2", kv=kv)
            tp_worst = 0.0
            for (tokens, logits), (want, ref) in zip(
                    generate(args, tp_kv, hf, PROMPTS, work, "kv-int8-tp2", 2), runs):
                assert tokens == want, f"{name} kv=int8 tp=2: {tokens} vs one rank's {want}"
                tp_worst = max(tp_worst, relative(logits, ref))
            assert tp_worst <= 1e-4, \
                f"{name} kv=int8 tp=2: logits differ from one rank's by {tp_worst:.3g}"
    print(f"{name}: {len(PROMPTS)} prompts x {NEW_TOKENS} greedy tokens as transformers' "
          f"generate; logits max rel err {worst:.2e} against recompute; alone = batched; "
          f"tp=2 = one rank; bf16 max rel err {bf16_worst:.2e}; "
          f"kv=int8 max rel err {kv_worst['int8']:.2e} (greedy = transformers' for "
          f"{kv_same['int8']}/{len(PROMPTS)} prompts; tp=2 within {tp_worst:.1e} of one rank); "
          f"kv=fp8 max rel err {kv_worst['fp8']:.2e} "
          f"({kv_same['fp8']}/{len(PROMPTS)} prompts greedy-equal); "
          f"kv=bf16 max rel err {kv_worst['bf16']:.2e} "
          f"({kv_same['bf16']}/{len(PROMPTS)} prompts greedy-equal)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--mpirun", default="mpirun")
    args = p.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(2)
    check("gpt2", "gpt2", args)
    check("llama-gqa", "llama", args)
    check("llama3-rope-scaling", "llama", args, rope_scaling=LLAMA3_SCALING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
