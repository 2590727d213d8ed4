//===- GptqCalibration.h - GPTQ over a compiled model -----------*- C++ -*-===//
//
// The runtime half of `llmc quantize --method gptq`: runs a compiled
// model's @eval program on calibration batches with the CPU executor and
// reads, right after each matmul whose weight is a parameter to quantize,
// that matmul's input X — the layer input GPTQ needs, H = 2·XᵀX / n. No
// second model implementation: the activations are the compiled forward's.
// A mixture of experts' stacked weights are read after each grouped
// matmul: each expert gets the H of the rows routed to it
// (runtime/quant/GptqExperts.h).
//
// Weights are quantized sequentially, in the order the forward reads them,
// each with inputs from the model whose earlier weights are already
// quantized (the paper's order): one "stage" is the weights whose matmuls
// read the same input (q, k, v; gate, up), calibrated together; after each
// stage its quantized values are written into the running model, and the
// next stage runs the calibration batches again.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_GPTQCALIBRATION_H
#define LLMC_RUNTIME_QUANT_GPTQCALIBRATION_H

#include "runtime/quant/Gptq.h"
#include "runtime/quant/GptqExperts.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace llmc {

struct GptqRequest {
  std::string artifact;    ///< one rank, CPU, fp32; its @eval program is run
  std::string weights;     ///< a safetensors file with every parameter
  std::string calibration; ///< data, as llmc-run --data takes it
  int64_t batches = 0;     ///< calibration batches of the artifact's batch shape
  struct Tensor {
    std::string name;
    quant::Scheme scheme;
    quant::StorageFormat storage; ///< NF4's double quantization, the scales' format
  };
  std::vector<Tensor> tensors; ///< the weights to quantize
  quant::GptqOptions options;
  /// Progress lines ("stage 3/16: h.0.mlp.c_fc.weight ..."); may be empty.
  std::function<void(const std::string &)> progress;
};

/// One quantized weight: what GPTQ did to it. The errors are the layer's
/// output error on the calibration inputs, tr((W − Q) H (W − Q)ᵀ) / 2 per
/// sample, for round-to-nearest and for GPTQ, under the same H. For a
/// stack of experts they are per routed row (expert e's under H_e,
/// weighted by its rows), and `samples` and `deadColumns` sum over them.
struct GptqTensorReport {
  std::string name;
  int64_t inputs = 0, samples = 0, deadColumns = 0;
  double rtnError = 0.0, gptqError = 0.0;
  std::vector<int64_t> expertRows;                ///< experts: the rows each received
  std::vector<quant::ExpertFallback> fallbacks; ///< experts rounded to nearest, and why
};

struct GptqResult {
  std::map<std::string, quant::QuantizedTensor> tensors;
  std::vector<GptqTensorReport> reports; ///< in quantization order
  int64_t stages = 0, tokens = 0;        ///< tokens per pass over the calibration batches
};

/// Quantizes `request.tensors`; false with a one-line `error` naming the
/// artifact, data, or weight at fault.
bool runGptq(const GptqRequest &request, GptqResult &result, std::string &error);

} // namespace llmc

#endif
