#!/usr/bin/env python3
"""The composition matrix: every pair of the features the README lists is
either compiled and trained with one rank's losses, or refused by
`llmc compile` with a message.

  composition.py table --llmc build/bin/llmc [--check | --write docs/parallelism.md]
      compiles every pair and prints the table (or checks that the table
      between the composition markers of the page is the one generated, or
      rewrites it there);
  composition.py parity --bin build/bin --work DIR (--all | --sample N [--seed S]) [--only GLOB]
      trains accepted pairs for STEPS steps on their ranks and compares the
      per-step losses with one rank's (the pair's other features kept, the
      fusions off, no --overlap-comm); a sample is drawn by a seed that
      changes daily unless given, and printed so a failure can be rerun.

A pair's flags are its two features' flags with their mesh axes merged:
zero3 (dp=2) and tp (tp=2) compile with --mesh dp=2,tp=2 on 4 ranks.
Features of one kind (two ZeRO stages, two schedules, two recomputation
modes, two precisions, LoRA and QLoRA, tp and sp) are alternatives, not a
pair; so are a GPT-2-only and a Llama-only fusion."""
import argparse
import concurrent.futures
import datetime
import fnmatch
import hashlib
import itertools
import json
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPARE = HERE.parent / "e2e" / "Inputs" / "compare_losses.py"
BEGIN, END = "<!-- composition:begin -->", "<!-- composition:end -->"
STEPS = 10
MESH_ORDER = ["pp", "dp", "fsdp", "tp"]
QAT = "weights=int4:block16, activations=int8:asym:ema0.9"
LORA = "rank=4, alpha=8, targets=qkv,proj,mlp"
BUDGET = "budget=<halfway>"


@dataclass
class Feature:
    name: str
    flags: list = field(default_factory=list)
    mesh: dict = field(default_factory=dict)
    kind: str = ""          # features of one kind are alternatives
    model: str = ""         # "gpt2" or "llama" when only one family has it
    fusion: str = ""        # a --fuse name
    pipeline: bool = False  # needs the 4-layer model in microbatches
    tolerance: float = 1e-5
    strict: str = ""        # K:TOL for the first K steps
    one_thread: bool = False
    runtime: list = field(default_factory=list)


def pp(name, *flags):
    return Feature(name, list(flags), {"pp": 2}, "pp", pipeline=True)


def fusion(name, model=""):
    return Feature("fuse " + name, fusion=name, model=model)


FEATURES = [
    Feature("dp", mesh={"dp": 2}, kind="dp"),
    Feature("zero1", ["--zero", "1"], {"dp": 2}, "dp"),
    Feature("zero2", ["--zero", "2"], {"dp": 2}, "dp"),
    Feature("zero3", ["--zero", "3"], {"dp": 2}, "dp"),
    Feature("hybrid", ["--zero", "3"], {"dp": 2, "fsdp": 2}, "dp"),
    Feature("tp", mesh={"tp": 2}, kind="tp"),
    Feature("sp", ["--sp"], {"tp": 2}, "tp"),
    pp("pp 1f1b"),
    pp("pp gpipe", "--pipeline-schedule", "gpipe"),
    pp("pp naive", "--pipeline-schedule", "naive"),
    pp("pp interleaved", "--pipeline-schedule", "interleaved", "--virtual-stages", "2"),
    pp("pp zero-bubble", "--pipeline-schedule", "zero-bubble"),
    Feature("recompute full", ["--recompute", "full"], kind="recompute"),
    Feature("recompute selective", ["--recompute", "selective"], kind="recompute"),
    # The budget is set per pair halfway between its arenas without and with
    # full recomputation, so that some layers are recomputed and some not.
    Feature("recompute budget", ["--recompute", BUDGET], kind="recompute"),
    Feature("qat", ["--qat", QAT], tolerance=5e-4, strict="1:1e-6", one_thread=True),
    Feature("lora", ["--lora", LORA], kind="adapters"),
    Feature("qlora", ["--lora", LORA, "--qlora"], kind="adapters"),
    Feature("adamw8bit", ["--optimizer", "adamw8bit"], tolerance=1e-4, strict="1:1e-6"),
    Feature("bf16", ["--precision", "bf16"], kind="precision", tolerance=1e-3),
    Feature("fp16", ["--precision", "fp16"], kind="precision", tolerance=1e-3),
    Feature("packing", ["--set", "seq_len=128", "--set", "doc_separator=10"]),
    Feature("overlap", ["--overlap-comm"],
            runtime=["--debug-collective-delay-ms", "1", "--debug-stream-delay-us", "50"]),
    fusion("linear-cross-entropy"),
    fusion("bias"),
    fusion("bias-gelu", "gpt2"),
    fusion("bias-grad"),
    fusion("elementwise"),
    fusion("add-norm"),
    fusion("residual"),
    fusion("gelu-grad", "gpt2"),
    fusion("swiglu-grad", "llama"),
    fusion("qkv-split", "gpt2"),
    fusion("rope", "llama"),
    fusion("multi-tensor-adamw"),
]
PARALLEL_KINDS = {"dp", "tp", "pp"}


