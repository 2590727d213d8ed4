//===- IntWeightCases.h - int8/int4/fp8 weights for the matmul_int tests -*- C++ -*-===//
//
// Random int8/int4/fp8 storage of a [rows, cols] weight under each
// grouping (random codes — every E4M3 code but NaN's —, scales of either
// sign with the first zero, zero points over the whole level range), as
// buffers for the kernels and as RefTensors for ref::dequantizeInt; shared
// by the matmul_int conformance cases and the decode GEMV tests.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_INTWEIGHTCASES_H
#define LLMC_TEST_UNIT_KERNELS_INTWEIGHTCASES_H

#include "KernelTest.h"

#include <random>
#include <string>
#include <vector>

namespace llmc::test {

/// The codes of a case: int8, int4, or E4M3 (8 bits, `fp8`).
struct CodeFormat {
  int bits = 8;
  bool fp8 = false;
  std::string name() const { return fp8 ? "fp8" : "int" + std::to_string(bits); }
};
inline const std::vector<CodeFormat> &allCodeFormats() {
  static const std::vector<CodeFormat> formats = {{8, false}, {4, false}, {8, true}};
  return formats;
}

/// Storage of a [rows, cols] weight and its reference values.
struct IntWeight {
  RefTensor codes, scale, zeroPoint; // zeroPoint without data: symmetric
  Buffer codesBuf{DType::U8, {}}, scaleBuf{DType::F32, {}}, zeroPointBuf{DType::I32, {}};
};

/// How a case groups the weight: block > 0, or channelAxis >= 0, or one
/// scale.
struct Grouping {
  int64_t block = 0, channelAxis = -1;
  std::string name() const {
    return block > 0 ? "block" + std::to_string(block)
           : channelAxis >= 0 ? "channel" + std::to_string(channelAxis)
                              : "tensor";
  }
  int64_t groups(int64_t rows, int64_t cols) const {
    return block > 0 ? rows * cols / block : channelAxis == 0 ? rows : channelAxis == 1 ? cols : 1;
  }
};

/// E4M3's NaN codes (S.1111.111), which random fp8 weights leave out.
inline bool isE4m3Nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

inline IntWeight randomWeight(const CodeFormat &f, int64_t rows, int64_t cols, const Grouping &g,
                              bool asymmetric, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = rows * cols, groups = g.groups(rows, cols);
  IntWeight w;
  w.codes = RefTensor::zeros({f.bits == 8 ? n : (n + 1) / 2});
  for (double &v : w.codes.data) {
    auto code = static_cast<uint8_t>(rng() >> 56);
    while (f.fp8 && isE4m3Nan(code)) code = static_cast<uint8_t>(rng() >> 56);
    v = static_cast<double>(code);
  }
  w.scale = roundTo(randomTensor({groups}, seed + 1, 0.05), DType::F32);
  w.scale.data[0] = 0.0; // an empty group reads back as zeros
  w.codesBuf = Buffer(DType::U8, {w.codes.numel()});
  for (int64_t i = 0; i < w.codes.numel(); ++i)
    w.codesBuf.view().as<uint8_t>()[i] = static_cast<uint8_t>(w.codes.data[i]);
  w.scaleBuf = Buffer::of(w.scale, DType::F32);
  if (asymmetric) {
    const int levels = f.bits == 8 ? 256 : 16;
    w.zeroPoint = RefTensor::zeros({groups});
    w.zeroPointBuf = Buffer(DType::I32, {groups});
    for (int64_t i = 0; i < groups; ++i) {
      int z = static_cast<int>(rng() % levels) - levels / 2;
      w.zeroPoint.data[i] = z;
      w.zeroPointBuf.view().as<int32_t>()[i] = z;
    }
  }
  return w;
}

inline KernelAttrs intAttrs(const CodeFormat &f, const Grouping &g,
                            std::vector<int64_t> weightShape, bool transposeB) {
  KernelAttrs a = attrs({}, {{"bits", f.bits}, {"transpose_b", transposeB}});
  if (f.fp8)
    a.setInt("fp8", 1);
  if (g.block > 0) a.setInt("block", g.block);
  if (g.channelAxis >= 0) a.setInt("channel_axis", g.channelAxis);
  a.setInts("weight_shape", std::move(weightShape));
  return a;
}

/// ref::dequantizeInt of `w`.
inline RefTensor referenceWeight(const IntWeight &w, const CodeFormat &f,
                                 const std::vector<int64_t> &shape, const Grouping &g) {
  return ref::dequantizeInt(w.codes, w.scale, w.zeroPoint, shape, f.bits, g.block, g.channelAxis,
                            f.fp8);
}

inline std::vector<Buffer *> inputsOf(Buffer &x, IntWeight &w) {
  std::vector<Buffer *> in = {&x, &w.codesBuf, &w.scaleBuf};
  if (!w.zeroPoint.data.empty()) in.push_back(&w.zeroPointBuf);
  return in;
}

} // namespace llmc::test

#endif
