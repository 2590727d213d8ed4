//===- matmul_nf4.cpp - x · W with W expanded from NF4 inside the product -===//
//
// matmul_nf4: y = x · W (or x · Wᵀ), W held as NF4 storage
// (common/QuantScheme.h: a 4-bit level per element, a double-quantized
// absmax per block of its last dimension), through the quantized-matmul
// kernel of QuantizedMatmul.h with the expander below.
//
// grouped_matmul_nf4 multiplies each expert's rows through the same kernel,
// an expert's slice being a piece of the stack's flat storage.
//
// A piece of a weight split by tensor parallelism finds its blocks'
// scales by their index in the whole weight (common/Nf4Piece.h). A block's
// absmax level is its code read as an int8 or an E4M3 number
// (absmax_format; quant::nf4AbsmaxLevel).
// Expansion multiplies a level by its block's absmax exactly as
// qat_dequantize_nf4 does (a single fp32 product; 0 where the absmax is not
// > 0), so the weights are those `llmc quantize` dequantizes. Levels are
// looked up with vpermps: sixteen at a time where the CPU has AVX-512
// (chosen at bind time, the library being built for AVX2; the environment
// variable LLMC_CPU_NO_AVX512 keeps to AVX2), else eight.
//
// A decode step's product over W [N, K] in blocks of whole 32s that divide
// K takes the integer dots of DecodeGemvInt8.h instead: x quantized to
// int8 per 32, each level its nearest multiple of 1/127 (quant::kNf4Int8Levels)
// and each block's scale absmax / 127, computed a row at a time.
//
//===----------------------------------------------------------------------===//

#include "common/QuantScheme.h"
#include "kernels/cpu/QuantizedMatmul.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace llmc::cpu {
namespace {

/// Expands elements [first, first + count) of W (flat, row-major) into
/// `out`.
class Nf4Expander {
public:
  /// The mean is read where it is used: loading weights after the kernel
  /// binds changes it. `packable`: a weight of its own (not an expert of
  /// a stack), whose decode products may run from a repacked copy.
  Nf4Expander(const uint8_t *codes, const uint8_t *absmaxQ, const float *absmaxScale,
              const float *mean, int64_t block, Nf4Piece piece, quant::AbsmaxFormat absmaxFormat,
              bool avx512, decode::DotIsa isa, bool packable)
      : codes_(codes), absmaxQ_(absmaxQ), absmaxScale_(absmaxScale), mean_(mean), block_(block),
        piece_(piece), absmaxFormat_(absmaxFormat), avx512_(avx512), isa_(isa),
        packs_(packable && decode::usePackedNibbles()) {}

  int64_t alignment() const { return block_; }

  void operator()(int64_t first, int64_t count, float *out) const {
    // Whole blocks of an even size (every call of the few-rows paths, and
    // the sgemm path's once its chunk is whole blocks): one division, then
    // a block's bytes at a time.
    if (canAccumulate(first, count)) {
      const int64_t half = block_ / 2, g0 = first / block_, g1 = g0 + count / block_;
      const uint8_t *bytes = codes_ + g0 * half;
      for (int64_t g = g0; g < g1; ++g, bytes += half, out += block_)
        expandBytes(bytes, half, scaleOf(g), out);
      return;
    }
    int64_t end = first + count;
    while (first < end) {
      int64_t g = first / block_;
      int64_t stop = std::min(end, (g + 1) * block_);
      const float a = scaleOf(g);
      int64_t i = first;
      if (i % 2 != 0 && i < stop)
        *out++ = quant::kNf4Levels[codes_[i / 2] >> 4] * a, ++i;
      int64_t pairs = (stop - i) / 2;
      expandBytes(codes_ + i / 2, pairs, a, out);
      out += 2 * pairs;
      i += 2 * pairs;
      if (i < stop)
        *out++ = quant::kNf4Levels[codes_[i / 2] & 0x0F] * a, ++i;
      first = stop;
    }
  }

