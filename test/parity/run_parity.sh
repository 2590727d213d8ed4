#!/usr/bin/env bash
# The parity matrix: every parallel layout trains the tiny GPT-2 and the tiny
# Llama with the same per-step losses as one rank (fp32, 20 steps, relative
# difference <= 1e-5); a GPT-2 with dropout checks that sharded layouts draw
# the single-rank masks; 4-layer models with 4 microbatches run the pipeline
# schedules; fake-quantized GPT-2s (--qat) check that every layout
# quantizes with the ranges of one rank; LoRA GPT-2s and Llamas check
# adapters split like their weights; 8-bit AdamW checks its state under
# data and tensor parallelism and ZeRO; an uneven GPT-2 (vocabulary 257,
# width 70; a Llama with vocabulary 257) checks ZeRO's padded shards on 2,
# 3 and 4 ranks and the padded vocabulary of tensor parallelism; a narrow
# GPT-2 with the real vocabulary of 50257 does the same at that size (the
# one-rank references are compiled with --fuse none, so every fused layout
# is also checked against the unfused ops); both with the vocabulary padded
# inside the artifact (--vocab-multiple: 257 -> 320, 50257 -> 50304) on one
# rank, under tensor parallelism (which splits the padded vocabulary) and
# ZeRO-3 (which shards the padded rows), against the unpadded one rank; packed
# GPT-2s and Llamas (rows of whole stories, doc_separator=10) check that the
# segment and position inputs follow the tokens in every layout, the
# sequence-split ones included; Mixtrals and Qwen-MoEs (mixture-of-experts
# MLPs, Qwen-MoE's with a shared expert and a dense layer, with both router
# losses, whose counts data parallelism sums over the ranks and whose sums
# the pipeline passes from stage to stage; tensor parallelism splits every
# expert) check data, tensor, sequence and expert parallelism (experts
# spread over ep ranks, rows exchanged by all-to-all), ZeRO and the
# pipeline schedules; a Mixtral with a sigmoid router (DeepSeek-V3's,
# weights scaled by 2.5) under dp, tp, ep, ep×tp and pp; a Mixtral with
# LoRA adapters on its experts (mixtral-lora) under dp, ZeRO-3, tp+sp, ep,
# ep×tp and pp; Qwen3s (per-head q/k norms, whose replicated weights take
# gradients from each rank's heads) under dp, ZeRO, tp, sp and pp; a
# Mixtral with a
# capacity factor of 1 (copies
# dropped, the same in every layout) under dp, ep and their mixes; an fp8
# Mixtral (--precision fp8, the experts' products included) under dp, ep
# and ep×tp, and with delayed scaling (an amax history per expert) under
# ep, dp×ep and ep×tp. Each layout runs twice: plainly (one
# ordered list per rank, 20 steps), and compiled with --overlap-comm for
# 10 steps against the reference's first 10 (communication
# on its own thread, ordered by the events --target cuda places) with
# random delays before every instruction on either stream (0..50 us) and
# before every collective (0..1 ms: far longer than any of these tiny
# kernels, so a stream or a rank that runs ahead must still wait for what it
# depends on and meet its peers in the same order).
#
# Last, the composition matrix (composition.py): a sample of the pairs of
# features that compile, each against one rank; --all runs every pair.
#
#   run_parity.sh <bin dir> <work dir> [--all] [family ... | composition]
set -euo pipefail
BIN=$1; WORK=$2; shift 2
PAIRS=(--sample 8)
[[ ${1:-} == --all ]] && PAIRS=(--all) && shift
FAMILIES=${*:-gpt2 llama gpt2-dropout gpt2-bf16 gpt2-pp llama-pp gpt2-qat gpt2-qat-pp gpt2-qat-outlier gpt2-fp8 gpt2-fp8-pp gpt2-lora llama-lora gpt2-lora-pp gpt2-adam8 gpt2-uneven llama-uneven gpt2-vocab50257 gpt2-packed llama-packed gpt2-packed-pp llama-packed-pp mixtral mixtral-pp mixtral-capacity mixtral-fp8 mixtral-fp8-delayed mixtral-sigmoid mixtral-sigmoid-pp mixtral-lora mixtral-lora-pp qwen2_moe qwen2_moe-pp qwen3 qwen3-pp qwen3_moe qwen3_moe-pp composition}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 OMP_WAIT_POLICY=PASSIVE
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STEPS=20
OVERLAP_STEPS=10 # the delays below make these runs the matrix's slowest
rm -rf "$WORK" && mkdir -p "$WORK"

