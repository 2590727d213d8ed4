"""Prints each tensor of a safetensors file as `name [shape]`, sorted;
with --dtypes as `name DTYPE [shape]`."""
import sys

from safetensors_util import tensors

with_dtypes = "--dtypes" in sys.argv[2:]
for name, (dtype, shape, data) in sorted(tensors(sys.argv[1]).items()):
    print(f"{name} {dtype} {shape}" if with_dtypes else f"{name} {shape}")