  /// Whether [first, first + count) is whole blocks of an even size, which
  /// accumulate() takes.
  bool canAccumulate(int64_t first, int64_t count) const {
    return block_ % 2 == 0 && first % block_ == 0 && count % block_ == 0;
  }

  /// acc[j] += xv · W[first + j] for j < count (whole blocks), without
  /// storing the expanded weights.
  void accumulate(int64_t first, int64_t count, float xv, float *acc) const {
    const int64_t half = block_ / 2, g0 = first / block_, g1 = g0 + count / block_;
    const uint8_t *bytes = codes_ + g0 * half;
    for (int64_t g = g0; g < g1; ++g, bytes += half, acc += block_)
      bytesTo<true>(bytes, half, scaleOf(g), xv, acc);
  }

  /// Rows of K elements in whole steps, blocks of whole steps.
  bool canDotRows(int64_t k) const { return decode::canStep(k, block_, true); }
  bool stepsEvensThenOdds() const { return true; }
  /// Blocks of whole 32s that divide K (each row's own blocks).
  bool canDotQuantized(int64_t k) const {
    return k % block_ == 0 && decode::canDotQuantized(k, block_);
  }
  decode::QLayout quantizedLayout() const {
    return decode::QLayout::of(isa_, decode::CodeKind::Nf4);
  }
  bool packs() const { return packs_; }
  decode::QLayout packedLayout() const {
    return decode::PackedNibbles::xLayout(isa_, decode::CodeKind::Nf4);
  }
  std::shared_ptr<const decode::PackedNibbles> pack(int64_t n, int64_t k) const {
    return decode::PackedNibbles::shared(codes_, IntScales{this, block_ / decode::kQBlock}, n, k,
                                         decode::CodeKind::Nf4, isa_);
  }
  void dotQuantized(int64_t r0, int64_t r1, const decode::QRows &d) const {
    decode::intRowsOf<decode::CodeKind::Nf4>(isa_, codes_,
                                             IntScales{this, block_ / decode::kQBlock}, r0, r1, d);
  }
  void dotRows(int64_t r0, int64_t r1, const decode::Rows &d, bool avx512) const {
    decode::rowsOf(decode::NibbleCodes{codes_, quant::kNf4Levels}, BlockScale{this},
                   decode::Runs{block_}, r0, r1, d, avx512);
  }

private:
  /// dotRows' scale of block g.
  struct BlockScale {
    const Nf4Expander *self;
    static constexpr bool kScaled = true;
    float operator()(int64_t g) const { return self->scaleOf(g); }
  };

  /// 1/127 rounded: dotQuantized's scales multiply by it rather than divide
  /// by 127 (a division a block was a fifth of an AVX2 decode product's
  /// time; the scale moves by an ulp at most).
  static constexpr float kPer127 = 1.0f / 127.0f;

