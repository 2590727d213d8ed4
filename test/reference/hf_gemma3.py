"""Gemma 3's text model against `transformers` 4.51 (docs/models.md).

Two random Gemma3ForCausalLM models (eager attention, fp32) — one with
three layers, sliding_window_pattern 3 (layers 0 and 1 local, 2 global), a
window of 6 keys over sequences of 16 and RoPE bases 10⁴ (local) and 10⁶
(global); one with four layers, pattern 2, linear rope_scaling (factor 8)
on its global layers and final_logit_softcapping set — are saved as Hugging Face
directories and compiled from their config.json alone (`llmc compile
--config`, the family from model_type), and:

  * HF -> llmc -> HF is bit-exact (`--steps 0 --ckpt-dir`, `export-hf`)
    with the config keys that change the model written back, and the
    export, loaded into a model built from its config.json, computes the
    same logits;
  * llmc's logits on a batch equal transformers' (eval mode, fp32) within
    TOL relative to the largest logit;
  * the first training loss equals transformers' loss on that batch
    within TOL, on one rank and under tensor parallelism (`--mesh tp=2`,
    two ranks: the heads split, the q/k norm weights whole on each rank),
    and the loss then falls over 3 steps on both;
  * `llmc generate` (paged KV cache; prompts and new tokens past the
    window) samples each token from transformers' logits of the whole
    sequence recomputed without a cache (TOL), and its greedy tokens are
    the argmax of those recomputed logits (transformers' own `generate`
    needs its HybridCache, which needs torch >= 2); under `--mesh tp=2`
    the same tokens, logits within TOL of one rank's;
  * each feature — the q/k norms, the local RoPE base, the window, the
    layer pattern, the linear scaling and the logits' soft-cap — changes
    transformers' logits by far more than TOL, so the checks above see it.

Run by run_hf.sh with the 4.51 venv's python; no network, no downloaded
models.
"""
import json
import os
import sys

import torch_compat  # noqa: F401  (before transformers: torch 1.13 lacks names it imports)
import torch
import transformers

from hf_artifacts import compile_pair, parse_args, read_dump, run, through_llmc, train_losses
from hf_generate import NEW_TOKENS, PROMPTS, generate, relative

TOL = 1e-4
SEQ, BATCH = 16, 4
COMMON = dict(vocab_size=257, hidden_size=64, intermediate_size=96, num_attention_heads=4,
              num_key_value_heads=2, head_dim=24, query_pre_attn_scalar=32,
              max_position_embeddings=64, rms_norm_eps=1e-6, sliding_window=6,
              rope_theta=1e6, rope_local_base_freq=1e4, hidden_activation="gelu_pytorch_tanh",
              tie_word_embeddings=True)
CASES = {
    "gemma3": dict(num_hidden_layers=3, sliding_window_pattern=3),
    # A cap small enough to bend this random model's logits.
    "gemma3-linear-softcap": dict(num_hidden_layers=4, sliding_window_pattern=2,
                                  rope_scaling={"rope_type": "linear", "factor": 8.0},
                                  final_logit_softcapping=3.0),
}
# Config keys export-hf must write back as transformers reads them.
KEYS = ("model_type", "sliding_window", "sliding_window_pattern", "rope_theta",
        "rope_local_base_freq", "rope_scaling", "head_dim", "query_pre_attn_scalar",
        "attn_logit_softcapping", "final_logit_softcapping", "hidden_activation",
        "tie_word_embeddings", "num_key_value_heads", "rms_norm_eps")



def build(config_args, state=None):
    """A Gemma3ForCausalLM from config keys (eager attention), with `state`
    loaded, or random weights with noise on every parameter so a misplaced
    norm weight shows."""
    config = transformers.Gemma3TextConfig(attn_implementation="eager", **config_args)
    torch.manual_seed(4321)
    model = transformers.Gemma3ForCausalLM(config).eval()
    if state is not None:
        model.load_state_dict(state)
    else:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
    return model


def logits_of(model, tokens):
    with torch.no_grad():
        return model(tokens, use_cache=False).logits


def check_generate(name, model, hf_dir, work, args):
    """Greedy generation through the windowed paged cache against the
    recomputed logits, and under tp=2 against one rank; returns the worst
    relative logit errors of both."""
    def compile_(out, *flags):
        run(os.path.join(args.bin, "llmc"), "compile", "--config",
            os.path.join(hf_dir, "config.json"), "--inference",
            "max-batch=3,max-context=32,page=4,chunk=8", *flags, "-o", out)
        return out

    one = generate(args, compile_(os.path.join(work, "gen.llmc")), hf_dir, PROMPTS, work,
                   "generate")
    worst = 0.0
    for prompt, (tokens, logits) in zip(PROMPTS, one):
        ref = logits_of(model, torch.tensor([prompt + tokens]))[0, len(prompt) - 1:-1]
        worst = max(worst, relative(logits, ref))
        want = ref.argmax(-1).tolist()
        assert tokens == want, f"{name} prompt {prompt}: {tokens} vs transformers' {want}"
    assert worst <= TOL, f"{name}: generated logits differ by {worst:.3g} (> {TOL})"
    tp = compile_(os.path.join(work, "gen-tp2.llmc"), "--mesh", "tp=2")
    tp_worst = 0.0
    for (tokens, logits), (want, ref) in zip(generate(args, tp, hf_dir, PROMPTS, work, "gen-tp2",
                                                      ranks=2), one):
        assert tokens == want, f"{name} tp=2: {tokens} vs one rank's {want}"
        tp_worst = max(tp_worst, relative(logits, ref))
    assert tp_worst <= TOL, f"{name} tp=2: generated logits differ by {tp_worst:.3g}"
    return worst, tp_worst


