//===- Cluster.h - the machines a plan is for -------------------*- C++ -*-===//
//
// What `llmc plan` knows about a cluster: how many accelerators, their
// memory, their dense peak, the rates their kernels achieve (Efficiency.h)
// and the two kinds of link a collective can span (inside a node, between
// nodes), each as latency α and bandwidth β. Presets hold datasheet and
// published measurements, each with its source; a calibration file
// measured on the device (Calibration.h) replaces the device's numbers;
// every field can be set by hand (e.g. from a measurement of a CPU
// "cluster", bench/plan_cpu.sh).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_PLAN_CLUSTER_H
#define LLMC_COMPILER_PLAN_CLUSTER_H

#include "compiler/plan/Efficiency.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llmc::plan {

struct Cluster {
  std::string name;           ///< "dgx-h100", or "custom"
  std::string deviceName;     ///< "H100 SXM5 80GB", or the calibrated device's
  int64_t devices = 0;        ///< ranks in the job
  int64_t nodeSize = 1;       ///< devices per node
  double memoryBytes = 0;     ///< per device
  /// Dense datasheet peak at the training precision, per device: what MFU
  /// divides by.
  double peakFlops = 0;
  /// Bytes/s a memory-bound kernel achieves, per device (measured, or the
  /// datasheet's times a stated efficiency).
  double memoryBandwidth = 0;
  double intraBandwidth = 0;  ///< bytes/s one device sends inside its node
  double interBandwidth = 0;  ///< bytes/s one device sends to other nodes
  double intraLatency = 0;    ///< seconds per message inside a node
  double interLatency = 0;    ///< seconds per message between nodes
  double kernelOverhead = 0;  ///< seconds added to every kernel launch
  /// Bytes/s one device copies to or from host memory, each direction
  /// (its PCIe link); 0: unknown, offloading is not searched.
  double hostLinkBandwidth = 0;
  /// Bytes/s of a node's host memory, shared by its devices' host-side
  /// optimizer updates; 0: unknown.
  double hostMemoryBandwidth = 0;
  /// FLOP/s of a node's CPUs at fp32 (datasheet peak), shared by its
  /// devices' host-side work; 0: unknown.
  double hostFlops = 0;
  /// Whether data-parallel communication runs beside compute (a GPU's
  /// communication stream); false prices every collective as blocking.
  bool overlap = true;
  /// How close kernels come to the peak, by kind and shape.
  Efficiency efficiency;
};

/// The preset names (`dgx-a100`, `dgx-h100`, `dgx-h200`) with a one-line
/// description.
std::vector<std::pair<std::string, std::string>> clusterPresets();

/// "dgx-h100:128" → the preset for 128 devices (whole nodes or fewer).
/// False with `error` set on an unknown preset or a bad count.
bool parseCluster(const std::string &spec, Cluster &cluster, std::string &error);

/// The one device a compile for `target` (cpu, cuda) is priced on when
/// `llmc compile --recompute budget` weighs recomputing against offloading
/// (RecomputePrice.h): `cuda` is the dgx-h100 preset's H100 with its PCIe
/// Gen5 x16 host link, 64 GB/s each way; `cpu` is one core of the
/// development VM as bench/plan_cpu.sh measured it (GEMMs at 59.2 GFLOP/s,
/// memory-bound kernels at its 15.1 GB/s copy rate, 0.73 µs per kernel),
/// whose "host link" is a memcpy within RAM at that same copy rate.
/// `hostLinkGBs` > 0 replaces the host link (GB/s each way).
Cluster targetDevice(const std::string &target, double hostLinkGBs = 0);

/// The factor on the GEMM rate of fp32 products compiled for `target`:
/// TF32 at half the bf16 rate on a GPU (cuda), the fp32 rate itself on a
/// CPU (costProgram's fp32MatmulScale).
double fp32MatmulScaleOf(const std::string &target);

/// "80GiB", "40GB", "512MiB", "1e9" → bytes; false on a malformed size.
bool parseBytes(const std::string &text, double &bytes);

/// Checks that every field a plan needs is set and positive; the message
/// names the flag to give.
std::string validate(const Cluster &cluster);

/// How ranks are laid out: mesh axes outermost first, rank =
/// Σ index(axis) × stride(axis), consecutive ranks fill a node.
struct MeshShape {
  std::vector<std::pair<std::string, int64_t>> axes; ///< outermost first
  int64_t size(const std::string &axis) const;
  int64_t stride(const std::string &axis) const;
  /// `llmc compile --mesh`'s "dp=2,tp=4" (an item without '=' is skipped).
  static MeshShape parse(const std::string &spec);
};

/// Whether a collective over `group` (axes of `mesh`) stays inside one node
/// for every rank: its members' ranks span less than a node and do not
/// straddle a node boundary.
bool groupInsideNode(const MeshShape &mesh, const std::vector<std::string> &group,
                     int64_t nodeSize);

enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };

/// Alpha-beta time of one collective on `n` ranks moving `bytes` (the
/// full buffer: the result of an all-gather, the input of a reduce-scatter),
/// by the ring algorithms NCCL uses for large messages:
///   all-reduce            2(n−1)·α + 2(n−1)/n · bytes/β
///   all-gather, reduce-scatter, all-to-all
///                          (n−1)·α +  (n−1)/n · bytes/β
///   broadcast, reduce      (n−1)·α +            bytes/β   (pipelined chain)
///   send/recv                    α +            bytes/β
double collectiveSeconds(Collective kind, int64_t n, double bytes, double alpha, double beta);

} // namespace llmc::plan

#endif
