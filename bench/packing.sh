#!/usr/bin/env bash
# Sequence packing: training throughput of the tiny GPT-2 (T=1024, B=4) on
# documents of mixed lengths (stories of the bundled corpus cut to lengths
# drawn log-uniformly from 16 to 1024 bytes, each opened by '\n'), three ways:
#   padded  one document per row, padded to T (the rest of the row is waste);
#   packed  documents back to back, compiled with doc_separator=10: attention
#           stays inside each document (costing Σ s_i², not T², per row) and
#           positions restart;
#   plain   the same stream without document boundaries (attention crosses
#           documents): what packing's masking costs or saves.
# The three run in turn, ROUNDS times (default 3), so load from anything
# else on the machine falls on all of them alike. Prints the median step
# time over every round's steps after 5 warm-up steps, tokens/s of the rows
# and of the documents' own tokens (padding excluded), and the padding waste.
# Usage: bench/packing.sh [build-dir] [steps per round]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
T=1024 B=4 ROUNDS=${ROUNDS:-3}

python3 - "$ROOT/data/tinytales.txt" "$WORK" $T $((B * (STEPS + 5))) <<'PY'
import math, random, sys
corpus, work, T, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
stories = [s for s in open(corpus, "rb").read().split(b"\n") if s]
rng = random.Random(1)
docs = []
for i in range(rows):
    n = int(math.exp(rng.uniform(math.log(16), math.log(T))))
    text = b""
    while len(text) < n - 1:  # long documents join consecutive stories
        text += stories[(i + len(text)) % len(stories)] + b" "
    docs.append(b"\n" + text[:n - 1])
# padded: document k fills window k (tokens k·T .. k·T+T), the rest is byte 0.
with open(f"{work}/padded.txt", "wb") as f:
    f.write(b"".join(d + b"\0" * (T - len(d)) for d in docs) + b"\n")
with open(f"{work}/packed.txt", "wb") as f:
    f.write(b"".join(docs) + b"\n")
useful = sum(len(d) for d in docs)
print(f"{rows} documents, {useful} tokens, mean {useful / rows:.0f}, "
      f"padding waste of one per row: {1 - useful / (rows * T):.1%}")
PY

compile() { # name extra-flags...
  local name=$1; shift
  "$BUILD/bin/llmc" compile --model gpt2 --preset tiny --set seq_len=$T --set max_positions=$T \
    --set batch_size=$B "$@" -o "$WORK/$name.llmc"
}
run() { # name data round
  "$BUILD/bin/llmc-run" "$WORK/$1.llmc" --steps $((STEPS + 5)) --quiet --data "$2" \
    --val-data "$2" --metrics "$WORK/$1.$3.jsonl"
}
compile padded
compile packed --set doc_separator=10
compile plain
for round in $(seq "$ROUNDS"); do
  run padded "$WORK/padded.txt" "$round"
  run packed "$WORK/packed.txt" "$round"
  run plain "$WORK/packed.txt" "$round"
done

python3 - "$WORK" $T $B "$ROUNDS" <<'PY'
import json, sys
work, T, B, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
padded = open(f"{work}/padded.txt", "rb").read()
waste = padded.count(b"\0") / (len(padded) - 1)
print(f"tiny GPT-2 (4 layers, d=128, B={B}, T={T}), median step of {rounds} rounds")
for name, useful in (("padded", 1 - waste), ("packed", 1.0), ("plain", 1.0)):
    ms = sorted(json.loads(l)["ms"] for r in range(1, rounds + 1)
                for l in list(open(f"{work}/{name}.{r}.jsonl"))[5:])
    med = ms[len(ms) // 2]
    rate = B * T / med * 1000
    print(f"  {name:7s} {med:8.1f} ms  {rate:9.0f} row tok/s  {rate * useful:9.0f} document "
          f"tok/s  padding waste {1 - useful:.1%}")
PY
