"""What the checks of a model family against transformers do alike
(hf_families.py, hf_qwen3.py, hf_gemma3.py, and hf_moe.py for the
mixtures of experts): compile a Hugging Face directory with llmc, on one
rank and under tp=2, take it through an llmc checkpoint and back, which
must give its tensors bit for bit, read the logits llmc dumped, and train
a few steps from it."""
import json
import argparse
import os
import subprocess

import torch
from safetensors.torch import load_file


def parse_args(transformers):
    """run_hf.sh's arguments (--bin, --work, --data, --mpirun); prints the
    versions checked against and keeps torch to the machine's two cores."""
    p = argparse.ArgumentParser()
    for name in ("--bin", "--work", "--data", "--mpirun"):
        p.add_argument(name, required=True)
    args = p.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(2)
    return args


def run(*cmd):
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


def compile_artifact(args, hf_in, out, seq, batch, *flags):
    """`llmc compile --config` of `hf_in` at [batch, seq] with a constant
    learning rate of 1e-3 (and `flags`) into `out`; returns `out`."""
    run(os.path.join(args.bin, "llmc"), "compile", "--config", os.path.join(hf_in, "config.json"),
        "--set", f"seq_len={seq}", "--set", f"batch_size={batch}", "--lr", "1e-3", "--warmup", "0",
        "--lr-schedule", "constant", *flags, "-o", out)
    return out


def compile_pair(args, hf_in, work, seq, batch):
    """compile_artifact on one rank and under tp=2: the two paths."""
    return (compile_artifact(args, hf_in, os.path.join(work, "m.llmc"), seq, batch),
            compile_artifact(args, hf_in, os.path.join(work, "tp2.llmc"), seq, batch, "--mesh",
                             "tp=2"))


def through_llmc(name, args, artifact, hf_in, work):
    """HF -> llmc checkpoint -> HF: `hf_in` loaded into `artifact` (0 steps,
    batch 0's logits dumped) and the checkpoint exported, whose tensors must
    be `hf_in`'s bit for bit. Returns the export's directory, the dump's
    path and the export's tensors."""
    hf_out = os.path.join(work, "hf-out")
    ck, dump = os.path.join(work, "ck"), os.path.join(work, "logits.safetensors")
    run(os.path.join(args.bin, "llmc-run"), artifact, "--weights", hf_in, "--steps", "0",
        "--ckpt-dir", ck, "--dump-logits", dump, "--data", args.data, "--quiet")
    run(os.path.join(args.bin, "llmc"), "export-hf", ck, artifact, "-o", hf_out)
    before, after = load_file(os.path.join(hf_in, "model.safetensors")), load_file(
        os.path.join(hf_out, "model.safetensors"))
    assert sorted(before) == sorted(after), (sorted(before), sorted(after))
    for key in before:
        assert torch.equal(before[key], after[key]), f"{name}: {key} differs after the round trip"
    return hf_out, dump, after


def read_dump(dump, batch, seq):
    """The tokens, targets and llmc's logits of the batch `dump` holds."""
    got = load_file(dump)
    tokens, targets, logits = got["tokens"].long(), got["targets"].long(), got["logits"]
    assert tokens.shape == (batch, seq), tokens.shape
    return tokens, targets, logits


def train_metrics(args, artifact, hf_dir, work, name, steps, ranks=1):
    """The metrics of `steps` training steps from the HF weights (step 1:
    batch 0), on `ranks` ranks: a dict per step."""
    metrics = os.path.join(work, name + ".jsonl")
    cmd = [os.path.join(args.bin, "llmc-run"), artifact, "--weights", hf_dir, "--steps",
           str(steps), "--metrics", metrics, "--data", args.data, "--quiet"]
    if ranks > 1:
        cmd = [args.mpirun, "-np", str(ranks), "--bind-to", "none"] + cmd
    run(*cmd)
    return [json.loads(line) for line in open(metrics)]


def train_losses(args, artifact, hf_dir, work, name, ranks=1):
    """The losses of 3 training steps from the HF weights (step 1: batch 0)."""
    return [m["loss"] for m in train_metrics(args, artifact, hf_dir, work, name, 3, ranks)]
