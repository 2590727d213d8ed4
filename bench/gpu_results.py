#!/usr/bin/env python3
"""The results of GPU checks (scripts/gpu-check.sh), kept as JSON.

  gpu_results.py record RESULTS --step NAME --verdict V --seconds S [--data FILE]
      merges one finished step into RESULTS (written atomically after every
      step, so a lease cut short keeps what it measured); --data is the
      JSON object the step wrote (its numbers), if any.
  gpu_results.py report [--results DIR] [--doc FILE] [--check]
      rewrites the part of FILE (docs/performance.md) between the markers
      `<!-- gpu-results:begin -->` and `<!-- gpu-results:end -->` from the
      leases in DIR (bench/results/*.json): the newest lease's numbers beside
      the previous one's, with the change. --check changes nothing and
      exits 1 when FILE differs from what it would write.
  gpu_results.py baseline [--results DIR] --batch B --seq T
      prints torch.compile's GPT-2 124M median from the newest lease in DIR
      measured on this GPU (nvidia-smi's name) with this PyTorch (run it
      with the python3 that has PyTorch), as bench/torch_gpu_gpt2.py prints
      it plus "cached": true; exits 1 when there is none.

A results file is one lease:
  {"schema": 1, "commit": ..., "date": "YYYY-MM-DD", "device": {...},
   "steps": {name: {"verdict": "PASS", "seconds": 12, "data": {...}}}}
The numbers a report shows come from the data of these steps:
  preflight          device: name, driver, cuda, cudnn, nvrtc, torch, sdpa_backend
  bench-gpt2-124M    {"batch", "seq", "llmc_ms": {variant: ms}, "torch_compile_ms", "torch", "llmc_failed": [variant]}
  bench-attention-D  {"rows": [{"seq", "heads", "head_dim", "tflops": {variant: x}, "sdpa_tflops"}]}
  bench-head         {"rows": [{"vocab", "ms", "tflops", ...}]}
  bench-gpt2-1.5B    {"median_ms", "tokens_per_s", "mfu_percent"} (bf16; "precision" in newer leases)
  bench-gpt2-1.5B-fp8  the same for --precision fp8
  bench-generate-1B  {"tokens_per_s": {form: {"prefill", "decode"}}} (device, stream, host, split)
  bench-calibrate    llmc-bench-calibrate's file: {"gemm": {"large_tflops"}, "bandwidth_gbs", ...}
"""
import argparse
import glob
import json
import os
import sys
import tempfile

BEGIN, END = "<!-- gpu-results:begin -->", "<!-- gpu-results:end -->"


def load(path):
    with open(path) as f:
        return json.load(f)


