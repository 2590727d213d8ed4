"""Sets every e_score_correction_bias of a Hugging Face directory's
model.safetensors (float32) to the given values, in place, or with --check
prints whether a second file holds the same bias bytes as the first.

  set_score_bias.py <model.safetensors> v0,v1,...
  set_score_bias.py --check <a.safetensors> <b.safetensors>
"""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return data, n, header


def biases(data, n, header):
    out = {}
    for name, info in header.items():
        if name.endswith("e_score_correction_bias"):
            begin, end = info["data_offsets"]
            out[name] = data[8 + n + begin:8 + n + end]
    return out


if sys.argv[1] == "--check":
    a, b = (biases(*read(p)) for p in sys.argv[2:4])
    print("same bias" if a == b and a else f"differs: {sorted(a)} vs {sorted(b)}")
    sys.exit(0)
path, values = sys.argv[1], [float(v) for v in sys.argv[2].split(",")]
data, n, header = read(path)
body = bytearray(data)
for name, info in header.items():
    if name.endswith("e_score_correction_bias"):
        assert info["dtype"] == "F32" and info["shape"] == [len(values)], info
        begin = 8 + n + info["data_offsets"][0]
        body[begin:begin + 4 * len(values)] = struct.pack(f"<{len(values)}f", *values)
open(path, "wb").write(bytes(body))
print(f"set {sum(1 for k in header if k.endswith('e_score_correction_bias'))} biases")
