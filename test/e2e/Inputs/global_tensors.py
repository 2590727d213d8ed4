"""The global tensors of a checkpoint, whatever layout saved it.

`checkpoint(step_dir)` assembles every tensor of a step directory from its
index.json (the pieces of each rank file, split and padded level by level:
`parts` of `dim`, or `pad_to` for a padded vocabulary) without the
runtime's code: {name: (dtype, global shape, little-endian bytes)}. The
padding is never part of a global tensor.
"""
import json
import os

from safetensors_util import tensors as load

SIZES = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4, "I64": 8, "U8": 1, "F64": 8}


def shapes(global_shape, levels):
    """The tensor's shape after each level: [global, ..., piece]."""
    out = [list(global_shape)]
    for level in levels:
        s = list(out[-1])
        d = level["dim"]
        if level.get("pad_to", 0) > 0:
            s[d] = level["pad_to"]
        else:
            s[d] = -(-s[d] // level["parts"])
        out.append(s)
    return out


def to_global(coords, positions, levels, sizes):
    """A piece's row coordinates in the global tensor, or None for padding."""
    c = list(coords)
    for k in range(len(levels) - 1, -1, -1):
        level, d = levels[k], levels[k]["dim"]
        outer = sizes[k][d]
        if level.get("pad_to", 0) > 0:
            if c[d] >= outer:
                return None
            continue
        block = outer // level["blocks"]
        piece = sizes[k + 1][d] // level["blocks"]
        x = c[d]
        c[d] = (x // piece) * block + positions[k] * piece + x % piece
        if c[d] >= outer:
            return None
    return c


def assemble(step_dir, name, entry, files):
    global_shape, levels = entry["shape"], entry["levels"]
    sizes = shapes(global_shape, levels)
    local = sizes[-1]
    rank = len(global_shape)
    if rank == 0:
        shard = entry["shards"][0]
        return files(shard["file"])[name][2]
    width = SIZES[entry["dtype"].upper()]
    last_whole = all(level["dim"] != rank - 1 for level in levels)
    row = global_shape[-1] if last_whole else 1  # elements moved at once
    numel = 1
    for d in global_shape:
        numel *= d
    out = bytearray(numel * width)
    local_numel = 1
    for d in local:
        local_numel *= d
    for shard in entry["shards"]:
        data = files(shard["file"])[name][2]
        assert len(data) == local_numel * width, f"{name}: piece of {len(data)} bytes"
        for i in range(0, local_numel, row):
            coords, rest = [], i
            for d in reversed(local):
                coords.append(rest % d)
                rest //= d
            coords.reverse()
            g = to_global(coords, shard["positions"], levels, sizes)
            if g is None:
                continue
            flat = 0
            for d, x in zip(global_shape, g):
                flat = flat * d + x
            out[flat * width:(flat + row) * width] = data[i * width:(i + row) * width]
    return bytes(out)


def checkpoint(step_dir):
    index = json.load(open(os.path.join(step_dir, "index.json")))["tensors"]
    cache = {}

    def files(name):
        if name not in cache:
            cache[name] = load(os.path.join(step_dir, name))
        return cache[name]

    return {name: (entry["dtype"], entry["shape"], assemble(step_dir, name, entry, files))
            for name, entry in index.items()}
