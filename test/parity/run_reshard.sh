#!/usr/bin/env bash
# Checkpoints move between layouts: a run saved at step 6 under one layout
# resumes under another and continues with the losses of an uninterrupted
# single-rank run (relative difference <= 1e-5), for every pair below. The
# uneven-* layouts train a GPT-2 no rank count divides (vocabulary 257,
# width 70), whose ZeRO shards are padded (and the padded-* ones the same
# model with its vocabulary padded inside the artifact, 257 -> 320,
# checkpoints moving between padded and unpadded artifacts); the pipe-*
# layouts a 4-layer
# GPT-2 in 4 microbatches, across pipeline stages, schedules and the
# layouts without them; the moe-* layouts a 4-layer Mixtral (its experts'
# parameters split by tp and ZeRO-3, its router sums crossing stages); the
# sigmoid-* ones a Mixtral with a sigmoid router (DeepSeek-V3's), whose
# frozen e_score_correction_bias moves with the rest between one rank and
# dp2×ep2.
#
#   run_reshard.sh <bin dir> <work dir>
set -euo pipefail
BIN=$1; WORK=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_WAIT_POLICY=PASSIVE
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$WORK" && mkdir -p "$WORK"
common=(--model gpt2 --preset tiny --set n_layer=2 --set batch_size=8 --set seq_len=32)
pipe=(--model gpt2 --preset tiny --set n_layer=4 --set batch_size=2 --set seq_len=32
      --microbatches 4)
moe=(--model mixtral --preset tiny --set n_layer=4 --set batch_size=2 --set seq_len=32
     --microbatches 4 --set router_z_loss_coef=0.001)
# A sigmoid router (DeepSeek-V3's): its frozen e_score_correction_bias
# travels with the checkpoint between one rank and expert parallelism.
sigmoid=(--model mixtral --preset tiny --set n_layer=2 --set batch_size=4 --set seq_len=32
         --set scoring_func=sigmoid --set routed_scaling_factor=2.5 --set router_z_loss_coef=0.001)
uneven=(--model gpt2 --preset tiny --set n_layer=2 --set batch_size=12 --set seq_len=32
        --set vocab_size=257 --set n_embd=70 --set n_head=2 --set n_kv_head=2)

# layout name | ranks | flags
declare -A RANKS FLAGS
add() { RANKS[$1]=$2; FLAGS[$1]=$3; }
add one 1 ""
add dp2 2 "--mesh dp=2"
add zero1-dp2 2 "--mesh dp=2 --zero 1"
add zero3-dp2 2 "--mesh dp=2 --zero 3"
add zero3-dp4 4 "--mesh dp=4 --zero 3"
add hybrid 4 "--mesh dp=2,fsdp=2 --zero 3"
add dp2-tp2 4 "--mesh dp=2,tp=2 --zero 1"
add tp4 4 "--mesh tp=4"
add tp2 2 "--mesh tp=2 --zero 0"
add dp4 4 "--mesh dp=4"
add zero3-dp2-tp2-sp 4 "--mesh dp=2,tp=2 --zero 3 --sp"
add uneven-one 1 ""
add uneven-zero1-dp3 3 "--mesh dp=3 --zero 1"
add uneven-zero3-dp2 2 "--mesh dp=2 --zero 3"
add uneven-zero2-dp4 4 "--mesh dp=4 --zero 2"
add uneven-tp2 2 "--mesh tp=2"
add padded-one 1 "--vocab-multiple 64"
add padded-tp2 2 "--mesh tp=2 --vocab-multiple 64"
add padded-zero3-dp2 2 "--mesh dp=2 --zero 3 --vocab-multiple 64"
add padded-dp2-tp2 4 "--mesh dp=2,tp=2 --zero 1 --vocab-multiple 64"
add pipe-one 1 ""
add pipe-pp2 2 "--mesh pp=2"
add pipe-pp4 4 "--mesh pp=4"
add pipe-pp2-dp2 4 "--mesh pp=2,dp=2 --zero 1"
add pipe-pp2-tp2 4 "--mesh pp=2,tp=2 --sp"
add pipe-zero3-dp2 2 "--mesh dp=2 --zero 3"
add pipe-pp2-interleaved 2 "--mesh pp=2 --pipeline-schedule interleaved --virtual-stages 2"
add pipe-pp2-zero-bubble 2 "--mesh pp=2 --pipeline-schedule zero-bubble"
add pipe-pp2-zero3-dp2 4 "--mesh pp=2,dp=2 --zero 3"
add pipe-pp2-zero2-dp2 4 "--mesh pp=2,dp=2 --zero 2 --pipeline-schedule zero-bubble"
add moe-one 1 ""
add moe-zero3-dp2 2 "--mesh dp=2 --zero 3"
add moe-dp2-tp2 4 "--mesh dp=2,tp=2 --zero 1"
add moe-pp2 2 "--mesh pp=2 --pipeline-schedule interleaved --virtual-stages 2"
add sigmoid-one 1 ""
add sigmoid-dp2-ep2 4 "--mesh dp=2,ep=2 --zero 1"
for name in "${!RANKS[@]}"; do
  model=("${common[@]}")
  [[ $name == uneven-* || $name == padded-* ]] && model=("${uneven[@]}")
  [[ $name == pipe-* ]] && model=("${pipe[@]}")
  [[ $name == moe-* ]] && model=("${moe[@]}")
  [[ $name == sigmoid-* ]] && model=("${sigmoid[@]}")
  # shellcheck disable=SC2086
  "$BIN/llmc" compile "${model[@]}" ${FLAGS[$name]} -o "$WORK/$name.llmc"
