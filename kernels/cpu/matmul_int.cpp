//===- matmul_int.cpp - x · W with W expanded from int8/int4/fp8 codes ----===//
//
// matmul_int: y = x · W (or x · Wᵀ), W held as `llmc quantize` stores an
// int8, int4 or fp8 weight (kernels/IntWeight.h: a signed level or an E4M3
// value per element, an fp32 scale and, asymmetric, an int32 zero point
// per group), through the quantized-matmul kernel of QuantizedMatmul.h
// with the expander below.
//
// grouped_matmul_int, a mixture of experts' stacked weights stored expert
// after expert, multiplies each expert's rows through the same kernel with
// an expander over that expert's codes and scales.
//
// The expander walks a range of W in runs that share one scale (a block,
// a row, the whole tensor) or, with one scale per column, along the row
// with a scale per element; each run is one vectorized loop (int4 with
// AVX2 intrinsics: the compiler does not vectorize the nibble unpacking
// well; E4M3 codes through a table of their 256 values). Element values
// are IntWeight.h's float(level − zero point) · scale (an E4M3 code's
// value · scale), so the weights are bit for bit those an fp32 artifact
// loads from the same file.
//
//===----------------------------------------------------------------------===//

#include "kernels/IntWeight.h"
#include "kernels/cpu/QuantizedMatmul.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace llmc::cpu {
namespace {

/// The signed level of each 4-bit code (IntWeight.h's intLevel).
constexpr float kInt4Levels[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};

class IntExpander {
public:
  /// `packable`: a weight of its own (not an expert of a stack), whose
  /// int4 decode products may run from a repacked copy.
  IntExpander(const uint8_t *codes, const float *scales, const int32_t *zeroPoints,
              IntWeightLayout layout, decode::DotIsa isa, bool packable)
      : codes_(codes), scales_(scales), zeroPoints_(zeroPoints), layout_(layout), isa_(isa),
        packs_(packable && nibbles() && decode::usePackedNibbles()) {}

  /// Runs shorter than a row (blocks) keep tiles to whole blocks; else any
  /// multiple of 16 columns (whole bytes of int4 codes, whole vectors).
  int64_t alignment() const {
    return layout_.run > 0 && layout_.run < layout_.cols ? layout_.run : 16;
  }

  void operator()(int64_t first, int64_t count, float *out) const {
    visit<false>(first, count, 0.0f, out);
  }
  bool canAccumulate(int64_t, int64_t) const { return true; }

  /// Symmetric codes in runs of one scale (blocks, rows, the tensor).
  bool canDotRows(int64_t k) const {
    return !zeroPoints_ && decode::canStep(k, layout_.run, stepsEvensThenOdds());
  }
  bool stepsEvensThenOdds() const { return nibbles() || layout_.fp8; }
  void dotRows(int64_t r0, int64_t r1, const decode::Rows &d, bool avx512) const {
    const decode::ScaleArray scale{scales_};
    const decode::Runs runs{layout_.run};
    if (layout_.fp8)
      decode::rowsOf(decode::E4m3Codes{codes_}, decode::E4m3Scale{scales_}, runs, r0, r1, d,
                     avx512);
    else if (layout_.bits == 8)
      decode::rowsOf(decode::Int8Codes{reinterpret_cast<const int8_t *>(codes_)}, scale, runs, r0,
                     r1, d, avx512);
    else
      decode::rowsOf(decode::NibbleCodes{codes_, kInt4Levels}, scale, runs, r0, r1, d, avx512);
  }
  void accumulate(int64_t first, int64_t count, float xv, float *acc) const {
    visit<true>(first, count, xv, acc);
  }

