"""Qwen-MoE (qwen2_moe) against `transformers` itself (docs/models.md).

A random 3-layer Qwen2MoeForCausalLM (vocabulary 257, width 64, 6 routed
experts 32 wide, top 3, a shared expert 48 wide behind its sigmoid gate,
q/k/v biases, RoPE base 10⁶) is saved as a Hugging Face directory and
compiled from its config.json alone (`llmc compile --config`, the family
from model_type). Two cases:

  * `qwen2_moe`: norm_topk_prob false (transformers' default), layer 1 a
    dense MLP (mlp_only_layers = [1]), layers 0 and 2 sparse;
  * `qwen2_moe-norm-topk`: norm_topk_prob true, decoder_sparse_step 2, so
    layer 1 alone is sparse.

For each:

  * HF -> llmc -> HF is bit-exact (`--steps 0 --ckpt-dir`, `export-hf`),
    with the experts', shared expert's and gate's keys and the MoE config
    keys written back, and transformers loads the export;
  * llmc's logits on a batch equal transformers' (eval mode, fp32) within
    TOL relative to the largest logit;
  * the first training loss equals transformers' cross-entropy plus
    router_aux_loss_coef times transformers' own load_balancing_loss_func
    of the sparse layers' router logits (output_router_logits) within TOL,
    and the loss then falls;
  * the shared expert, norm_topk_prob and the load-balancing term each
    move transformers' numbers by far more than TOL, so the checks see them;
  * greedy generation through the paged KV cache samples each token from
    transformers' logits of the whole sequence (TOL) and equals its greedy
    `generate`.

Run by run_hf.sh with the venv's python; no network, no downloaded models.
"""
import copy
import sys

import torch
import transformers
from transformers.models.qwen2_moe.modeling_qwen2_moe import load_balancing_loss_func

from hf_families import TOL, check_generate
from hf_artifacts import parse_args
from hf_moe import logits_error, reference_loss, through_llmc, training_losses

EXPERTS, TOP_K, AUX = 6, 3, 0.1
CONFIG_KEYS = ("model_type", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
               "shared_expert_intermediate_size", "norm_topk_prob", "decoder_sparse_step",
               "mlp_only_layers", "router_aux_loss_coef", "output_router_logits",
               "use_sliding_window", "rope_theta", "tie_word_embeddings", "intermediate_size")


def hf_model(**moe):
    torch.manual_seed(2468)
    config = transformers.Qwen2MoeConfig(
        vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False, use_sliding_window=False,
        num_experts=EXPERTS, num_experts_per_tok=TOP_K, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, router_aux_loss_coef=AUX, output_router_logits=True,
        attn_implementation="eager", **moe)
    model = transformers.Qwen2MoeForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def logits_changed(model, tokens, ref, change):
    """How far transformers' logits move when `change` edits a copy of the model."""
    other = copy.deepcopy(model)
    change(other)
    with torch.no_grad():
        moved = other(tokens, use_cache=False).logits
    return (moved - ref).abs().max().item() / ref.abs().max().item()


def without_shared_experts(model):
    for layer in model.model.layers:
        if hasattr(layer.mlp, "shared_expert_gate"):
            layer.mlp.shared_expert.down_proj.weight.data.zero_()


def flip_norm_topk(model):
    for layer in model.model.layers:
        if hasattr(layer.mlp, "norm_topk_prob"):
            layer.mlp.norm_topk_prob = not layer.mlp.norm_topk_prob


def check(name, args, **moe):
    model = hf_model(**moe)
    case = through_llmc(name, args, model, CONFIG_KEYS)
    assert any("shared_expert_gate" in n for n, _ in model.named_parameters())
    ref, ce, aux, sparse = reference_loss(model, case, load_balancing_loss_func, EXPERTS, TOP_K)
    err = logits_error(case, ref)
    shared = logits_changed(model, case.tokens, ref, without_shared_experts)
    norm = logits_changed(model, case.tokens, ref, flip_norm_topk)
    for what, moved in (("the shared expert", shared), ("norm_topk_prob", norm)):
        assert moved > 100 * TOL, f"{name}: {what} moves the logits by only {moved:.3g}"
    ref_loss = ce + AUX * aux
    assert AUX * aux > 100 * TOL * ref_loss, f"{name}: the aux loss is too small to see"
    losses = training_losses(args, case, ref_loss)
    # transformers 4.44's generate computes the aux loss from an attention
    # mask sized for every layer, which fails with dense layers; generation
    # needs no router logits.
    model.config.output_router_logits = False
    worst = check_generate(name, model, case.hf_in, case.work, args)
    print(f"{name}: {case.tensors} tensors bit-exact after HF -> llmc -> HF; logits max rel err "
          f"{err:.2e} (without the shared expert they move {shared:.2e}, with norm_topk_prob "
          f"flipped {norm:.2e}); first loss {losses[0]:.6f} vs transformers {ref_loss:.6f} "
          f"(cross-entropy {ce:.6f} + {AUX} x load balancing {aux:.6f} over {sparse} sparse "
          f"layers); greedy generation as transformers', logits max rel err {worst:.2e} "
          f"against recompute")


def main():
    args = parse_args(transformers)
    check("qwen2_moe", args, norm_topk_prob=False, mlp_only_layers=[1])
    check("qwen2_moe-norm-topk", args, norm_topk_prob=True, decoder_sparse_step=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
