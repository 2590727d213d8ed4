"""A packed row trains exactly as its documents one at a time.

usage: packed_equivalence.py BIN CORPUS WORK FAMILY

Cuts three documents of 100, 37 and 150 tokens from the stories of CORPUS
(each opened by '\\n', the byte tokenizer's separator, so the row holds
query and key tiles that segments hide from each other), compiles FAMILY
once with doc_separator=10 for the row of all three and once plainly per
document, and dumps the loss and gradients of each (llmc-run --dump-grads).
The loss is the mean over the row's tokens, so the packed loss and every
packed gradient must equal the token-weighted mean of the documents' own
(fp32, relative error <= 1e-5 per tensor). The plain model on the packed
row must differ: there attention crosses the documents.

Prints `packed = documents: N tensors, max relative error E` and
`plain row differs: yes`, or a line per mismatch (exit 1).
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_util import read, tensors as load  # noqa: E402

BIN, CORPUS, WORK, FAMILY = sys.argv[1:5]
LENGTHS = [100, 37, 150]
TOL = 1e-5


def compile_model(name, seq_len, packed):
    out = os.path.join(WORK, name + ".llmc")
    flags = ["--set", "n_layer=2", "--set", "batch_size=1", "--set", f"seq_len={seq_len}",
             "--set", "max_positions=512"]
    if packed:
        flags += ["--set", "doc_separator=10"]
    subprocess.run([os.path.join(BIN, "llmc"), "compile", "--model", FAMILY, "--preset", "tiny",
                    *flags, "-o", out], check=True)
    return out


def dump(artifact, text_name, text):
    data = os.path.join(WORK, text_name + ".txt")
    with open(data, "wb") as f:
        f.write(text)
    out = os.path.join(WORK, os.path.basename(artifact) + "." + text_name + ".grads")
    subprocess.run([os.path.join(BIN, "llmc-run"), artifact, "--steps", "0", "--quiet",
                    "--data", data, "--val-data", data, "--dump-grads", out], check=True)
    values = {name: np.frombuffer(raw, dtype=np.float32).astype(np.float64)
              for name, (dtype, _, raw) in load(out).items() if dtype == "F32"}
    return float(read(out)[0]["__metadata__"]["loss"]), values


stories = [line for line in open(CORPUS, "rb").read().split(b"\n") if line]
docs = [b"\n" + story[:n - 1] for story, n in zip(stories, LENGTHS)]
assert [len(d) for d in docs] == LENGTHS
os.makedirs(WORK, exist_ok=True)

total = sum(LENGTHS)
packed = compile_model("packed", total, True)
packed_loss, packed_values = dump(packed, "row", b"".join(docs) + b"\n")
loss, grads = 0.0, {}
for i, doc in enumerate(docs):
    l, g = dump(compile_model(f"doc{i}", len(doc), False), f"doc{i}", doc + b"\n")
    w = len(doc) / total
    loss += w * l
    for name, value in g.items():
        if name.startswith("grad/"):
            grads[name] = grads.get(name, 0) + w * value
        elif not np.array_equal(value, packed_values[name]):  # one initialisation for all
            sys.exit(f"parameter {name} of doc{i} differs from the packed model's")

errors = [abs(packed_loss - loss) / abs(loss)]
bad = [] if errors[0] <= TOL else [f"loss {packed_loss} != {loss}"]
for name, want in grads.items():
    got = packed_values[name]
    err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
    errors.append(err)
    if err > TOL:
        bad.append(f"{name}: relative error {err:.3g}")
plain_loss, _ = dump(compile_model("plain", total, False), "row", b"".join(docs) + b"\n")

for line in bad:
    print(line)
print(f"packed = documents: {len(grads)} tensors, max relative error {max(errors):.1e}"
      if not bad else "packed != documents")
print("plain row differs: " + ("yes" if abs(plain_loss - packed_loss) > 1e-4 else "no"))
sys.exit(1 if bad else 0)
