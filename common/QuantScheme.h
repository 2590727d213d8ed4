//===- QuantScheme.h - the fake-quantization contract ----------*- C++ -*-===//
//
// What `qat.observe`, `qat.fake_quant`, `qat.fake_quant_grad` and `qat.ema`
// compute, shared by the CPU kernels, the CUDA kernels and the double
// reference (which decide the grid in fp32 exactly as the kernels do, so a
// rounding tie is broken the same way everywhere). Standard library only.
//
// A scheme quantizes each *group* of a tensor with its own range. Groups:
//  - tensor:  one group;
//  - channel: one per index of dimension `axis` (element i of a row-major
//             tensor is in group (i / inner) % shape[axis], inner = the
//             product of the dims after `axis`);
//  - block:   `block` consecutive elements of the last dimension (which
//             `block` divides): element i is in group i / block.
// A `stacked` scheme reads dimension 0 as a stack of tensors, each
// quantized on its own (a mixture of experts' weights [G, K, F], each
// expert with its own scales): tensor is one group per slice, channel
// one per (slice, index of `axis`), `axis` >= 1 counted in the whole
// tensor; blocks, which never cross a row, are the same groups either way.
//
// A range is stored per group as the pair [−min, max] (tensor<G×2×f32>),
// so ranges of pieces of one tensor on several ranks combine by an
// elementwise max (one all-reduce).
//
// Quantize-dequantize of x with range [n, m] (min = −n, max = m), in fp32:
//  - symmetric: amax = max(n, m); if amax is not > 0, y = 0 and every
//    nonzero x counts as clipped. Otherwise:
//      int8 / int4 / int3: scale = amax / qmax (127 / 7 / 3); q = round(x / scale)
//                   (ties to even); clipped = |q| > qmax; y = clamp(q) · scale.
//      fp8_e4m3 / fp8_e5m2: scale = amax / fmax (448 / 57344);
//                   v = x / scale; clipped = |x| > amax (not |v| > fmax:
//                   amax / scale can exceed fmax by an ulp); y = fp8(clamp(v)) ·
//                   scale, fp8() rounding to the nearest value of the format
//                   (subnormals included; ties to the even mantissa): the
//                   shared rounding of common/Fp8.h.
//      nf4:         v = x / amax; clipped = |v| > 1; y = the NF4 level
//                   nearest clamp(v) (ties to the lower level) · amax.
//  - asymmetric (integer formats only): lo = min(min, 0), hi = max(max, 0);
//    qmin = −(qmax + 1); if hi − lo is not > 0, as amax = 0 above. Otherwise
//    scale = (hi − lo) / (qmax − qmin); zp = clamp(round(qmin − lo / scale),
//    qmin, qmax); q = round(x / scale) + zp; clipped = q ∉ [qmin, qmax];
//    y = (clamp(q) − zp) · scale.
// fake_quant_grad: dx = clipped ? 0 : dy (the straight-through estimator,
// zero where x was clipped).
// observe: per group [−min(x), max(x)].
// ema: per group, new = observed if state is (0, 0) (never observed), else
// momentum · state + (1 − momentum) · observed.
//
// Outlier columns (LLM.int8(), Dettmers et al. 2022), a scheme with
// `outlier` = t > 0 (integer formats, tensor or channel granularity): the
// columns of x are the indices c of its last dimension, and `columns`
// (tensor<C×2×f32>) holds each column's range [−min, max] over all rows of
// x, combined over the ranks that split the rows — so every rank decides as
// one rank would on the whole tensor. Column c is an outlier column when
// max(columns[c]) > t, both read as fp32 and compared in double (a column
// whose largest |x| is exactly t is not one). Then:
//  - observe(x, columns): the ranges of the scheme's groups over the
//    elements of the other columns only (a group left without elements
//    observes [−inf, −inf]);
//  - fake_quant(x, range, columns): y = x in outlier columns (kept in high
//    precision), the quantize-dequantize above elsewhere;
//  - fake_quant_grad(x, range, dy, columns): dx = dy in outlier columns
//    (never clipped), the straight-through rule above elsewhere.
// A range that is empty because every column is an outlier quantizes no
// element, so its "y = 0" never shows.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_QUANTSCHEME_H
#define LLMC_COMMON_QUANTSCHEME_H

#include "common/Fp8.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc::quant {

/// Kernel attribute `format`.
/// (Int3 came last, so the numbers of the others stay what artifacts hold.)
enum class Format : int64_t { Int8 = 0, Int4 = 1, Fp8E4M3 = 2, Fp8E5M2 = 3, Nf4 = 4, Int3 = 5 };
/// Kernel attribute `granularity`.
enum class Granularity : int64_t { Tensor = 0, Channel = 1, Block = 2 };

struct Scheme {
  Format format = Format::Int8;
  Granularity granularity = Granularity::Tensor;
  int64_t axis = 0;     ///< channel
  int64_t block = 0;    ///< block
  bool symmetric = true;
  double outlier = 0.0; ///< outlier-column threshold on |x|; 0: none
  bool stacked = false; ///< dimension 0 stacks tensors quantized each on its own
};

