"""Rewrites a safetensors file with one tensor dropped, copied or cut short,
to make the broken files the loading errors are tested on.

usage: edit_safetensors.py IN OUT drop NAME
       edit_safetensors.py IN OUT copy FROM NAME    (NAME gets FROM's values)
       edit_safetensors.py IN OUT truncate NAME N   (NAME keeps its first N values, shape [N])
"""
import json
import math
import struct
import sys

from safetensors_util import read, tensors

src, dst, op, *args = sys.argv[1:]
header, _ = read(src)
table = tensors(src)
if op == "drop":
    del table[args[0]]
elif op == "copy":
    table[args[1]] = table[args[0]]
elif op == "truncate":
    dtype, shape, data = table[args[0]]
    n = int(args[1])
    table[args[0]] = (dtype, [n], data[:n * len(data) // math.prod(shape)])
else:
    sys.exit(f"unknown operation {op}")
out, body = {}, b""
if "__metadata__" in header:
    out["__metadata__"] = header["__metadata__"]
for name, (dtype, shape, data) in table.items():
    out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(data)]}
    body += data
text = json.dumps(out).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + body)
