"""Mixtral (mixture of experts) against `transformers` itself (docs/models.md).

A random 2-layer MixtralForCausalLM (4 experts, top 2, vocabulary 257,
width 64) is saved as a Hugging Face directory and compiled from its
config.json alone (`llmc compile --config`, the family from model_type):

  * HF -> llmc -> HF is bit-exact (`--steps 0 --ckpt-dir`, `export-hf`),
    with the experts' keys written back, and transformers loads the export;
  * llmc's logits on a batch equal transformers' (eval mode, fp32) within
    TOL relative to the largest logit;
  * the first training loss equals transformers' cross-entropy plus
    router_aux_loss_coef times transformers' own load_balancing_loss_func
    of the router logits (output_router_logits) within TOL, and the loss
    then falls;
  * the load-balancing term moves the loss by far more than TOL, so the
    check sees it; without output_router_logits the loss is the
    cross-entropy alone;
  * greedy generation through the paged KV cache samples each token from
    transformers' logits of the whole sequence (TOL) and equals its greedy
    `generate`.

Run by run_hf.sh with the venv's python; no network, no downloaded models.
"""
import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file
from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

from hf_families import BATCH, SEQ, TOL, check_generate, first_loss, run

EXPERTS, TOP_K, AUX = 4, 2, 0.1


def hf_model(output_router_logits):
    torch.manual_seed(4321)
    config = transformers.MixtralConfig(
        vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, rope_theta=1e6, tie_word_embeddings=False, sliding_window=None,
        num_local_experts=EXPERTS, num_experts_per_tok=TOP_K, router_aux_loss_coef=AUX,
        output_router_logits=output_router_logits, attn_implementation="eager")
    model = transformers.MixtralForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def reference_loss(model, tokens, targets):
    """transformers' training loss of the batch: the cross-entropy of the
    targets plus, with output_router_logits, coef · load_balancing_loss_func."""
    with torch.no_grad():
        out = model(tokens, use_cache=False, output_router_logits=True)
        logits = out.logits
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               targets.reshape(-1)).item()
        aux = load_balancing_loss_func(out.router_logits, EXPERTS, TOP_K).item()
    return logits, ce, aux


def check(name, args, output_router_logits):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    hf_in, hf_out = os.path.join(work, "hf"), os.path.join(work, "hf-out")
    model = hf_model(output_router_logits)
    model.save_pretrained(hf_in, safe_serialization=True)
    llmc, llmc_run = os.path.join(args.bin, "llmc"), os.path.join(args.bin, "llmc-run")
    artifact = os.path.join(work, "m.llmc")
    run(llmc, "compile", "--config", os.path.join(hf_in, "config.json"), "--set",
        f"seq_len={SEQ}", "--set", f"batch_size={BATCH}", "--lr", "1e-3", "--warmup", "0",
        "--lr-schedule", "constant", "-o", artifact)

    ck, dump = os.path.join(work, "ck"), os.path.join(work, "logits.safetensors")
    run(llmc_run, artifact, "--weights", hf_in, "--steps", "0", "--ckpt-dir", ck,
        "--dump-logits", dump, "--data", args.data, "--quiet")
    run(llmc, "export-hf", ck, artifact, "-o", hf_out)
    before, after = (load_file(os.path.join(d, "model.safetensors")) for d in (hf_in, hf_out))
    assert sorted(before) == sorted(after), (sorted(before), sorted(after))
    for key in before:
        assert torch.equal(before[key], after[key]), f"{name}: {key} differs after the round trip"
    config_out = json.load(open(os.path.join(hf_out, "config.json")))
    for key in ("model_type", "num_local_experts", "num_experts_per_tok", "router_aux_loss_coef",
                "output_router_logits", "sliding_window", "rope_theta", "tie_word_embeddings"):
        assert getattr(model.config, key) == config_out[key], (key, config_out.get(key))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        hf_out, torch_dtype=torch.float32, attn_implementation="eager").eval()

    got = load_file(dump)
    tokens, targets, logits = got["tokens"].long(), got["targets"].long(), got["logits"]
    assert tokens.shape == (BATCH, SEQ), tokens.shape
    ref, ce, aux = reference_loss(model, tokens, targets)
    with torch.no_grad():
        assert torch.equal(ref, reloaded(tokens, use_cache=False).logits), \
            f"{name}: the exported model computes other logits"
    err = (logits - ref).abs().max().item() / ref.abs().max().item()
    assert err <= TOL, f"{name}: logits differ by {err:.3g} relative (> {TOL})"
    ref_loss = ce + (AUX * aux if output_router_logits else 0.0)
    if output_router_logits:
        assert AUX * aux > 100 * TOL * ref_loss, f"{name}: the aux loss is too small to see"

    losses = first_loss(args, artifact, hf_in, work, "train")
    loss_err = abs(losses[0] - ref_loss) / ref_loss
    assert loss_err <= TOL, f"{name}: first loss {losses[0]} vs transformers {ref_loss}"
    assert losses[-1] < losses[0], f"{name}: loss did not fall: {losses}"
    worst = check_generate(name, model, hf_in, work, args)
    print(f"{name}: {len(before)} tensors bit-exact after HF -> llmc -> HF; logits max rel err "
          f"{err:.2e}; first loss {losses[0]:.6f} vs transformers {ref_loss:.6f} "
          f"(cross-entropy {ce:.6f} + {AUX} x load balancing {aux:.6f}"
          f"{'' if output_router_logits else ', not added'}); greedy generation as "
          f"transformers', logits max rel err {worst:.2e} against recompute")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--mpirun", required=True)
    args = p.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(2)
    check("mixtral", args, output_router_logits=True)
    check("mixtral-no-aux", args, output_router_logits=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
