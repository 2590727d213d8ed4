//===- Cluster.cpp - cluster presets and the alpha-beta link model --------===//

#include "compiler/plan/Cluster.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace llmc::plan {

namespace {

/// The share of the datasheet HBM bandwidth memory-bound kernels are priced
/// at: a stated assumption (a large device-to-device copy reaches about
/// 90% of it), replaced by the device's own copy bandwidth when a
/// calibration file (gpu-check's bench-calibrate step) is given.
constexpr double kHbmEfficiency = 0.90;

/// The share of NVLink's line rate NCCL's collectives move data at: "450GB/s
/// is the line rate. With the protocol overhead (~20%) NCCL can get an
/// effective NVLink bandwidth of 370GB/s" (S. Jeaugey, NCCL maintainer, on
/// H100: NVIDIA/nccl-tests issue 212, 2024). InfiniBand is taken at its
/// line rate.
constexpr double kNvlinkEfficiency = 0.80;

/// A DGX node of 8 GPUs. Bandwidths are one direction: NVLink's quoted
/// totals are bidirectional (A100 600 GB/s, H100 and H200 900 GB/s), of
/// which collectives get kNvlinkEfficiency; a DGX node has one InfiniBand
/// port per GPU (A100: HDR 200 Gb/s, H100 and H200: NDR 400 Gb/s). Peaks are dense bf16 tensor-core
/// rates (no sparsity), from NVIDIA's datasheets.
///
/// Host side (ZeRO-Offload, nominal datasheet rates): each GPU's PCIe x16
/// link, per direction (Gen4 on A100: 32 GB/s; Gen5 on H100 and H200: 64
/// GB/s), and the node's two CPUs' memory (DGX A100: 2 × AMD EPYC 7742, 8
/// channels of DDR4-3200 each, 409.6 GB/s; DGX H100/H200: 2 × Xeon
/// Platinum 8480C, 8 channels of DDR5-4800 each, 614.4 GB/s). The CPUs'
/// fp32 peak at base clock: EPYC 7742, 2 × 64 cores × 2.25 GHz × 32 FLOP
/// per cycle (two 256-bit FMA pipes) = 9.2 TFLOP/s; Xeon 8480C, 2 × 56
/// cores × 2.0 GHz × 64 (two 512-bit FMA pipes) = 14.3 TFLOP/s.
Cluster dgx(const std::string &name, double memoryGiB, double tflops, double hbm, double nvlink,
            double ib, double pcie, double hostMemory, double hostTflops) {
  Cluster c;
  c.name = name;
  c.nodeSize = 8;
  c.memoryBytes = memoryGiB * (1ll << 30);
  c.peakFlops = tflops * 1e12;
  c.memoryBandwidth = hbm * 1e12 * kHbmEfficiency;
  c.intraBandwidth = nvlink * 1e9 * kNvlinkEfficiency;
  c.interBandwidth = ib / 8 * 1e9;
  // NCCL's per-step latencies on these systems are a few microseconds in
  // a node and about twice that across the network.
  c.intraLatency = 5e-6;
  c.interLatency = 10e-6;
  // Launching one kernel of a captured graph, plus its tail.
  c.kernelOverhead = 2e-6;
  c.hostLinkBandwidth = pcie * 1e9;
  c.hostMemoryBandwidth = hostMemory * 1e9;
  c.hostFlops = hostTflops * 1e12;
  c.efficiency.tiles = largeGemmTiles();
  return c;
}

/// Causal flash attention, forward and backward, bf16, head dim 128, as
/// PyTorch 2.11's scaled_dot_product_attention ran it on an H200 on
/// 2026-11-26 (bench/attention_gpu.sh, B·T = 16k tokens, 16 heads;
/// bench/results/2026-11-26-h200.json): cuDNN's fused flash attention,
/// the kernel llmc binds by default (llmc-run --attention auto). The
/// H100 SXM has the same 132 SMs and tensor cores.
std::vector<AttentionRate> hopperAttention() {
  return {{128, 1024, 281.4e12}, {128, 2048, 387.4e12}, {128, 4096, 475.4e12},
          {128, 8192, 533.6e12}};
}

Cluster preset(const std::string &name, bool &found) {
  found = true;
  if (name == "dgx-a100") {
    // A100 SXM4 80GB: 108 SMs, 2.039 TB/s HBM2e.
    Cluster c = dgx(name, 80, 312, 2.039, 300, 200, 32, 409.6, 9.216);
    c.deviceName = "A100 SXM4 80GB";
    c.efficiency.sms = 108;
    // The maximum achievable bf16 matmul rate measured on an A100 SXM
    // (CUDA 12.1, best of a scan of large shapes): 267.9 TF/s, 85.9% of the
    // peak (S. Bekman, "Machine Learning Engineering", Maximum Achievable
    // Matmul FLOPS table).
    c.efficiency.gemmFlops = 267.9e12;
    // FlashAttention-2 reaches "50-73% of the theoretical maximum FLOPs/s on
    // A100" (Dao 2023, abstract); causal attention at sequences of a few
    // thousand is the low end: 50%.
    c.efficiency.attention = {{128, 2048, 0.50 * 312e12}};
    c.efficiency.source = "A100 datasheet; GEMM 267.9 TF/s (MAMF table); FlashAttention-2 at 50% "
                          "of peak; HBM at 90%";
    return c;
  }
  if (name == "dgx-h100") {
    // H100 SXM5 80GB: 132 SMs, 3.35 TB/s HBM3.
    Cluster c = dgx(name, 80, 989, 3.35, 450, 400, 64, 614.4, 14.336);
    c.deviceName = "H100 SXM5 80GB";
    c.efficiency.sms = 132;
    // The maximum achievable bf16 matmul rate measured on an H100 SXM
    // (CUDA 12.1): 792.1 TF/s, 80.1% of the peak (the MAMF table above).
    c.efficiency.gemmFlops = 792.1e12;
    c.efficiency.attention = hopperAttention();
    c.efficiency.source = "H100 datasheet; GEMM 792.1 TF/s (MAMF table); cuDNN flash attention as "
                          "measured on an H200; HBM at 90%";
    return c;
  }
  if (name == "dgx-h200") {
    // H200 141GB: the H100's 132 SMs and peak, 4.8 TB/s HBM3e; the device
    // reports about 139 GiB.
    Cluster c = dgx(name, 139, 989, 4.8, 450, 400, 64, 614.4, 14.336);
    c.deviceName = "H200 141GB";
    c.efficiency.sms = 132;
    // cuBLASLt's bf16 8192³ product, measured on an H200 with llmc's
    // CUDA build: 790 TF/s (docs/performance.md).
    c.efficiency.gemmFlops = 790e12;
    c.efficiency.attention = hopperAttention();
    c.efficiency.source = "H200 datasheet; GEMM 790 TF/s and cuDNN flash attention as measured on "
                          "an H200; HBM at 90%";
    return c;
  }
  found = false;
  return {};
}

} // namespace

