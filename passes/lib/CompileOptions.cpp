//===- CompileOptions.cpp - checking and recording the options ------------===//

#include "passes/lib/CompileOptions.h"
#include "passes/lib/QATScheme.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace llmc {
namespace {

template <typename T> std::string text(const T &value) {
  std::ostringstream os;
  os << value;
  return os.str();
}
std::string text(bool value) { return value ? "1" : "0"; }
std::string text(const std::string &value) { return value; }

/// "" when `value` is one of the '|'-separated `choices` (or there are
/// none), else the error for flag `flag`: "... (expected a, b or c)".
std::string checkChoice(const char *flag, const std::string &value, const std::string &choices) {
  if (choices.empty())
    return "";
  std::vector<std::string> list;
  for (size_t begin = 0;;) {
    size_t end = choices.find('|', begin);
    list.push_back(choices.substr(begin, end - begin));
    if (end == std::string::npos)
      break;
    begin = end + 1;
  }
  for (const std::string &choice : list)
    if (choice == value)
      return "";
  std::string expected;
  for (size_t i = 0; i < list.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == list.size() ? " or " : ", ") + list[i];
  return std::string("unknown --") + flag + " '" + value + "' (expected " + expected + ")";
}

/// --offload is a comma-separated list of optimizer and activations, or none.
std::string checkOffload(const CompileOptions &o) {
  std::string item;
  std::istringstream items(o.offload);
  while (std::getline(items, item, ','))
    if (item != "optimizer" && item != "activations" && !(item == "none" && o.offload == "none"))
      return "unknown --offload '" + o.offload +
             "' (expected none, optimizer, activations or optimizer,activations)";
  if (!offloads(o, "activations"))
    return "";
  if (!o.inference.empty())
    return "--offload activations moves what training saves for the backward; --inference "
           "has no backward";
  return "";
}

} // namespace

bool offloads(const CompileOptions &options, const std::string &what) {
  std::string item;
  std::istringstream items(options.offload);
  while (std::getline(items, item, ','))
    if (item == what)
      return true;
  return false;
}

std::string offloadedLayers(const CompileOptions &options) {
  if (offloads(options, "activations"))
    return "*";
  std::string layers, entry;
  std::istringstream entries(options.recomputeLayers);
  while (std::getline(entries, entry, ',')) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos)
      continue;
    std::string mode = entry.substr(eq + 1);
    if (mode == "offload" || (mode.size() > 8 && mode.compare(mode.size() - 8, 8, "+offload") == 0))
      layers += (layers.empty() ? "" : ",") + entry.substr(0, eq);
  }
  return layers;
}

int64_t parseByteSize(const std::string &input) {
  std::string text = input;
  auto trim = [](std::string &s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    s = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  };
  trim(text);
  static const std::pair<const char *, double> units[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0}};
  double scale = 1.0;
  for (auto [suffix, factor] : units) {
    std::string s = suffix;
    if (text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      text.resize(text.size() - s.size());
      trim(text);
      scale = factor;
      break;
    }
  }
  if (text.empty())
    return -1;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(value) || value < 0 || value * scale > 9.2e18)
    return -1;
  return static_cast<int64_t>(value * scale);
}

std::string resolveOptions(CompileOptions &o) {
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)                       \
  if (std::string error = checkChoice(flag, text(o.field), choices); !error.empty())               \
    return error;
