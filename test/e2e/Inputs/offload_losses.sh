#!/usr/bin/env bash
# Trains one configuration compiled without and with --offload optimizer
# (or $OFFLOAD, e.g. activations) and requires identical per-step losses and
# identical final checkpoints (parameters, masters, moments): the offloaded
# program runs the same kernels on the same values, only its optimizer
# state (or its saved activations) lives in host memory and its update on
# the host, so not one bit may change. Then resumes the
# offloaded run from its step-2 checkpoint and requires the uninterrupted
# run's losses for steps 3 and 4.
#
#   offload_losses.sh <bin dir> <work dir> <name> <ranks> <launcher> [llmc compile flags...]
#
# <launcher> is the mpirun command for ranks > 1 (ignored for one rank).
# $RUN_FLAGS, if set, go to every llmc-run (e.g. --debug-stream-delay-us).
set -euo pipefail
BIN=$1 WORK=$2 NAME=$3 RANKS=$4 LAUNCH=$5
shift 5
OFFLOAD=${OFFLOAD:-optimizer}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$WORK"
run() {
  if [ "$RANKS" -gt 1 ]; then
    $LAUNCH -np "$RANKS" "$BIN/llmc-run" "$@"
  else
    "$BIN/llmc-run" "$@"
  fi
}
for mode in none "$OFFLOAD"; do
  tag=$NAME-$mode
  "$BIN/llmc" compile "$@" --offload "$mode" -o "$WORK/$tag.llmc"
  rm -rf "$WORK/$tag.ck"
  # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
  run "$WORK/$tag.llmc" --steps 4 --metrics "$WORK/$tag.jsonl" --quiet \
    --ckpt-dir "$WORK/$tag.ck" --ckpt-every 2 ${RUN_FLAGS:-}
done
echo -n "$NAME: "
python3 "$HERE/compare_losses.py" "$WORK/$NAME-none.jsonl" "$WORK/$NAME-$OFFLOAD.jsonl" 0
echo -n "$NAME: "
python3 "$HERE/same_checkpoint.py" "$WORK/$NAME-none.ck/step_00000004" \
  "$WORK/$NAME-$OFFLOAD.ck/step_00000004" | tr '\n' ' '
echo
# Resume: steps 3 and 4 again from the offloaded run's step-2 checkpoint.
resumed=$WORK/$NAME-resumed
rm -rf "$resumed.ck" && mkdir -p "$resumed.ck"
cp -r "$WORK/$NAME-$OFFLOAD.ck/step_00000002" "$resumed.ck/"
echo step_00000002 > "$resumed.ck/latest"
run "$WORK/$NAME-$OFFLOAD.llmc" --steps 4 --resume --ckpt-dir "$resumed.ck" \
  --metrics "$resumed.jsonl" --quiet
python3 - "$WORK/$NAME-$OFFLOAD.jsonl" "$resumed.jsonl" "$NAME" <<'PY'
import json, sys
whole = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
again = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2]))}
same = sorted(again) == [3, 4] and all(again[s] == whole[s] for s in again)
print(f"{sys.argv[3]}: resumed steps {sorted(again)}", "identical" if same else f"differ: {again} vs {whole}")
sys.exit(0 if same else 1)
PY
