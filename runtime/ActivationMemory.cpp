//===- ActivationMemory.cpp - activations per layer vs Korthikanti --------===//

#include "runtime/ActivationMemory.h"

#include <algorithm>

namespace llmc {

ActivationShape activationShape(const Artifact &artifact) {
  ActivationShape shape;
  shape.s = static_cast<int64_t>(artifact.metaNumber("model.seq_len", 0));
  shape.h = static_cast<int64_t>(artifact.metaNumber("model.n_embd", 0));
  shape.a = static_cast<int64_t>(artifact.metaNumber("model.n_head", 0));
  shape.gptLayer = artifact.meta("model.family") == "gpt2";
  shape.sequenceParallel = artifact.metaNumber("sequence_parallel", 0) != 0;
  std::string precision = artifact.meta("precision");
  // fp8 computes in bf16 outside its fake-quantized matmul operands.
  shape.elementBytes = precision == "bf16" || precision == "fp16" || precision == "fp8" ? 2 : 4;
  // b: the rows one rank runs per microbatch (the forward graph's batch is
  // one microbatch of every data-parallel rank).
  int64_t rows = static_cast<int64_t>(artifact.metaNumber("model.batch_size", 0));
  std::vector<std::string> batchAxes = artifact.metaList("data_parallel_axes");
  int64_t dataParallel = 1;
  for (auto &[axis, size] : artifact.mesh) {
    if (axis == "tp")
      shape.t = size;
    if (std::find(batchAxes.begin(), batchAxes.end(), axis) != batchAxes.end())
      dataParallel *= size;
  }
  if (rows > 0 && rows % dataParallel == 0)
    shape.b = rows / dataParallel;
  return shape;
}

namespace {
/// The recomputation a layer mode names: offloading ("+offload", or
/// "offload" for none) moves what the layer keeps, not how much it is.
std::string recomputation(const std::string &mode) {
  if (mode == "offload")
    return "none";
  size_t plus = mode.find("+offload");
  return plus == std::string::npos ? mode : mode.substr(0, plus);
}
} // namespace

double korthikantiBytes(const ActivationShape &x, const std::string &layerMode) {
  std::string mode = recomputation(layerMode);
  double sbh = x.sbh(), t = static_cast<double>(x.t);
  double attention = 5.0 * x.a * x.s / x.h; // the 5as/h term
  if (mode == "full")
    return 2 * sbh / (x.sequenceParallel ? t : 1);
  double core = mode == "selective" ? 0 : 1;
  if (x.sequenceParallel)
    return sbh / t * (34 + core * attention);
  return sbh * (10 + 24 / t + core * attention / t);
}

std::string korthikantiFormula(const ActivationShape &x, const std::string &layerMode) {
  std::string mode = recomputation(layerMode);
  bool tp = x.t > 1;
  if (mode == "full")
    return x.sequenceParallel && tp ? "2sbh/t" : "2sbh";
  bool core = mode != "selective";
  if (!tp)
    return core ? "sbh(34 + 5as/h)" : "34sbh";
  if (x.sequenceParallel)
    return core ? "sbh/t (34 + 5as/h)" : "34sbh/t";
  return core ? "sbh(10 + 24/t + 5as/(ht))" : "sbh(10 + 24/t)";
}

std::map<std::string, std::string> recomputeModes(const Artifact &artifact) {
  std::map<std::string, std::string> modes;
  std::string fallback = artifact.meta("recompute", "none");
  if (fallback == "budget")
    fallback = "none"; // the search names every layer it recomputes
  for (auto &[layer, bytes] : artifact.memory.savedPerLayer)
    modes[layer] = fallback;
  for (const std::string &item : artifact.metaList("recompute.layers")) {
    size_t eq = item.find('=');
    if (eq != std::string::npos)
      modes[item.substr(0, eq)] = item.substr(eq + 1);
  }
  // --offload activations moves every layer's saved values to host memory.
  std::string offload = "," + artifact.meta("offload", "none") + ",";
  if (offload.find(",activations,") != std::string::npos)
    for (auto &[layer, mode] : modes)
      if (mode.find("offload") == std::string::npos)
        mode = mode == "none" ? "offload" : mode + "+offload";
  return modes;
}

} // namespace llmc
