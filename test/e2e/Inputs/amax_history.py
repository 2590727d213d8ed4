"""Prints an fp8 delayed-scaling state (amax histories) from a checkpoint.

usage: amax_history.py STEP_DIR NAME MARGIN
Assembles tensor NAME of the step (from every rank's piece: an expert's
history lives on the rank holding the expert): f32[N + 1] (one history:
the range, then N amaxes, newest first) or f32[G, N + 1] (one per
expert). For a [G, N + 1] state it first prints `histories G distinct
D` (D: how many different ranges the G histories hold); then for each
history `history N recorded K` (K: amaxes recorded, the nonzero ones) and
`range ok` when its range is its largest recorded amax times 2^MARGIN
(common/DelayedScaling.h), else `range bad`.
"""
import struct
import sys

from global_tensors import checkpoint


def report(values, margin):
    history = values[1:]
    recorded = [a for a in history if a != 0.0]
    print(f"history {len(history)} recorded {len(recorded)}")
    ok = recorded and values[0] == max(recorded) * 2.0**margin
    print("range ok" if ok else f"range bad: {values[0]} vs {recorded}")


step_dir, name, margin = sys.argv[1], sys.argv[2], int(sys.argv[3])
found = checkpoint(step_dir).get(name)
if not found:
    sys.exit(f"no tensor {name} in {step_dir}")
dtype, shape, data = found
values = struct.unpack(f"<{len(data) // 4}f", data)
if len(shape) == 1:
    report(values, margin)
else:
    groups, width = shape
    rows = [values[g * width:(g + 1) * width] for g in range(groups)]
    print(f"histories {groups} distinct {len({row[0] for row in rows})}")
    for row in rows:
        report(row, margin)
