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
