#!/usr/bin/env bash
# Trains one configuration compiled with two --fuse settings and requires
# identical per-step losses (a fusion must compute exactly what the ops it
# replaces compute), or within $TOLERANCE (relative; default 0) for a
# fusion that sums in another order. With SAME_CHECKPOINT=1 both runs also
# save their final state, compared tensor by tensor (parameters, masters,
# moments: a fusion of the optimizer step must leave every byte as it was).
#
#   [TOLERANCE=t] [SAME_CHECKPOINT=1] fused_losses.sh <bin dir> <work dir> <name> <ranks> <launcher> <fuse a> <fuse b> [llmc compile flags...]
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
  save=()
  if [ "${SAME_CHECKPOINT:-0}" = 1 ]; then
    rm -rf "$WORK/$tag.ck"
    save=(--ckpt-dir "$WORK/$tag.ck")
  fi
  if [ "$RANKS" -gt 1 ]; then
    $LAUNCH -np "$RANKS" "$BIN/llmc-run" "$WORK/$tag.llmc" --steps 3 \
      --metrics "$WORK/$tag.jsonl" --quiet "${save[@]}"
  else
    "$BIN/llmc-run" "$WORK/$tag.llmc" --steps 3 --metrics "$WORK/$tag.jsonl" --quiet "${save[@]}"
  fi
done
echo -n "$NAME: "
python3 "$HERE/compare_losses.py" "$WORK/$NAME-${FUSE_A//,/+}.jsonl" "$WORK/$NAME-${FUSE_B//,/+}.jsonl" "${TOLERANCE:-0}"
if [ "${SAME_CHECKPOINT:-0}" = 1 ]; then
  echo -n "$NAME: "
  python3 "$HERE/same_checkpoint.py" "$WORK/$NAME-${FUSE_A//,/+}.ck/step_00000003" \
    "$WORK/$NAME-${FUSE_B//,/+}.ck/step_00000003" | tr '\n' ' '
  echo
fi