/// A scheme in one expression: makeScheme(Format::Int4, Granularity::Block, 0, 64).
inline Scheme makeScheme(Format format, Granularity granularity = Granularity::Tensor,
                         int64_t axis = 0, int64_t block = 0, bool symmetric = true) {
  Scheme s;
  s.format = format;
  s.granularity = granularity;
  s.axis = axis;
  s.block = block;
  s.symmetric = symmetric;
  return s;
}

/// Whether a column with range [−min, max] = [negMin, max] is an outlier
/// column of `s` (always false without a threshold).
inline bool isOutlierColumn(const Scheme &s, float negMin, float max) {
  return s.outlier > 0.0 && static_cast<double>(negMin > max ? negMin : max) > s.outlier;
}

/// The 16 NormalFloat levels of QLoRA (Dettmers et al., 2023), ascending.
inline constexpr float kNf4Levels[16] = {
    -1.0f,        -0.6961928f, -0.52507305f, -0.3949175f, -0.28444138f, -0.18477343f,
    -0.09105004f, 0.0f,        0.0795803f,   0.1609302f,  0.2461123f,   0.33791524f,
    0.44070983f,  0.562617f,   0.72295684f,  1.0f};

/// kNf4Levels as their nearest multiples of 1/127, in 127ths: the integer
/// weights the CPU's decode-step NF4 dots multiply (llama.cpp's IQ4_NL
/// likewise defines its levels in int8).
inline constexpr int8_t kNf4Int8Levels[16] = {-127, -88, -67, -50, -36, -23, -12, 0,
                                              10,   20,  31,  43,  56,  71,  92,  127};

/// Largest integer level of a symmetric integer format (127 / 7 / 3).
inline int64_t integerMax(Format f) {
  return f == Format::Int8 ? 127 : f == Format::Int4 ? 7 : 3;
}
inline bool isInteger(Format f) {
  return f == Format::Int8 || f == Format::Int4 || f == Format::Int3;
}
/// The common/Fp8.h format of an fp8 Format.
inline fp8::Kind fp8KindOf(Format f) {
  return f == Format::Fp8E4M3 ? fp8::Kind::E4M3 : fp8::Kind::E5M2;
}
/// Largest finite value of an fp8 format.
inline double fp8Max(Format f) { return fp8::maxOf(fp8KindOf(f)); }

inline const char *formatName(Format f) {
  switch (f) {
  case Format::Int8: return "int8";
  case Format::Int4: return "int4";
  case Format::Int3: return "int3";
  case Format::Fp8E4M3: return "fp8_e4m3";
  case Format::Fp8E5M2: return "fp8_e5m2";
  case Format::Nf4: return "nf4";
  }
  return "?";
}

/// Number of groups of a tensor of `shape` (0 when the scheme does not fit
/// the shape: axis out of range, block not dividing the last dimension).
inline int64_t groupCount(const Scheme &s, const std::vector<int64_t> &shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int64_t rank = static_cast<int64_t>(shape.size());
  // Stacked tensor and channel groups repeat per slice of dimension 0.
  const int64_t slices = s.stacked && rank >= 2 ? shape[0] : 1;
  switch (s.granularity) {
  case Granularity::Tensor: return slices;
  case Granularity::Channel:
    return s.axis >= (s.stacked ? 1 : 0) && s.axis < rank ? slices * shape[s.axis] : 0;
  case Granularity::Block:
    return !shape.empty() && s.block > 0 && shape.back() % s.block == 0 ? numel / s.block : 0;
  }
  return 0;
}

/// Elements after `axis` (the stride of a channel index).
inline int64_t innerSize(const std::vector<int64_t> &shape, int64_t axis) {
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  return inner;
}

/// The group of flat element `i`.
inline int64_t groupOf(const Scheme &s, const std::vector<int64_t> &shape, int64_t i) {
  const bool stacked = s.stacked && shape.size() >= 2;
  const int64_t slice = stacked ? innerSize(shape, 0) : 0;
  switch (s.granularity) {
  case Granularity::Tensor: return stacked ? i / slice : 0;
  case Granularity::Channel: {
    const int64_t channel = (i / innerSize(shape, s.axis)) % shape[s.axis];
    return stacked ? (i / slice) * shape[s.axis] + channel : channel;
  }
  case Granularity::Block: return i / s.block;
  }
  return 0;
}

/// How a format turns x / scale into a level (the kernels' loop bodies).
enum class Grid { IntSymmetric, IntAsymmetric, Fp8, Nf4 };
inline Grid gridOf(const Scheme &s) {
  if (isInteger(s.format)) return s.symmetric ? Grid::IntSymmetric : Grid::IntAsymmetric;
  return s.format == Format::Nf4 ? Grid::Nf4 : Grid::Fp8;
}

