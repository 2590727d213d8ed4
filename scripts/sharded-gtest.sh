#!/usr/bin/env bash
# Runs a GoogleTest program as SHARDS processes at once, each taking every
# SHARDS-th test of its filter (gtest's own sharding: GTEST_TOTAL_SHARDS,
# GTEST_SHARD_INDEX), with the machine's cores split between them
# (OMP_NUM_THREADS, unless it is set). The CUDA conformance tests spend most
# of their time in the CPU kernels they compare against, which one process
# runs on a few of a GPU machine's cores while the GPU waits; the shards
# share the GPU. COMMAND may be a wrapper that passes the environment on
# (compute-sanitizer --tool memcheck kernel_tests).
#
# Shard i writes STEM-i.log and, where COMMAND is a gtest program, its
# JUnit XML to STEM-i.xml (--gtest_output is added last). When all are done
# this prints each shard's result lines and the tests that failed, and exits
# 1 if any shard failed (0 otherwise). Killed (a step's time limit), the
# shards go with it: they share its process group.
#
# Usage: scripts/sharded-gtest.sh SHARDS STEM COMMAND [ARGS...]
set -uo pipefail
if (($# < 3)) || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: sharded-gtest.sh SHARDS STEM COMMAND [ARGS...] (SHARDS a positive integer)" >&2
  exit 2
fi
SHARDS=$1 STEM=$2
shift 2
THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / SHARDS > 0 ? $(nproc) / SHARDS : 1 ))}

pids=()
for ((i = 0; i < SHARDS; ++i)); do
  GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=$THREADS \
    "$@" --gtest_output="xml:$STEM-$i.xml" > "$STEM-$i.log" 2>&1 &
  pids+=($!)
done
echo "sharded-gtest: $SHARDS shards of $* ($THREADS threads each), logs $STEM-<shard>.log"

failed=0
for ((i = 0; i < SHARDS; ++i)); do
  wait "${pids[i]}"
  status=$?
  echo "== shard $i: exit $status"
  # gtest's totals and the names of the failed tests (a crash: the log's end).
  awk '/^\[==========\]|^\[  PASSED  \]|^\[  SKIPPED \] [0-9]+ tests?,/ { print; seen = 1; next }
       /^\[  FAILED  \] [0-9]+ tests?, listed below/ { failures = 1 }
       failures && /^\[  FAILED  \]/ { print }
       END { exit !seen }' "$STEM-$i.log" || tail -5 "$STEM-$i.log"
  ((status == 0)) || failed=1
done
if ((failed)); then
  echo "sharded-gtest: a shard failed"
  exit 1
fi