std::vector<std::pair<std::string, std::string>> clusterPresets() {
  return {{"dgx-a100", "8 × A100 80GB per node: 312 TFLOP/s bf16, 2.0 TB/s HBM, NVLink 300 GB/s, "
                       "HDR InfiniBand 25 GB/s per GPU"},
          {"dgx-h100", "8 × H100 80GB per node: 989 TFLOP/s bf16, 3.35 TB/s HBM, NVLink 450 GB/s, "
                       "NDR InfiniBand 50 GB/s per GPU"},
          {"dgx-h200", "8 × H200 141GB per node: 989 TFLOP/s bf16, 4.8 TB/s HBM, NVLink 450 GB/s, "
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

Cluster targetDevice(const std::string &target, double hostLinkGBs) {
  Cluster c;
  if (target == "cuda") {
    bool found = false;
    c = preset("dgx-h100", found);
    c.devices = 1;
  } else {
    // bench/plan_cpu.sh on the 2-core development VM, 2026-11-25, one
    // thread (docs/planner.md, "Predicted vs measured (CPU ranks)"). On
    // the CPU backend the arena and host memory are one allocation, so a
    // copy between them is a memcpy at the copy rate.
    c.name = "cpu";
    c.deviceName = "CPU core (bench/plan_cpu.sh)";
    c.devices = c.nodeSize = 1;
    c.peakFlops = 59.2e9;
    c.memoryBandwidth = 15.1e9;
    c.kernelOverhead = 0.73e-6;
    // The TCP transport's all-reduce on that VM: 1.39 ms per ring step,
    // 0.58 GB/s.
    c.intraBandwidth = c.interBandwidth = 0.58e9;
    c.intraLatency = c.interLatency = 1.39e-3;
    c.hostLinkBandwidth = 15.1e9;
    c.hostMemoryBandwidth = 15.1e9;
    c.hostFlops = 59.2e9;
    c.overlap = false;
    c.efficiency.source = "bench/plan_cpu.sh, one core of the development VM";
  }
  if (hostLinkGBs > 0)
    c.hostLinkBandwidth = hostLinkGBs * 1e9;
  return c;
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
  if (c.hostLinkBandwidth < 0 || c.hostMemoryBandwidth < 0)
    return "--host-bw and --host-memory-bw cannot be negative";
  if (std::string bad = validate(c.efficiency); !bad.empty())
    return bad;
  if (c.devices > c.nodeSize && c.devices % c.nodeSize != 0)
    return std::to_string(c.devices) + " devices is not a whole number of " +
           std::to_string(c.nodeSize) + "-device nodes";
  return "";
}

MeshShape MeshShape::parse(const std::string &spec) {
  MeshShape mesh;
  std::istringstream items(spec);
  std::string axis;
  while (std::getline(items, axis, ',')) {
    size_t eq = axis.find('=');
    if (eq != std::string::npos)
      mesh.axes.push_back({axis.substr(0, eq), std::atoll(axis.c_str() + eq + 1)});
  }
  return mesh;
}

double fp32MatmulScaleOf(const std::string &target) { return target == "cuda" ? 0.5 : 1.0; }

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