# name | ranks | llmc compile flags | families (empty: gpt2 llama)
LAYOUTS=(
  "dp2|2|--mesh dp=2|gpt2 llama qwen3 gpt2-qat gpt2-qat-outlier gpt2-fp8 gpt2-lora gpt2-adam8 gpt2-packed llama-packed mixtral qwen2_moe qwen3_moe mixtral-capacity mixtral-fp8 mixtral-sigmoid mixtral-lora"
  "dp4|4|--mesh dp=4|gpt2 llama mixtral"
  "dp2-ps|2|--mesh dp=2 --grad-sync ps"
  "dp2-small-buckets|2|--mesh dp=2 --grad-bucket-mb 0.05|gpt2"
  "dp2-no-buckets|2|--mesh dp=2 --grad-bucket-mb 0|gpt2"
  "zero1-dp2|2|--mesh dp=2 --zero 1|gpt2 llama qwen3 gpt2-fp8 gpt2-lora gpt2-adam8 gpt2-packed mixtral qwen2_moe qwen3_moe"
  "zero2-dp2|2|--mesh dp=2 --zero 2"
  "zero2-dp4-micro2|4|--mesh dp=4 --zero 2 --microbatches 2 --set batch_size=4"
  "zero3-dp4|4|--mesh dp=4 --zero 3|gpt2 llama qwen3 gpt2-qat gpt2-qat-outlier gpt2-lora gpt2-packed llama-packed mixtral mixtral-lora"
  "zero3-dp2-keep|2|--mesh dp=2 --zero 3 --fsdp-reshard-after-forward=false --fsdp-prefetch 0"
  "hybrid-dp2-fsdp2|4|--mesh dp=2,fsdp=2 --zero 3"
  "tp2|2|--mesh tp=2|gpt2 llama qwen3 gpt2-qat gpt2-lora llama-lora gpt2-adam8 gpt2-packed llama-packed mixtral qwen2_moe qwen3_moe mixtral-sigmoid"
  "tp4|4|--mesh tp=4|gpt2"
  "dp2-tp2|4|--mesh dp=2,tp=2|gpt2 llama qwen3 mixtral qwen2_moe"
  "zero1-dp2-tp2|4|--mesh dp=2,tp=2 --zero 1"
  "zero3-dp2-tp2|4|--mesh dp=2,tp=2 --zero 3|gpt2 llama qwen3 mixtral"
  "tp2-sp|2|--mesh tp=2 --sp|gpt2 llama qwen3 gpt2-dropout gpt2-packed llama-packed mixtral qwen2_moe qwen3_moe mixtral-lora"
  "ep2|2|--mesh ep=2|mixtral qwen2_moe qwen3_moe mixtral-capacity mixtral-fp8 mixtral-fp8-delayed mixtral-sigmoid mixtral-lora"
  "ep4|4|--mesh ep=4|mixtral mixtral-capacity"
  "dp2-ep2|4|--mesh dp=2,ep=2|mixtral qwen2_moe qwen3_moe mixtral-capacity mixtral-fp8 mixtral-fp8-delayed"
  "zero1-dp2-ep2|4|--mesh dp=2,ep=2 --zero 1|mixtral"
  "zero3-dp2-ep2|4|--mesh dp=2,ep=2 --zero 3|mixtral"
  "ep2-tp2|4|--mesh ep=2,tp=2|mixtral qwen3_moe mixtral-capacity mixtral-fp8 mixtral-fp8-delayed mixtral-sigmoid mixtral-lora"
  "ep2-tp2-sp|4|--mesh ep=2,tp=2 --sp|mixtral"
  "dp2-tp2-sp|4|--mesh dp=2,tp=2 --sp|gpt2 llama qwen3 gpt2-qat gpt2-fp8 gpt2-lora llama-lora gpt2-packed llama-packed"
  "zero3-dp2-tp2-sp|4|--mesh dp=2,tp=2 --zero 3 --sp"
  "tp-slowest|4|--mesh dp=2,tp=2 --rank-order tp,dp|gpt2"
  "recompute-full|1|--recompute full|gpt2 llama qwen3 gpt2-dropout"
  "dp2-tp2-sp-recompute-full|4|--mesh dp=2,tp=2 --sp --recompute full"
  "zero3-dp2-recompute-selective|2|--mesh dp=2 --zero 3 --recompute selective|gpt2 llama gpt2-dropout"
  "dp2-dropout|2|--mesh dp=2|gpt2-dropout"
  "zero1-dp2-tp2-sp-dropout|4|--mesh dp=2,tp=2 --zero 1 --sp|gpt2-dropout"
  "zero2-dp2-bf16|2|--mesh dp=2 --zero 2|gpt2-bf16"
  "zero3-dp2-tp2-sp-bf16|4|--mesh dp=2,tp=2 --zero 3 --sp|gpt2-bf16"
  "zero1-dp2-micro4-bf16|2|--mesh dp=2 --zero 1 --microbatches 4 --set batch_size=2|gpt2-bf16"
  # Shapes no rank count divides: ZeRO pads them (gpt2-uneven).
  "uneven-zero1-dp2|2|--mesh dp=2 --zero 1|gpt2-uneven"
  "uneven-zero1-dp3|3|--mesh dp=3 --zero 1|gpt2-uneven"
  "uneven-zero2-dp4|4|--mesh dp=4 --zero 2|gpt2-uneven"
  "uneven-zero3-dp3|3|--mesh dp=3 --zero 3|gpt2-uneven"
  "uneven-zero3-dp2-tp2|4|--mesh dp=2,tp=2 --zero 3|gpt2-uneven"
  "uneven-hybrid-dp2-fsdp2|4|--mesh dp=2,fsdp=2 --zero 3|gpt2-uneven"
  "uneven-tp2|2|--mesh tp=2|gpt2-uneven llama-uneven"
  "uneven-dp2-tp2-sp|4|--mesh dp=2,tp=2 --sp --zero 1|gpt2-uneven llama-uneven"
  "uneven-pp2-dp2-tp2|8|--mesh pp=2,dp=2,tp=2 --zero 1|gpt2-uneven"
  # The vocabulary padded inside the artifact (llmc-pad-vocab).
  "padded-one|1|--vocab-multiple 64|gpt2-uneven llama-uneven"
  "padded-tp2|2|--mesh tp=2 --vocab-multiple 64|gpt2-uneven llama-uneven"
  "padded-zero3-dp2-tp2|4|--mesh dp=2,tp=2 --zero 3 --vocab-multiple 64|gpt2-uneven"
  # GPT-2's real vocabulary, 50257, on a narrow model.
  "vocab50257-zero3-dp2|2|--mesh dp=2 --zero 3|gpt2-vocab50257"
  "vocab50257-zero1-dp3|3|--mesh dp=3 --zero 1|gpt2-vocab50257"
  "vocab50257-tp2-sp|2|--mesh tp=2 --sp|gpt2-vocab50257"
  "vocab50257-padded-tp2-sp|2|--mesh tp=2 --sp --vocab-multiple 128|gpt2-vocab50257"
  "vocab50257-padded-zero3-dp2|2|--mesh dp=2 --zero 3 --vocab-multiple 128|gpt2-vocab50257"
  # Pipelines (4 layers, 4 microbatches): every schedule, with and without
  # recomputation, alone and with data and tensor parallelism.
  "pp2|2|--mesh pp=2|gpt2-pp llama-pp qwen3-pp gpt2-qat-pp gpt2-fp8-pp gpt2-lora-pp gpt2-packed-pp llama-packed-pp mixtral-pp qwen2_moe-pp qwen3_moe-pp mixtral-sigmoid-pp mixtral-lora-pp"
  "pp2-gpipe|2|--mesh pp=2 --pipeline-schedule gpipe|gpt2-pp"
  "pp2-naive|2|--mesh pp=2 --pipeline-schedule naive|gpt2-pp"
  "pp4|4|--mesh pp=4|gpt2-pp llama-pp mixtral-pp"
  "pp2-dp2|4|--mesh pp=2,dp=2|gpt2-pp llama-pp mixtral-pp"
  "pp2-ep2|4|--mesh pp=2,ep=2|mixtral-pp qwen2_moe-pp qwen3_moe-pp"
  "pp2-dp2-tp2|8|--mesh pp=2,dp=2,tp=2 --zero 1|gpt2-pp llama-pp qwen3-pp gpt2-packed-pp mixtral-pp"
  "pp2-interleaved-v2|2|--mesh pp=2 --pipeline-schedule interleaved --virtual-stages 2|gpt2-pp llama-pp qwen3-pp mixtral-pp qwen2_moe-pp"
  "pp2-zero-bubble|2|--mesh pp=2 --pipeline-schedule zero-bubble|gpt2-pp llama-pp mixtral-pp"
  "pp2-recompute-full|2|--mesh pp=2 --recompute full|gpt2-pp llama-pp mixtral-pp"
  "pp2-recompute-selective|2|--mesh pp=2 --recompute selective|gpt2-pp llama-pp mixtral-pp"
  "pp2-interleaved-recompute-full|2|--mesh pp=2 --pipeline-schedule interleaved --virtual-stages 2 --recompute full|gpt2-pp"
  "pp2-zero-bubble-recompute-selective|2|--mesh pp=2 --pipeline-schedule zero-bubble --recompute selective|gpt2-pp llama-pp"
  "pp2-dp2-tp2-sp-recompute-full|8|--mesh pp=2,dp=2,tp=2 --sp --recompute full|gpt2-pp"
  "pp2-dp2-tp2-recompute-selective|8|--mesh pp=2,dp=2,tp=2 --recompute selective|llama-pp"
  "pp4-recompute-selective|4|--mesh pp=4 --recompute selective|gpt2-pp llama-pp"
  "pp2-dp2-recompute-full|4|--mesh pp=2,dp=2 --recompute full|gpt2-pp llama-pp"
  "pp2-recompute-budget|2|--mesh pp=2 --recompute budget=8.5MiB|gpt2-pp llama-pp"
  # ZeRO-2/3 under pipeline stages: whole gradients reduce-scattered once
  # per stage and step, ZeRO-3's gathers in the actions that use them (or
  # kept for the step), hybrid sharding.
  "pp2-dp2-zero2|4|--mesh pp=2,dp=2 --zero 2|gpt2-pp llama-pp"
  "pp2-dp2-zero3|4|--mesh pp=2,dp=2 --zero 3|gpt2-pp llama-pp"
  "pp2-dp2-zero3-zero-bubble|4|--mesh pp=2,dp=2 --zero 3 --pipeline-schedule zero-bubble|gpt2-pp"
  "pp2-dp2-zero3-interleaved|4|--mesh pp=2,dp=2 --zero 3 --pipeline-schedule interleaved --virtual-stages 2|gpt2-pp"
  "pp2-dp2-zero3-keep-gathered|4|--mesh pp=2,dp=2 --zero 3 --fsdp-keep-gathered --pipeline-schedule gpipe|gpt2-pp"
  "pp2-dp2-tp2-zero3-sp|8|--mesh pp=2,dp=2,tp=2 --zero 3 --sp|gpt2-pp"
  "pp2-hybrid-zero3|8|--mesh pp=2,dp=2,fsdp=2 --zero 3 --set batch_size=4 --microbatches 2|gpt2-pp"
)

