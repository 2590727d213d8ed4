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
import sys

import torch
import transformers
from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

from hf_families import TOL, check_generate
from hf_artifacts import parse_args
from hf_moe import logits_error, reference_loss, through_llmc, training_losses

EXPERTS, TOP_K, AUX = 4, 2, 0.1
CONFIG_KEYS = ("model_type", "num_local_experts", "num_experts_per_tok", "router_aux_loss_coef",
               "output_router_logits", "sliding_window", "rope_theta", "tie_word_embeddings")


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


def check(name, args, output_router_logits):
    model = hf_model(output_router_logits)
    case = through_llmc(name, args, model, CONFIG_KEYS)
    ref, ce, aux, _ = reference_loss(model, case, load_balancing_loss_func, EXPERTS, TOP_K)
    err = logits_error(case, ref)
    ref_loss = ce + (AUX * aux if output_router_logits else 0.0)
    if output_router_logits:
        assert AUX * aux > 100 * TOL * ref_loss, f"{name}: the aux loss is too small to see"
    losses = training_losses(args, case, ref_loss)
    worst = check_generate(name, model, case.hf_in, case.work, args)
    print(f"{name}: {case.tensors} tensors bit-exact after HF -> llmc -> HF; logits max rel err "
          f"{err:.2e}; first loss {losses[0]:.6f} vs transformers {ref_loss:.6f} "
          f"(cross-entropy {ce:.6f} + {AUX} x load balancing {aux:.6f}"
          f"{'' if output_router_logits else ', not added'}); greedy generation as "
          f"transformers', logits max rel err {worst:.2e} against recompute")


def main():
    args = parse_args(transformers)
    check("mixtral", args, output_router_logits=True)
    check("mixtral-no-aux", args, output_router_logits=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