  /// Symmetric integer codes in runs of whole blocks of 32
  /// (DecodeGemvInt8.h); E4M3 values are not integers.
  bool canDotQuantized(int64_t k) const {
    return !zeroPoints_ && !layout_.fp8 && decode::canDotQuantized(k, layout_.run);
  }
  decode::QLayout quantizedLayout() const {
    return decode::QLayout::of(isa_, nibbles() ? decode::CodeKind::Int4 : decode::CodeKind::Int8);
  }
  bool packs() const { return packs_; }
  decode::QLayout packedLayout() const {
    return decode::PackedNibbles::xLayout(isa_, decode::CodeKind::Int4);
  }
  std::shared_ptr<const decode::PackedNibbles> pack(int64_t n, int64_t k) const {
    const decode::BlockScales scales{scales_, layout_.run / decode::kQBlock};
    return decode::PackedNibbles::shared(codes_, scales, n, k, decode::CodeKind::Int4, isa_);
  }
  void dotQuantized(int64_t r0, int64_t r1, const decode::QRows &d) const {
    const decode::BlockScales scales{scales_, layout_.run / decode::kQBlock};
    if (nibbles())
      decode::intRowsOf<decode::CodeKind::Int4>(isa_, codes_, scales, r0, r1, d);
    else
      decode::intRowsOf<decode::CodeKind::Int8>(isa_, codes_, scales, r0, r1, d);
  }

private:
  bool nibbles() const { return layout_.bits == 4; }

  /// out[j] = w, or with Accumulate out[j] += xv · w (a fused multiply-add).
  template <bool Accumulate> static inline void put(float *out, int64_t j, float w, float xv) {
    if constexpr (Accumulate)
      out[j] = std::fma(xv, w, out[j]);
    else
      out[j] = w;
  }

  template <bool Accumulate> void visit(int64_t first, int64_t count, float xv, float *out) const {
    const int64_t end = first + count;
    while (first < end) {
      int64_t stop;
      if (layout_.run == 0) { // one scale per column: to the end of the row
        const int64_t c0 = first % layout_.cols;
        stop = std::min(end, first - c0 + layout_.cols);
        perColumn<Accumulate>(first, stop - first, c0, xv, out);
      } else {
        const int64_t g = first / layout_.run;
        stop = std::min(end, (g + 1) * layout_.run);
        oneScale<Accumulate>(first, stop - first, scales_[g], zeroPoints_ ? zeroPoints_[g] : 0, xv,
                             out);
      }
      out += stop - first;
      first = stop;
    }
  }

  /// Elements [first, first + n), all of one group (scale s, zero point z).
  template <bool Accumulate>
  void oneScale(int64_t first, int64_t n, float s, int z, float xv, float *out) const {
    if (layout_.fp8) {
      const float *value = fp8::e4m3Values();
      const uint8_t *q = codes_ + first;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) put<Accumulate>(out, j, value[q[j]] * s, xv);
      return;
    }
    if (layout_.bits == 8) {
      const auto *q = reinterpret_cast<const int8_t *>(codes_) + first;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) put<Accumulate>(out, j, intDequantize(q[j], z, s), xv);
      return;
    }
    int64_t j = 0;
    if (first % 2 != 0) { // starts on a high nibble
      put<Accumulate>(out, 0, intDequantize(intLevel(codes_, 4, first), z, s), xv);
      j = 1;
    }
    const uint8_t *bytes = codes_ + (first + j) / 2;
    const int64_t pairs = (n - j) / 2;
    float *o = out + j;
    int64_t done = 0;
#if defined(__AVX2__)
    done = int4Bytes256<Accumulate>(bytes, pairs, z, s, xv, o);
#endif
#pragma omp simd
    for (int64_t p = done; p < pairs; ++p) {
      const int b = bytes[p];
      // Sign-extend each nibble: shift it to the top of an int8, then back.
      const int low = static_cast<int8_t>(b << 4) >> 4, high = static_cast<int8_t>(b) >> 4;
      put<Accumulate>(o, 2 * p, intDequantize(low, z, s), xv);
      put<Accumulate>(o, 2 * p + 1, intDequantize(high, z, s), xv);
    }
    if (j + 2 * pairs < n)
      put<Accumulate>(out, n - 1, intDequantize(intLevel(codes_, 4, first + n - 1), z, s), xv);
  }

