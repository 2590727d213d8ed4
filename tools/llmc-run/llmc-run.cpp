//===- llmc-run.cpp - run a compiled artifact -----------------------------===//
//
// Plain C++ on top of libllmc_runtime: no MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "runtime/CudaFlags.h"
#include "runtime/support/ArgParser.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

namespace {

const char *kUsageHead = R"(usage: llmc-run <model.llmc> [options]

Trains a compiled artifact (see `llmc compile`).

data (docs/data.md; write shards with `llmc data`)
  --data SPEC        training tokens: bundled (default), a file (.bin uint16/uint32
                     token shard, anything else is text through the byte tokenizer),
                     a directory of .bin shards, or a quoted glob ('d/train_*.bin');
                     memory-mapped, shards in name order
  --val-data SPEC    validation tokens, the same forms
  --val-shards N     hold out the last N shards of --data for validation (default:
                     1 when --data has several shards, else its last 10% of tokens)
LR schedule (defaults come from the artifact)
  --steps N          run length in optimizer steps (the LR schedule spans it)
  --stop-at K        stop after step K (checkpointing); --resume continues to --steps
  --lr X             peak learning rate
  --min-lr X         final learning rate    --warmup N    warmup steps
  --lr-schedule S    cosine | linear | constant (formerly --schedule, still accepted)
  --seed N           initialisation and data-order seed
checkpoints
  --ckpt-dir D       save checkpoints to D (at the end, every --ckpt-every N, on Ctrl-C)
  --ckpt-every N     also save every N steps
  --keep-last K      keep only the newest K checkpoints (the one `latest` names
                     always stays; default: keep all)
  --keep-every M     with --keep-last, also keep every checkpoint of a step divisible by M
  --resume           continue from the latest checkpoint in --ckpt-dir
  --weights F        start from the parameters in F (safetensors, plain or written by
                     `llmc quantize`, dequantized on load; or a Hugging Face model
                     directory with config.json, see docs/huggingface.md); --steps 0
                     only evaluates
  --calibrate N      before training, run N training batches forward with the
                     fake-quantization observers live (--qat ...:ema): PTQ activation
                     ranges, no weight changes; saved with --ckpt-dir
non-finite steps (a step whose loss or gradient norm is inf or NaN is skipped:
                  parameters and optimizer state stay as they were)
  --max-nonfinite-steps N   after N consecutive skipped steps, stop with a checkpoint
                     of the last good state and exit 1 (default 3; 0: never stop)
  --inject-nonfinite STEPS[@RANK]   testing aid: at these steps (e.g. 5 or 5,6,7) rank
                     RANK (default 0) makes its activations NaN
fp16 loss scaling (artifacts compiled with --precision fp16; defaults from the artifact)
  --loss-scale S     initial loss scale (default 65536)
  --loss-scale-growth-interval N   double the scale after N steps without overflow
                     (default 2000)
  --loss-scale-backoff F   multiply the scale by F on an overflow, which skips
                     the step (default 0.5)
  --min-loss-scale S never back off below S (default 1); overflows at S count
                     towards --max-nonfinite-steps, earlier ones do not
reporting
  --metrics F        append one JSON line per step to F
  --log-every N      print every N steps (default 1)
  --eval-every N     validation loss every N steps (always once at the end)
  --eval-batches N   batches per evaluation (default 8)
  --sample N         generate N tokens after training
  --prompt S         prompt for --sample (default "Once upon a time")
  --temperature X    sampling temperature (0 = greedy; default 0.8)
  --top-k K          sample from the K most likely tokens (default 40)
  --dump-grads F     write parameters and gradients of the first batch to F (safetensors)
  --dump-logits F    write the first batch's tokens, targets and logits to F (safetensors)
  --profile          time every instruction; print time per kernel at the end (on a
                     GPU: CUDA events around each launch, and the cuBLASLt GEMMs
                     inside a kernel as a part of its own)
  --trace F          write a Chrome/Perfetto trace of every step to F: one row per
                     rank, one span per pipeline action or microbatch forward/backward
)";

const char *kUsageTail =
    R"(multi-rank (mpirun -np N llmc-run ..., or N processes with RANK, WORLD_SIZE,
            MASTER_ADDR, MASTER_PORT set: see docs/parallelism.md, "Launching")
  --comm-timeout S   abort the job when a collective (or, without mpirun, the
                     start-up) takes longer than S seconds (default 300)
  --debug-collective-delay-ms N   sleep a random 0..N ms before each collective (testing)
  --debug-stream-delay-us N  sleep a random 0..N µs before each instruction on each
                             stream of an --overlap-comm artifact (testing)
  --quiet            print errors only
  -h, --help         this text

Exit status: 0 success, 1 error (also: stopped after --max-nonfinite-steps skipped steps),
130 interrupted (a checkpoint was saved when --ckpt-dir is set).
)";

int usageError(const std::string &message) {
  std::cerr << "llmc-run: error: " << message << "\n(see llmc-run --help)\n";
  return 1;
}

