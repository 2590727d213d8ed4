"""Compares where two llmc-run --metrics files end: the mean loss of the
last N steps (skipped steps left out), relative difference at most TOL.

  final_loss.py A.jsonl B.jsonl TOL [N=20]"""
import json
import sys


def tail_mean(path, n):
    losses = [r["loss"] for r in map(json.loads, open(path)) if not r["skipped"]]
    return sum(losses[-n:]) / len(losses[-n:])


n = int(sys.argv[4]) if len(sys.argv) > 4 else 20
a, b = tail_mean(sys.argv[1], n), tail_mean(sys.argv[2], n)
diff = abs(a - b) / abs(b)
print(f"final loss {a:.4f} vs {b:.4f} (mean of the last {n} steps): relative difference {diff:.2e}")
sys.exit(0 if diff <= float(sys.argv[3]) else 1)