  /// dotQuantized's scales: absmax / 127 of each block of a row, the
  /// levels being in 127ths (decode::BlockScales' interface).
  struct IntScales {
    const Nf4Expander *self;
    int64_t per; ///< blocks of 32 per NF4 block
    static int64_t scratchFloats(int64_t k) { return k / decode::kQBlock + 16; }
    const float *row(int64_t r, int64_t k, float *scratch) const {
      const int64_t blocks = k / self->block_, g0 = r * blocks;
      int64_t j = 0;
#if defined(__AVX2__)
      if (self->piece_.rowsAreRuns()) {
        const int64_t whole0 = self->piece_.wholeBlock(g0);
        j = self->avx512_ ? self->intScales512(g0, whole0, blocks, scratch)
                          : self->intScales256(g0, whole0, blocks, scratch);
      }
#endif
      for (; j < blocks; ++j) scratch[j] = self->scaleOf(g0 + j) * kPer127;
      return scratch;
    }
    /// Starts loading row r's absmax codes.
    void prefetch(int64_t r, int64_t k) const {
      const int64_t blocks = k / self->block_;
      decode::prefetchBytes(self->absmaxQ_ + r * blocks, blocks);
    }
  };

#if defined(__AVX2__)
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own
// _mm512_undefined operands (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
  /// IntScales::row's blocks [g0, g0 + n), one run of the whole weight's
  /// from its block whole0 (a row of the weight, of an expert of a stack,
  /// or of a piece with its columns in one chunk), sixteen at a time
  /// (scaleOf's two fp32 operations, in order, then · kPer127); returns
  /// the blocks done.
  __attribute__((target("avx512f,avx512bw"))) int64_t intScales512(int64_t g0, int64_t whole0,
                                                                   int64_t n, float *out) const {
    const __m512 mean = _mm512_set1_ps(*mean_), zero = _mm512_setzero_ps();
    const __m512 per127 = _mm512_set1_ps(kPer127);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const bool e4m3 = absmaxFormat_ == quant::AbsmaxFormat::Fp8E4M3;
    const float *e4m3Values = fp8::e4m3Values();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      const int64_t g = g0 + j;
      const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(absmaxQ_ + g));
      // nf4AbsmaxLevel: the int8, or the E4M3 number looked up.
      const __m512 level = e4m3 ? _mm512_i32gather_ps(_mm512_cvtepu8_epi32(codes), e4m3Values, 4)
                                : _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes));
      // The sixteen blocks share one scale or cross into the next (by
      // the whole weight's block index).
      const int64_t whole = whole0 + j, first = whole / quant::kNf4DoubleQuantBlock;
      const int crossing = static_cast<int>((first + 1) * quant::kNf4DoubleQuantBlock - whole);
      const __mmask16 next = _mm512_cmpge_epi32_mask(lane, _mm512_set1_epi32(crossing));
      const __m512 scale = _mm512_mask_blend_ps(
          next, _mm512_set1_ps(absmaxScale_[first]),
          _mm512_set1_ps(
              absmaxScale_[std::min(first + 1, (whole + 15) / quant::kNf4DoubleQuantBlock)]));
      const __m512 absmax = _mm512_add_ps(_mm512_mul_ps(level, scale), mean);
      // max(NaN, 0) is 0, as scaleOf's "not > 0".
      _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_max_ps(absmax, zero), per127));
    }
    return j;
  }
#pragma GCC diagnostic pop

  /// intScales512 eight at a time with AVX2.
  int64_t intScales256(int64_t g0, int64_t whole0, int64_t n, float *out) const {
    const __m256 mean = _mm256_set1_ps(*mean_), zero = _mm256_setzero_ps();
    const __m256 per127 = _mm256_set1_ps(kPer127);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const bool e4m3 = absmaxFormat_ == quant::AbsmaxFormat::Fp8E4M3;
    const float *e4m3Values = fp8::e4m3Values();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const int64_t g = g0 + j;
      const __m128i codes = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(absmaxQ_ + g));
      const __m256 level = e4m3 ? _mm256_i32gather_ps(e4m3Values, _mm256_cvtepu8_epi32(codes), 4)
                                : _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes));
      const int64_t whole = whole0 + j, first = whole / quant::kNf4DoubleQuantBlock;
      const int crossing = static_cast<int>((first + 1) * quant::kNf4DoubleQuantBlock - whole);
      const __m256 next =
          _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(crossing - 1)));
      const __m256 scale = _mm256_blendv_ps(
          _mm256_set1_ps(absmaxScale_[first]),
          _mm256_set1_ps(
              absmaxScale_[std::min(first + 1, (whole + 7) / quant::kNf4DoubleQuantBlock)]),
          next);
      const __m256 absmax = _mm256_add_ps(_mm256_mul_ps(level, scale), mean);
      // max(NaN, 0) is 0 with NaN first (vmaxps returns its second operand).
      _mm256_storeu_ps(out + j, _mm256_mul_ps(_mm256_max_ps(absmax, zero), per127));
    }
    return j;
  }