/// --inject-nonfinite STEP[,STEP...][@RANK]
bool parseInjectNonFinite(const std::string &v, llmc::TrainOptions &options) {
  std::string steps = v;
  if (size_t at = v.find('@'); at != std::string::npos) {
    int64_t rank = 0;
    if (!llmc::ArgParser::integer(rank)(v.substr(at + 1)) || rank < 0)
      return false;
    options.injectRank = static_cast<int>(rank);
    steps = v.substr(0, at);
  }
  options.injectNonFinite.clear();
  std::string bad;
  return llmc::ArgParser::integerList(steps, options.injectNonFinite, bad) &&
         std::all_of(options.injectNonFinite.begin(), options.injectNonFinite.end(),
                     [](int64_t step) { return step >= 1; });
}

} // namespace

int main(int argc, char **argv) {
  using llmc::ArgParser;
  llmc::TrainOptions options;
  ArgParser args;
  auto text = ArgParser::text;
  auto integer = ArgParser::integer;
  auto number = ArgParser::number;
  args.option("--data", text(options.data));
  args.option("--val-data", text(options.valData));
  args.option("--val-shards", [&](const std::string &v) {
    return integer(options.valShards)(v) && options.valShards >= 1;
  });
  args.option("--steps", integer(options.steps));
  args.option("--lr", number(options.lr));
  args.option("--stop-at", integer(options.stopAt));
  args.option("--min-lr", number(options.minLr));
  args.option("--warmup", integer(options.warmup));
  args.option("--lr-schedule", text(options.schedule));
  args.option("--schedule", [&](const std::string &v) {
    std::cerr << "llmc-run: note: --schedule is now spelled --lr-schedule\n";
    options.schedule = v;
    return true;
  });
  args.option("--seed", integer(options.seed));
  args.option("--ckpt-dir", text(options.ckptDir));
  args.option("--ckpt-every", integer(options.ckptEvery));
  args.option("--keep-last", integer(options.retention.keepLast));
  args.option("--keep-every", integer(options.retention.keepEvery));
  args.option("--weights", text(options.weights));
  args.option("--calibrate", integer(options.calibrateBatches));
  args.option("--metrics", text(options.metrics));
  args.option("--log-every", integer(options.logEvery));
  args.option("--eval-every", integer(options.evalEvery));
  args.option("--eval-batches", integer(options.evalBatches));
  args.option("--sample", integer(options.sampleTokens));
  args.option("--prompt", text(options.prompt));
  args.option("--temperature", number(options.temperature));
  args.option("--top-k", integer(options.topK));
  args.option("--dump-grads", text(options.dumpGrads));
  args.option("--dump-logits", text(options.dumpLogits));
  args.option("--loss-scale", number(options.lossScale));
  args.option("--loss-scale-growth-interval", integer(options.lossScaleGrowthInterval));
  args.option("--loss-scale-backoff", number(options.lossScaleBackoff));
  args.option("--min-loss-scale", number(options.minLossScale));
  args.option("--trace", text(options.trace));
  llmc::addCudaFlags(args, options.cuda);
  args.option("--comm-timeout", number(options.commTimeout));
  args.option("--debug-collective-delay-ms", [&](const std::string &v) {
    int64_t n = 0;
    if (!integer(n)(v) || n < 0)
      return false;
    options.debugCollectiveDelayMs = static_cast<int>(n);
    return true;
  });
  args.option("--debug-stream-delay-us", [&](const std::string &v) {
    int64_t n = 0;
    if (!integer(n)(v) || n < 0 || n > 1000000)
      return false;
    options.debugStreamDelayMicros = static_cast<int>(n);
    return true;
  });
  args.option("--max-nonfinite-steps", [&](const std::string &v) {
    return integer(options.maxNonFiniteSteps)(v) && options.maxNonFiniteSteps >= 0;
  });
  args.option("--inject-nonfinite",
              [&](const std::string &v) { return parseInjectNonFinite(v, options); });
  args.flag("--resume", options.resume);
  args.flag("--quiet", options.quiet);
  args.flag("--profile", options.profile);
  if (std::string error = args.parse(argc, argv, "artifact", options.artifact); !error.empty())
    return usageError(error);
  if (args.helpRequested()) {
    std::cout << kUsageHead << "GPUs\n" << llmc::kCudaFlagsHelp << kUsageTail;
    return 0;
  }
  if (options.artifact.empty())
    return usageError("no artifact given");
  if (options.logEvery < 1 || options.evalBatches < 1)
    return usageError("--log-every and --eval-batches must be >= 1");
  if (options.steps < -1 || options.ckptEvery < 0 || options.sampleTokens < 0)
    return usageError("--steps, --ckpt-every and --sample must be >= 0");
  if (options.retention.keepLast < 0 || options.retention.keepEvery < 0)
    return usageError("--keep-last and --keep-every must be >= 0");
  if (options.retention.keepEvery > 0 && options.retention.keepLast == 0)
    return usageError("--keep-every needs --keep-last (without it every checkpoint is kept)");
  return llmc::runTraining(options);
}
