//===- Export.h - parameters to one weights file ---------------*- C++ -*-===//
//
// The runtime half of `llmc quantize`: reads the named parameters whole,
// one at a time, from a checkpoint's latest step (any layout; a
// mixed-precision run's master copy when it has one), a Hugging Face model
// directory (under HF's names) or an llmc weights file — all mapped, not
// read whole — quantizes the chosen ones, and writes all of them to one
// safetensors file in the layout of QuantizedFile.h. The tool decides what
// to quantize from the model graph; this needs none.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_EXPORT_H
#define LLMC_RUNTIME_QUANT_EXPORT_H

#include "kernels/Tensor.h"
#include "runtime/quant/QuantizedTensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct ExportRequest {
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape; ///< what the model expects (checked)
    bool quantize = false;
    quant::Scheme scheme;
    quant::StorageFormat storage; ///< NF4's double quantization, the scales' format
    /// Already quantized (GPTQ): written as given instead of quantizing
    /// the checkpoint's values to nearest.
    const quant::QuantizedTensor *given = nullptr;
  };
  /// A checkpoint directory, a Hugging Face model directory (config.json
  /// beside the tensors) or a weights .safetensors file.
  std::string source;
  std::string output;
  std::vector<Tensor> tensors; ///< in file order
};

struct ExportedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string scheme;     ///< schemeString (+ "+dq", "+dq_fp8"), empty when kept as is
  DType dtype = DType::F32; ///< as the checkpoint held it
  int64_t numel = 0, bytesBefore = 0, bytesAfter = 0;
};

struct ExportReport {
  std::string source; ///< a checkpoint's step directory, or the directory or file given
  int64_t step = -1;  ///< a checkpoint's step; -1 for other sources
  std::vector<ExportedTensor> tensors;
  int64_t observers = 0; ///< qat_state/* activation ranges copied along
};

/// Writes `request.output`; false with a one-line `error` (naming the
/// checkpoint, tensor or file) when something is missing or does not fit.
bool exportWeights(const ExportRequest &request, ExportReport &report, std::string &error);

} // namespace llmc

#endif
