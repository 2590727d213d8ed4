"""Qwen2, Mistral and Gemma 2 against `transformers` itself (docs/models.md).

For each case — Qwen2 (q/k/v biases, tied head, RoPE base 10⁶), Mistral
without a window (sliding_window null), Mistral whose window (6 keys)
is shorter than the sequence (16), and Gemma 2 (heads 24 wide over a width
of 64, query_pre_attn_scalar, soft-capped scores and logits, a window of 6
on layer 0 and none on layer 1, (1 + w) norms around each sublayer, GeGLU,
scaled embeddings) — a transformers model with random
weights is saved as a Hugging Face directory and compiled from its
config.json alone (`llmc compile --config`, the family from model_type),
and:

  * HF -> llmc -> HF is bit-exact (`--steps 0 --ckpt-dir`, `export-hf`)
    with the config keys that change the model (sliding_window,
    use_sliding_window) written back, and transformers loads the export;
  * llmc's logits on a batch equal transformers' (eval mode, fp32) within
    TOL relative to the largest logit;
  * the first training loss equals transformers' loss on that batch
    within TOL, on one rank and under tensor parallelism (`--mesh tp=2`,
    two ranks), and the loss then falls;
  * with the window, `llmc generate` (paged KV cache, prompts and new
    tokens past the window) samples each token from transformers' logits
    of the whole sequence recomputed without a cache (TOL), and its greedy
    tokens are transformers' `generate`;
  * the window and (Gemma 2) each soft-cap change transformers' logits by
    far more than TOL on the batch, so the checks above see them.

Run by run_hf.sh with the venv's python; no network, no
downloaded models.
"""
import copy
import json
import os
import sys

import torch
import transformers

from hf_artifacts import compile_pair, parse_args, read_dump, run, through_llmc, train_losses
from hf_generate import NEW_TOKENS, PROMPTS, generate, relative

TOL = 1e-4
SEQ, BATCH = 16, 4
# Gemma 2's own settings: heads not hidden / heads wide, caps small enough
# to bend this random model's scores and logits.
GEMMA2 = dict(head_dim=24, query_pre_attn_scalar=32, attn_logit_softcapping=1.0,
              final_logit_softcapping=3.0, sliding_window=6,
              hidden_activation="gelu_pytorch_tanh")



def hf_model(family, **extra):
    """A random 2-layer model of `family` (vocabulary 257, width 64, 4 query
    and 2 key/value heads) with noise on every parameter, so a misplaced
    bias or norm weight shows."""
    torch.manual_seed(4321)
    common = dict(vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-6, attn_implementation="eager")
    if family == "qwen2":
        config = transformers.Qwen2Config(rope_theta=1e6, tie_word_embeddings=True, **common,
                                          **extra)
        model = transformers.Qwen2ForCausalLM(config)
    elif family == "gemma2":
        config = transformers.Gemma2Config(tie_word_embeddings=True, **common, **GEMMA2, **extra)
        model = transformers.Gemma2ForCausalLM(config)
    else:
        config = transformers.MistralConfig(rope_theta=10000.0, tie_word_embeddings=False,
                                            **common, **extra)
        model = transformers.MistralForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def greedy(model, prompt):
    """transformers' greedy tokens. Gemma 2's `generate` in 4.44 needs its
    HybridCache, which needs torch._dynamo (torch >= 2; the venv has
    Debian's 1.13), and its DynamicCache path windows a decode step's mask
    as if the query were at position 0; so for Gemma 2 each token is the
    argmax of the whole sequence recomputed without a cache."""
    if model.config.model_type != "gemma2":
        return model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS,
                              do_sample=False, pad_token_id=0)[0, len(prompt):].tolist()
    tokens = list(prompt)
    for _ in range(NEW_TOKENS):
        tokens.append(int(model(torch.tensor([tokens]), use_cache=False).logits[0, -1].argmax()))
    return tokens[len(prompt):]


def check_generate(name, model, hf_dir, work, args):
    """Greedy generation through the windowed paged cache against
    transformers; returns the worst relative logit error."""
    artifact = os.path.join(work, "gen.llmc")
    run(os.path.join(args.bin, "llmc"), "compile", "--config", os.path.join(hf_dir, "config.json"),
        "--inference", "max-batch=3,max-context=32,page=4,chunk=8", "-o", artifact)
    worst = 0.0
    for prompt, (tokens, logits) in zip(PROMPTS, generate(args, artifact, hf_dir, PROMPTS, work,
                                                          "generate")):
        with torch.no_grad():
            ref = model(torch.tensor([prompt + tokens]), use_cache=False).logits[0, len(prompt) - 1:-1]
            want = greedy(model, prompt)
        worst = max(worst, relative(logits, ref))
        assert tokens == want, f"{name} prompt {prompt}: {tokens} vs transformers' {want}"
    assert worst <= TOL, f"{name}: generated logits differ by {worst:.3g} (> {TOL})"
    return worst


