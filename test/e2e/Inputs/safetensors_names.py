"""Prints each tensor of a safetensors file as `name [shape]`, sorted."""
import sys

from safetensors_util import tensors

for name, (dtype, shape, data) in sorted(tensors(sys.argv[1]).items()):
    print(f"{name} {shape}")