def alternatives(a, b):
    """Why a and b are not a pair, or ""."""
    if a.kind and a.kind == b.kind:
        return "alternatives"
    if a.model and b.model and a.model != b.model:
        return "different families"
    return ""


def model_args(features):
    """The tiny model the pair trains, as llmc compile flags."""
    family = next((f.model for f in features if f.model), "gpt2")
    if any(f.pipeline for f in features):
        shape = ["--set", "n_layer=4", "--set", "batch_size=4", "--microbatches", "4"]
    else:
        shape = ["--set", "n_layer=2", "--set", "batch_size=8"]
    # The tiny Llama's MLP width (352) is not a whole number of QLoRA's
    # blocks of 64; 384 is.
    if family == "llama":
        shape += ["--set", "ffn_hidden=384"]
    return ["--model", family, "--preset", "tiny", *shape, "--set", "seq_len=32"]


def compile_flags(features, reference=False):
    """llmc compile's flags for the features; the reference drops the
    layout, --overlap-comm and the fusions (one rank, unfused)."""
    flags = model_args(features)
    mesh = {}
    fusions = [f.fusion for f in features if f.fusion]
    for f in features:
        if reference and (f.kind in PARALLEL_KINDS or f.runtime):
            continue
        mesh.update(f.mesh)
        flags += f.flags
    if mesh:
        flags += ["--mesh", ",".join(f"{a}={mesh[a]}" for a in MESH_ORDER if a in mesh)]
    if reference:
        flags += ["--fuse", "none"]
    elif fusions:
        flags += ["--fuse", ",".join(fusions)]
    return flags


def ranks(features):
    n = 1
    for f in features:
        for size in f.mesh.values():
            n *= size
    return n


def pairs():
    """Every unordered pair of features, with why it is not one or ""."""
    for a, b in itertools.combinations(FEATURES, 2):
        yield a, b, alternatives(a, b)


def largest_arena(llmc, flags, out):
    """The largest rank's planned arena in bytes (llmc inspect), or None."""
    if subprocess.run([llmc, "compile", *flags, "-o", str(out)], capture_output=True).returncode:
        return None
    text = subprocess.run([llmc, "inspect", str(out)], capture_output=True, text=True).stdout
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    sizes = [float(v) * units[u] for v, u in re.findall(r"^\s*arena\s+([0-9.]+) (\w+)", text, re.M)]
    return max(sizes, default=None)


def resolve_budget(llmc, flags, out):
    """Replaces the budget placeholder by the pair's halfway arena."""
    if BUDGET not in flags:
        return flags
    at = flags.index(BUDGET)
    none, full = (largest_arena(llmc, flags[:at] + [mode] + flags[at + 1:], out)
                  for mode in ("none", "full"))
    if none is None or full is None:
        return flags[:at] + ["full"] + flags[at + 1:]  # refused either way: say why
    return flags[:at] + [f"budget={(none + full) / 2 / 2**20:.3f}MiB"] + flags[at + 1:]


def try_compile(llmc, flags, out):
    """"" when llmc compile accepts the flags, else its error."""
    run = subprocess.run([llmc, "compile", *resolve_budget(llmc, flags, out), "-o", str(out)],
                         capture_output=True, text=True)
    if run.returncode == 0:
        return ""
    lines = [l for l in run.stderr.splitlines() if "error:" in l] or [f"exit {run.returncode}"]
    return re.sub(r"^.*?error: ", "", lines[0])


