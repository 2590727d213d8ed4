"""Checks a --dump-grads file's adapter gradients against a central finite
difference of the loss (no numpy needed).

usage: lora_grad_check.py params DUMP OUT            (DUMP's parameters, grads dropped)
       lora_grad_check.py step DUMP MATCH OUT+ OUT-  (the parameters moved by ±h·g/|g|)
       lora_grad_check.py check DUMP MATCH LOG LOG+ LOG- TOL

`step` moves every adapter whose name contains MATCH along its gradient's
unit direction u, by h chosen so the loss moves by about 2e-3 (six printed
digits resolve that to 0.5 %; a larger step meets the curvature); `check` compares the directional
derivative (L(p+h·u) − L(p−h·u)) / 2h, read from the three runs' "loss"
lines, with |g| = g·u, within the relative tolerance TOL.
"""
import json
import math
import re
import struct
import sys

from safetensors_util import tensors


def write(path, table):
    header, body = {}, b""
    for name, (dtype, shape, data) in table.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + body)


def floats(data):
    return struct.unpack(f"<{len(data) // 4}f", data)


def adapters(table, match):
    """name -> (parameter values, gradient values) of the matching adapters."""
    out = {}
    for name, (dtype, _, data) in table.items():
        if ".lora_" in name and match in name and not name.startswith("grad/"):
            assert dtype == "F32", name
            out[name] = (floats(data), floats(table["grad/" + name][2]))
    if not out:
        sys.exit(f"no adapter matches '{match}'")
    return out


def step_size(chosen):
    norm = math.sqrt(sum(g * g for _, grad in chosen.values() for g in grad))
    if norm == 0:
        sys.exit("the adapters' gradient is zero")
    return norm, 1e-3 / norm


def parameters(table):
    return {n: t for n, t in table.items() if not n.startswith("grad/") and n not in
            ("tokens", "targets")}


def loss(log):
    found = re.findall(r"\(loss ([0-9.eE+-]+)\)", open(log).read())
    if not found:
        sys.exit(f"{log}: no gradient dump's loss")
    return float(found[-1])


mode, dump, *args = sys.argv[1:]
table = tensors(dump)
if mode == "params":
    write(args[0], parameters(table))
elif mode == "step":
    match, plus, minus = args
    chosen = adapters(table, match)
    norm, h = step_size(chosen)
    for path, sign in ((plus, 1), (minus, -1)):
        moved = parameters(table)
        for name, (values, grad) in chosen.items():
            dtype, shape, _ = moved[name]
            data = [v + sign * h * g / norm for v, g in zip(values, grad)]
            moved[name] = (dtype, shape, struct.pack(f"<{len(data)}f", *data))
        write(path, moved)
elif mode == "check":
    match, log, plus, minus, tol = args
    norm, h = step_size(adapters(table, match))
    fd = (loss(plus) - loss(minus)) / (2 * h)
    error = abs(fd - norm) / norm
    print(f"|g| {norm:.6g}, finite difference {fd:.6g}, relative error {error:.2e} "
          f"(loss {loss(log):.6g})")
    sys.exit(0 if error <= float(tol) else 1)
else:
    sys.exit(f"unknown mode {mode}")
