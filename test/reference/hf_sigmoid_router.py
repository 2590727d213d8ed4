"""Sigmoid routers (DeepSeek-V3's) against a plain PyTorch gate (docs/models.md).

transformers 4.44 has no DeepSeek-V3, so the reference gate is written here
in plain torch from the published MoEGate (deepseek-ai/DeepSeek-V3,
inference/model.py `Gate.forward`, and the Hugging Face release's
`MoEGate` for norm_topk_prob):

    scores = sigmoid(x @ W.T)                       # fp32
    choice = topk(scores + e_score_correction_bias, k).indices
    weights = scores.gather(choice)                 # the un-biased scores
    weights /= weights.sum(-1)   if norm_topk_prob
    weights *= routed_scaling_factor

and put in place of each MixtralSparseMoeBlock's routing in a random
2-layer MixtralForCausalLM (4 experts, top 2, width 64) whose config.json
also carries scoring_func = sigmoid, routed_scaling_factor = 2.5 and
router_z_loss_coef, and whose safetensors carry a random, nonzero
`model.layers.L.block_sparse_moe.gate.e_score_correction_bias` (large
enough to change which experts are chosen). llmc compiles the config.json
alone and loads the directory (--weights); then

  * the first loss equals the torch model's cross-entropy plus
    router_aux_loss_coef × llmc's load-balancing loss with normalised
    sigmoid scores, E · Σₑ (countₑ/(N·L)) · (Σ s′ₑ/(N·L)) with s′ = s / Σ s,
    plus router_z_loss_coef × the mean logsumexp(logits)², within TOL;
  * every trainable parameter's gradient of that batch (llmc-run
    --dump-grads) equals torch's autograd, relative error ≤ GRAD_TOL per
    tensor (the stacked experts against Hugging Face's per-expert slices);
  * the bias matters: without it the torch model chooses other experts for
    some tokens and its loss moves by far more than TOL;
  * the loss falls over 3 steps.

Run by run_hf.sh with the venv's python; no network, no downloaded models.
"""
import json
import os
import struct
import sys
import types

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from hf_artifacts import parse_args, run

EXPERTS, TOP_K, AUX, Z, SCALE = 4, 2, 0.1, 0.01, 2.5
SEQ, BATCH = 16, 4
TOL, GRAD_TOL = 1e-4, 1e-4


def sigmoid_gate(x, weight, bias, top_k, normalize, scale):
    """DeepSeek-V3's MoEGate with scoring_func = sigmoid: the chosen
    experts' indices and weights, and the router logits."""
    logits = F.linear(x, weight)
    scores = logits.float().sigmoid()
    choice = torch.topk(scores + bias, top_k, dim=-1)[1]
    weights = scores.gather(1, choice)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return choice, weights * scale, logits


def moe_forward(self, hidden):
    """MixtralSparseMoeBlock.forward with the sigmoid gate above."""
    b, t, c = hidden.shape
    x = hidden.reshape(-1, c)
    bias = self.gate.e_score_correction_bias if self.use_bias else torch.zeros(EXPERTS)
    choice, weights, logits = sigmoid_gate(x, self.gate.weight, bias, TOP_K, True, SCALE)
    self.last_choice = choice  # for the balance loss's counts
    out = torch.zeros_like(x)
    for e in range(EXPERTS):
        token, slot = torch.where(choice == e)
        if token.numel():
            out = out.index_add(0, token, self.experts[e](x[token]) * weights[token, slot, None])
    return out.reshape(b, t, c), logits


def balance_loss(router_logits, choices):
    """llmc's load-balancing loss for sigmoid routers: Mixtral's
    load_balancing_loss_func with the normalised scores as probabilities,
    over all layers' tokens at once. Also DeepSeek-V3's sequence-wise
    balance loss (α = 1) as published, for the record: per sequence and
    layer Σᵢ fᵢ Pᵢ, fᵢ = E/(k·T) · (copies of i among its T tokens),
    Pᵢ = the mean of s′ᵢ over them; averaged over sequences, summed over
    layers."""
    s = torch.cat(router_logits).sigmoid()                       # [L·N, E]
    mask = F.one_hot(torch.cat(choices), EXPERTS).float()        # [L·N, k, E]
    s_norm = s / s.sum(-1, keepdim=True)
    tokens = s.shape[0]
    ours = EXPERTS * ((mask.sum(1).sum(0) / tokens) * (s_norm.sum(0) / tokens)).sum()
    published = 0.0
    n = router_logits[0].shape[0]
    for layer in range(len(router_logits)):
        rows = slice(layer * n, (layer + 1) * n)
        m = mask[rows].sum(1).reshape(BATCH, SEQ, EXPERTS)
        p = s_norm[rows].reshape(BATCH, SEQ, EXPERTS)
        f = EXPERTS / (TOP_K * SEQ) * m.sum(1)
        published += (f * p.mean(1)).sum(-1).mean()
    return ours, published


BIASES = []