def refusals(llmc, work):
    """{(a, b): message} for every refused pair."""
    todo = [(a, b) for a, b, why in pairs() if not why]
    def attempt(pair):
        a, b = pair
        tag = hashlib.sha1((a.name + "+" + b.name).encode()).hexdigest()[:12]
        return pair, try_compile(llmc, compile_flags(pair), work / f"{tag}.llmc")
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return {(a.name, b.name): m for (a, b), m in pool.map(attempt, todo) if m}


def render(refused):
    """The markdown table: a grid of pairs and the refusals' messages."""
    messages = sorted(set(refused.values()))
    number = {m: i + 1 for i, m in enumerate(messages)}
    names = [f.name for f in FEATURES]
    lines = ["| | " + " | ".join(f"{i + 1}" for i in range(len(names))) + " |",
             "| --- " * (len(names) + 1) + "|"]
    for i, a in enumerate(FEATURES):
        cells = []
        for j, b in enumerate(FEATURES):
            first, second = (a, b) if i < j else (b, a)
            if i == j:
                cells.append("")
            elif alternatives(a, b):
                cells.append("·")
            elif (first.name, second.name) in refused:
                cells.append(f"✗{number[refused[(first.name, second.name)]]}")
            else:
                cells.append("✓")
        lines.append(f"| {i + 1} {a.name} | " + " | ".join(cells) + " |")
    total = sum(1 for *_, why in pairs() if not why)
    n, m = len(refused), len(messages)
    lines += ["", f"{total} pairs: {total - n} compile, {n} {'is' if n == 1 else 'are'} refused "
              f"({m} message{'' if m == 1 else 's'}); · marks alternatives (one kind, or two "
              "families).", ""]
    for m in messages:
        who = [f"{a} + {b}" for (a, b), mm in sorted(refused.items()) if mm == m]
        lines.append(f"{number[m]}. {', '.join(who)}: “{m}”")
    return "\n".join(lines) + "\n"


def table(args):
    if args.generated:
        text = Path(args.generated).read_text()
    else:
        work = Path(args.work or "/tmp/llmc-composition")
        work.mkdir(parents=True, exist_ok=True)
        text = render(refusals(args.llmc, work))
    if not args.page:
        sys.stdout.write(text)
        return 0
    page = Path(args.page).read_text()
    start, end = page.index(BEGIN) + len(BEGIN) + 1, page.index(END)
    if args.write:
        Path(args.page).write_text(page[:start] + text + page[end:])
        return 0
    if page[start:end] == text:
        print(f"composition table: {args.page} is up to date")
        return 0
    sys.stdout.write(text)
    print(f"composition table: {args.page} differs from the generated table above "
          f"(regenerate with: {sys.argv[0]} table --llmc LLMC --write {args.page})",
          file=sys.stderr)
    return 1


def run_training(bin_dir, flags, runtime, n, work, tag, qlora_weights):
    """Compiles and trains; the metrics file, or raises with the reason."""
    artifact, metrics = work / f"{tag}.llmc", work / f"{tag}.jsonl"
    flags = resolve_budget(bin_dir / "llmc", flags, artifact)
    subprocess.run([bin_dir / "llmc", "compile", *flags, "-o", artifact], check=True)
    run = [bin_dir / "llmc-run", artifact, "--steps", str(STEPS), "--metrics", metrics, "--quiet",
           *runtime]
    if qlora_weights:
        run += ["--weights", qlora_weights]
    if n > 1:
        run = ["mpirun", "-np", str(n), "--bind-to", "none", *run]
    subprocess.run(run, check=True)
    return metrics


