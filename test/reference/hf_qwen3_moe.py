"""Qwen3-MoE (qwen3_moe) against `transformers` 4.51 itself (docs/models.md).

Random 3-layer Qwen3MoeForCausalLM models (vocabulary 257, width 64, 4
query and 2 key/value heads with q/k norms, 6 routed experts 32 wide, top
3, no shared expert, RoPE base 10⁶), noise on every parameter. Each is
saved as a Hugging Face directory and compiled from its config.json alone
(`llmc compile --config`, the family from model_type). Two cases:

  * `qwen3_moe`: the released models' layout: every layer sparse,
    norm_topk_prob true, heads 24 wide (head_dim, not 64 / 4);
  * `qwen3_moe-dense-layer`: layer 1 a dense MLP (mlp_only_layers = [1]),
    norm_topk_prob false (Qwen3MoeConfig's default), no head_dim key (its
    attention falls back to hidden_size / num_attention_heads = 16),
    attention biases.

For each:

  * HF -> llmc -> HF is bit-exact (`--steps 0 --ckpt-dir`, `export-hf`),
    the config keys that change the model written back (no shared expert's),
    and the export, built by transformers from its config.json, computes
    the same logits;
  * llmc's logits on a batch equal transformers' (eval mode, fp32) within
    TOL relative to the largest logit;
  * the first training loss equals transformers' cross-entropy plus
    router_aux_loss_coef times transformers' own load_balancing_loss_func
    of the sparse layers' router logits within TOL, on one rank, under
    tensor parallelism (tp=2) and under expert parallelism (ep=2); the
    later steps' losses under tp=2 and ep=2 equal one rank's, and the loss
    falls;
  * norm_topk_prob, q_norm and the load-balancing term each move
    transformers' numbers by far more than TOL, so the checks see them;
  * (`qwen3_moe`) `llmc generate` through the paged KV cache samples each
    token from transformers' logits of the whole sequence recomputed
    without a cache, its greedy tokens are transformers', and under tp=2
    it gives one rank's tokens and logits.

transformers 4.51's Qwen3MoeModel returns None as a dense layer's router
logits, which its own load_balancing_loss_func cannot concatenate; the
reference takes the sparse layers' logits, as Qwen2MoeModel returns them.

Run by run_hf.sh with the transformers 4.51 venv's python; no network, no
downloaded models.
"""
import copy
import json
import os
import sys

import torch_compat  # noqa: F401  (before transformers)
import torch
import transformers
from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

from hf_artifacts import compile_artifact, compile_pair, parse_args, read_dump, through_llmc
from hf_artifacts import train_metrics
from hf_generate import relative
from hf_qwen3 import TOL, check_generate, load_export, norm_matters

SEQ, BATCH, STEPS = 16, 4, 4
EXPERTS, TOP_K, AUX = 6, 3, 0.1
CONFIG_KEYS = ("model_type", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
               "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "router_aux_loss_coef",
               "output_router_logits", "use_sliding_window", "sliding_window", "rope_theta",
               "tie_word_embeddings", "attention_bias", "rms_norm_eps", "num_key_value_heads",
               "intermediate_size")


def hf_model(**extra):
    torch.manual_seed(1357)
    config = transformers.Qwen3MoeConfig(
        vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, rope_theta=1e6, num_experts=EXPERTS, num_experts_per_tok=TOP_K,
        moe_intermediate_size=32, router_aux_loss_coef=AUX, output_router_logits=True,
        attn_implementation="eager", **extra)
    model = transformers.Qwen3MoeForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            # As hf_qwen3.py: the q/k norms' weights get more noise.
            p.add_(torch.randn_like(p) * (0.5 if "_norm." in name and "self_attn" in name else 0.1))
    return model.eval()


def reference(model, tokens, targets):
    """transformers' logits, its cross-entropy of the targets, its
    load_balancing_loss_func of the sparse layers' router logits, and how
    many layers route."""
    with torch.no_grad():
        logits = model(tokens, use_cache=False).logits
        routed = model.model(tokens, use_cache=False, output_router_logits=True).router_logits
    sparse = tuple(r for r in routed if r is not None)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           targets.reshape(-1)).item()
    return logits, ce, load_balancing_loss_func(sparse, EXPERTS, TOP_K).item(), len(sparse)


def norm_topk_matters(name, model, tokens, ref):
    """With norm_topk_prob flipped transformers' logits move by far more
    than TOL, so the logit check sees the renormalisation."""
    other = copy.deepcopy(model)
    for layer in other.model.layers:
        if hasattr(layer.mlp, "norm_topk_prob"):
            layer.mlp.norm_topk_prob = not layer.mlp.norm_topk_prob
    with torch.no_grad():
        gap = relative(other(tokens, use_cache=False).logits, ref)
    assert gap > 100 * TOL, f"{name}: flipping norm_topk_prob moves the logits only {gap:.3g}"
    return gap


