"""Checks for test/e2e/quantize-gptq*.test.

  lower-error REPORT   every weight in the GPTQ table of an `llmc quantize
                       --method gptq` report has a lower layer output error
                       than round-to-nearest's
  logit-error FP32 RTN GPTQ
                       three `llmc-run --dump-logits` files of the same
                       batch: prints each quantized model's RMS logit error
                       against FP32's, relative to FP32's RMS logit, and
                       succeeds when GPTQ's is at most RTN's"""
import math
import re
import struct
import sys

from safetensors_util import tensors


def lower_error(path):
    rows = re.findall(r"^  (\S+) +(\d+) +(\d+) +(\S+) +(\S+) +(\S+)$", open(path).read(), re.M)
    rows = [r for r in rows if r[0] != "tensor"]
    worse = [r[0] for r in rows if not float(r[4]) < float(r[3])]
    print(f"{len(rows)} weights, {len(worse)} not improved: {' '.join(worse)}")
    return bool(rows) and not worse


def logits(path):
    dtype, _, data = tensors(path)["logits"]
    if dtype != "F32":
        sys.exit(f"{path}: logits are {dtype}, expected F32")
    return struct.unpack(f"<{len(data) // 4}f", data)


def logit_error(fp32, rtn, gptq):
    ref = logits(fp32)
    scale = math.sqrt(sum(v * v for v in ref) / len(ref))

    def rms(path):
        x = logits(path)
        return math.sqrt(sum((p - q) ** 2 for p, q in zip(ref, x)) / len(ref)) / scale

    e_rtn, e_gptq = rms(rtn), rms(gptq)
    print(f"relative RMS logit error: rtn {e_rtn:.3e}, gptq {e_gptq:.3e}, "
          f"ratio {e_gptq / e_rtn:.3f}")
    return e_gptq <= e_rtn


mode = sys.argv[1]
if mode == "lower-error":
    ok = lower_error(sys.argv[2])
elif mode == "logit-error":
    ok = logit_error(*sys.argv[2:5])
else:
    sys.exit(f"unknown mode {mode}")
sys.exit(0 if ok else 1)