#endif

  /// Block g's absmax, or nf4Value's 0 where it is not > 0.
  float scaleOf(int64_t g) const {
    float scale = absmaxScale_[piece_.wholeBlock(g) / quant::kNf4DoubleQuantBlock];
    float absmax = quant::nf4Absmax(absmaxQ_[g], absmaxFormat_, scale, *mean_);
    return absmax > 0.0f ? absmax : 0.0f;
  }

  inline void expandBytes(const uint8_t *bytes, int64_t n, float a, float *out) const {
    bytesTo<false>(bytes, n, a, 0.0f, out);
  }

  /// out[2j], out[2j + 1] = the low and high levels of bytes[j], times a;
  /// with Accumulate, out[i] += xv · that (a fused multiply-add).
  template <bool Accumulate>
  inline void bytesTo(const uint8_t *bytes, int64_t n, float a, float xv, float *out) const {
    int64_t j = 0;
#if defined(__AVX2__)
    if (avx512_) {
      j = bytesTo512<Accumulate>(bytes, n, a, xv, out);
    } else {
      j = bytesTo256<Accumulate>(bytes, n, a, xv, out);
    }
#endif
    for (; j < n; ++j) {
      float w0 = quant::kNf4Levels[bytes[j] & 0x0F] * a, w1 = quant::kNf4Levels[bytes[j] >> 4] * a;
      if constexpr (Accumulate) {
        out[2 * j] = std::fma(xv, w0, out[2 * j]);
        out[2 * j + 1] = std::fma(xv, w1, out[2 * j + 1]);
      } else {
        out[2 * j] = w0;
        out[2 * j + 1] = w1;
      }
    }
  }

#if defined(__AVX2__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined operands (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  /// bytesTo's vector part with AVX-512, where one vpermps looks up all 16
  /// levels; returns the bytes done.
  template <bool Accumulate>
  __attribute__((target("avx512f,avx512bw"))) static int64_t
  bytesTo512(const uint8_t *bytes, int64_t n, float a, float xv, float *out) {
    const __m512 levels = _mm512_loadu_ps(quant::kNf4Levels);
    const __m512 scale = _mm512_set1_ps(a), x = _mm512_set1_ps(xv);
    const __m128i nibble = _mm_set1_epi8(0x0F);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes + j));
      __m128i low = _mm_and_si128(b, nibble);
      __m128i high = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
      // Element order: lo0 hi0 lo1 hi1 ...; a lambda would not inherit the
      // target, hence the two halves written out.
      __m512 w0 = _mm512_mul_ps(
          _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high)), levels), scale);
      __m512 w1 = _mm512_mul_ps(
          _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(low, high)), levels), scale);
      float *p = out + 2 * j;
      if constexpr (Accumulate) {
        _mm512_storeu_ps(p, _mm512_fmadd_ps(x, w0, _mm512_loadu_ps(p)));
        _mm512_storeu_ps(p + 16, _mm512_fmadd_ps(x, w1, _mm512_loadu_ps(p + 16)));
      } else {
        _mm512_storeu_ps(p, w0);
        _mm512_storeu_ps(p + 16, w1);
      }
    }
    return j;
  }

