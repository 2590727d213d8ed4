"""Compares the global tensors of two checkpoints, whatever layouts saved them.

usage: same_global_tensors.py STEP_DIR_A STEP_DIR_B [TOLERANCE] [--only REGEX]
Assembles every tensor of each checkpoint from its index.json (the pieces
of each rank file, split and padded level by level: `parts` of `dim`, or
`pad_to` for a padded vocabulary) without the runtime's code, and prints
`same N` when both hold the same tensors with the same shapes and bytes,
else `differs NAME` (or `missing NAME`) for each that does not. The padding
is never part of a global tensor. With TOLERANCE, an f32 tensor is the
same when every element differs by at most TOLERANCE times the tensor's
largest magnitude in A (other dtypes still byte for byte). With --only,
only the tensors whose names REGEX matches (re.search) are compared.
"""
import array
import re
import sys

from global_tensors import checkpoint


def close(x, y, tolerance):
    """Two f32 tensors (dtype, shape, bytes) within tolerance of x's largest magnitude."""
    if x[:2] != y[:2] or x[0].upper() != "F32":
        return x == y
    u, v = array.array("f", x[2]), array.array("f", y[2])
    scale = max((abs(e) for e in u), default=0.0)
    return all(abs(p - q) <= tolerance * scale for p, q in zip(u, v))


args = sys.argv[1:]
only = ""  # matches every name
if "--only" in args:
    at = args.index("--only")
    only = args[at + 1]
    del args[at:at + 2]
a, b = checkpoint(args[0]), checkpoint(args[1])
tolerance = float(args[2]) if len(args) > 2 else None
same = 0
for name in sorted(n for n in set(a) | set(b) if re.search(only, n)):
    if name not in a or name not in b:
        print(f"missing {name}")
    elif a[name] != b[name] and (tolerance is None or not close(a[name], b[name], tolerance)):
        print(f"differs {name}")
    else:
        same += 1
print(f"same {same}")