#include "passes/lib/CompileOptions.def"

  // Gradients are fp32 or the compute type; nothing narrows them further.
  if (o.gradDtype != "fp32" && o.gradDtype != o.precision)
    return "--grad-dtype " + o.gradDtype + " needs --precision " + o.gradDtype +
           " (gradients are fp32 or in the compute type)";
  if (o.precision == "fp8" && !o.qat.empty())
    return "--precision fp8 fake-quantizes the blocks' linear layers itself; it does not "
           "combine with --qat";
  if (o.fp8Scaling != "current") {
    if (o.precision != "fp8")
      return "--fp8-scaling needs --precision fp8 (it chooses how fp8 training scales)";
    if (std::string error; !fp8ScalingSuffix(o.fp8Scaling, error))
      return error;
  }
  if (o.fp8FastAccumulation != "forward" && o.precision != "fp8" && o.qat.empty())
    return "--fp8-fast-accumulation needs fp8 products (--precision fp8, or --qat with fp8 "
           "schemes)";
  if (o.microbatches < 1)
    return "--microbatches must be >= 1";
  if (o.virtualStages < 1)
    return "--virtual-stages must be >= 1";
  if (o.fsdpPrefetch < 0)
    return "--fsdp-prefetch must be >= 0";
  if (o.gradBucketMb < 0)
    return "--grad-bucket-mb must be >= 0";
  // Defaults that depend on the target: the GPU wants aligned logits rows
  // and few, large head chunks; the CPU gains nothing from padding.
  if (o.vocabMultiple < 0)
    return "--vocab-multiple must be >= 0 (0: the target's default)";
  if (o.fuseChunkMb < 0)
    return "--fuse-chunk-mb must be >= 0 (0: the target's default)";
  o.vocabMultiple = resolvedVocabMultiple(o);
  o.fuseChunkMb = resolvedFuseChunkMb(o);
  if (o.maxGradNorm < 0)
    return "--max-grad-norm must be >= 0 (0 disables clipping)";
  if (std::string error; parsePassInsertions(o.insertPass, error), !error.empty())
    return error;
  if (o.qlora && o.lora.empty())
    return "--qlora needs --lora (it quantizes the weights adapters are added to)";
  if (o.qloraBlock != quant::kNf4Block && !o.qlora)
    return "--qlora-block needs --qlora (it sets the block of QLoRA's NF4 storage)";
  if (o.qloraBlock < 1)
    return "--qlora-block must be >= 1, got " + std::to_string(o.qloraBlock);
  bool nf4WeightQuant = false;
  if (!o.weightQuant.empty()) {
    if (o.inference.empty())
      return "--weight-quant needs --inference (training keeps its weights in full precision; "
             "see --qlora)";
    std::string error;
    std::optional<QATSchemeSpec> scheme = parseWeightOnlyScheme(o.weightQuant, error);
    if (!scheme)
      return "--weight-quant: " + error;
    nf4WeightQuant = scheme->format == "nf4";
  }
  if (o.doubleQuant != "int8" && !o.qlora && !nf4WeightQuant)
    return "--double-quant sets the absmax levels of NF4 storage: it needs --qlora or "
           "--weight-quant nf4[:block<N>]";
  o.gradBucketBytes = static_cast<int64_t>(o.gradBucketMb * (1 << 20));

  if (!(o.hostBw >= 0) || !std::isfinite(o.hostBw))
    return "--host-bw must be a positive number of GB/s (0: the target's host link), not " +
           text(o.hostBw);
  o.memoryBudgetBytes = 0;
  if (!o.memoryBudget.empty()) {
    o.memoryBudgetBytes = parseByteSize(o.memoryBudget);
    if (o.memoryBudgetBytes <= 0)
      return "bad --memory-budget '" + o.memoryBudget +
             "' (expected a size such as 24GiB, 512MiB or 1e9)";
  }
  o.deviceMemoryBytes = 0;
  if ((o.offloadedLayers == "host" || o.offloadedLayers == "split") && o.deviceMemory.empty())
    return "--offloaded-layers " + o.offloadedLayers +
           " needs --device-memory (the budget that decides which layers leave the device)";
  if (!o.request.empty() && (o.deviceMemory.empty() || o.offloadedLayers != "auto"))
    return "--request prices --offloaded-layers auto's choice: it needs --device-memory and "
           "--offloaded-layers auto";
  if (!o.deviceMemory.empty()) {
    if (o.inference.empty())
      return "--device-memory needs --inference (training fits a budget with --recompute "
             "budget=<bytes> and --offload)";
    o.deviceMemoryBytes = parseByteSize(o.deviceMemory);
    if (o.deviceMemoryBytes <= 0)
      return "bad --device-memory '" + o.deviceMemory +
             "' (expected a size such as 24GiB, 512MiB or 1e9)";
  }
  // --recompute budget=<bytes> is --recompute budget --memory-budget <bytes>.
  if (o.recompute.rfind("budget=", 0) == 0) {
    std::string size = o.recompute.substr(7);
    int64_t bytes = parseByteSize(size);
    if (bytes <= 0)
      return "bad --recompute budget '" + size + "' (expected a size such as 24GiB, 512MiB or 1e9)";
    if (o.memoryBudgetBytes > 0 && o.memoryBudgetBytes != bytes)
      return "--recompute budget=" + size + " and --memory-budget " + o.memoryBudget +
             " disagree; give one";
    o.recompute = "budget";
    o.memoryBudget = size;
    o.memoryBudgetBytes = bytes;
  }
  if (o.recompute != "none" && o.recompute != "full" && o.recompute != "selective" &&
      o.recompute != "budget")
    return "unknown --recompute '" + o.recompute +
           "' (expected none, full, selective or budget=<bytes>)";
  if (std::string error = checkOffload(o); !error.empty())
    return error;
  if (o.recompute == "budget" && o.memoryBudgetBytes <= 0)
    return "--recompute budget needs a budget: --recompute budget=<bytes> or "
           "--memory-budget <bytes>";
  return "";
}