def nf4_base(bin_dir, features, work):
    """QLoRA's base: the model's weights after two steps quantized to NF4 (as
    `llmc quantize --scheme nf4:block64` writes them)."""
    shape = model_args(features)
    if "--microbatches" in shape:  # the weights' shapes only, as llmc quantize takes them
        at = shape.index("--microbatches")
        shape = shape[:at] + shape[at + 2:]
    tag = hashlib.sha1(" ".join(shape).encode()).hexdigest()[:12]
    out = work / f"base-{tag}-nf4.safetensors"
    if not out.exists():
        subprocess.run([bin_dir / "llmc", "compile", *shape, "-o", work / f"base-{tag}.llmc"], check=True)
        subprocess.run([bin_dir / "llmc-run", work / f"base-{tag}.llmc", "--steps", "2",
                        "--ckpt-dir", work / f"base-{tag}", "--quiet"], check=True)
        subprocess.run([bin_dir / "llmc", "quantize", work / f"base-{tag}", *shape,
                        "--scheme", "nf4:block64", "-o", out], check=True, capture_output=True)
    return out


def check_pair(bin_dir, work, a, b, references):
    """PASS/FAIL line for one accepted pair."""
    features = [a, b]
    env_threads = os.environ.pop("OMP_NUM_THREADS", None)
    if any(f.one_thread for f in features):
        os.environ["OMP_NUM_THREADS"] = "1"
    weights = nf4_base(bin_dir, features, work) if any(f.name == "qlora" for f in features) else None
    reference_flags = compile_flags(features, reference=True)
    key = " ".join(reference_flags) + str(os.environ.get("OMP_NUM_THREADS"))
    if key not in references:
        tag = "ref-" + hashlib.sha1(key.encode()).hexdigest()[:12]
        references[key] = run_training(bin_dir, reference_flags, [], 1, work, tag, weights)
    tag = re.sub(r"[^a-z0-9]+", "-", f"{a.name}+{b.name}")
    runtime = [flag for f in features for flag in f.runtime]
    metrics = run_training(bin_dir, compile_flags(features), runtime, ranks(features), work, tag,
                           weights)
    tolerance = max(f.tolerance for f in features)
    strict = [f.strict for f in features if f.strict][:1]
    result = subprocess.run([sys.executable, COMPARE, references[key], metrics, str(tolerance), *strict],
                            capture_output=True, text=True)
    if env_threads is not None:
        os.environ["OMP_NUM_THREADS"] = env_threads
    verdict = "PASS" if result.returncode == 0 else "FAIL"
    detail = (result.stdout or result.stderr).strip()
    return f"{verdict} {a.name} + {b.name} ({ranks(features)} ranks): {detail}"


def parity(args):
    bin_dir, work = Path(args.bin), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    candidates = [(a, b) for a, b, why in pairs()
                  if not why and fnmatch.fnmatch(f"{a.name} + {b.name}", args.only)]
    if not args.all:
        seed = args.seed if args.seed is not None else datetime.date.today().toordinal()
        random.Random(seed).shuffle(candidates)
        print(f"composition parity: a sample of {args.sample} accepted pairs, seed {seed} "
              f"(rerun with --seed {seed}; every pair: --all)")
    failed, checked, references = 0, 0, {}
    for a, b in candidates:
        if not args.all and checked == args.sample:
            break
        flags = compile_flags([a, b])
        if try_compile(bin_dir / "llmc", flags, work / "probe.llmc"):
            continue  # refused, as the table says
        try:
            line = check_pair(bin_dir, work, a, b, references)
        except subprocess.CalledProcessError as e:
            line = f"FAIL {a.name} + {b.name}: {' '.join(map(str, e.cmd))} exited {e.returncode}"
        print(line, flush=True)
        failed += line.startswith("FAIL")
        checked += 1
    print(f"composition parity: {checked} pairs, {failed} failed")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table")
    t.add_argument("--llmc")
    t.add_argument("--work")
    t.add_argument("--generated", help="a table printed earlier, instead of compiling")
    mode = t.add_mutually_exclusive_group()
    mode.add_argument("--check", dest="page")
    mode.add_argument("--write", dest="write_page")
    p = sub.add_parser("parity")
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--all", action="store_true")
    p.add_argument("--sample", type=int, default=8)
    p.add_argument("--seed", type=int)
    p.add_argument("--only", default="*", help="pairs whose 'a + b' matches this pattern")
    args = parser.parse_args()
    if args.command == "table":
        if not args.llmc and not args.generated:
            parser.error("table needs --llmc (or --generated)")
        args.write = args.write_page is not None
        args.page = args.page or args.write_page
        return table(args)
    return parity(args)


if __name__ == "__main__":
    sys.exit(main())
