"""Compares the tensors two single-rank safetensors files share.

usage: same_tensors.py A.safetensors B.safetensors [--skip SUFFIX]...
Prints `same N` when every shared tensor (except names ending in a skipped
suffix) is bit-identical, else `differs NAME` for each that is not; also
`only-in-b NAME` for tensors of B that A lacks.
"""
import sys

from safetensors_util import tensors as load

args = sys.argv[1:]
skip = [args[i + 1] for i, a in enumerate(args) if a == "--skip"]
paths = [a for i, a in enumerate(args) if a != "--skip" and (i == 0 or args[i - 1] != "--skip")]
a, b = load(paths[0]), load(paths[1])
same = 0
for name in sorted(a):
    if name not in b or any(name.endswith(s) for s in skip):
        continue
    if a[name] == b[name]:
        same += 1
    else:
        print(f"differs {name}")
for name in sorted(b):
    if name not in a:
        print(f"only-in-b {name}")
print(f"same {same}")
