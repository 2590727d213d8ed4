"""Checks for test/e2e/quantize*.test.

  same-tensors A B     every tensor of safetensors file A is in B with the
                       same dtype, shape and bytes
  same-loss A B        two --dump-grads files record the same loss (all digits)
  val-loss A B TOL     two llmc-run outputs report final validation losses
                       at most TOL apart"""
import json
import re
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    return header, data[8 + size:]


def tensors(path):
    header, body = read(path)
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = (entry["dtype"], entry["shape"], body[begin:end])
    return out


def val_loss(path):
    losses = re.findall(r"val loss ([0-9.]+)", open(path).read())
    if not losses:
        sys.exit(f"{path}: no 'val loss'")
    return float(losses[-1])


mode, a, b = sys.argv[1:4]
if mode == "same-tensors":
    ta, tb = tensors(a), tensors(b)
    bad = [n for n in ta if n not in tb or ta[n] != tb[n]]
    print(f"{len(ta)} tensors, {len(bad)} differ")
    sys.exit(1 if bad else 0)
if mode == "same-loss":
    la, lb = read(a)[0]["__metadata__"]["loss"], read(b)[0]["__metadata__"]["loss"]
    print(f"loss {la} and {lb}")
    sys.exit(0 if la == lb else 1)
if mode == "val-loss":
    la, lb, tol = val_loss(a), val_loss(b), float(sys.argv[4])
    print(f"val loss {la} and {lb}")
    sys.exit(0 if abs(la - lb) <= tol else 1)
sys.exit(f"unknown mode {mode}")
