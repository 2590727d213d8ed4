"""The steps hf_mixtral.py and hf_qwen2_moe.py share: a transformers
mixture-of-experts model saved as a Hugging Face directory, compiled from
its config.json alone, its weights taken through llmc and back, its
logits and first training loss compared with transformers'."""
import json
import os
from dataclasses import dataclass

import torch
import transformers

import hf_artifacts
from hf_families import BATCH, SEQ, TOL


@dataclass
class Case:
    name: str
    work: str
    hf_in: str
    artifact: str
    tensors: int  # bit-exact after HF -> llmc -> HF
    tokens: torch.Tensor
    targets: torch.Tensor
    logits: torch.Tensor  # llmc's, of batch 0


def through_llmc(name, args, model, config_keys):
    """Compiles `model`'s saved config, dumps batch 0's logits from its
    weights, exports the step-0 checkpoint back and checks the round trip:
    every tensor bit-exact, `config_keys` written back as transformers reads
    them, and transformers loads the export to the same logits."""
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    hf_in = os.path.join(work, "hf")
    model.save_pretrained(hf_in, safe_serialization=True)
    artifact = hf_artifacts.compile_artifact(args, hf_in, os.path.join(work, "m.llmc"), SEQ, BATCH)
    hf_out, dump, after = hf_artifacts.through_llmc(name, args, artifact, hf_in, work)
    config_out = json.load(open(os.path.join(hf_out, "config.json")))
    for key in config_keys:
        assert getattr(model.config, key) == config_out[key], (key, config_out.get(key))
    case = Case(name, work, hf_in, artifact, len(after),
                *hf_artifacts.read_dump(dump, BATCH, SEQ))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        hf_out, torch_dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        assert torch.equal(model(case.tokens, use_cache=False).logits,
                           reloaded(case.tokens, use_cache=False).logits), \
            f"{name}: the exported model computes other logits"
    return case


def reference_loss(model, case, load_balancing_loss_func, experts, top_k):
    """transformers' logits of batch 0, its cross-entropy of the targets
    and its own load_balancing_loss_func of the router logits (of the
    layers that route), and how many layers those are."""
    with torch.no_grad():
        out = model(case.tokens, use_cache=False, output_router_logits=True)
        logits = out.logits
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               case.targets.reshape(-1)).item()
        aux = load_balancing_loss_func(out.router_logits, experts, top_k).item()
    return logits, ce, aux, len(out.router_logits)


def logits_error(case, ref):
    """llmc's logits against transformers', relative to the largest; ≤ TOL."""
    err = (case.logits - ref).abs().max().item() / ref.abs().max().item()
    assert err <= TOL, f"{case.name}: logits differ by {err:.3g} relative (> {TOL})"
    return err


def training_losses(args, case, ref_loss):
    """3 training steps from the HF weights: the first equals `ref_loss`
    within TOL, and the loss falls."""
    losses = hf_artifacts.train_losses(args, case.artifact, case.hf_in, case.work, "train")
    assert abs(losses[0] - ref_loss) / ref_loss <= TOL, \
        f"{case.name}: first loss {losses[0]} vs transformers {ref_loss}"
    assert losses[-1] < losses[0], f"{case.name}: loss did not fall: {losses}"
    return losses