int64_t resolvedVocabMultiple(const CompileOptions &o) {
  if (o.vocabMultiple > 0)
    return o.vocabMultiple;
  return o.target == "cuda" ? 128 : 1; // a CPU GEMM gains nothing from the padding
}

double resolvedFuseChunkMb(const CompileOptions &o) {
  if (o.fuseChunkMb > 0)
    return o.fuseChunkMb;
  return o.target == "cuda" ? 1024.0 : 256.0;
}

std::vector<PassInsertion> parsePassInsertions(const std::string &spec, std::string &error) {
  std::vector<PassInsertion> insertions;
  size_t begin = 0;
  while (begin <= spec.size() && !spec.empty()) {
    size_t end = spec.find(';', begin);
    std::string entry = spec.substr(begin, end == std::string::npos ? end : end - begin);
    begin = end == std::string::npos ? spec.size() + 1 : end + 1;
    if (entry.empty())
      continue;
    PassInsertion insertion;
    size_t colon = entry.find(':');
    std::string where = entry.substr(0, colon);
    if (where.rfind("after=", 0) == 0) {
      insertion.anchor = where.substr(6);
    } else if (where.rfind("before=", 0) == 0) {
      insertion.after = false;
      insertion.anchor = where.substr(7);
    }
    if (colon != std::string::npos)
      insertion.passes = entry.substr(colon + 1);
    if (insertion.anchor.empty() || insertion.passes.empty()) {
      error = "bad --insert-pass '" + entry +
              "' (expected after=<pass>:<pipeline> or before=<pass>:<pipeline>)";
      return {};
    }
    insertions.push_back(insertion);
  }
  return insertions;
}

std::string resolveOptions(const ScheduleDefaults &s) {
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)
#define LLMC_SCHEDULE_OPTION(Type, field, flag, Default, choices, key, help)                       \
  if (std::string error = checkChoice(flag, text(s.field), choices); !error.empty())               \
    return error;
#include "passes/lib/CompileOptions.def"
  if (s.warmup < 0 || s.steps < 0)
    return "--warmup and --steps must be >= 0";
  return "";
}

std::map<std::string, std::string> optionMetadata(const CompileOptions &o,
                                                  const ScheduleDefaults &s) {
  std::map<std::string, std::string> meta;
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)                       \
  if (*key)                                                                                        \
    meta[key] = text(o.field);
#define LLMC_SCHEDULE_OPTION(Type, field, flag, Default, choices, key, help)                       \
  if (*key)                                                                                        \
    meta[key] = text(s.field);
#include "passes/lib/CompileOptions.def"
  meta["recompute.layers"] = o.recomputeLayers;
  if (!o.recomputePrice.empty()) {
    meta["recompute.price"] = o.recomputePrice;
    meta["recompute.price_basis"] = o.recomputePriceBasis;
  }
  return meta;
}

} // namespace llmc
