"""Reads safetensors files for the end-to-end checks (no numpy needed)."""
import json
import struct


def read(path):
    """(header, body): the JSON header and the bytes after it."""
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + size]), data[8 + size:]


def tensors(path):
    """name -> (dtype, shape, bytes), the metadata entry left out."""
    header, body = read(path)
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = (entry["dtype"], entry["shape"], body[begin:end])
    return out
