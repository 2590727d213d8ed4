# Sourced by the bench scripts: `bench/<name>.sh [build-dir] [steps]`.
# Sets ROOT, BUILD, STEPS (default 40), THREADS (default: every core; the
# same for llmc and any baseline) and a scratch WORK directory removed on exit.
# OpenMP's wait policy, the same for llmc and any baseline: WAIT_POLICY
# (default PASSIVE; `default` leaves libgomp's own, spin a while then sleep).
ROOT=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=${2:-40}
THREADS=${THREADS:-$(nproc)}
export OMP_NUM_THREADS=$THREADS
if [[ ${WAIT_POLICY:-PASSIVE} == default ]]; then
  unset OMP_WAIT_POLICY
else
  export OMP_WAIT_POLICY=${WAIT_POLICY:-PASSIVE}
fi
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

# The Mixtral shapes of the mixture-of-experts benches: sets L H KV C F E K V
# (layers, heads, kv heads, width, expert width, experts, top-k, vocabulary).
#   tiny:  4 layers, width 128, 4 heads (2 kv), 4 experts of 176, top 2, vocabulary 256
#   small: 4 layers, width 512, 8 heads (4 kv), 8 experts of 1024, top 2, vocabulary 8192
moe_shape() {
  local shape
  case $1 in
    tiny) shape=(4 4 2 128 176 4 2 256) ;;
    small) shape=(4 8 4 512 1024 8 2 8192) ;;
    *) echo "SIZE must be tiny or small, got '$1'" >&2; exit 2 ;;
  esac
  read -r L H KV C F E K V <<<"${shape[*]}"
}
