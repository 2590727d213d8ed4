"""Checks a stack's per-expert amax history against the weights it observed.

usage: expert_amax.py STEP_DIR NEXT_STEP_DIR PARAM
The step after STEP_DIR quantizes the parameter PARAM ([experts, ...],
bf16 or f32) as STEP_DIR saved it, and records each expert's amax, the
largest |w| over that expert's matrix, as the newest entry of its row of
`qat_state/PARAM` ([experts, N + 1]: the range, then N amaxes). Prints
`experts G match` when every row's newest amax is its expert's, computed
here from the saved weights, else `expert E: recorded R, weights A`.
"""
import struct
import sys

from global_tensors import checkpoint


def floats(dtype, data):
    if dtype.upper() == "BF16":
        halves = struct.unpack(f"<{len(data) // 2}H", data)
        return struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I",
                                                             *(h << 16 for h in halves)))
    return struct.unpack(f"<{len(data) // 4}f", data)


step, following, param = sys.argv[1:4]
dtype, shape, data = checkpoint(step)[param]
weights = floats(dtype, data)
_, (experts, width), history = checkpoint(following)["qat_state/" + param]
rows = floats("F32", history)
per_expert = len(weights) // experts
bad = 0
for e in range(experts):
    amax = max(abs(w) for w in weights[e * per_expert:(e + 1) * per_expert])
    recorded = rows[e * width + 1]
    if recorded != amax:
        print(f"expert {e}: recorded {recorded}, weights {amax}")
        bad += 1
if not bad:
    print(f"experts {experts} match")
