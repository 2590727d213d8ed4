#!/usr/bin/env bash
# The data loader alone on multi-GB datasets: writes a 0.5 GB and a 3 GB
# dataset of random uint16 tokens (vocabulary 65,536) with `llmc data`, in
# 50 MB shards (25M tokens), under a scratch directory in $TMPDIR (removed on
# exit); then reads one epoch of each as a training rank would (64 rows of
# T=1024 per batch), from the page cache and (3 GB, --cold) from the disk.
# Reports tokens/s and peak resident memory (getrusage, cross-checked with
# /usr/bin/time): memory follows the shard size, not the dataset's.
# Usage: bench/data_loader.sh [build-dir]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
SHARD_TOKENS=${SHARD_TOKENS:-25000000}

write() { # name bytes
  head -c "$2" /dev/urandom |
    "$BUILD/bin/llmc" data - --from u16 --vocab 65536 --shard-tokens "$SHARD_TOKENS" -o "$WORK/$1/d"
}
read_epoch() { # name [--cold]
  /usr/bin/time -f '{"time_max_rss_mib": %M}' -o "$WORK/time.json" \
    "$BUILD/bin/llmc-bench-data" "$WORK/$1" 1024 64 "${@:2}"
  awk '{ printf "  /usr/bin/time peak RSS: %.1f MiB\n", $2 / 1024 }' FS='[:}]' "$WORK/time.json"
}

write small $((512 << 20))
write large $((3 << 30))
du -sh "$WORK/small" "$WORK/large"
read_epoch small
read_epoch large
read_epoch large --cold
