"""Checks for test/e2e/quantize*.test.

  same-tensors A B     every tensor of safetensors file A is in B with the
                       same dtype, shape and bytes
  same-loss A B        two --dump-grads files record the same loss (all digits)
  val-loss A B TOL     two llmc-run outputs report final validation losses
                       at most TOL apart"""
import sys

from safetensors_util import read, tensors
from val_loss import val_loss

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
