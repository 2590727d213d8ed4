#!/usr/bin/env bash
# Starts N ranks the way torchrun or srun without an MPI plugin would: each
# process gets its rank, the world size and where rank 0 listens (a free
# port on 127.0.0.1), and its output goes to <logs>.<rank>.log. Waits for
# all and prints "exit=<first non-zero status, else 0>".
#
# With KILL, STOP or INT <rank>, that rank gets the signal once rank 0 has
# logged a step. After KILL or STOP the others must end on their own, and the
# script also prints whether they did so within the bound; after INT (Ctrl-C
# reaching one rank) every rank must stop, and is waited for.
#
#   launch_ranks.sh <N> <torchrun|slurm> <logs> [KILL|STOP|INT <rank>] -- <command> <args>...
set -u
n=$1; style=$2; logs=$3; shift 3
signal=""; victim=-1
if [[ $1 == KILL || $1 == STOP || $1 == INT ]]; then signal=$1; victim=$2; shift 2; fi
[[ $1 == -- ]] && shift
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s)
pids=()
for ((r = 0; r < n; r++)); do
  if [[ $style == torchrun ]]; then
    env RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" > "$logs.$r.log" 2>&1 &
  else
    # MASTER_ADDR left to the fallback: the first host of the step.
    env -u MASTER_ADDR SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_PROCID=$r SLURM_LOCALID=$r \
        SLURM_NTASKS=$n SLURM_TASKS_PER_NODE="$n" SLURM_NODEID=0 SLURM_STEP_NODELIST=localhost \
        MASTER_PORT=$port "$@" > "$logs.$r.log" 2>&1 &
  fi
  pids+=($!)
done
if [[ -n $signal ]]; then
  for _ in $(seq 200); do
    grep -q '^step' "$logs.0.log" 2>/dev/null && break
    sleep 0.1
  done
  kill -"$signal" "${pids[$victim]}"
  [[ $signal == INT ]] && victim=-1 # it stops like the others
fi
# A guard against a hang; it must not hold our stdout open.
( sleep 40; kill -9 "${pids[@]}" ) > /dev/null 2>&1 & guard=$!
status=0
for ((r = 0; r < n; r++)); do
  [[ $r == "$victim" ]] && continue
  wait "${pids[$r]}"; s=$?
  [[ $status == 0 ]] && status=$s
done
pkill -P $guard 2>/dev/null; kill $guard 2>/dev/null
if [[ $victim != -1 ]]; then
  kill -CONT "${pids[$victim]}" 2>/dev/null; kill -9 "${pids[$victim]}" 2>/dev/null
  wait "${pids[$victim]}" 2>/dev/null
  elapsed=$(( $(date +%s) - start ))
  echo "exit=$status elapsed_ok=$([[ $elapsed -lt 30 ]] && echo yes || echo no)"
else
  echo "exit=$status"
fi
