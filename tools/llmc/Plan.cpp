//===- Plan.cpp - `llmc plan`: rank the layouts of a model on a cluster ---===//

#include "tools/llmc/Plan.h"

#include "compiler/plan/Calibration.h"
#include "compiler/plan/Planner.h"
#include "passes/lib/SizeFormat.h"
#include "tools/llmc/Quantize.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
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

Opt<std::string> model(
    "model",
    cl::desc("Built-in model family (gpt2, llama, qwen2, qwen3, mistral, gemma2, gemma3_text, "
             "mixtral, qwen2_moe, qwen3_moe)"),
    cl::Required, PLAN_OPT);
Opt<std::string> preset("preset", cl::desc("Model preset"), cl::init("124M"), PLAN_OPT);
cl::list<std::string> sets("set", cl::desc("Override a model config key (key=value)"), PLAN_OPT);
Opt<std::string> configJson("config", cl::desc("Hugging Face style config.json"), PLAN_OPT);
Opt<std::string> cluster("cluster",
                         cl::desc("Preset and GPU count: dgx-a100:N | dgx-h100:N | dgx-h200:N"),
                         PLAN_OPT);
Opt<std::string> calibration("calibration",
                             cl::desc("The device's measured rates (JSON written by "
                                      "llmc-bench-calibrate, gpu-check's bench-calibrate step)"),
                             PLAN_OPT);
Opt<std::string> attentionKernel(
    "attention-kernel",
    cl::desc("flash (the measured flash-attention rate, what llmc runs) | unfused (the scores "
             "materialized, as systems without flash attention ran it: to compare with their "
             "published runs)"),
    cl::init("flash"), PLAN_OPT);
Opt<std::string> target("target",
                        cl::desc("Backend the layouts compile for: cuda (GPUs, the default) | "
                                 "cpu (CPU ranks, described by hand)"),
                        cl::init("cuda"), PLAN_OPT);
Opt<int64_t> gpus("gpus", cl::desc("Number of devices (with or instead of --cluster)"), PLAN_OPT);
Opt<std::string> gpuMemory("gpu-memory", cl::desc("Memory per device (80GiB)"), PLAN_OPT);
Opt<double> gpuTflops("gpu-tflops", cl::desc("Dense peak per device at the training precision, "
                                             "TFLOP/s"),
                      PLAN_OPT);
Opt<double> memoryBw("memory-bw", cl::desc("Device memory bandwidth memory-bound kernels achieve, "
                                          "GB/s"),
                     PLAN_OPT);
Opt<double> gemmTflops("gemm-tflops",
                       cl::desc("Measured large-GEMM rate per device, TFLOP/s (GEMMs run at "
                                "most this fast)"),
                       PLAN_OPT);
Opt<double> attentionTflops("attention-tflops",
                            cl::desc("Measured attention rate (forward and backward) per device, "
                                     "TFLOP/s, at every head dim and sequence"),
                            PLAN_OPT);
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
Opt<double> hostBw("host-bw",
                   cl::desc("Bandwidth one device copies to or from host memory (its PCIe "
                            "link), each direction, GB/s"),
                   PLAN_OPT);
