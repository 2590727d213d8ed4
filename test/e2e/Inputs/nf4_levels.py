"""Expands the NF4 weights of an `llmc quantize` file, written here from the
formats' definitions, and compares them bit for bit with the fp32 weights
llmc dequantized from it (a checkpoint llmc-run saved after --weights).

usage: nf4_levels.py QUANTIZED.safetensors DEQUANTIZED.safetensors

For each weight W with a `W.qweight`: the record (metadata "W") names the
double quantization, and `W.absmax_q`'s dtype must agree: U8 holds int8
levels (two's complement), F8_E4M3 OCP E4M3 numbers (bias 7, 3 mantissa
bits, subnormals, S.1111.111 NaN). absmax = level * scale + mean and
value = NF4 level * absmax (0 where absmax is not > 0), each operation
rounded to fp32 (the product of two fp32 values is exact in a double, so
rounding it once is the fp32 product). Prints how many weights agree.
"""
import struct
import sys

from safetensors_util import read, tensors

NF4 = [-1.0, -0.6961928, -0.52507305, -0.3949175, -0.28444138, -0.18477343,
       -0.09105004, 0.0, 0.0795803, 0.1609302, 0.2461123, 0.33791524,
       0.44070983, 0.562617, 0.72295684, 1.0]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


NF4 = [f32(v) for v in NF4]  # the fp32 levels (common/QuantScheme.h's)


def e4m3(code):
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 15, code & 7
    if exponent == 15 and mantissa == 7:
        return float("nan")
    if exponent == 0:
        return sign * mantissa / 8.0 * 2.0 ** -6
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)


def int8(code):
    return code - 256 if code >= 128 else code


def expand(name, record, t):
    fields = dict(f.split("=", 1) for f in record.split()[1:])
    block = int(record.split(":")[1][len("block"):])
    levels = fields["double_quant"].split(":")[0]
    dtype = t[name + ".absmax_q"][0]
    want = {"int8": "U8", "fp8_e4m3": "F8_E4M3"}[levels]
    if dtype != want:
        sys.exit(f"{name}.absmax_q is {dtype}, but the record says {levels} ({want})")
    level = e4m3 if levels == "fp8_e4m3" else int8
    codes = t[name + ".qweight"][2]
    absmax_q = t[name + ".absmax_q"][2]
    raw = t[name + ".absmax_scale"][2]
    scales = struct.unpack(f"<{len(raw) // 4}f", raw)
    mean = struct.unpack("<f", t[name + ".absmax_mean"][2])[0]
    dims = [int(d) for d in fields["shape"].split("x")]
    numel = 1
    for d in dims:
        numel *= d
    out = []
    for i in range(numel):
        g = i // block
        absmax = f32(f32(level(absmax_q[g]) * scales[g // 256]) + mean)
        byte = codes[i // 2]
        index = byte & 15 if i % 2 == 0 else byte >> 4
        out.append(f32(NF4[index] * absmax) if absmax > 0 else 0.0)
    return levels, dims, out


header, _ = read(sys.argv[1])
records = header.get("__metadata__", {})
stored, dequantized = tensors(sys.argv[1]), tensors(sys.argv[2])
count, kinds = 0, set()
for name in sorted(n[: -len(".qweight")] for n in stored if n.endswith(".qweight")):
    levels, dims, values = expand(name, records[name], stored)
    dtype, shape, data = dequantized[name]
    if dtype != "F32" or shape != dims:
        sys.exit(f"{name}: dequantized {dtype} {shape}, expected F32 {dims}")
    got = struct.unpack(f"<{len(data) // 4}f", data)
    bad = [i for i, (a, b) in enumerate(zip(got, values)) if a != b]
    if bad:
        i = bad[0]
        sys.exit(f"{name}: {len(bad)} elements differ, first {i}: {got[i]} vs {values[i]}")
    count += 1
    kinds.add(stored[name + ".absmax_q"][0])
print(f"{count} NF4 weights with {', '.join(sorted(kinds))} absmax levels equal")
