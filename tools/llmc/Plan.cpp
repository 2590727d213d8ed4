//===- Plan.cpp - `llmc plan`: rank the layouts of a model on a cluster ---===//

#include "tools/llmc/Plan.h"

#include "compiler/plan/Planner.h"
#include "passes/Utils.h"
#include "tools/llmc/Quantize.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace llvm;

namespace llmc {

cl::SubCommand planCommand("plan", "Rank parallel layouts of a model for a cluster by predicted "
                                   "step time (docs/planner.md)");

cl::OptionCategory &planCategory() {
  static cl::OptionCategory category("llmc plan options");
  return category;
}

namespace {

template <typename T> using Opt = cl::opt<T>;
#define PLAN_OPT cl::sub(planCommand), cl::cat(planCategory())

Opt<std::string> model("model", cl::desc("Built-in model family (gpt2, llama)"), cl::Required,
                       PLAN_OPT);
Opt<std::string> preset("preset", cl::desc("Model preset"), cl::init("124M"), PLAN_OPT);
cl::list<std::string> sets("set", cl::desc("Override a model config key (key=value)"), PLAN_OPT);
Opt<std::string> configJson("config", cl::desc("Hugging Face style config.json"), PLAN_OPT);
Opt<std::string> cluster("cluster", cl::desc("Preset and GPU count: dgx-a100:N | dgx-h100:N"),
                         PLAN_OPT);
Opt<int64_t> gpus("gpus", cl::desc("Number of devices (with or instead of --cluster)"), PLAN_OPT);
Opt<std::string> gpuMemory("gpu-memory", cl::desc("Memory per device (80GiB)"), PLAN_OPT);
Opt<double> gpuTflops("gpu-tflops", cl::desc("Dense peak per device at the training precision, "
                                             "TFLOP/s"),
                      PLAN_OPT);
Opt<double> memoryBw("memory-bw", cl::desc("Device memory bandwidth, GB/s"), PLAN_OPT);
Opt<int64_t> nodeSize("node-size", cl::desc("Devices per node"), PLAN_OPT);
Opt<double> intraBw("intra-bw", cl::desc("Bandwidth one device sends inside a node, GB/s"),
                    PLAN_OPT);
Opt<double> interBw("inter-bw", cl::desc("Bandwidth one device sends to other nodes, GB/s"),
                    PLAN_OPT);
Opt<double> latency("latency", cl::desc("Per-message latency inside a node, microseconds"),
                    PLAN_OPT);
Opt<double> interLatency("inter-latency",
                         cl::desc("Per-message latency between nodes, microseconds (default: "
                                  "twice --latency)"),
                         PLAN_OPT);
Opt<double> kernelOverhead("kernel-overhead", cl::desc("Fixed cost of each kernel, microseconds"),
                           PLAN_OPT);
Opt<bool> noOverlap("no-overlap",
                    cl::desc("Communication does not run beside compute (the CPU executor): "
                             "price every collective as blocking"),
                    PLAN_OPT);
Opt<double> fp32Matmul("fp32-matmul-scale",
                       cl::desc("fp32 matmul rate as a fraction of the peak (0.5: TF32 on "
                                "tensor cores; 1 on a CPU)"),
                       cl::init(0.5), PLAN_OPT);
Opt<int64_t> globalBatch("global-batch", cl::desc("Sequences per optimizer step"), cl::Required,
                         PLAN_OPT);
Opt<int64_t> seq("seq", cl::desc("Sequence length (default: the model's)"), cl::init(0),
                 PLAN_OPT);
Opt<std::string> precision("precision", cl::desc("fp32 | bf16 | fp16"), cl::init("bf16"),
                           PLAN_OPT);
cl::list<int64_t> microbatchSizes("microbatch-sizes", cl::desc("Microbatch sizes to try (1,2,4,8)"),
                                  cl::CommaSeparated, PLAN_OPT);
cl::list<int64_t> onlyTp("tp", cl::desc("Only these tensor-parallel sizes"), cl::CommaSeparated,
                         PLAN_OPT);
cl::list<int64_t> onlyPp("pp", cl::desc("Only these pipeline sizes"), cl::CommaSeparated,
                         PLAN_OPT);
cl::list<int64_t> onlyZero("zero", cl::desc("Only these ZeRO stages"), cl::CommaSeparated,
                           PLAN_OPT);
cl::list<std::string> onlyRecompute("recompute",
                                    cl::desc("Only these: none, selective, full, budget"),
                                    cl::CommaSeparated, PLAN_OPT);
cl::list<std::string> onlySchedule("pipeline-schedule",
                                   cl::desc("Only these: 1f1b, interleaved, zero-bubble"),
                                   cl::CommaSeparated, PLAN_OPT);
Opt<std::string> onlySp("sp", cl::desc("Sequence parallelism: on, off or both"), cl::init("both"),
                        PLAN_OPT);
Opt<int64_t> top("top", cl::desc("Rows to print"), cl::init(10), PLAN_OPT);
Opt<bool> bottom("bottom", cl::desc("Also print the slowest --top layouts that fit"), PLAN_OPT);
Opt<bool> explain("explain", cl::desc("Say why each rejected family was rejected"), PLAN_OPT);
Opt<int64_t> emitFlags("emit-flags", cl::desc("Print the llmc compile flags of row N (1 = best) "
                                              "and nothing else"),
                       cl::init(0), PLAN_OPT);
Opt<int64_t> verify("verify", cl::desc("Compile the best N layouts at reduced depth to confirm the "
                                       "compiler accepts them"),
                    cl::init(3), PLAN_OPT);
Opt<int64_t> compareCompiled("compare-compiled",
                             cl::desc("Compile the best N layouts in full and print predicted vs "
                                      "planned memory per stage (small models)"),
                             cl::init(0), PLAN_OPT);

int fail(const Twine &message) {
  WithColor::error(errs(), "llmc plan") << message << "\n";
  return 1;
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

std::string seconds(double s) {
  if (s < 1e-3)
    return fixed(s * 1e6, 1) + " us";
  if (s < 1)
    return fixed(s * 1e3, 2) + " ms";
  return fixed(s, 2) + " s";
}

/// 3.34e18 → "3340.4 PFLOP", 1.2e9 → "1.20 GFLOP".
std::string flops(double f) {
  static const std::pair<double, const char *> units[] = {
      {1e15, "PFLOP"}, {1e12, "TFLOP"}, {1e9, "GFLOP"}, {1e6, "MFLOP"}};
  for (auto &[scale, unit] : units)
    if (f >= scale)
      return fixed(f / scale, f / scale < 10 ? 2 : 1) + " " + unit;
  return fixed(f, 0) + " FLOP";
}

bool buildCluster(plan::Cluster &c, std::string &error) {
  if (!cluster.empty() && !plan::parseCluster(cluster, c, error))
    return false;
  if (cluster.empty())
    c.name = "custom";
  if (gpus.getNumOccurrences())
    c.devices = gpus;
  if (gpuMemory.getNumOccurrences() && !plan::parseBytes(gpuMemory, c.memoryBytes)) {
    error = "--gpu-memory '" + gpuMemory + "' is not a size (e.g. 80GiB)";
    return false;
  }
  if (gpuTflops.getNumOccurrences())
    c.peakFlops = gpuTflops * 1e12;
  if (memoryBw.getNumOccurrences())
    c.memoryBandwidth = memoryBw * 1e9;
  if (nodeSize.getNumOccurrences())
    c.nodeSize = nodeSize;
  if (intraBw.getNumOccurrences())
    c.intraBandwidth = intraBw * 1e9;
  if (interBw.getNumOccurrences())
    c.interBandwidth = interBw * 1e9;
  if (latency.getNumOccurrences()) {
    c.intraLatency = latency * 1e-6;
    c.interLatency = 2 * latency * 1e-6;
  }
  if (interLatency.getNumOccurrences())
    c.interLatency = interLatency * 1e-6;
  if (kernelOverhead.getNumOccurrences())
    c.kernelOverhead = kernelOverhead * 1e-6;
  if (noOverlap)
    c.overlap = false;
  error = plan::validate(c);
  return error.empty();
}

void printRow(raw_ostream &os, size_t rank, const plan::Prediction &p, const plan::Cluster &c) {
  os << format("%4zu  %-52s %10s %10s %12s %8s %6s %7s %6s\n", rank,
               p.layout.label().c_str(), formatSize(static_cast<int64_t>(p.memoryBytes)).c_str(),
               seconds(p.stepSeconds).c_str(),
               withCommas(static_cast<int64_t>(p.tokensPerSecond)).c_str(),
               fixed(p.tflopsPerDevice, p.tflopsPerDevice < 10 ? 3 : 1).c_str(),
               (fixed(100 * p.mfu, 1) + "%").c_str(), (fixed(100 * p.bubble, 1) + "%").c_str(),
               (fixed(100 * p.commShare, 1) + "%").c_str());
}

} // namespace

int runPlan() {
  plan::Request request;
  request.model.family = model;
  request.model.preset = preset;
  request.model.configJson = configJson;
  request.model.overrides.assign(sets.begin(), sets.end());
  std::string error;
  if (!buildCluster(request.cluster, error))
    return fail(error);
  request.globalBatch = globalBatch;
  request.seqLen = seq;
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    return fail("--precision must be fp32, bf16 or fp16, not '" + precision + "'");
  request.precision = precision;
  request.fp32MatmulScale = fp32Matmul;
  if (!microbatchSizes.empty())
    request.microbatchSizes.assign(microbatchSizes.begin(), microbatchSizes.end());
  for (int64_t size : request.microbatchSizes)
    if (size <= 0)
      return fail("--microbatch-sizes: " + Twine(size) + " is not a positive size");
  request.onlyTp.assign(onlyTp.begin(), onlyTp.end());
  request.onlyPp.assign(onlyPp.begin(), onlyPp.end());
  request.onlyZero.assign(onlyZero.begin(), onlyZero.end());
  request.onlyRecompute.assign(onlyRecompute.begin(), onlyRecompute.end());
  request.onlySchedule.assign(onlySchedule.begin(), onlySchedule.end());
  for (const std::string &mode : request.onlyRecompute)
    if (mode != "none" && mode != "selective" && mode != "full" && mode != "budget")
      return fail("--recompute: '" + mode + "' is not none, selective, full or budget");
  for (const std::string &kind : request.onlySchedule)
    if (kind != "1f1b" && kind != "interleaved" && kind != "zero-bubble")
      return fail("--pipeline-schedule: '" + kind + "' is not 1f1b, interleaved or zero-bubble");
  if (onlySp != "both" && onlySp != "on" && onlySp != "off")
    return fail("--sp must be on, off or both, not '" + onlySp + "'");
  request.onlySp = onlySp == "both" ? -1 : onlySp == "on";
  plan::Result result;
  if (!plan::runPlan(request, std::max<int64_t>(verify, emitFlags), result, error))
    return fail(error);

  raw_ostream &os = outs();
  if (emitFlags > 0) {
    if (emitFlags > static_cast<int64_t>(result.ranked.size()))
      return fail("--emit-flags " + Twine(emitFlags) + ": only " + Twine(result.ranked.size()) +
                  " layouts fit");
    os << "llmc compile " << result.ranked[emitFlags - 1].layout.compileFlags(request)
       << " -o model.llmc\n";
    return 0;
  }
  const plan::Cluster &c = request.cluster;
  int64_t nodes = (c.devices + c.nodeSize - 1) / c.nodeSize;
  os << "model:    " << model << " " << preset << ", " << fixed(result.parameters / 1e9, 2)
     << "B parameters, " << result.layers << " layers, sequence " << result.seqLen << "\n"
     << "cluster:  " << c.devices << " devices (" << c.name << ", " << nodes << " node"
     << (nodes == 1 ? "" : "s") << " of " << c.nodeSize << "), "
     << fixed(c.peakFlops / 1e12, c.peakFlops < 1e13 ? 3 : 0) << " TFLOP/s and "
     << formatSize(static_cast<int64_t>(c.memoryBytes)) << " each\n"
     << "batch:    " << request.globalBatch << " sequences × " << result.seqLen
     << " tokens per step, " << request.precision << "; model FLOPs per step "
     << flops(result.modelFlopsPerStep) << "\n"
     << "searched: " << result.layoutsSearched << " layouts, " << result.ranked.size()
     << " fit; " << result.probesCompiled << " probe compiles (" << fixed(result.probeSeconds, 1)
     << " s), " << fixed(result.searchSeconds, 1) << " s in all\n\n";
  if (result.ranked.empty()) {
    os << "no layout fits.\n";
  } else {
    os << format("%4s  %-52s %10s %10s %12s %8s %6s %7s %6s\n", "#", "layout", "memory",
                 "step", "tokens/s", "TFLOP/s", "MFU", "bubble", "comm");
    size_t n = std::min<size_t>(top, result.ranked.size());
    for (size_t i = 0; i < n; ++i)
      printRow(os, i + 1, result.ranked[i], c);
    if (bottom && result.ranked.size() > n) {
      os << "   ...\n";
      for (size_t i = std::max(n, result.ranked.size() - n); i < result.ranked.size(); ++i)
        printRow(os, i + 1, result.ranked[i], c);
    }
  }
  if (compareCompiled > 0) {
    os << "\npredicted vs compiled arena per stage:\n";
    for (int64_t i = 0; i < compareCompiled && i < static_cast<int64_t>(result.ranked.size());
         ++i) {
      const plan::Layout &l = result.ranked[i].layout;
      std::vector<double> predicted, compiled;
      std::string why;
      if (l.recompute == "budget") {
        os << "  " << l.label() << ": (budget layouts are planned by the compiler)\n";
        continue;
      }
      if (!plan::predictedStageBytes(request, l, predicted, why) ||
          !plan::compiledStageBytes(request, l, compiled, why)) {
        os << "  " << l.label() << ": " << why << "\n";
        continue;
      }
      os << "  " << l.label() << ":";
      for (size_t s = 0; s < predicted.size() && s < compiled.size(); ++s)
        os << " " << formatSize(static_cast<int64_t>(predicted[s])) << " vs "
           << formatSize(static_cast<int64_t>(compiled[s])) << " ("
           << fixed(100 * (predicted[s] / compiled[s] - 1), 1) << "%)";
      os << "\n";
    }
  }
  if (explain) {
    os << "\nrejected:\n";
    for (const plan::Rejected &r : result.rejected)
      os << "  " << r.family << ": " << r.reason << "\n";
  }
  return 0;
}

} // namespace llmc
