#!/usr/bin/env bash
# Starts a 2-rank training run, then stops (SIGSTOP) or kills (SIGKILL) rank
# 1 mid-run. Prints the job's exit status and how long the others took to
# give up; exits non-zero only if the job hung past the bound.
#   stuck_rank.sh <STOP|KILL> <llmc-run> <artifact> <log>
set -u
signal=$1; run=$2; artifact=$3; log=$4
start=$(date +%s)
# Open MPI's session directory beside the log: not the TMPDIR other tests'
# mpiruns share (see lit.cfg.py's %mpirun).
mpirun -np 2 --bind-to none --mca orte_tmpdir_base "$log.ompi" "$run" "$artifact" \
  --steps 100000 --quiet --comm-timeout 3 > "$log" 2>&1 &
job=$!
# Wait until both ranks (children of mpirun) run, and train a little.
for _ in $(seq 100); do
  [[ $(pgrep -P "$job" | wc -l) -ge 2 ]] && break
  sleep 0.1
done
sleep 1
victim=$(pgrep -P "$job" | sort -n | tail -1)
kill -"$signal" "$victim"
# A guard against a hang; it must not hold our stdout open.
( sleep 60; kill -9 $job ) > /dev/null 2>&1 & guard=$!
wait $job; status=$?
pkill -P $guard 2>/dev/null; kill $guard 2>/dev/null
kill -CONT "$victim" 2>/dev/null; kill -9 "$victim" 2>/dev/null
elapsed=$(( $(date +%s) - start ))
echo "exit=$status elapsed_ok=$([[ $elapsed -lt 45 ]] && echo yes || echo no)"
