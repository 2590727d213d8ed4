//===- OffloadChoice.h - stream the offloaded layers or run them on the host -*- C++ -*-===//
//
// `llmc compile --inference … --device-memory <bytes>` moves the last
// layers' weights to host memory. `--offloaded-layers auto` (the default)
// lets the compiler decide what those layers do, by pricing the three
// lowered artifacts on the compile target's device (plan::targetDevice)
// for one request:
//
//   stream  their weights cross the host link every step, one layer ahead
//           of use on the copy stream: a step costs max(device, link) where
//           copies overlap compute (CUDA), device + link where they do not
//           (the CPU target's memcpy);
//   host    they run on the host's cores: a step costs device + host +
//           link, the link carrying only the activations in and out; each
//           host kernel costs max(FLOPs / host FLOP/s, bytes / host memory
//           bandwidth), the node's CPUs shared by its devices; each host
//           collective (tensor parallelism's all-reduces) a ring
//           all-reduce over host memory at the node's message latency;
//   split   prefill steps stream them (their KV pools with their weights,
//           copied back after each layer) and decode steps run them on the
//           host: each step priced as its form is.
//
// A request is `--request prompt=P,new=N` (default: half of max-context
// each; one given, the other is the rest of the context): ceil(P / chunk) prefill steps and N
// decode steps, every step at max-batch rows. Prefill is compute bound (the device wins: `stream`),
// decode is bound by weight bytes (host memory beats the link: `host`); a
// request with both is often cheapest split.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_OFFLOADCHOICE_H
#define LLMC_COMPILER_OFFLOADCHOICE_H

#include "compiler/plan/Cluster.h"

#include "dialects/Exec/ExecDialect.h"

#include <cstdint>
#include <string>

namespace llmc {

/// The request `--offloaded-layers auto` prices.
struct RequestShape {
  int64_t promptTokens = 0;
  int64_t newTokens = 0;
};

/// Parses `prompt=P,new=N`. What is omitted fills `maxContext`: half each
/// when both are, else the rest beside the other. "" or the error.
std::string parseRequest(const std::string &text, int64_t maxContext, RequestShape &request);

/// One step's priced seconds, by where they are spent.
struct StepPrice {
  /// Kernels and collectives on the device.
  double device = 0;
  /// Kernels on the host's cores, and collectives on its transport.
  double host = 0;
  /// Copies between host and device memory.
  double link = 0;
  /// Copies run beside the device's kernels (streamed weights on a GPU's
  /// copy stream); the caller sets it, priceStep does not.
  bool overlapped = false;
  double seconds() const;
};

/// Prices `program` on `device` for a job laid out as `mesh`.
StepPrice priceStep(exec::ProgramOp program, const plan::Cluster &device,
                    const plan::MeshShape &mesh, double fp32MatmulScale);

/// Seconds one request takes: ceil(prompt / chunk) prefills and `new` decodes.
double requestSeconds(const StepPrice &prefill, const StepPrice &decode, int64_t chunk,
                      const RequestShape &request);

} // namespace llmc

#endif