#pragma GCC diagnostic pop

  template <bool Accumulate>
  static int64_t bytesTo256(const uint8_t *bytes, int64_t n, float a, float xv, float *out) {
    int64_t j = 0;
    const __m256 lo8 = _mm256_loadu_ps(quant::kNf4Levels);
    const __m256 hi8 = _mm256_loadu_ps(quant::kNf4Levels + 8);
    const __m256 scale = _mm256_set1_ps(a), x = _mm256_set1_ps(xv);
    const __m128i nibble = _mm_set1_epi8(0x0F);
    auto put = [&](float *p, __m128i idx8) { // 8 indices in the low bytes → 8 levels · a
      __m256i idx = _mm256_cvtepu8_epi32(idx8);
      __m256 low = _mm256_permutevar8x32_ps(lo8, idx);
      __m256 high = _mm256_permutevar8x32_ps(hi8, idx);
      // Bit 3 of the index, moved to the sign bit, picks the upper half.
      __m256 pick = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
      __m256 w = _mm256_mul_ps(_mm256_blendv_ps(low, high, pick), scale);
      if constexpr (Accumulate)
        _mm256_storeu_ps(p, _mm256_fmadd_ps(x, w, _mm256_loadu_ps(p)));
      else
        _mm256_storeu_ps(p, w);
    };
    for (; j + 16 <= n; j += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(bytes + j));
      __m128i low = _mm_and_si128(b, nibble);
      __m128i high = _mm_and_si128(_mm_srli_epi16(b, 4), nibble);
      // Element order: lo0 hi0 lo1 hi1 ...
      __m128i first = _mm_unpacklo_epi8(low, high), second = _mm_unpackhi_epi8(low, high);
      put(out + 2 * j, first);
      put(out + 2 * j + 8, _mm_srli_si128(first, 8));
      put(out + 2 * j + 16, second);
      put(out + 2 * j + 24, _mm_srli_si128(second, 8));
    }
    return j;
  }
#endif

  const uint8_t *codes_, *absmaxQ_;
  const float *absmaxScale_, *mean_;
  int64_t block_;
  Nf4Piece piece_;
  quant::AbsmaxFormat absmaxFormat_;
  bool avx512_;
  decode::DotIsa isa_;
  bool packs_;
};

std::unique_ptr<Kernel> makeMatmulNf4(const KernelArgs &args, std::string &error) {
  contracts::MatmulNf4Binding d;
  if (!contracts::bindMatmulNf4(args, error, &d))
    return nullptr;
  decode::DotIsa isa;
  std::string isaError;
  if (!decode::chooseDotIsa(true, isa, isaError))
    return Validator("matmul_nf4", args, error).reject(isaError);
  Nf4Expander expand(args.inputs[1].as<uint8_t>(), args.inputs[2].as<uint8_t>(),
                     args.inputs[3].as<float>(), args.inputs[4].as<float>(), d.block, d.piece,
                     d.absmaxFormat, useAvx512(), isa, /*packable=*/true);
  return makeQuantizedMatmul("matmul_nf4", args, d, expand, error);
}

/// Each expert's Nf4Expander over its codes and absmax levels, a piece of
/// the stack whose blocks find their double-quantized scales in the
/// whole stack's.
std::unique_ptr<Kernel> makeGroupedMatmulNf4(const KernelArgs &args, std::string &error) {
  contracts::GroupedMatmulNf4Binding d;
  if (!contracts::bindGroupedMatmulNf4(args, error, &d))
    return nullptr;
  decode::DotIsa isa;
  std::string isaError;
  if (!decode::chooseDotIsa(true, isa, isaError))
    return Validator("grouped_matmul_nf4", args, error).reject(isaError);
  const uint8_t *codes = args.inputs[2].as<uint8_t>(), *absmaxQ = args.inputs[3].as<uint8_t>();
  const float *absmaxScale = args.inputs[4].as<float>(), *mean = args.inputs[5].as<float>();
  const int64_t slice = d.expert.rows * d.expert.cols;
  const bool avx512 = useAvx512();
  auto expertOf = [=](int64_t g) {
    return Nf4Expander(codes + g * slice / 2, absmaxQ + g * slice / d.block, absmaxScale, mean,
                       d.block, d.expertPiece(g), d.absmaxFormat, avx512, isa,
                       /*packable=*/false);
  };
  return makeGroupedQuantizedMatmul("grouped_matmul_nf4", args, d, expertOf, error);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "matmul_nf4", makeMatmulNf4);
LLMC_REGISTER_KERNEL(CPU, "grouped_matmul_nf4", makeGroupedMatmulNf4);

} // namespace llmc::cpu
