"""Compares the loss columns of two llmc-run --metrics files: same steps,
relative difference at most the given tolerance. Prints the worst."""
import json
import sys

a = [json.loads(line) for line in open(sys.argv[1])]
b = [json.loads(line) for line in open(sys.argv[2])]
tol = float(sys.argv[3])
if [r["step"] for r in a] != [r["step"] for r in b]:
    sys.exit(f"different steps: {[r['step'] for r in a]} vs {[r['step'] for r in b]}")
worst = max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(a, b))
print(f"{len(a)} steps, worst relative loss difference {worst:.2e}")
sys.exit(0 if worst <= tol else 1)