def check_export(name, hf_in, hf_out, tokens, ref):
    """The export's config.json keys (those of the saved model's file) and
    the model transformers builds from it."""
    saved, config_out = (json.load(open(os.path.join(d, "config.json"))) for d in (hf_in, hf_out))
    assert config_out["architectures"] == ["Qwen3MoeForCausalLM"], config_out["architectures"]
    assert "shared_expert_intermediate_size" not in config_out, sorted(config_out)
    for key in CONFIG_KEYS:
        assert saved[key] == config_out[key], (key, saved[key], config_out[key])
    head_dim = saved.get("head_dim", saved["hidden_size"] // saved["num_attention_heads"])
    assert config_out["head_dim"] == head_dim, (config_out["head_dim"], head_dim)
    reloaded = load_export(hf_out)
    reloaded.config.output_router_logits = False  # as the reference model (check)
    with torch.no_grad():
        again = reloaded(tokens, use_cache=False).logits
    assert torch.equal(ref, again), f"{name}: the exported model computes other logits"


def layouts_train_alike(name, args, artifact, tp_artifact, hf_in, work, ref_loss):
    """STEPS steps on one rank, under tp=2 and under ep=2: each layout's
    first loss is transformers' (TOL), every step's loss is one rank's, and
    the loss falls. Returns the losses and the worst difference from one
    rank's."""
    ep_artifact = compile_artifact(args, hf_in, os.path.join(work, "ep2.llmc"), SEQ, BATCH,
                                   "--mesh", "ep=2")
    losses = {"1 rank": [s["loss"] for s in train_metrics(args, artifact, hf_in, work, "train",
                                                          STEPS)]}
    for label, path in (("tp=2", tp_artifact), ("ep=2", ep_artifact)):
        steps = train_metrics(args, path, hf_in, work, "train-" + label[:2], STEPS, ranks=2)
        losses[label] = [s["loss"] for s in steps]
    one = losses["1 rank"]
    for label, ls in losses.items():
        loss_err = abs(ls[0] - ref_loss) / ref_loss
        assert loss_err <= TOL, f"{name} ({label}): first loss {ls[0]} vs transformers {ref_loss}"
        assert ls[-1] < ls[0], f"{name} ({label}): loss did not fall: {ls}"
    # Each layout sums the experts' rows and the heads in its own order;
    # an fp32 rounding that flips a token's top-3 would move a loss by far
    # more than this.
    worst = max(abs(a - b) / a for label in ("tp=2", "ep=2") for a, b in zip(one, losses[label]))
    assert worst <= 1e-5, f"{name}: tp=2 and ep=2 losses {losses} vs one rank's"
    return losses, worst


def check(name, args, with_generate, **extra):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    hf_in = os.path.join(work, "hf")
    model = hf_model(**extra)
    model.save_pretrained(hf_in, safe_serialization=True)
    # The saved config keeps output_router_logits (llmc adds the loss);
    # transformers' forward would compute its own from every layer's router
    # logits, a dense layer's None among them, so reference() asks for them.
    model.config.output_router_logits = False
    artifact, tp_artifact = compile_pair(args, hf_in, work, SEQ, BATCH)
    hf_out, dump, after = through_llmc(name, args, artifact, hf_in, work)
    assert any(".mlp.experts.0.gate_proj." in key for key in after), sorted(after)
    tokens, targets, logits = read_dump(dump, BATCH, SEQ)
    ref, ce, aux, sparse = reference(model, tokens, targets)
    check_export(name, hf_in, hf_out, tokens, ref)
    err = relative(logits, ref)
    assert err <= TOL, f"{name}: logits differ by {err:.3g} relative (> {TOL})"
    norm = norm_topk_matters(name, model, tokens, ref)
    q_gap = norm_matters(name, model, tokens, ref, "q_norm")
    ref_loss = ce + AUX * aux
    assert AUX * aux > 100 * TOL * ref_loss, f"{name}: the aux loss is too small to see"
    losses, worst = layouts_train_alike(name, args, artifact, tp_artifact, hf_in, work, ref_loss)
    generated = ""
    if with_generate:
        gen = check_generate(name, model, hf_in, work, args)
        generated = (f"; greedy generation as transformers' (and tp=2's), logits max rel err "
                     f"{gen:.2e} against recompute")
    one = losses["1 rank"]
    print(f"{name}: {len(after)} tensors bit-exact after HF -> llmc -> HF; logits max rel err "
          f"{err:.2e} (norm_topk_prob flipped moves them {norm:.2e}, no q_norm {q_gap:.2e}); "
          f"first loss {one[0]:.6f} (tp=2 {losses['tp=2'][0]:.6f}, ep=2 {losses['ep=2'][0]:.6f}) "
          f"vs transformers {ref_loss:.6f} (cross-entropy {ce:.6f} + {AUX} x load balancing "
          f"{aux:.6f} over {sparse} sparse layers); {STEPS} steps' losses under tp=2 and ep=2 "
          f"within {worst:.1e} of one rank's ({one[0]:.4f} -> {one[-1]:.4f}){generated}")


def main():
    args = parse_args(transformers)
    check("qwen3_moe", args, with_generate=True, head_dim=24, norm_topk_prob=True)
    check("qwen3_moe-dense-layer", args, with_generate=False, norm_topk_prob=False,
          mlp_only_layers=[1], attention_bias=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
