"""Names transformers 4.51 imports that Debian's torch 1.13 lacks.

transformers 4.51 is the first release with Qwen3 and Gemma 3, and it
imports a few torch 2 names at module load even when the code that uses
them never runs: `torch.distributed.tensor` (DTensor, for tensor-parallel
loading), `torch.compiler.disable` (a decorator on flex attention) and
the float8 dtypes (entries of a safetensors dtype table). The fp32 eager
forward and loss the reference tests run call none of them. Each stand-in
below fails loudly if it is ever used, so a check can never pass through
one. Import this module before transformers; it does nothing on a torch
that has the names.
"""
import sys
import types

import torch
import torch.distributed


class _Missing:
    """A name torch 1.13 lacks; any use of it is an error."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"torch_compat: {self._name} is not in torch {torch.__version__}")

    def __repr__(self):
        return f"<missing {self._name}>"


if "torch.distributed.tensor" not in sys.modules and not hasattr(torch.distributed, "tensor"):
    dtensor = types.ModuleType("torch.distributed.tensor")

    class DTensor:  # isinstance() checks are False; construction fails.
        def __init__(self, *args, **kwargs):
            raise RuntimeError("torch_compat: DTensor is not in torch " + torch.__version__)

    dtensor.DTensor = DTensor
    sys.modules["torch.distributed.tensor"] = dtensor
    torch.distributed.tensor = dtensor

if not hasattr(torch, "compiler"):
    compiler = types.ModuleType("torch.compiler")

    def disable(fn=None, recursive=True):
        """Nothing is compiled on torch 1.13, so disabling is the identity."""
        return fn if fn is not None else (lambda f: f)

    compiler.disable = disable
    compiler.is_compiling = lambda: False
    sys.modules["torch.compiler"] = compiler
    torch.compiler = compiler

for _name in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, _name):
        setattr(torch, _name, _Missing("torch." + _name))