/// The constants one call of a fake-quantization kernel uses for its
/// format, computed once at bind time (passed by value to CUDA kernels).
struct FormatConsts {
  float qmin = 0.0f, qmax = 0.0f; ///< integer levels
  float fmax = 0.0f;              ///< largest finite fp8 value
  int mbits = 0, emin = 0;        ///< fp8 mantissa bits, least normal exponent
  float nf4Threshold[15] = {};    ///< largest float ≤ each NF4 midpoint
  float nf4Levels[16] = {};       ///< kNf4Levels
};

inline FormatConsts formatConsts(Format f) {
  FormatConsts k;
  if (isInteger(f)) {
    k.qmax = static_cast<float>(integerMax(f));
    k.qmin = -(k.qmax + 1.0f);
  } else if (f == Format::Fp8E4M3 || f == Format::Fp8E5M2) {
    k.fmax = static_cast<float>(fp8Max(f));
    k.mbits = fp8::specOf(fp8KindOf(f)).mbits;
    k.emin = fp8::specOf(fp8KindOf(f)).emin;
  }
  for (int i = 0; i < 15; ++i) {
    // Two floats of like magnitude: their exact mean is a double.
    double mid = (static_cast<double>(kNf4Levels[i]) + kNf4Levels[i + 1]) / 2.0;
    float below = static_cast<float>(mid);
    if (static_cast<double>(below) > mid) below = std::nextafter(below, -INFINITY);
    k.nf4Threshold[i] = below;
  }
  for (int i = 0; i < 16; ++i) k.nf4Levels[i] = kNf4Levels[i];
  return k;
}

// --- NF4 storage with double-quantized absmax (QLoRA) -----------------------
//
// A stored NF4 tensor: per element the index 0..15 of its level, two per
// byte (element 2k in the low nibble of byte k); per block of elements one
// absmax, itself stored as an 8-bit level with one fp32 scale per
// kNf4DoubleQuantBlock consecutive blocks and one fp32 mean:
// absmax = level(code) · scale + mean (two fp32 operations, in that order).
// The level is the code read as an int8 (two's complement; levels ±127,
// scale = max |absmax − mean| / 127) or as an OCP E4M3 number (QLoRA's
// 8-bit floats: common/Fp8.h, scale = max |absmax − mean| / 448).
// Element value: kNf4Levels[index] · absmax, or 0 where absmax is not > 0.

/// Blocks sharing one fp32 scale of their 8-bit absmax levels.
inline constexpr int64_t kNf4DoubleQuantBlock = 256;
/// Elements per block of QLoRA's stored weights (`--qlora`).
inline constexpr int64_t kNf4Block = 64;

/// How a double-quantized absmax level is stored: kernel attribute
/// `absmax_format` (the numbers are what artifacts hold).
enum class AbsmaxFormat : int64_t { Int8 = 0, Fp8E4M3 = 1 };

/// "int8" / "fp8_e4m3": the ops' attribute and the file record's spelling.
inline const char *absmaxFormatName(AbsmaxFormat f) {
  return f == AbsmaxFormat::Fp8E4M3 ? "fp8_e4m3" : "int8";
}
/// Parses absmaxFormatName's spelling; false for anything else.
inline bool parseAbsmaxFormat(const std::string &name, AbsmaxFormat &out) {
  for (AbsmaxFormat f : {AbsmaxFormat::Int8, AbsmaxFormat::Fp8E4M3})
    if (name == absmaxFormatName(f)) {
      out = f;
      return true;
    }
  return false;
}
/// The largest level of a format (127 / 448): a block of 256's scale is
/// its largest |absmax − mean| over this.
inline float absmaxLevelMax(AbsmaxFormat f) {
  return f == AbsmaxFormat::Fp8E4M3 ? fp8::maxOf(fp8::Kind::E4M3) : 127.0f;
}

/// The fp32 scales of `blocks` double-quantized absmax values.
inline int64_t nf4ScaleCount(int64_t blocks) {
  return (blocks + kNf4DoubleQuantBlock - 1) / kNf4DoubleQuantBlock;
}

/// The level a stored absmax code holds (exact in fp32).
LLMC_HOST_DEVICE inline float nf4AbsmaxLevel(uint8_t code, AbsmaxFormat format) {
  return format == AbsmaxFormat::Fp8E4M3 ? fp8::decode(code, fp8::Kind::E4M3)
                                         : static_cast<float>(static_cast<int8_t>(code));
}
inline float nf4Absmax(uint8_t code, AbsmaxFormat format, float scale, float mean) {
  float deviation = nf4AbsmaxLevel(code, format) * scale;
  return deviation + mean;
}
inline float nf4Value(int index, float absmax) {
  return absmax > 0.0f ? kNf4Levels[index] * absmax : 0.0f;
}
/// The level index of element `i` of packed `codes`.
inline int nf4Index(const uint8_t *codes, int64_t i) {
  uint8_t byte = codes[i / 2];
  return (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
}

} // namespace llmc::quant

#endif
