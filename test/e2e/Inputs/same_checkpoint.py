"""Compares the tensors of two checkpoint directories, rank file by rank file.

usage: same_checkpoint.py STEP_DIR_A STEP_DIR_B
Prints `same N` when both hold the same safetensors files and every tensor
of every file is bit-identical (N tensors in all), else `differs FILE NAME`
for each tensor that is not and `missing FILE` for a file only one has.
"""
import os
import sys

from safetensors_util import tensors as load

a_dir, b_dir = sys.argv[1:3]
files = lambda d: sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
same = 0
for name in sorted(set(files(a_dir)) | set(files(b_dir))):
    if name not in files(a_dir) or name not in files(b_dir):
        print(f"missing {name}")
        continue
    a, b = load(os.path.join(a_dir, name)), load(os.path.join(b_dir, name))
    for tensor in sorted(set(a) | set(b)):
        if a.get(tensor) == b.get(tensor):
            same += 1
        else:
            print(f"differs {name} {tensor}")
print(f"same {same}")
