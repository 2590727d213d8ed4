//===- QuantizedFile.h - quantized tensors in a safetensors file -*- C++ -*-===//
//
// A quantized weight W (runtime/quant/QuantizedTensor.h) is stored as
//   W.qweight       U8   [code bytes]   the codes, flat, row-major
//   W.scale         F32  [groups]       (not with double quantization; F16
//                                       with fp16 scales)
//   W.zero_point    I32  [groups]       asymmetric only
//   W.absmax_q      U8   [groups]       NF4 double quantization: int8 levels
//                   (F8_E4M3: E4M3 levels, QLoRA's 8-bit floats)
//   W.absmax_scale  F32  [ceil(groups / 256)]
//   W.absmax_mean   F32  []
// and the `__metadata__` entry "W" → "<scheme> shape=<d0>x<d1>..." (plus
// " double_quant=int8:block256", or " double_quant=fp8_e4m3:block256", with
// double quantization: the record and absmax_q's dtype must agree), e.g.
// "int4:block64:sym shape=128x384". Every other tensor is stored as is. A
// reader takes W from W.qweight when the file has it, else from W.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_QUANTIZEDFILE_H
#define LLMC_RUNTIME_QUANT_QUANTIZEDFILE_H

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/quant/QuantizedTensor.h"

#include <map>
#include <string>
#include <vector>

namespace llmc {

/// Appends the arrays of `q` under `name` to `tensors` (they point into
/// `q`, which must outlive the write) and its record to `metadata`.
void appendQuantized(const std::string &name, const quant::QuantizedTensor &q,
                     std::vector<SafeTensor> &tensors,
                     std::map<std::string, std::string> &metadata);

/// The `__metadata__` record of a quantized tensor.
std::string quantizedRecord(const quant::QuantizedTensor &q);

/// A tensor of a plain or quantized file, as fp32.
struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  std::string scheme; ///< the record it was dequantized from; empty when plain
};

/// Reads tensor `name` of `file`, dequantizing a quantized one and widening
/// bf16 / f64 to fp32 (f64 rounds). Returns false when the file has no such
/// tensor; throws, naming the file and tensor, when it is malformed.
bool readFloatTensor(const SafetensorsFile &file, const std::string &name, FloatTensor &out);

} // namespace llmc

#endif