fail=0
for family in $FAMILIES; do
  if [[ $family == composition ]]; then
    python3 "$HERE/composition.py" parity --bin "$BIN" --work "$WORK/composition" "${PAIRS[@]}" || fail=1
    continue
  fi
  # gpt2-dropout: every layout must draw the single-rank dropout masks.
  # gpt2-bf16: mixed precision (bf16 parameters, fp32 masters and gradients)
  # under ZeRO, with microbatches summed in fp32;
  # reductions in another order round differently, hence the tolerance.
  model=${family%%-*}; tolerance=1e-5
  common=(--model "$model" --preset tiny --set n_layer=2 --set batch_size=8 --set seq_len=32)
  [[ $family == *-pp ]] && common=(--model "$model" --preset tiny --set n_layer=4
                                   --set batch_size=2 --set seq_len=32 --microbatches 4)
  [[ $family == *-dropout ]] && common+=(--set dropout=0.1)
  # Both router losses: the load-balancing loss (the tiny preset's) and a z-loss.
  [[ $family == mixtral* || $family == qwen*_moe* ]] && common+=(--set router_z_loss_coef=0.001)
  # A capacity of one balanced share per expert: copies are dropped, the
  # same ones in every layout (the capacity counts the whole batch).
  [[ $family == *-capacity ]] && common+=(--set moe_capacity_factor=1.0)
  # A sigmoid router (DeepSeek-V3's) with its weights scaled by 2.5: the
  # frozen e_score_correction_bias is replicated on every rank, prob_sum
  # sums the normalised scores.
  [[ $family == *-sigmoid* ]] && common+=(--set scoring_func=sigmoid --set routed_scaling_factor=2.5)
  [[ $family == gpt2-uneven ]] && common=(--model "$model" --preset tiny --set n_layer=2
                                          --set batch_size=12 --set seq_len=32 --set vocab_size=257
                                          --set n_embd=70 --set n_head=2 --set n_kv_head=2)
  [[ $family == gpt2-vocab50257 ]] && common=(--model "$model" --preset tiny --set n_layer=1
                                              --set batch_size=6 --set seq_len=16 --set vocab_size=50257
                                              --set n_embd=64 --set n_head=2 --set n_kv_head=2)
  [[ $family == llama-uneven ]] && common=(--model "$model" --preset tiny --set n_layer=2
                                           --set batch_size=12 --set seq_len=32 --set vocab_size=257)
  [[ $family == *-bf16 ]] && common+=(--precision bf16) && tolerance=1e-3
  # --precision fp8: bf16 as above, and every fp8 scale from an amax
  # max-reduced over the ranks holding pieces of its tensor (the batch's
  # rows on dp and ep, the weights and activations on tp/sp, the experts'
  # weights on ep), so each layout quantizes with one rank's scales.
  [[ $family == *-fp8* ]] && common+=(--precision fp8) && tolerance=1e-3
  # Packed rows of 128 bytes: most hold the end of one story and the start
  # of the next (stories are ~500 bytes, separated by blank lines).
  [[ $family == *-packed* ]] && common+=(--set seq_len=128 --set doc_separator=10)
  # Fake quantization: runs agree to fp32 accuracy until a 1-ulp difference
  # moves a value across a rounding step; after that they drift like two
  # thread counts on one rank do (~1e-4 over 20 steps). One thread per rank
  # everywhere keeps the first step's arithmetic identical, so it must agree.
  strict=()
  unset OMP_NUM_THREADS
  qat="weights=int4:block16, activations=int8:asym:ema0.9"
  # Outlier columns: threshold 3, which several columns of a fresh model's
  # normalised activations exceed somewhere in the batch (6 would leave
  # none); the batch axes split each column, whose decision must be the
  # whole batch's. Not under tp: a row-parallel sum differs from one rank's
  # in the last bit, and at step 1 a range one ulp off already moves the
  # loss by ~1e-6 (plain symmetric int8 activations do the same), which the
  # strict check cannot tell from a wrong decision; test/passes/qat.mlir
  # checks the tp reductions instead.
  [[ $family == *-qat-outlier ]] && qat="weights=int4:block16, activations=int8:asym:outlier3"
  [[ $family == *-qat* ]] && common+=(--qat "$qat") &&
    tolerance=5e-4 && strict=(1:1e-6) && export OMP_NUM_THREADS=1
  # A mixture of experts in fp8: a value that an fp8 rounding flips can flip
  # a token's top-2 experts too, so the runs drift further apart (measured
  # 1.3e-3 at dp2 by step 17); the first step, on one thread per rank, must
  # still agree, which a wrong scale anywhere would break — except under tp,
  # whose row-parallel bf16 sums differ from one rank's in the last bit
  # before the next layer rounds them to fp8 (step 1: 1.2e-4 at ep2·tp2).
  [[ $family == mixtral-fp8* ]] && tolerance=2e-3 && strict=(1:1e-6) &&
    export OMP_NUM_THREADS=1
  # Delayed scaling: an amax history per expert for its weights, rows and
  # dY, sharded over ep with the experts; each step's ranges come from the
  # steps before, so a layout recording another rank's amaxes drifts.
  [[ $family == *-fp8-delayed ]] && common+=(--fp8-scaling delayed,history=8,margin=1)
  # LoRA, base frozen: GPT-2 adapts every layer's matmuls and keeps its head
  # frozen (the fused head without a weight gradient), Llama adapts the
  # head too (an adapted head is not fused).
  [[ $family == gpt2-lora* ]] && common+=(--lora "rank=4, alpha=8, targets=qkv,proj,mlp")
  [[ $family == llama-lora* ]] && common+=(--lora "rank=4, alpha=8, targets=qkv,proj,mlp,head")
  # A Mixtral's routed experts adapted too: an A and a B per expert,
  # split with their experts under ep and like their weights under tp.
  [[ $family == mixtral-lora* ]] && common+=(--lora "rank=4, alpha=8, targets=qkv,proj,mlp")
  # 8-bit AdamW: blocks are cut from each rank's piece of a moment, so a
  # layout that splits a tensor into pieces that are not whole blocks
  # quantizes it differently (ZeRO-1 here): same trajectory, not the same
  # rounding.
  [[ $family == *-adam8 ]] && common+=(--optimizer adamw8bit) && tolerance=1e-4 && strict=(1:1e-6)
  # The one-rank reference runs unfused, every layout with the default
  # fusions: the matrix shows fusion and parallelism change nothing.
  "$BIN/llmc" compile "${common[@]}" --fuse none -o "$WORK/$family-1.llmc"
  "$BIN/llmc-run" "$WORK/$family-1.llmc" --steps $STEPS --metrics "$WORK/$family-1.jsonl" --quiet
  head -n $OVERLAP_STEPS "$WORK/$family-1.jsonl" > "$WORK/$family-1-overlap.jsonl"
  for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name ranks flags only <<< "$layout"
    [[ " ${only:-gpt2 llama} " != *" $family "* ]] && continue
    for variant in plain overlap; do
      extra=() delays=() steps=$STEPS reference="$WORK/$family-1.jsonl"
      [[ $variant == overlap ]] && extra=(--overlap-comm) &&
        delays=(--debug-collective-delay-ms 1 --debug-stream-delay-us 50) &&
        steps=$OVERLAP_STEPS reference="$WORK/$family-1-overlap.jsonl"
      artifact="$WORK/$family-$name-$variant.llmc" out="$WORK/$family-$name-$variant.jsonl"
      # shellcheck disable=SC2086
      "$BIN/llmc" compile "${common[@]}" $flags "${extra[@]}" -o "$artifact"
      mpirun -np "$ranks" --bind-to none "$BIN/llmc-run" "$artifact" \
        --steps "$steps" --metrics "$out" --quiet "${delays[@]}"
      check=("${strict[@]}")
      [[ $family == *-fp8* && $flags == *tp=* ]] && check=()
      if result=$(python3 "$HERE/../e2e/Inputs/compare_losses.py" "$reference" "$out" $tolerance "${check[@]}"); then
        echo "PASS $family $name ($variant): $result"
      else
        echo "FAIL $family $name ($variant): $result"
        fail=1
      fi
    done
  done
done
exit $fail
