#!/usr/bin/env bash
# Start-up of `llmc generate` on a 1B-class Hugging Face directory: the
# wall time until the first token is under way and the peak anonymous
# memory (RssAnon, sampled every 20 ms from /proc/<pid>/status; the page
# cache and file-backed pages of a mapped file are not counted) and peak
# RSS (VmHWM, file pages included), for each llmc build given. The model
# is TinyLlama-1.1B's shape (hidden 2048, 22 layers, 32 heads, 4 kv heads,
# intermediate 5632, vocab 32000) with random weights, saved by
# transformers in bf16 (2.2 GB; DTYPE=float32: 4.4 GB, which an fp32
# model reads in place); the artifact is fp32 (4.4 GB of parameters), one
# row, 64 tokens of context. Runs alternate the builds (warm page cache for
# all: the file is read once before the first run). A label's build may be
# followed by generate flags after commas: copy=build,--copy-weights.
#
# Usage: [RUNS=3] [DTYPE=bfloat16|float32] bench/weights_startup.sh <label>=<build-dir>[,flag]...
# Needs about 8 GB of free memory and 5 GB of disk in $TMPDIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-3}
DTYPE=${DTYPE:-bfloat16}
PY=${PY:-$ROOT/build/hf-venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_WAIT_POLICY=PASSIVE

"$PY" - "$WORK/hf" "$DTYPE" <<'PYEOF'
import sys, torch, transformers
config = transformers.LlamaConfig(
    hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
    intermediate_size=5632, vocab_size=32000, max_position_embeddings=2048,
    rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, torch_dtype=sys.argv[2])
torch.manual_seed(0)
torch.set_default_dtype(getattr(torch, sys.argv[2]))
model = transformers.LlamaForCausalLM(config)
model.save_pretrained(sys.argv[1], safe_serialization=True, max_shard_size="20GB")
PYEOF
cat "$WORK/hf"/*.safetensors > /dev/null # into the page cache for every run alike

# Peak RssAnon and VmHWM of a command, sampled while it runs; prints
# "<wall s> <peak RssAnon kB> <VmHWM kB>" to stdout, the command's stderr to $2.
measure() {
  local out=$1
  shift
  python3 - "$out" "$@" <<'PYEOF'
import subprocess, sys, time
out = open(sys.argv[1], "w")
start = time.monotonic()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=out)
peak_anon = hwm = 0
while p.poll() is None:
    try:
        for line in open(f"/proc/{p.pid}/status"):
            key, _, value = line.partition(":")
            if key == "RssAnon": peak_anon = max(peak_anon, int(value.split()[0]))
            if key == "VmHWM": hwm = max(hwm, int(value.split()[0]))
    except (FileNotFoundError, ProcessLookupError, ValueError):
        pass
    time.sleep(0.02)
wall = time.monotonic() - start
if p.returncode != 0:
    sys.exit(f"command failed ({p.returncode}): see {sys.argv[1]}")
print(f"{wall:.2f} {peak_anon} {hwm}")
PYEOF
}

echo "# $(date -u +%Y-%m-%d), $(getconf _NPROCESSORS_ONLN) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), TinyLlama-1.1B shape, $DTYPE file, fp32 artifact"
for pair in "$@"; do
  label=${pair%%=*} build=${pair#*=} build=${build%%,*}
  "$build/bin/llmc" compile --model llama --config "$WORK/hf/config.json" \
    --inference max-batch=1,max-context=64,chunk=16 -o "$WORK/$label.llmc" > /dev/null
done
for ((r = 0; r < RUNS; ++r)); do
  for pair in "$@"; do
    label=${pair%%=*} spec=${pair#*=}
    IFS=, read -r -a flags <<< "$spec"
    build=${flags[0]} flags=("${flags[@]:1}")
    read -r wall anon hwm < <(measure "$WORK/$label.err" "$build/bin/llmc" generate \
      "$WORK/$label.llmc" --weights "$WORK/hf" --prompt-tokens 1,2,3,4 --max-new-tokens 1 \
      --temperature 0 "${flags[@]}")
    # Start-up: everything before the first prefill chunk.
    work=$(awk '/^prefill:/ {p = $5} /^decode:/ {d = $5} END {print p + d}' "$WORK/$label.err")
    python3 -c "import sys; w, g, a, h = map(float, sys.argv[2:]); print(f'{sys.argv[1]}: start-up {w - g:.2f} s (wall {w:.2f} s), peak RssAnon {a / 1048576:.2f} GiB, VmHWM {h / 1048576:.2f} GiB')" \
      "$label" "$wall" "$work" "$anon" "$hwm"
  done
done
