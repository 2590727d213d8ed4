#!/usr/bin/env bash
# Trains one configuration compiled unpadded (--vocab-multiple 1) and with
# its vocabulary padded (--vocab-multiple <multiple>), 3 steps each, and
# requires the same per-step losses, exactly or within $TOLERANCE
# (relative; default 0) where a product of another width sums in another
# order. Each run saves its last step under <work dir>/<name>-<multiple>.ck.
#
#   [TOLERANCE=t] padded_losses.sh <bin dir> <work dir> <name> <ranks> <launcher> <multiple> [llmc compile flags...]
#
# <launcher> is the mpirun command for ranks > 1 (ignored for one rank).
set -euo pipefail
BIN=$1 WORK=$2 NAME=$3 RANKS=$4 LAUNCH=$5 MULTIPLE=$6
shift 6
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$WORK"
for multiple in 1 "$MULTIPLE"; do
  tag=$NAME-$multiple
  "$BIN/llmc" compile "$@" --vocab-multiple "$multiple" -o "$WORK/$tag.llmc"
  run=("$BIN/llmc-run" "$WORK/$tag.llmc" --steps 3 --metrics "$WORK/$tag.jsonl" --quiet
       --ckpt-dir "$WORK/$tag.ck")
  if [ "$RANKS" -gt 1 ]; then
    $LAUNCH -np "$RANKS" "${run[@]}"
  else
    "${run[@]}"
  fi
done
echo -n "$NAME: "
python3 "$HERE/compare_losses.py" "$WORK/$NAME-1.jsonl" "$WORK/$NAME-$MULTIPLE.jsonl" "${TOLERANCE:-0}"
