#!/usr/bin/env python3
"""Writes the table common/Fp8.h is tested against (test/unit/common/Fp8Test.cpp).

For a set of fp32 inputs it records the code of the saturating fp8 cast that
PyTorch (torch.float8_e4m3fn / torch.float8_e5m2) or, where the installed
torch predates float8 dtypes (Debian's 1.13), ml_dtypes (the same OCP formats,
as JAX uses them) computes: x clamped to [-max, max] (NaN kept), then cast,
round to nearest even. Inputs: every fp8 value of both formats, its fp32
neighbours, every midpoint (tie) between consecutive values and the
midpoints' neighbours, values beyond the largest (overflow), infinities,
NaN, zeros, fp32 subnormals, and random fp32 bit patterns; each with both
signs.

Record (little-endian, 6 bytes): uint32 fp32 bits of the input, uint8 E4M3
code, uint8 E5M2 code. Header: b"LLMCFP8\\0", uint32 record count.

  python3 test/reference/fp8_cast_table.py test/unit/common/Inputs/fp8_casts.bin
"""
import struct
import sys

import numpy as np


def caster():
    """(name, cast(array f32, fmt) -> uint8 codes) from torch, else ml_dtypes."""
    try:
        import torch
        dtypes = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}

        def cast(x, fmt):
            t = torch.from_numpy(x).to(dtypes[fmt])
            return t.view(torch.uint8).numpy()
        return f"torch {torch.__version__}", cast
    except (ImportError, AttributeError):
        import ml_dtypes
        dtypes = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}

        def cast(x, fmt):
            return x.astype(dtypes[fmt]).view(np.uint8)
        return f"ml_dtypes {ml_dtypes.__version__}", cast


FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def fp8_values(name_cast, fmt):
    """The finite non-negative values of a format, ascending (decoded by the library)."""
    import ml_dtypes  # decoding only needs a float8 dtype; ml_dtypes or torch alike
    dt = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[fmt]
    v = np.arange(128, dtype=np.uint8).view(dt).astype(np.float32)
    return np.unique(v[np.isfinite(v)])


def inputs(cast):
    xs = []
    for fmt in ("e4m3", "e5m2"):
        v = fp8_values(cast, fmt)
        mids = ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)
        assert np.all(mids.astype(np.float64) == (v[:-1].astype(np.float64) + v[1:]) / 2)
        # Beyond the largest: its would-be next steps' midpoints and multiples.
        top = np.float32(FMAX[fmt])
        step = top - v[-2]
        over = np.array([top + step / 2, top + step, top + 3 * step / 2, top * 2, top * 1024,
                         np.finfo(np.float32).max, np.inf], dtype=np.float32)
        for base in (v, mids, over):
            xs += [base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(0))]
    sub = np.array([1, 2, 3, 0x400000, 0x7fffff, 0x800000], dtype=np.uint32).view(np.float32)
    rng = np.random.default_rng(8)
    rand = rng.integers(0, 2**32, size=32768, dtype=np.uint64).astype(np.uint32).view(np.float32)
    xs += [sub, rand, np.array([0.0, np.nan], dtype=np.float32)]
    x = np.concatenate(xs).astype(np.float32)
    x = np.concatenate([x, -x])
    return np.unique(x.view(np.uint32))


def main():
    np.seterr(all="ignore")  # overflow and NaN inputs are the point
    name, cast = caster()
    bits = inputs(cast)
    x = bits.view(np.float32)
    codes = [cast(np.clip(x, -FMAX[f], FMAX[f]), f) for f in ("e4m3", "e5m2")]
    with open(sys.argv[1], "wb") as out:
        out.write(b"LLMCFP8\0" + struct.pack("<I", len(bits)))
        rec = np.zeros(len(bits), dtype=[("x", "<u4"), ("e4m3", "u1"), ("e5m2", "u1")])
        rec["x"], rec["e4m3"], rec["e5m2"] = bits, codes[0], codes[1]
        out.write(rec.tobytes())
    print(f"{len(bits)} inputs, casts by {name}")


if __name__ == "__main__":
    main()