#if defined(__AVX2__)
  /// oneScale's int4 pairs, 16 bytes (32 weights) at a time: each nibble
  /// sign-extended in 8-bit lanes ((v ^ 8) − 8), the two nibbles of a byte
  /// interleaved into element order, then widened to int32, the zero point
  /// subtracted and the result converted and scaled — the scalar loop's
  /// arithmetic exactly. Returns the bytes done.
  template <bool Accumulate>
  static int64_t int4Bytes256(const uint8_t *bytes, int64_t n, int z, float s, float xv,
                              float *out) {
    const __m128i nibble = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    const __m256i zeroPoint = _mm256_set1_epi32(z);
    const __m256 scale = _mm256_set1_ps(s), x = _mm256_set1_ps(xv);
    auto put8 = [&](float *p, __m128i levels) { // the low 8 signed bytes → 8 weights
      __m256i v = _mm256_sub_epi32(_mm256_cvtepi8_epi32(levels), zeroPoint);
      __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(v), scale);
      if constexpr (Accumulate)
        _mm256_storeu_ps(p, _mm256_fmadd_ps(x, w, _mm256_loadu_ps(p)));
      else
        _mm256_storeu_ps(p, w);
    };
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes + j));
      __m128i low = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(b, nibble), eight), eight);
      __m128i high =
          _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(_mm_srli_epi16(b, 4), nibble), eight), eight);
      __m128i first = _mm_unpacklo_epi8(low, high), second = _mm_unpackhi_epi8(low, high);
      put8(out + 2 * j, first);
      put8(out + 2 * j + 8, _mm_srli_si128(first, 8));
      put8(out + 2 * j + 16, second);
      put8(out + 2 * j + 24, _mm_srli_si128(second, 8));
    }
    return j;
  }
#endif

  /// Elements [first, first + n) of one row, starting at column c0, each
  /// column its own group.
  template <bool Accumulate>
  void perColumn(int64_t first, int64_t n, int64_t c0, float xv, float *out) const {
    const float *s = scales_ + c0;
    const int32_t *z = zeroPoints_ ? zeroPoints_ + c0 : nullptr;
    if (layout_.fp8) {
      const float *value = fp8::e4m3Values();
      const uint8_t *q = codes_ + first;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) put<Accumulate>(out, j, value[q[j]] * s[j], xv);
      return;
    }
    if (layout_.bits == 8) {
      const auto *q = reinterpret_cast<const int8_t *>(codes_) + first;
      if (z) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          put<Accumulate>(out, j, intDequantize(q[j], z[j], s[j]), xv);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) put<Accumulate>(out, j, intDequantize(q[j], 0, s[j]), xv);
      }
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      put<Accumulate>(out, j, intDequantize(intLevel(codes_, 4, first + j), z ? z[j] : 0, s[j]),
                      xv);
  }

  const uint8_t *codes_;
  const float *scales_;
  const int32_t *zeroPoints_;
  IntWeightLayout layout_;
  decode::DotIsa isa_;
  bool packs_;
};

std::unique_ptr<Kernel> makeMatmulInt(const KernelArgs &args, std::string &error) {
  contracts::MatmulIntBinding d;
  if (!contracts::bindMatmulInt(args, error, &d))
    return nullptr;
  decode::DotIsa isa;
  std::string isaError;
  if (!decode::chooseDotIsa(d.layout.bits == 4, isa, isaError))
    return Validator("matmul_int", args, error).reject(isaError);
  IntExpander expand(args.inputs[1].as<uint8_t>(), args.inputs[2].as<float>(),
                     d.layout.asymmetric ? args.inputs[3].as<int32_t>() : nullptr, d.layout, isa,
                     /*packable=*/true);
  return makeQuantizedMatmul("matmul_int", args, d, expand, error);
}

/// Each expert's IntExpander over its own codes, scales and zero points.
std::unique_ptr<Kernel> makeGroupedMatmulInt(const KernelArgs &args, std::string &error) {
  contracts::GroupedMatmulIntBinding d;
  if (!contracts::bindGroupedMatmulInt(args, error, &d))
    return nullptr;
  decode::DotIsa isa;
  std::string isaError;
  if (!decode::chooseDotIsa(d.layout.bits == 4, isa, isaError))
    return Validator("grouped_matmul_int", args, error).reject(isaError);
  const uint8_t *codes = args.inputs[2].as<uint8_t>();
  const float *scales = args.inputs[3].as<float>();
  const int32_t *zeroPoints = d.layout.asymmetric ? args.inputs[4].as<int32_t>() : nullptr;
  auto expertOf = [=](int64_t g) {
    return IntExpander(codes + g * d.expertBytes, scales + g * d.expertGroups,
                       zeroPoints ? zeroPoints + g * d.expertGroups : nullptr, d.layout, isa,
                       /*packable=*/false);
  };
  return makeGroupedQuantizedMatmul("grouped_matmul_int", args, d, expertOf, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "matmul_int", makeMatmulInt);
LLMC_REGISTER_KERNEL(CPU, "grouped_matmul_int", makeGroupedMatmulInt);

} // namespace llmc::cpu
