//===- Nf4WeightCases.h - random NF4 weights for kernel tests ---*- C++ -*-===//
//
// Random NF4 storage (random codes and absmax levels, scales and a mean
// that leave some blocks' absmax <= 0, i.e. zero) with its ref tensors and
// buffers, and matmul_nf4's attributes.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_NF4WEIGHTCASES_H
#define LLMC_TEST_UNIT_KERNELS_NF4WEIGHTCASES_H

#include "KernelTest.h"
#include "common/QuantScheme.h"

#include <cstdlib>
#include <random>

namespace llmc::test {

/// `n` uniformly random bytes, as a ref tensor and as u8 storage.
inline RefTensor randomBytes(int64_t n, uint64_t seed) {
  RefTensor t = RefTensor::zeros({n});
  std::mt19937_64 rng(seed);
  for (double &v : t.data) v = static_cast<double>(rng() >> 56);
  return t;
}

/// `bytes` (values 0..255) as u8 storage.
inline Buffer u8Buffer(const RefTensor &bytes) {
  Buffer b(DType::U8, {bytes.numel()});
  uint8_t *out = b.view().as<uint8_t>();
  for (int64_t i = 0; i < bytes.numel(); ++i) out[i] = static_cast<uint8_t>(bytes.data[i]);
  return b;
}

struct Nf4Weight {
  RefTensor codes, absmaxQ, absmaxScale;
  double mean = 0.3;
  Buffer codesBuf, absmaxQBuf, scaleBuf, meanBuf;
};

inline Nf4Weight randomWeight(int64_t numel, int64_t block, uint64_t seed) {
  int64_t groups = numel / block;
  RefTensor codes = randomBytes((numel + 1) / 2, seed), absmaxQ = randomBytes(groups, seed + 1);
  RefTensor scale =
      roundTo(randomTensor({quant::nf4ScaleCount(groups)}, seed + 2, 0.01), DType::F32);
  RefTensor mean = RefTensor::zeros({1});
  mean.data[0] = 0.3;
  return {codes,
          absmaxQ,
          scale,
          0.3,
          u8Buffer(codes),
          u8Buffer(absmaxQ),
          Buffer::of(scale, DType::F32),
          Buffer::of(mean, DType::F32)};
}

inline KernelAttrs nf4Attrs(int64_t block, std::vector<int64_t> weightShape, bool transposeB) {
  KernelAttrs a = attrs({}, {{"block", block}, {"transpose_b", transposeB}});
  a.setInts("weight_shape", std::move(weightShape));
  return a;
}

} // namespace llmc::test

#endif
