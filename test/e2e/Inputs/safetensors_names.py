"""Prints each tensor of a safetensors file as `name [shape]`, sorted."""
import json
import struct
import sys

data = open(sys.argv[1], "rb").read()
size = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + size])
for name in sorted(k for k in header if k != "__metadata__"):
    print(f"{name} {header[name]['shape']}")
