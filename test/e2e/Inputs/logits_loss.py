"""The cross-entropy of a logits dump equals the loss of a gradient dump.

usage: logits_loss.py LOGITS GRADS

LOGITS is `llmc-run --dump-logits` (tokens, targets, logits of training
batch 0), GRADS `llmc-run --dump-grads` of the same artifact and weights
(batch 0's tokens, the loss in its metadata). Both must hold the same
tokens, and the mean −log softmax(logits)[target] over the targets that
are not ignored (negative) must equal the loss (fp32, relative 1e-5).
Prints `logits loss = dumped loss` with the relative error, or why not
(exit 1).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_util import read, tensors as load  # noqa: E402

NUMPY = {"F32": np.float32, "I32": np.int32}


def array(entry):
    dtype, shape, data = entry
    return np.frombuffer(data, dtype=NUMPY[dtype]).reshape(shape)


logits_file, grads_file = load(sys.argv[1]), load(sys.argv[2])
tokens = array(logits_file["tokens"])
if not np.array_equal(tokens, array(grads_file["tokens"])):
    sys.exit("the two dumps hold different batches")
logits = array(logits_file["logits"]).astype(np.float64)
logits = logits.reshape(-1, logits.shape[-1])
targets = array(logits_file["targets"]).reshape(-1)
kept = targets >= 0
shifted = logits - logits.max(axis=1, keepdims=True)
lse = np.log(np.exp(shifted).sum(axis=1))
losses = lse[kept] - shifted[kept, targets[kept]]
ours = losses.mean()
dumped = float(read(sys.argv[2])[0]["__metadata__"]["loss"])
error = abs(ours - dumped) / abs(dumped)
print(f"logits loss = dumped loss: relative error {error:.1e}" if error <= 1e-5 else
      f"logits loss {ours} != dumped loss {dumped} (relative error {error:.1e})")
sys.exit(0 if error <= 1e-5 else 1)
