//===- Cluster.cpp - cluster presets and the alpha-beta link model --------===//

#include "compiler/plan/Cluster.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace llmc::plan {

namespace {

/// Datasheet numbers, per GPU. Bandwidths are one direction: NVLink's
/// quoted totals are bidirectional (A100 600 GB/s, H100 900 GB/s); a DGX
/// node has one InfiniBand port per GPU (A100: HDR 200 Gb/s, H100: NDR
/// 400 Gb/s). Peaks are dense bf16 tensor-core rates (no sparsity).
Cluster dgx(const std::string &name, double tflops, double hbm, double nvlink, double ib) {
  Cluster c;
  c.name = name;
  c.nodeSize = 8;
  c.memoryBytes = 80.0 * (1ll << 30);
  c.peakFlops = tflops * 1e12;
  c.memoryBandwidth = hbm * 1e12;
  c.intraBandwidth = nvlink * 1e9;
  c.interBandwidth = ib / 8 * 1e9;
  // NCCL's per-step latencies on these systems are a few microseconds in
  // a node and about twice that across the network.
  c.intraLatency = 5e-6;
  c.interLatency = 10e-6;
  // Launching one kernel of a captured graph, plus its tail.
  c.kernelOverhead = 2e-6;
  return c;
}

Cluster preset(const std::string &name, bool &found) {
  found = true;
  if (name == "dgx-a100")
    return dgx(name, 312, 2.039, 300, 200);
  if (name == "dgx-h100")
    return dgx(name, 989, 3.35, 450, 400);
  found = false;
  return {};
}

} // namespace

std::vector<std::pair<std::string, std::string>> clusterPresets() {
  return {{"dgx-a100", "8 × A100 80GB per node: 312 TFLOP/s bf16, 2.0 TB/s HBM, NVLink 300 GB/s, "
                       "HDR InfiniBand 25 GB/s per GPU"},
          {"dgx-h100", "8 × H100 80GB per node: 989 TFLOP/s bf16, 3.35 TB/s HBM, NVLink 450 GB/s, "
                       "NDR InfiniBand 50 GB/s per GPU"}};
}

bool parseCluster(const std::string &spec, Cluster &cluster, std::string &error) {
  size_t colon = spec.find(':');
  std::string name = spec.substr(0, colon);
  bool found = false;
  Cluster c = preset(name, found);
  if (!found) {
    error = "unknown cluster '" + name + "' (presets:";
    for (auto &[preset, description] : clusterPresets())
      error += " " + preset;
    error += "; or give --gpus, --gpu-memory, --gpu-tflops, ... without --cluster)";
    return false;
  }
  if (colon == std::string::npos) {
    error = "--cluster " + spec + ": give the number of GPUs, e.g. " + name + ":64";
    return false;
  }
  std::string count = spec.substr(colon + 1);
  char *end = nullptr;
  long long n = std::strtoll(count.c_str(), &end, 10);
  if (count.empty() || *end != '\0' || n <= 0) {
    error = "--cluster " + spec + ": '" + count + "' is not a positive number of GPUs";
    return false;
  }
  c.devices = n;
  if (n > c.nodeSize && n % c.nodeSize != 0) {
    error = "--cluster " + spec + ": " + count + " GPUs is not a whole number of " +
            std::to_string(c.nodeSize) + "-GPU nodes";
    return false;
  }
  cluster = c;
  return true;
}

bool parseBytes(const std::string &text, double &bytes) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value <= 0)
    return false;
  std::string unit(end);
  std::transform(unit.begin(), unit.end(), unit.begin(), ::tolower);
  static const std::pair<const char *, double> units[] = {
      {"", 1},           {"b", 1},
      {"kb", 1e3},       {"mb", 1e6},           {"gb", 1e9},           {"tb", 1e12},
      {"kib", 1 << 10},  {"mib", 1 << 20},      {"gib", 1ll << 30},    {"tib", 1ll << 40}};
  for (auto &[name, scale] : units)
    if (unit == name) {
      bytes = value * scale;
      return true;
    }
  return false;
}

std::string validate(const Cluster &c) {
  auto need = [](double value, const char *flag) -> std::string {
    return value > 0 ? "" : std::string("the cluster needs ") + flag + " (a positive value)";
  };
  for (std::string error :
       {need(c.devices, "--gpus"), need(c.nodeSize, "--node-size"),
        need(c.memoryBytes, "--gpu-memory"), need(c.peakFlops, "--gpu-tflops"),
        need(c.memoryBandwidth, "--memory-bw"), need(c.intraBandwidth, "--intra-bw"),
        need(c.interBandwidth, "--inter-bw")})
    if (!error.empty())
      return error;
  if (c.intraLatency < 0 || c.interLatency < 0 || c.kernelOverhead < 0)
    return "latencies and the kernel overhead cannot be negative";
  if (c.devices > c.nodeSize && c.devices % c.nodeSize != 0)
    return std::to_string(c.devices) + " devices is not a whole number of " +
           std::to_string(c.nodeSize) + "-device nodes";
  return "";
}

int64_t MeshShape::size(const std::string &axis) const {
  for (auto &[name, n] : axes)
    if (name == axis)
      return n;
  return 1;
}

int64_t MeshShape::stride(const std::string &axis) const {
  int64_t stride = 1;
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    if (it->first == axis)
      return stride;
    stride *= it->second;
  }
  return stride;
}

bool groupInsideNode(const MeshShape &mesh, const std::vector<std::string> &group,
                     int64_t nodeSize) {
  // A group's members differ only in the group's axes: from its lowest
  // rank (every group axis at index 0) the farthest member is
  // Σ (size − 1)·stride away. The group stays in a node when, for every
  // such lowest rank, both ends share a node.
  int64_t span = 0, total = 1;
  for (const std::string &axis : group)
    span += (mesh.size(axis) - 1) * mesh.stride(axis);
  for (auto &[name, n] : mesh.axes)
    total *= n;
  if (span == 0)
    return true;
  for (int64_t rank = 0; rank < total; ++rank) {
    bool lowest = true;
    for (const std::string &axis : group)
      lowest &= (rank / mesh.stride(axis)) % mesh.size(axis) == 0;
    if (lowest && rank / nodeSize != (rank + span) / nodeSize)
      return false;
  }
  return true;
}

double collectiveSeconds(Collective kind, int64_t n, double bytes, double alpha, double beta) {
  if (n <= 1 || (bytes == 0 && alpha == 0))
    return 0;
  double steps = static_cast<double>(n - 1);
  double share = steps / static_cast<double>(n);
  switch (kind) {
  case Collective::AllReduce: return 2 * steps * alpha + 2 * share * bytes / beta;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll: return steps * alpha + share * bytes / beta;
  case Collective::Broadcast:
  case Collective::Reduce: return steps * alpha + bytes / beta;
  case Collective::SendRecv: return alpha + bytes / beta;
  }
  return 0;
}

} // namespace llmc::plan
