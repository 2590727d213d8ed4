//===- Nf4WeightCases.h - random NF4 weights for kernel tests ---*- C++ -*-===//
//
// Random NF4 storage (random codes and absmax levels — int8, or E4M3 with
// its NaN codes among them — scales and a mean that leave some blocks'
// absmax <= 0 or NaN, i.e. zero) with its ref tensors and buffers, and
// matmul_nf4's attributes.
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
  quant::AbsmaxFormat absmaxFormat = quant::AbsmaxFormat::Int8;
};

/// Random storage whose absmax levels are read in `format` (random bytes
/// either way).
inline Nf4Weight randomWeight(int64_t numel, int64_t block, uint64_t seed,
                              quant::AbsmaxFormat format = quant::AbsmaxFormat::Int8) {
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
          Buffer::of(mean, DType::F32),
          format};
}

/// Whether matmul_nf4 takes the integer dots (x quantized to int8 per 32,
/// levels in 127ths: kernels/cpu/DecodeGemvInt8.h): a decode step's few
/// rows (≤ 16) times Wᵀ [N, K], blocks of whole 32s that divide K.
inline bool takesIntegerDots(int64_t rows, int64_t k, int64_t block, bool transposeB) {
  return rows <= 16 && transposeB && block % 32 == 0 && k % block == 0;
}

/// The weight (`shape`, blocks of `block` along its rows) with each level
/// its int8 form (quant::kNf4Int8Levels / 127): what the integer dots
/// multiply.
inline RefTensor nf4Int8Weights(const Nf4Weight &wt, const std::vector<int64_t> &shape,
                                int64_t block) {
  RefTensor w = RefTensor::zeros(shape);
  std::vector<uint8_t> codes(wt.codes.data.begin(), wt.codes.data.end());
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t g = i / block;
    const float absmax =
        quant::nf4Absmax(static_cast<uint8_t>(wt.absmaxQ.data[g]), wt.absmaxFormat,
                         static_cast<float>(wt.absmaxScale.data[g / quant::kNf4DoubleQuantBlock]),
                         static_cast<float>(wt.mean));
    const int level = quant::kNf4Int8Levels[quant::nf4Index(codes.data(), i)];
    w.data[i] = absmax > 0.0f ? level / 127.0 * absmax : 0.0;
  }
  return w;
}

/// matmul_nf4's attributes; absmax_format only for E4M3 levels (absent,
/// it reads as int8).
inline KernelAttrs nf4Attrs(int64_t block, std::vector<int64_t> weightShape, bool transposeB,
                            quant::AbsmaxFormat format = quant::AbsmaxFormat::Int8) {
  KernelAttrs a = attrs({}, {{"block", block}, {"transpose_b", transposeB}});
  a.setInts("weight_shape", std::move(weightShape));
  if (format != quant::AbsmaxFormat::Int8)
    a.setInt("absmax_format", static_cast<int64_t>(format));
  return a;
}

} // namespace llmc::test

#endif