def write_atomically(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".results-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def record(args):
    results = load(args.results) if os.path.exists(args.results) else {"schema": 1, "steps": {}}
    entry = {"verdict": args.verdict, "seconds": args.seconds}
    if args.data and os.path.exists(args.data):
        try:
            entry["data"] = load(args.data)
        except json.JSONDecodeError as e:
            entry["data_error"] = f"{args.data}: {e}"
    results["steps"][args.step] = entry
    if args.step == "preflight" and "data" in entry:
        results["device"] = entry["data"]
    for key in ("commit", "date"):
        value = getattr(args, key)
        if value:
            results[key] = value
    write_atomically(args.results, json.dumps(results, indent=1, sort_keys=True) + "\n")


def step_data(lease, step):
    return lease.get("steps", {}).get(step, {}).get("data", {})


def metrics(lease):
    """The report's rows of one lease: {label: (value, unit, higher_is_better)}."""
    rows = {}
    gpt2 = step_data(lease, "bench-gpt2-124M")
    for variant, ms in sorted(gpt2.get("llmc_ms", {}).items()):
        rows[f"GPT-2 124M step, llmc ({variant})"] = (ms, "ms", False)
    if "torch_compile_ms" in gpt2:
        rows["GPT-2 124M step, torch.compile"] = (gpt2["torch_compile_ms"], "ms", False)
        best = min(gpt2.get("llmc_ms", {}).values(), default=None)
        if best:
            rows["GPT-2 124M, llmc / torch.compile tokens/s"] = (
                gpt2["torch_compile_ms"] / best, "×", True)
    for step in sorted(s for s in lease.get("steps", {}) if s.startswith("bench-attention")):
        for r in step_data(lease, step).get("rows", []):
            shape = f"T={r['seq']}, H={r['heads']}, D={r['head_dim']}"
            best = max(r.get("tflops", {}).values(), default=None)
            for variant, x in sorted(r.get("tflops", {}).items()):
                rows[f"attention fwd+bwd {shape}, llmc ({variant})"] = (x, "TF/s", True)
            if r.get("sdpa_tflops") and best:
                rows[f"attention fwd+bwd {shape}, llmc best / SDPA"] = (
                    best / r["sdpa_tflops"], "×", True)
    for r in step_data(lease, "bench-head").get("rows", []):
        label = f"LM head fwd+bwd, V={r['vocab']}"
        rows[label] = (r["ms"], "ms", False)
    calibration = step_data(lease, "bench-calibrate")
    if "gemm" in calibration:
        rows["bf16 GEMM 8192³ (calibration)"] = (calibration["gemm"]["large_tflops"], "TF/s", True)
    if "bandwidth_gbs" in calibration:
        rows["device copy bandwidth (calibration)"] = (calibration["bandwidth_gbs"], "GB/s", True)
    big = step_data(lease, "bench-gpt2-1.5B")
    if "mfu_percent" in big:
        rows["GPT-2 1.5B shape, MFU"] = (big["mfu_percent"], "%", True)
        rows["GPT-2 1.5B shape, step"] = (big["median_ms"], "ms", False)
    fp8 = step_data(lease, "bench-gpt2-1.5B-fp8")
    if "median_ms" in fp8:
        rows["GPT-2 1.5B shape, fp8 step"] = (fp8["median_ms"], "ms", False)
        if "median_ms" in big:
            rows["GPT-2 1.5B shape, bf16 / fp8 step time"] = (
                big["median_ms"] / fp8["median_ms"], "×", True)
    generate = step_data(lease, "bench-generate-1B").get("tokens_per_s", {})
    forms = {"device": "every layer on the device", "stream": "1.5 GiB, layers streamed",
             "host": "1.5 GiB, layers on the host", "split": "1.5 GiB, layers split"}
    for form, rates in generate.items():
        for step in ("prefill", "decode"):
            if step in rates:
                rows[f"Llama 1B {step}, {forms.get(form, form)}"] = (rates[step], "tok/s", True)
    return rows


def fmt(value, unit):
    if value is None:
        return "—"
    text = f"{value:.2f}" if unit == "×" else f"{value:.1f}"
    return f"{text}{unit}" if unit in ("×", "%") else f"{text} {unit}"


def leases(folder):
    found = []
    for path in glob.glob(os.path.join(folder, "*.json")):
        lease = load(path)
        if lease.get("schema") == 1 and lease.get("date"):
            found.append((lease["date"], os.path.basename(path), lease))
    return [lease for _, _, lease in sorted(found, key=lambda t: (t[0], t[1]))]


def device_line(lease):
    d = lease.get("device", {})
    parts = [d.get("name", "unknown device")]
    for key in ("driver", "cuda", "cudnn", "torch", "sdpa_backend"):
        if d.get(key):
            parts.append(f"{key} {d[key]}")
    return ", ".join(parts)


def render(all_leases):
    if not all_leases:
        return "No GPU results recorded yet (bench/results/ is empty).\n"
    new = all_leases[-1]
    old = all_leases[-2] if len(all_leases) > 1 else None
    now, before = metrics(new), metrics(old) if old else {}
    lines = [f"Generated by `bench/gpu_results.py report` from bench/results/ "
             f"({len(all_leases)} lease(s)); do not edit by hand.", "",
             f"Latest: {new['date']}, commit {new.get('commit', '?')[:12]}, {device_line(new)}."]
    if old:
        lines.append(f"Previous: {old['date']}, commit {old.get('commit', '?')[:12]}, "
                     f"{device_line(old)}.")
    failed = sorted(s for s, e in new.get("steps", {}).items() if e.get("verdict", "").startswith("FAIL"))
    if failed:
        lines.append(f"Steps that failed in the latest lease: {', '.join(failed)}.")
    lines += ["", "| measure | latest | previous | change |", "| --- | ---: | ---: | ---: |"]
    for label in list(now) + [k for k in before if k not in now]:
        value, unit, higher = now.get(label, (None,) + before.get(label, (None, "", True))[1:])
        prev = before.get(label, (None,))[0]
        change = "—"
        if value is not None and prev:
            ratio = value / prev
            better = ratio > 1 if higher else ratio < 1
            change = f"{ratio:.2f}×" + (" (better)" if better and abs(ratio - 1) > 0.02 else "")
        lines.append(f"| {label} | {fmt(value, unit)} | {fmt(prev, unit)} | {change} |")
    return "\n".join(lines) + "\n"


def report(args):
    with open(args.doc) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"{args.doc}: no '{BEGIN}' ... '{END}' markers to write between")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    updated = head + BEGIN + "\n" + render(leases(args.results)) + END + tail
    if args.check:
        if updated != doc:
            sys.exit(f"{args.doc} is stale: run bench/gpu_results.py report")
        return
    if updated != doc:
        write_atomically(args.doc, updated)


def current_gpu():
    import subprocess
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.splitlines()
    return out[0].strip() if out else None


def baseline(args):
    import torch
    gpu = current_gpu()
    for lease in reversed(leases(args.results)):
        data = step_data(lease, "bench-gpt2-124M")
        if (lease.get("device", {}).get("name") == gpu and data.get("torch") == torch.__version__
                and data.get("batch") == args.batch and data.get("seq") == args.seq
                and "torch_compile_ms" in data):
            print(json.dumps({"median_ms": data["torch_compile_ms"], "torch": data["torch"],
                              "cached": True, "from": lease["date"]}))
            return
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("results")
    rec.add_argument("--step", required=True)
    rec.add_argument("--verdict", required=True)
    rec.add_argument("--seconds", type=int, required=True)
    rec.add_argument("--data")
    rec.add_argument("--commit")
    rec.add_argument("--date")
    rep = sub.add_parser("report")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rep.add_argument("--results", default=os.path.join(root, "bench", "results"))
    rep.add_argument("--doc", default=os.path.join(root, "docs", "performance.md"))
    rep.add_argument("--check", action="store_true")
    base = sub.add_parser("baseline")
    base.add_argument("--results", default=os.path.join(root, "bench", "results"))
    base.add_argument("--batch", type=int, required=True)
    base.add_argument("--seq", type=int, required=True)
    args = ap.parse_args()
    {"record": record, "report": report, "baseline": baseline}[args.command](args)


if __name__ == "__main__":
    main()
