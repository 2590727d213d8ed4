"""Checks two llmc-run --metrics files hold the same steps with the same
loss, gradient norm, skip verdict and loss scale, bit for bit (as JSON
prints them): a resumed run against an uninterrupted one."""
import json
import sys

keys = ["step", "loss", "grad_norm", "skipped", "skipped_total", "loss_scale"]
a = [json.loads(line) for line in open(sys.argv[1])]
b = [json.loads(line) for line in open(sys.argv[2])]
if len(a) != len(b):
    sys.exit(f"{len(a)} steps vs {len(b)}")
for x, y in zip(a, b):
    for k in keys:
        if x.get(k) != y.get(k):
            sys.exit(f"step {x['step']}: {k} {x.get(k)} vs {y.get(k)}")
print(f"same {len(a)} steps")