Opt<double> hostMemoryBw("host-memory-bw",
                         cl::desc("A node's host memory bandwidth, shared by its devices' "
                                  "offloaded optimizer updates, GB/s"),
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
cl::list<int64_t> onlyEp("ep",
                         cl::desc("Only these expert-parallel sizes (a mixture of experts; "
                                  "default: every divisor of its experts that divides the "
                                  "data-parallel ranks)"),
                         cl::CommaSeparated, PLAN_OPT);
cl::list<int64_t> onlyZero("zero", cl::desc("Only these ZeRO stages"), cl::CommaSeparated,
                           PLAN_OPT);
cl::list<std::string> onlyRecompute("recompute",
                                    cl::desc("Only these: none, selective, full, budget"),
                                    cl::CommaSeparated, PLAN_OPT);
cl::list<std::string> onlySchedule("pipeline-schedule",
                                   cl::desc("Only these: 1f1b, interleaved, zero-bubble"),
                                   cl::CommaSeparated, PLAN_OPT);
cl::list<int64_t> onlyVirtualStages(
    "virtual-stages",
    cl::desc("Only these chunk counts per stage for the interleaved schedule (default 2,4; any "
             "that divides a stage's layers)"),
    cl::CommaSeparated, PLAN_OPT);
cl::list<std::string> offload("offload",
                              cl::desc("Offloading choices: none, optimizer (ZeRO-Offload), "
                                       "activations, optimizer+activations (default: offload "
                                       "a layout only where it does not fit without)"),
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

/// The cluster: a preset, then a calibration of its device, then every
/// number given by hand.
bool buildCluster(plan::Cluster &c, std::string &error) {
  if (!cluster.empty() && !plan::parseCluster(cluster, c, error))
    return false;
  if (cluster.empty())
    c.name = "custom";
  if (!calibration.empty() && !plan::loadCalibration(calibration, c, error))
    return false;
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
  if (gemmTflops.getNumOccurrences()) {
    if (!(gemmTflops > 0)) {
      error = "--gemm-tflops must be a positive rate";
      return false;
    }
    c.efficiency.gemmFlops = gemmTflops * 1e12;
  }
  if (attentionTflops.getNumOccurrences()) {
    if (!(attentionTflops > 0)) {
      error = "--attention-tflops must be a positive rate";
      return false;
    }
    c.efficiency.attention = {{1, 1, attentionTflops * 1e12}};
  }
  if (attentionKernel != "flash" && attentionKernel != "unfused") {
    error = "--attention-kernel must be flash or unfused, not '" + attentionKernel + "'";
    return false;
  }
  c.efficiency.unfusedAttention = attentionKernel == "unfused";
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
  if (hostBw.getNumOccurrences())
    c.hostLinkBandwidth = hostBw * 1e9;
  if (hostMemoryBw.getNumOccurrences())
    c.hostMemoryBandwidth = hostMemoryBw * 1e9;
  if (noOverlap)
    c.overlap = false;
  error = plan::validate(c);
  return error.empty();
}

/// What the request's flags say beyond the cluster; "" when valid.
std::string requestError() {
  if (seq.getNumOccurrences() && seq <= 0)
    return "--seq must be a positive number of tokens, not " + std::to_string(seq);
  if (top <= 0)
    return "--top must be a positive number of rows, not " + std::to_string(top);
  if (emitFlags < 0)
    return "--emit-flags takes a row number (1 = the best), not " + std::to_string(emitFlags);
  if (verify < 0)
    return "--verify must be 0 or more layouts, not " + std::to_string(verify);
  if (compareCompiled < 0)
    return "--compare-compiled must be 0 or more layouts, not " + std::to_string(compareCompiled);
  if (onlySp != "both" && onlySp != "on" && onlySp != "off")
    return "--sp must be on, off or both, not '" + onlySp + "'";
  return "";
}

/// "H100 SXM5 80GB: GEMMs at most 792 TFLOP/s (tiles in waves over 132
/// SMs), attention 281–534 TFLOP/s, memory 3015.0 GB/s, 2.0 us per kernel
/// (source)".
std::string describeDevice(const plan::Cluster &c) {
  const plan::Efficiency &e = c.efficiency;
  double gemm = e.gemmFlops > 0 ? std::min(e.gemmFlops, c.peakFlops) : c.peakFlops;
  int digits = c.peakFlops < 1e13 ? 3 : 0;
  std::string text = (c.deviceName.empty() ? std::string() : c.deviceName + ": ") +
                     "GEMMs at most " + fixed(gemm / 1e12, digits) + " TFLOP/s";
  if (e.sms > 0)
    text += " (tiles in waves over " + std::to_string(e.sms) + " SMs)";
  double low = c.peakFlops, high = 0;
  for (const plan::AttentionRate &r : e.attention)
    low = std::min(low, r.flopsPerSecond), high = std::max(high, r.flopsPerSecond);
  if (e.attention.empty())
    low = high = c.peakFlops;
  high = std::min(high, c.peakFlops);
  if (e.unfusedAttention)
    text += ", attention unfused (its scores through memory)";
  else
    text += ", attention " + fixed(low / 1e12, digits) +
            (high > low ? "–" + fixed(high / 1e12, digits) : std::string()) + " TFLOP/s";
  text += ", memory " + fixed(c.memoryBandwidth / 1e9, 1) + " GB/s, " +
          fixed(c.kernelOverhead * 1e6, 1) + " us per kernel";
  if (!e.source.empty())
    text += " (" + e.source + ")";
  return text;
}

void printRow(raw_ostream &os, size_t rank, const plan::Prediction &p, const plan::Cluster &c) {
  os << format("%4zu  %-52s %10s %10s %12s %8s %6s %7s %6s\n", rank,
               p.layout.label().c_str(), formatSize(static_cast<int64_t>(p.memoryBytes)).c_str(),
               seconds(p.stepSeconds).c_str(),
               withCommas(static_cast<int64_t>(p.tokensPerSecond)).c_str(),
               fixed(p.tflopsPerDevice, p.tflopsPerDevice < 10 ? 3 : 1).c_str(),
               (fixed(100 * p.mfu, 1) + "%").c_str(), (fixed(100 * p.bubble, 1) + "%").c_str(),
               (fixed(100 * p.commShare, 1) + "%").c_str());
  if (p.layout.offload || p.layout.offloadActivations)
    os << format("%6s  host %s, +%s offloaded%s\n", "",
                 formatSize(static_cast<int64_t>(p.hostBytes)).c_str(),
                 seconds(p.offloadSeconds).c_str(),
                 p.layout.offload && p.layout.offloadActivations
                     ? (" (activations +" + seconds(p.activationOffloadSeconds) + ")").c_str()
                     : "");
}

/// The search's request from the command line; false with `error`.
bool buildRequest(plan::Request &request, std::string &error) {
  request.model.family = model;
  request.model.preset = preset;
  request.model.configJson = configJson;
  request.model.overrides.assign(sets.begin(), sets.end());
  if (std::string bad = requestError(); !bad.empty()) {
    error = bad;
    return false;
  }
  if (!buildCluster(request.cluster, error))
    return false;
  request.globalBatch = globalBatch;
  request.seqLen = seq;
  request.precision = precision;
  request.target = target;
  request.fp32MatmulScale = fp32Matmul;
  if (!microbatchSizes.empty())
    request.microbatchSizes.assign(microbatchSizes.begin(), microbatchSizes.end());
  request.onlyTp.assign(onlyTp.begin(), onlyTp.end());
  request.onlyPp.assign(onlyPp.begin(), onlyPp.end());
  request.onlyZero.assign(onlyZero.begin(), onlyZero.end());
  request.onlyEp.assign(onlyEp.begin(), onlyEp.end());
  request.onlyRecompute.assign(onlyRecompute.begin(), onlyRecompute.end());
  request.onlySchedule.assign(onlySchedule.begin(), onlySchedule.end());
  request.onlyVirtualStages.assign(onlyVirtualStages.begin(), onlyVirtualStages.end());
  request.onlySp = onlySp == "both" ? -1 : onlySp == "on";
  request.offload.assign(offload.begin(), offload.end());
  request.shownRows = std::max<int64_t>({top, emitFlags, verify, compareCompiled});
  request.shownBottom = bottom;
  error = plan::validate(request);
  return error.empty();
}

/// What was searched: the model, the cluster, the host's rates where a
/// shown row is offloaded, the batch, how MFU is counted, the search's
/// size and time.
void printHeader(raw_ostream &os, const plan::Request &request, const plan::Result &result) {
  const plan::Cluster &c = request.cluster;
  int64_t nodes = (c.devices + c.nodeSize - 1) / c.nodeSize;
  os << "model:    " << model << " " << preset << ", " << fixed(result.parameters / 1e9, 2)
     << "B parameters, " << result.layers << " layers, sequence " << result.seqLen << "\n"
     << "cluster:  " << c.devices << " devices (" << c.name << ", " << nodes << " node"
     << (nodes == 1 ? "" : "s") << " of " << c.nodeSize << "), "
     << fixed(c.peakFlops / 1e12, c.peakFlops < 1e13 ? 3 : 0) << " TFLOP/s and "
     << formatSize(static_cast<int64_t>(c.memoryBytes)) << " each\n"
     << "device:   " << describeDevice(c) << "\n";
  size_t shown = bottom ? result.ranked.size() : std::min<size_t>(top, result.ranked.size());
  if (std::any_of(result.ranked.begin(), result.ranked.begin() + shown,
                  [](const plan::Prediction &p) { return p.layout.offload; }))
    os << "offload:  rows marked off keep the optimizer state in host memory: gradients down "
          "and parameters up at "
       << fixed(c.hostLinkBandwidth / 1e9, 1) << " GB/s per device each way, the update at "
       << fixed(c.hostMemoryBandwidth / 1e9, 1)
       << " GB/s of host memory per node, not overlapped (docs/planner.md)\n";
  if (std::any_of(result.ranked.begin(), result.ranked.begin() + shown,
                  [](const plan::Prediction &p) { return p.layout.offloadActivations; }))
    os << "offload:  rows marked act-off keep what each layer saves for its backward in host "
          "memory: down after its forward, up before its backward, every microbatch, at "
       << fixed(c.hostLinkBandwidth / 1e9, 1)
       << " GB/s per device each way, in the compute stream's order (not overlapped)\n";
  os
     << "batch:    " << request.globalBatch << " sequences × " << result.seqLen
     << " tokens per step, " << request.precision << ", --target " << request.target
     << "; model FLOPs per step " << flops(result.modelFlopsPerStep) << "\n"
     << "MFU:      model FLOPs by PaLM's 6N + 12·L·H·Q·T per token, as llmc's kernels compute "
        "them (causal attention: half the scores; docs/planner.md), over the peak; at most "
     << fixed(100 * result.achievableFraction, 1) << "% here\n"
     << "searched: " << result.layoutsSearched << " layouts, " << result.ranked.size()
     << " fit; " << result.probesCompiled << " probe compiles (" << fixed(result.probeSeconds, 1)
     << " s), " << fixed(result.searchSeconds, 1) << " s in all\n\n";
}

/// The ranked rows: the top ones, and with --bottom the slowest as many.
void printRanking(raw_ostream &os, const plan::Result &result, const plan::Cluster &c) {
  if (result.ranked.empty()) {
    os << "no layout fits.\n";
    return;
  }
  os << format("%4s  %-52s %10s %10s %12s %8s %6s %7s %6s\n", "#", "layout", "memory", "step",
               "tokens/s", "TFLOP/s", "MFU", "bubble", "comm");
  size_t n = std::min<size_t>(top, result.ranked.size());
  for (size_t i = 0; i < n; ++i) printRow(os, i + 1, result.ranked[i], c);
  if (bottom && result.ranked.size() > n) {
    os << "   ...\n";
    for (size_t i = std::max(n, result.ranked.size() - n); i < result.ranked.size(); ++i)
      printRow(os, i + 1, result.ranked[i], c);
  }
}

/// --compare-compiled: each of the first rows' predicted arena per stage
/// beside what compiling it plans.
void printCompiledComparison(raw_ostream &os, const plan::Request &request,
                             const plan::Result &result) {
  os << "\npredicted vs compiled arena per stage:\n";
  for (int64_t i = 0; i < compareCompiled && i < static_cast<int64_t>(result.ranked.size()); ++i) {
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

} // namespace

int runPlan() {
  plan::Request request;
  std::string error;
  if (!buildRequest(request, error))
    return fail(error);
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
  printHeader(os, request, result);
  printRanking(os, result, request.cluster);
  if (compareCompiled > 0)
    printCompiledComparison(os, request, result);
  if (explain && !result.offloadOnly.empty()) {
    os << "\nfits only offloaded:\n";
    for (const plan::Rejected &r : result.offloadOnly)
      os << "  " << r.family << ": " << r.reason << "\n";
  }
  if (explain) {
    os << "\nrejected:\n";
    for (const plan::Rejected &r : result.rejected)
      os << "  " << r.family << ": " << r.reason << "\n";
  }
  return 0;
}

} // namespace llmc
