"""Compares the tensors two safetensors files share: f32 ones within a
tolerance, the others bit for bit.

usage: close_tensors.py A.safetensors B.safetensors TOLERANCE
Prints `close N (worst W)` when every shared tensor has the same dtype and
shape, every f32 element differs by at most TOLERANCE times the tensor's
largest magnitude in A (W: the largest such relative difference) and every
other tensor is identical, else `differs NAME` for each that is not.
"""
import struct
import sys

from safetensors_util import tensors as load

a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
close, worst = 0, 0.0
for name in sorted(set(a) & set(b)):
    (da, sa, xa), (db, sb, xb) = a[name], b[name]
    if da != db or sa != sb or (da != "F32" and xa != xb):
        print(f"differs {name}")
        continue
    if da != "F32":
        close += 1
        continue
    x = struct.unpack(f"<{len(xa) // 4}f", xa)
    y = struct.unpack(f"<{len(xb) // 4}f", xb)
    scale = max((abs(v) for v in x), default=0.0) or 1.0
    diff = max((abs(p - q) for p, q in zip(x, y)), default=0.0) / scale
    worst = max(worst, diff)
    if diff <= tol:
        close += 1
    else:
        print(f"differs {name} by {diff:.2e}")
print(f"close {close} (worst {worst:.1e})")
