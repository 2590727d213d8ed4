# Sourced by the bench scripts: `bench/<name>.sh [build-dir] [steps]`.
# Sets ROOT, BUILD, STEPS (default 40), THREADS (default: every core; the
# same for llmc and any baseline) and a scratch WORK directory removed on exit.
ROOT=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=${2:-40}
THREADS=${THREADS:-$(nproc)}
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$THREADS
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Decode tokens/s of `llmc generate` on each artifact, over <runs> rounds
# that alternate them (the machine's drift hits all alike), with the
# generate arguments in the array DECODE_ARGS; prints each one's median,
# its ratio to the first's and the rounds.
# Usage: decode_medians <runs> <new-tokens> <label>=<artifact>...
decode_medians() {
  local runs=$1 new=$2 pair
  shift 2
  for ((r = 0; r < runs; ++r)); do
    for pair in "$@"; do
      "$BUILD/bin/llmc" generate "${pair#*=}" "${DECODE_ARGS[@]}" --max-new-tokens "$new" \
        --temperature 0 2>&1 > /dev/null |
        awk -v k="${pair%%=*}" '/^decode:/ {gsub(/\(/, "", $7); print k, $7}'
    done
  done | python3 -c "
import statistics, sys
rates = {}
for line in sys.stdin:
    kind, rate = line.split()
    rates.setdefault(kind, []).append(float(rate))
first = next(iter(rates))
base = statistics.median(rates[first])
for kind, r in rates.items():
    runs = ', '.join(f'{x:.1f}' for x in r)
    print(f'{kind}: decode median {statistics.median(r):.1f} tok/s, {statistics.median(r) / base:.2f}x {first} (runs: {runs})')
"
}
