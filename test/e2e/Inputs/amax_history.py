"""Prints an fp8 delayed-scaling state (an amax history) from a checkpoint.

usage: amax_history.py STEP_DIR NAME MARGIN
Finds tensor NAME (f32[N + 1]: the range, then N amaxes, newest first) in
the step's safetensors files and prints `history N recorded K` (K: amaxes
recorded, the nonzero ones) and `range ok` when the range is the largest
recorded amax times 2^MARGIN (common/DelayedScaling.h), else `range bad`.
"""
import os
import struct
import sys

from safetensors_util import tensors

step_dir, name, margin = sys.argv[1], sys.argv[2], int(sys.argv[3])
for file in sorted(os.listdir(step_dir)):
    if not file.endswith(".safetensors"):
        continue
    found = tensors(os.path.join(step_dir, file)).get(name)
    if not found:
        continue
    dtype, shape, data = found
    values = struct.unpack(f"<{len(data) // 4}f", data)
    history = values[1:]
    recorded = [a for a in history if a != 0.0]
    print(f"history {len(history)} recorded {len(recorded)}")
    ok = recorded and values[0] == max(recorded) * 2.0 ** margin
    print("range ok" if ok else f"range bad: {values[0]} vs {recorded}")
    sys.exit(0)
sys.exit(f"no tensor {name} in {step_dir}")
