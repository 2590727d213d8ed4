//===- QuantGroupings.h - the groupings the quantization tests sweep ------===//
//
// Shared by quant_test.cpp's conformance cases and cuda_quant_test.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_QUANTGROUPINGS_H
#define LLMC_TEST_UNIT_KERNELS_QUANTGROUPINGS_H

#include "common/QuantScheme.h"

#include <cstdint>
#include <vector>

namespace llmc::test {

/// Per tensor, per channel of every axis, and per block of each of `blocks`
/// that divides the last dimension.
inline std::vector<quant::Scheme> groupings(const std::vector<int64_t> &shape, quant::Format format,
                                            bool symmetric, const std::vector<int64_t> &blocks) {
  using quant::Granularity;
  std::vector<quant::Scheme> schemes = {
      quant::makeScheme(format, Granularity::Tensor, 0, 0, symmetric)};
  for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis)
    schemes.push_back(quant::makeScheme(format, Granularity::Channel, axis, 0, symmetric));
  for (int64_t block : blocks)
    if (shape.back() % block == 0)
      schemes.push_back(quant::makeScheme(format, Granularity::Block, 0, block, symmetric));
  return schemes;
}

} // namespace llmc::test

#endif
