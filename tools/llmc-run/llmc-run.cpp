//===- llmc-run.cpp - run a compiled artifact -----------------------------===//
//
// Plain C++ on top of libllmc_runtime: no MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>

namespace {

const char *kUsage = R"(usage: llmc-run <model.llmc> [options]

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
  --tf32             cuda artifacts: fp32 matrix products on TF32 tensor cores
                     (faster; ~1e-3 relative error instead of fp32's)
  --attention I      cuda artifacts: what runs attention: auto (default: cuDNN's fused
                     flash attention where it is loaded and takes the op, else
                     cuda-cores), cudnn, tensor-cores (llmc's, bf16/f16 at head dim 64
                     or 128) or cuda-cores (llmc's); a start-up line says what each
                     attention op got (docs/cuda.md)
  --device-comm C    cuda artifacts: how ranks' collectives and transfers travel:
                     auto (default: NCCL, or the host transport through pinned
                     memory where ranks share a GPU, which NCCL refuses), nccl,
                     or host (docs/cuda.md)
  --no-gemm-timing   cuda artifacts: take cuBLASLt's heuristic algorithm for each
                     GEMM instead of timing its top candidates when the GEMM binds
                     (also LLMC_GEMM_TIMING=0)
  --trace F          write a Chrome/Perfetto trace of every step to F: one row per
                     rank, one span per pipeline action or microbatch forward/backward
multi-rank (mpirun -np N llmc-run ..., or N processes with RANK, WORLD_SIZE,
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

} // namespace

int main(int argc, char **argv) {
  llmc::TrainOptions options;
  using Setter = std::function<bool(const std::string &)>;
  auto integer = [](int64_t &out) -> Setter {
    return [&out](const std::string &v) {
      char *end = nullptr;
      long long parsed = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end) return false;
      out = parsed;
      return true;
    };
  };
  auto number = [](double &out) -> Setter {
    return [&out](const std::string &v) {
      char *end = nullptr;
      double parsed = std::strtod(v.c_str(), &end);
      if (v.empty() || *end) return false;
      out = parsed;
      return true;
    };
  };
  auto text = [](std::string &out) -> Setter {
    return [&out](const std::string &v) { out = v; return true; };
  };
  std::map<std::string, Setter> valued = {
      {"--data", text(options.data)},
      {"--val-data", text(options.valData)},
      {"--val-shards",
       [&](const std::string &v) {
         return integer(options.valShards)(v) && options.valShards >= 1;
       }},
      {"--steps", integer(options.steps)},
      {"--lr", number(options.lr)},
      {"--stop-at", integer(options.stopAt)},
      {"--min-lr", number(options.minLr)},
      {"--warmup", integer(options.warmup)},
      {"--lr-schedule", text(options.schedule)},
      {"--schedule",
       [&](const std::string &v) {
         std::cerr << "llmc-run: note: --schedule is now spelled --lr-schedule\n";
         options.schedule = v;
         return true;
       }},
      {"--seed", integer(options.seed)},
      {"--ckpt-dir", text(options.ckptDir)},
      {"--ckpt-every", integer(options.ckptEvery)},
      {"--keep-last", integer(options.retention.keepLast)},
      {"--keep-every", integer(options.retention.keepEvery)},
      {"--weights", text(options.weights)},
      {"--calibrate", integer(options.calibrateBatches)},
      {"--metrics", text(options.metrics)},
      {"--log-every", integer(options.logEvery)},
      {"--eval-every", integer(options.evalEvery)},
      {"--eval-batches", integer(options.evalBatches)},
      {"--sample", integer(options.sampleTokens)},
      {"--prompt", text(options.prompt)},
      {"--temperature", number(options.temperature)},
      {"--top-k", integer(options.topK)},
      {"--dump-grads", text(options.dumpGrads)},
      {"--dump-logits", text(options.dumpLogits)},
      {"--loss-scale", number(options.lossScale)},
      {"--loss-scale-growth-interval", integer(options.lossScaleGrowthInterval)},
      {"--loss-scale-backoff", number(options.lossScaleBackoff)},
      {"--min-loss-scale", number(options.minLossScale)},
      {"--trace", text(options.trace)},
      {"--attention",
       [&](const std::string &v) { return llmc::parseAttentionImpl(v, &options.attention); }},
      {"--device-comm",
       [&](const std::string &v) { return llmc::parseDeviceComm(v, &options.deviceComm); }},
      {"--comm-timeout", number(options.commTimeout)},
      {"--debug-collective-delay-ms",
       [&](const std::string &v) {
         int64_t n = 0;
         if (!integer(n)(v) || n < 0)
           return false;
         options.debugCollectiveDelayMs = static_cast<int>(n);
         return true;
       }},
      {"--debug-stream-delay-us",
       [&](const std::string &v) {
         int64_t n = 0;
         if (!integer(n)(v) || n < 0 || n > 1000000)
           return false;
         options.debugStreamDelayMicros = static_cast<int>(n);
         return true;
       }},
      {"--max-nonfinite-steps",
       [&](const std::string &v) {
         return integer(options.maxNonFiniteSteps)(v) && options.maxNonFiniteSteps >= 0;
       }},
      {"--inject-nonfinite",
       [&](const std::string &v) {
         // STEP[,STEP...][@RANK]
         std::string steps = v;
         if (size_t at = v.find('@'); at != std::string::npos) {
           int64_t r = 0;
           if (!integer(r)(v.substr(at + 1)) || r < 0)
             return false;
           options.injectRank = static_cast<int>(r);
           steps = v.substr(0, at);
         }
         options.injectNonFinite.clear();
         for (size_t begin = 0; begin <= steps.size();) {
           size_t end = std::min(steps.find(',', begin), steps.size());
           int64_t step = 0;
           if (!integer(step)(steps.substr(begin, end - begin)) || step < 1)
             return false;
           options.injectNonFinite.push_back(step);
           begin = end + 1;
         }
         return true;
       }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--resume") { options.resume = true; continue; }
    if (arg == "--quiet") { options.quiet = true; continue; }
    if (arg == "--profile") { options.profile = true; continue; }
    if (arg == "--tf32") { options.tf32 = true; continue; }
    if (arg == "--attention-tensor-cores")
      return usageError("--attention-tensor-cores is now --attention tensor-cores");
    if (arg == "--no-gemm-timing") { options.gemmTiming = false; continue; }
    std::string value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inlineValue = true;
    }
    auto it = valued.find(arg);
    if (it != valued.end()) {
      if (!inlineValue) {
        if (i + 1 >= argc)
          return usageError("option " + arg + " needs a value");
        value = argv[++i];
      }
      if (!it->second(value))
        return usageError("bad value '" + value + "' for " + arg +
                          (arg == "--attention"
                               ? std::string(" (expected ") + llmc::attentionImplChoices() + ")"
                           : arg == "--device-comm" ? std::string(" (expected auto, nccl or host)")
                                                    : std::string()));
      continue;
    }
    if (arg.rfind("-", 0) == 0)
      return usageError("unknown option '" + arg + "'");
    if (!options.artifact.empty())
      return usageError("more than one artifact given ('" + options.artifact + "', '" + arg + "')");
    options.artifact = arg;
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
