//===- Fp8Codes.h - fp8 codes for the kernel tests ---------------*- C++ -*-===//
//
// Random fp8 codes and their values, from the references' definitions of
// the formats, for the tests of the kernels that read fp8 operands
// (matmul_fp8_test.cpp, grouped_matmul_fp8_test.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_FP8CODES_H
#define LLMC_TEST_UNIT_KERNELS_FP8CODES_H

#include "Conformance.h"

namespace llmc::test {

/// The kernels' format attribute values (common/QuantScheme.h).
constexpr int64_t kE4M3 = 2, kE5M2 = 3;

inline const char *fp8FormatName(int64_t format) { return format == kE4M3 ? "e4m3" : "e5m2"; }

/// Random finite codes of `format` (NaN and, for E5M2, inf left out).
inline RefTensor randomCodes(std::vector<int64_t> shape, uint64_t seed, int64_t format) {
  const int64_t gap = format == kE4M3 ? 1 : 4, first = 128 - gap; // 0x7f / 0x7c..0x7f
  RefTensor codes = randomIds(std::move(shape), seed, 0, 256 - 2 * gap);
  for (double &c : codes.data) {
    int64_t v = static_cast<int64_t>(c);
    c = static_cast<double>(v < first ? v : v + gap);
  }
  return codes;
}

/// The values of `codes` in `format`, from the references' definitions.
inline RefTensor codeValues(const RefTensor &codes, int64_t format) {
  RefTensor values = codes;
  for (double &v : values.data) {
    int64_t byte = static_cast<int64_t>(v);
    v = format == kE4M3 ? ref::e4m3Value(byte) : ref::e5m2Value(byte);
  }
  return values;
}

} // namespace llmc::test

#endif
