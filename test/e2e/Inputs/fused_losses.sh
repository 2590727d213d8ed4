#!/usr/bin/env bash
# Trains one configuration compiled with two --fuse settings and requires
# identical per-step losses (a fusion must compute exactly what the ops it
# replaces compute), or within $TOLERANCE (relative; default 0) for a
# fusion that sums in another order.
#
#   [TOLERANCE=t] fused_losses.sh <bin dir> <work dir> <name> <ranks> <launcher> <fuse a> <fuse b> [llmc compile flags...]
#
# <launcher> is the mpirun command for ranks > 1 (ignored for one rank).
set -euo pipefail
BIN=$1 WORK=$2 NAME=$3 RANKS=$4 LAUNCH=$5 FUSE_A=$6 FUSE_B=$7
shift 7
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$WORK"
for fuse in "$FUSE_A" "$FUSE_B"; do
  tag=$NAME-${fuse//,/+}
  "$BIN/llmc" compile "$@" --fuse "$fuse" -o "$WORK/$tag.llmc"
  if [ "$RANKS" -gt 1 ]; then
    $LAUNCH -np "$RANKS" "$BIN/llmc-run" "$WORK/$tag.llmc" --steps 3 \
      --metrics "$WORK/$tag.jsonl" --quiet
  else
    "$BIN/llmc-run" "$WORK/$tag.llmc" --steps 3 --metrics "$WORK/$tag.jsonl" --quiet
  fi
done
echo -n "$NAME: "
python3 "$HERE/compare_losses.py" "$WORK/$NAME-${FUSE_A//,/+}.jsonl" "$WORK/$NAME-${FUSE_B//,/+}.jsonl" "${TOLERANCE:-0}"