def hf_model():
    torch.manual_seed(2024)
    config = transformers.MixtralConfig(
        vocab_size=257, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, rope_theta=1e6, tie_word_embeddings=False, sliding_window=None,
        num_local_experts=EXPERTS, num_experts_per_tok=TOP_K, router_aux_loss_coef=AUX,
        output_router_logits=True, attn_implementation="eager",
        scoring_func="sigmoid", routed_scaling_factor=SCALE, router_z_loss_coef=Z)
    model = transformers.MixtralForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    for layer in model.model.layers:
        block = layer.block_sparse_moe
        block.gate.register_buffer("e_score_correction_bias", torch.randn(EXPERTS) * 0.2)
        BIASES.append(block.gate.e_score_correction_bias)
        block.use_bias = True
        block.forward = types.MethodType(moe_forward, block)
    return model


def read_dump(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    kinds = {"F32": np.float32, "I32": np.int32}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=kinds[info["dtype"]])
        tensors[name] = torch.tensor(raw.reshape(info["shape"]).copy())
    return tensors, meta


def torch_loss(model, tokens, targets):
    out = model(tokens, use_cache=False, output_router_logits=True)
    logits = out.logits
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    choices = [layer.block_sparse_moe.last_choice for layer in model.model.layers]
    aux, published = balance_loss(out.router_logits, choices)
    z = torch.cat(out.router_logits).logsumexp(-1).square().mean()
    return ce + AUX * aux + Z * z, ce, aux, published, z


def hf_grad(model, name):
    """Hugging Face's gradient of llmc's parameter `name` (stacked experts
    from their slices)."""
    params = dict(model.named_parameters())
    if name == "lm_head.weight":
        return params[name].grad
    if ".experts." in name:
        head, tail = name.split(".experts.")
        return torch.stack([params[f"model.{head}.experts.{e}.{tail}"].grad
                            for e in range(EXPERTS)])
    return params["model." + name].grad


def main():
    args = parse_args(transformers)
    work = os.path.join(args.work, "sigmoid")
    os.makedirs(work, exist_ok=True)
    model = hf_model()
    hf_in = os.path.join(work, "hf")
    model.save_pretrained(hf_in, safe_serialization=True)
    config = json.load(open(os.path.join(hf_in, "config.json")))
    assert config["scoring_func"] == "sigmoid" and config["routed_scaling_factor"] == SCALE
    llmc, llmc_run = os.path.join(args.bin, "llmc"), os.path.join(args.bin, "llmc-run")
    artifact, dump = os.path.join(work, "m.llmc"), os.path.join(work, "grads.safetensors")
    run(llmc, "compile", "--config", os.path.join(hf_in, "config.json"), "--set",
        f"seq_len={SEQ}", "--set", f"batch_size={BATCH}", "--lr", "1e-3", "--warmup", "0",
        "--lr-schedule", "constant", "-o", artifact)
    run(llmc_run, artifact, "--weights", hf_in, "--steps", "1", "--dump-grads", dump,
        "--data", args.data, "--quiet")
    got, meta = read_dump(dump)
    tokens, targets = got["tokens"].long(), got["targets"].long()
    for layer, bias in enumerate(BIASES):
        name = f"layers.{layer}.block_sparse_moe.gate.e_score_correction_bias"
        assert torch.equal(got[name], bias), f"{name} did not load"

    loss, ce, aux, published, z = torch_loss(model, tokens, targets)
    loss.backward()
    llmc_loss = float(meta["loss"])
    assert abs(llmc_loss - loss.item()) <= TOL * loss.item(), \
        f"first loss: llmc {llmc_loss} vs torch {loss.item()}"
    worst = 0.0
    names = [k[len("grad/"):] for k in got if k.startswith("grad/")]
    for name in names:
        ref = hf_grad(model, name).double()
        err = ((got["grad/" + name].double() - ref).norm() / max(ref.norm().item(), 1e-30)).item()
        assert err <= GRAD_TOL, f"gradient of {name}: relative error {err:.3e}"
        worst = max(worst, err)
    assert not any("e_score_correction_bias" in n for n in names), "the bias took a gradient"

    # The bias changes the choice, so the check sees it.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.block_sparse_moe.use_bias = False
        unbiased = torch_loss(model, tokens, targets)[0].item()
    assert abs(unbiased - loss.item()) > 100 * TOL * loss.item(), \
        f"the bias moves the loss only {abs(unbiased - loss.item()):.2e}"

    metrics = os.path.join(work, "train.jsonl")
    run(llmc_run, artifact, "--weights", hf_in, "--steps", "3", "--metrics", metrics,
        "--data", args.data, "--quiet")
    losses = [json.loads(line)["loss"] for line in open(metrics)]
    assert abs(losses[0] - llmc_loss) <= 1e-6 * llmc_loss, (losses[0], llmc_loss)
    assert losses[-1] < losses[0], f"loss did not fall: {losses}"
    print(f"sigmoid router: first loss llmc {llmc_loss:.6f} vs torch {loss.item():.6f} "
          f"(cross-entropy {ce.item():.6f} + {AUX} x balance {aux.item():.6f} + {Z} x z "
          f"{z.item():.6f}; DeepSeek-V3's sequence-wise balance loss as published would be "
          f"{published.item():.6f}); {len(names)} gradients, worst relative error {worst:.2e}; "
          f"without the bias torch's loss is {unbiased:.6f}; losses {losses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
