"""What the checks of a model family against transformers do alike
(hf_families.py, hf_qwen3.py, hf_gemma3.py): compile a Hugging Face
directory with llmc, on one rank and under tp=2, and take it through an
llmc checkpoint and back, which must give its tensors bit for bit."""
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


def compile_pair(args, hf_in, work, seq, batch):
    """`llmc compile --config` of `hf_in` at [batch, seq] with a constant
    learning rate of 1e-3: the paths of the one-rank and the tp=2 artifact."""
    compile_args = ["--config", os.path.join(hf_in, "config.json"), "--set", f"seq_len={seq}",
                    "--set", f"batch_size={batch}", "--lr", "1e-3", "--warmup", "0",
                    "--lr-schedule", "constant"]
    artifact, tp_artifact = os.path.join(work, "m.llmc"), os.path.join(work, "tp2.llmc")
    llmc = os.path.join(args.bin, "llmc")
    run(llmc, "compile", *compile_args, "-o", artifact)
    run(llmc, "compile", *compile_args, "--mesh", "tp=2", "-o", tp_artifact)
    return artifact, tp_artifact


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