def without(model, setting):
    """The model with one config setting turned off (a window as wide as
    the sequence: Gemma 2's layers need one)."""
    off = SEQ if setting == "sliding_window" else None
    if model.config.model_type == "gemma2" and setting == "sliding_window":
        for layer in model.model.layers:
            layer.sliding_window = off
            layer.self_attn.sliding_window = None
    setattr(model.config, setting, off)


def check_setting_matters(name, model, tokens, ref, setting):
    """The setting must change the logits on this batch by far more than
    TOL, or the logit check proves nothing about it."""
    value = getattr(model.config, setting, None)
    if not value or (setting == "sliding_window" and value >= SEQ):
        return None
    model = copy.deepcopy(model)
    without(model, setting)
    with torch.no_grad():
        changed = model(tokens, use_cache=False).logits
    gap = (changed - ref).abs().max().item() / ref.abs().max().item()
    assert gap > 100 * TOL, f"{name}: {setting} changes the logits by only {gap:.3g}"
    return gap


def check(name, family, args, **extra):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    hf_in = os.path.join(work, "hf")
    model = hf_model(family, **extra).eval()
    model.save_pretrained(hf_in, safe_serialization=True)
    artifact, tp_artifact = compile_pair(args, hf_in, work, SEQ, BATCH)
    # HF -> llmc checkpoint -> HF, and the logits of batch 0.
    hf_out, dump, after = through_llmc(name, args, artifact, hf_in, work)
    config_in, config_out = (json.load(open(os.path.join(d, "config.json")))
                             for d in (hf_in, hf_out))
    for key in ("model_type", "sliding_window", "use_sliding_window", "tie_word_embeddings",
                "rope_theta", "head_dim", "query_pre_attn_scalar", "attn_logit_softcapping",
                "final_logit_softcapping", "hidden_activation"):
        if key in config_out:
            # What transformers reads (config.json leaves defaults out).
            want = getattr(model.config, key, config_in.get(key))
            assert want == config_out[key], (key, want, config_out[key])
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        hf_out, torch_dtype=torch.float32, attn_implementation="eager").eval()

    tokens, targets, logits = read_dump(dump, BATCH, SEQ)
    with torch.no_grad():
        ref = model(tokens, use_cache=False).logits
        again = reloaded(tokens, use_cache=False).logits
        ref_loss = torch.nn.functional.cross_entropy(ref.reshape(-1, ref.shape[-1]),
                                                     targets.reshape(-1)).item()
    assert torch.equal(ref, again), f"{name}: the exported model computes other logits"
    err = (logits - ref).abs().max().item() / ref.abs().max().item()
    assert err <= TOL, f"{name}: logits differ by {err:.3g} relative (> {TOL})"
    gaps = {}
    for setting in ("sliding_window", "attn_logit_softcapping", "final_logit_softcapping"):
        gap = check_setting_matters(name, model, tokens, ref, setting)
        if gap is not None:
            gaps[setting] = gap

    losses = train_losses(args, artifact, hf_in, work, "train")
    tp_losses = train_losses(args, tp_artifact, hf_in, work, "train-tp2", ranks=2)
    for label, ls in (("1 rank", losses), ("tp=2", tp_losses)):
        loss_err = abs(ls[0] - ref_loss) / ref_loss
        assert loss_err <= TOL, f"{name} ({label}): first loss {ls[0]} vs transformers {ref_loss}"
        assert ls[-1] < ls[0], f"{name} ({label}): loss did not fall: {ls}"
    generated = ""
    if extra.get("sliding_window") or family == "gemma2":
        worst = check_generate(name, model, hf_in, work, args)
        generated = (f"; {len(PROMPTS)} prompts x {NEW_TOKENS} greedy tokens as transformers', "
                     f"logits max rel err {worst:.2e} against recompute")
    print(f"{name}: {len(after)} tensors bit-exact after HF -> llmc -> HF; logits max rel err "
          f"{err:.2e}; first loss {losses[0]:.6f} (tp=2 {tp_losses[0]:.6f}) vs transformers "
          f"{ref_loss:.6f}{generated}" +
          "".join(f"; without {k} the logits move {v:.2g}" for k, v in gaps.items()))


def main():
    args = parse_args(transformers)
    check("qwen2", "qwen2", args)
    check("mistral", "mistral", args, sliding_window=None)
    check("mistral-window", "mistral", args, sliding_window=6)
    check("gemma2", "gemma2", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