def feature_gaps(name, model, config_args, tokens, ref):
    """How far each feature moves transformers' logits: the model without
    it (same weights), relative to the largest logit."""
    state = model.state_dict()
    variants = {
        "rope_local_base_freq": dict(rope_local_base_freq=config_args["rope_theta"]),
        "sliding_window": dict(sliding_window=SEQ),
        "sliding_window_pattern": dict(sliding_window_pattern=config_args["sliding_window_pattern"]
                                       + 1),
    }
    if config_args.get("rope_scaling"):
        variants["rope_scaling"] = dict(rope_scaling=None)
    if config_args.get("final_logit_softcapping"):
        variants["final_logit_softcapping"] = dict(final_logit_softcapping=None)
    gaps = {}
    for feature, change in variants.items():
        gaps[feature] = relative(logits_of(build({**config_args, **change}, state), tokens), ref)
    plain = build(config_args, state)
    for layer in plain.model.layers:
        layer.self_attn.q_norm = torch.nn.Identity()
        layer.self_attn.k_norm = torch.nn.Identity()
    gaps["q_norm/k_norm"] = relative(logits_of(plain, tokens), ref)
    for feature, gap in gaps.items():
        assert gap > 100 * TOL, f"{name}: {feature} changes the logits by only {gap:.3g}"
    return gaps


def check_export(name, model, hf_out, after, tokens):
    """The export's config.json keys, and its tensors in the model transformers
    builds from that config.json computing `model`'s logits."""
    config_out = json.load(open(os.path.join(hf_out, "config.json")))
    for key in KEYS:
        # An unscaled RoPE is written as Llama's is: no rope_scaling (null).
        assert key in config_out or key == "rope_scaling", f"{name}: export-hf wrote no {key}"
        want = getattr(model.config, key)
        assert want == config_out.get(key), (key, want, config_out.get(key))
    # The export as transformers builds it from its own config.json.
    config = transformers.AutoConfig.from_pretrained(hf_out, attn_implementation="eager")
    reloaded = transformers.Gemma3ForCausalLM(config).eval()
    missing, unexpected = reloaded.load_state_dict(after, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    assert torch.equal(logits_of(model, tokens), logits_of(reloaded, tokens)), \
        f"{name}: the exported model computes other logits"
    return len(after)


def check(name, args):
    config_args = {**COMMON, **CASES[name]}
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    hf_in = os.path.join(work, "hf")
    model = build(config_args)
    model.save_pretrained(hf_in, safe_serialization=True)
    artifact, tp_artifact = compile_pair(args, hf_in, work, SEQ, BATCH)
    # HF -> llmc checkpoint -> HF, and the logits of batch 0.
    hf_out, dump, after = through_llmc(name, args, artifact, hf_in, work)
    tokens, targets, logits = read_dump(dump, BATCH, SEQ)
    tensors = check_export(name, model, hf_out, after, tokens)

    ref = logits_of(model, tokens)
    ref_loss = torch.nn.functional.cross_entropy(ref.reshape(-1, ref.shape[-1]),
                                                 targets.reshape(-1)).item()
    err = relative(logits, ref)
    assert err <= TOL, f"{name}: logits differ by {err:.3g} relative (> {TOL})"
    gaps = feature_gaps(name, model, config_args, tokens, ref)

    losses = train_losses(args, artifact, hf_in, work, "train")
    tp_losses = train_losses(args, tp_artifact, hf_in, work, "train-tp2", ranks=2)
    loss_errs = []
    for label, ls in (("1 rank", losses), ("tp=2", tp_losses)):
        loss_errs.append(abs(ls[0] - ref_loss) / ref_loss)
        assert loss_errs[-1] <= TOL, \
            f"{name} ({label}): first loss {ls[0]} vs transformers {ref_loss}"
        assert ls[-1] < ls[0], f"{name} ({label}): loss did not fall: {ls}"
    steps_gap = max(abs(a - b) / a for a, b in zip(losses, tp_losses))
    assert steps_gap <= TOL, f"{name}: tp=2 losses {tp_losses} vs one rank's {losses}"
    worst, tp_worst = check_generate(name, model, hf_in, work, args)
    print(f"{name}: {tensors} tensors bit-exact after HF -> llmc -> HF; logits max rel err "
          f"{err:.2e}; first loss {losses[0]:.6f} (rel err {loss_errs[0]:.1e}), tp=2 "
          f"{tp_losses[0]:.6f} ({loss_errs[1]:.1e}) vs transformers {ref_loss:.6f}; 3 steps "
          f"{' '.join(f'{x:.6f}' for x in losses)}, tp=2 within {steps_gap:.1e}; "
          f"{len(PROMPTS)} prompts x {NEW_TOKENS} greedy tokens as transformers' argmax, "
          f"logits max rel err {worst:.2e}, tp=2 the same tokens within {tp_worst:.1e}; "
          f"without each feature the logits move: " +
          ", ".join(f"{k} {v:.2g}" for k, v in gaps.items()))


def main():
    args = parse_args(transformers)
    for name in CASES:
        check(name, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