done
run() { # layout, extra llmc-run args...
  local name=$1; shift
  if [[ ${RANKS[$name]} == 1 ]]; then "$BIN/llmc-run" "$WORK/$name.llmc" "$@"
  else mpirun -np "${RANKS[$name]}" --bind-to none "$BIN/llmc-run" "$WORK/$name.llmc" "$@"; fi
}
run one --steps 12 --metrics "$WORK/reference.jsonl" --quiet
run uneven-one --steps 12 --metrics "$WORK/uneven-reference.jsonl" --quiet
run pipe-one --steps 12 --metrics "$WORK/pipe-reference.jsonl" --quiet
run moe-one --steps 12 --metrics "$WORK/moe-reference.jsonl" --quiet
run sigmoid-one --steps 12 --metrics "$WORK/sigmoid-reference.jsonl" --quiet

fail=0
for pair in "zero3-dp2:one" "zero3-dp4:zero3-dp2" "hybrid:zero1-dp2" "one:zero3-dp4" \
            "zero1-dp2:hybrid" "dp2:zero3-dp4" "zero3-dp2:zero3-dp2" \
            "dp2-tp2:tp4" "dp2-tp2:dp4" "dp2-tp2:one" "tp4:zero3-dp2" "zero3-dp4:tp2" \
            "zero3-dp2-tp2-sp:tp2" "one:zero3-dp2-tp2-sp" \
            "uneven-zero1-dp3:uneven-zero3-dp2" "uneven-zero3-dp2:uneven-zero2-dp4" \
            "uneven-zero2-dp4:uneven-one" "uneven-one:uneven-zero1-dp3" \
            "uneven-tp2:uneven-zero1-dp3" "uneven-zero3-dp2:uneven-tp2" \
            "padded-tp2:uneven-one" "uneven-one:padded-zero3-dp2" "padded-zero3-dp2:uneven-tp2" \
            "uneven-zero1-dp3:padded-dp2-tp2" "padded-dp2-tp2:padded-one" "padded-one:padded-tp2" \
            "pipe-pp2:pipe-pp2" "pipe-pp2:pipe-one" "pipe-one:pipe-pp4" "pipe-pp4:pipe-pp2-dp2" \
            "pipe-pp2-dp2:pipe-zero3-dp2" "pipe-zero3-dp2:pipe-pp2-tp2" \
            "pipe-pp2-tp2:pipe-pp2-interleaved" "pipe-pp2-interleaved:pipe-pp2-zero-bubble" \
            "pipe-pp2-zero-bubble:pipe-pp4" "pipe-pp4:pipe-pp2-zero3-dp2" \
            "pipe-pp2-zero3-dp2:pipe-pp2-zero2-dp2" "pipe-pp2-zero2-dp2:pipe-one" \
            "moe-one:moe-zero3-dp2" "moe-zero3-dp2:moe-dp2-tp2" "moe-dp2-tp2:moe-pp2" \
            "moe-pp2:moe-one" "sigmoid-one:sigmoid-dp2-ep2" "sigmoid-dp2-ep2:sigmoid-one"; do
  from=${pair%%:*}; to=${pair##*:}
  reference=reference
  [[ $from == uneven-* || $from == padded-* ]] && reference=uneven-reference
  [[ $from == pipe-* ]] && reference=pipe-reference
  [[ $from == moe-* ]] && reference=moe-reference
  [[ $from == sigmoid-* ]] && reference=sigmoid-reference
  ck="$WORK/ck-$from-$to"
  run "$from" --steps 12 --stop-at 6 --ckpt-dir "$ck" --quiet
  run "$to" --steps 12 --resume --ckpt-dir "$ck" --metrics "$WORK/$from-$to.jsonl" --quiet
  tail -n 6 "$WORK/$reference.jsonl" > "$WORK/reference-tail.jsonl"
  if result=$(python3 "$HERE/../e2e/Inputs/compare_losses.py" "$WORK/reference-tail.jsonl" "$WORK/$from-$to.jsonl" 1e-5); then
    echo "PASS $from -> $to: $result"
  else
    echo "FAIL $from -> $to: $result"; fail=1
  fi
done
exit $fail
