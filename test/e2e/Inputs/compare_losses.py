"""Compares the loss columns of two llmc-run --metrics files: same steps,
relative difference at most the given tolerance. Prints the worst.

An optional fourth argument K:TOL holds the first K steps to a tighter
tolerance: with fake quantization, a 1-ulp difference can move a value
across a rounding step, so runs drift apart (as they do between two thread
counts on one rank), but until then they must agree to fp32 accuracy."""
import json
import sys

a = [json.loads(line) for line in open(sys.argv[1])]
b = [json.loads(line) for line in open(sys.argv[2])]
tol = float(sys.argv[3])
if [r["step"] for r in a] != [r["step"] for r in b]:
    sys.exit(f"different steps: {[r['step'] for r in a]} vs {[r['step'] for r in b]}")
diffs = [abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b)]
worst = max(diffs)
ok = worst <= tol
message = f"{len(a)} steps, worst relative loss difference {worst:.2e}"
if len(sys.argv) > 4:
    first, strict = sys.argv[4].split(":")
    early = max(diffs[: int(first)])
    ok = ok and early <= float(strict)
    message += f" (first {first} steps {early:.2e})"
print(message)
sys.exit(0 if ok else 1)
