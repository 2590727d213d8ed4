//===- DecodeGemvInt8.h - decode products as int8 dots, x quantized -*- C++ -*-===//
//
// y[i, r] = Σ_c x[i, c] · W[r, c] for symmetric int8 and int4 codes of W
// [N, K] (runs of one scale a multiple of 32 elements), computed as
// llama.cpp's Q4_0 × Q8_0 and Q8_0 × Q8_0 dots are: every 32 elements of a
// row of x (a block) are quantized to int8 with their own scale
//     d = amax / 127,  q = round-to-nearest-even(x · (1 / d)),
// each block's codes are multiplied with W's as integers (an exact int32
// sum), and the sum is scaled once in fp32 by d · W's scale.
//
// So results are not the fp32 product's: |x − q·d| ≤ d/2 per element, and
// |y − y_fp32| ≤ Σ_blocks d/2 · Σ_block |W| (plus fp32 rounding). Prefill
// (more than a few rows) keeps fp32 activations (DecodeGemv.h).
//
// NF4's levels are not integers: here each is its nearest multiple of 1/127
// (quant::kNf4Int8Levels; llama.cpp's IQ4_NL defines its levels in int8),
// so W moves by at most absmax/254 per element, beside x's d/2.
//
// The unsigned × signed byte dot (vpdpbusd, or vpmaddubsw + vpmaddwd) takes
// int4 codes unsigned, as nibble ^ 8 (level + 8); the excess, 8 · Σ q of
// the block, is the accumulator's starting value (`bias`, one per block,
// computed with q). NF4's zmm body likewise looks up level + 128 (vpshufb);
// int8 and NF4's ymm bodies take |w| and sign(w)·q (no overflow of
// vpmaddubsw's int16 pairs).
//
// Bodies, chosen at bind time (chooseDotIsa): AVX-512 VNNI (zmm, int4: 4
// blocks a step), ymm VNNI (AVX-VNNI's VEX vpdpbusd, or on AVX-512 VNNI
// CPUs its EVEX form; int8's best), AVX2 (vpmaddubsw + vpmaddwd). The VNNI
// dot is inline assembly so that one AVX2-compiled body serves both ymm
// forms. LLMC_CPU_DOT=avx512vnni|avxvnni|avx2 asks for a body (a lower one
// where the CPU lacks it); LLMC_CPU_NO_AVX512 rules out the zmm body.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMVINT8_H
#define LLMC_KERNELS_CPU_DECODEGEMVINT8_H

#include "common/QuantScheme.h"
#include "kernels/cpu/DecodeGemv.h"

#include <cmath>
#include <string>
#include <vector>

namespace llmc::cpu::decode {

/// The codes an integer-dot body multiplies.
enum class CodeKind {
  Int8, ///< one signed byte per element
  Int4, ///< a signed nibble (level + 8) per element, two per byte
  Nf4,  ///< an NF4 level index per element, two per byte (quant::kNf4Int8Levels)
};

/// The integer-dot body a kernel runs.
enum class DotIsa {
  Avx512Vnni, ///< zmm, vpdpbusd
  YmmVnniVex, ///< ymm, AVX-VNNI's vpdpbusd
  YmmVnniEvex, ///< ymm, AVX-512 VNNI's vpdpbusd (AVX512VL)
  Avx2,        ///< ymm, vpmaddubsw + vpmaddwd
};

/// The body for this CPU and LLMC_CPU_DOT / LLMC_CPU_NO_AVX512, or false
/// with `error` set for an LLMC_CPU_DOT value that names no body. int8
/// codes (not `nibbles`) have no zmm body: on Zen 4 it read 17 GB/s on one
/// core where the ymm one reads 22-27, so they take ymm VNNI there.
inline bool chooseDotIsa(bool nibbles, DotIsa &isa, std::string &error) {
  const bool vnni512 = useAvx512() && __builtin_cpu_supports("avx512vnni");
  const bool vnniVex = __builtin_cpu_supports("avxvnni");
  const bool vnniEvex = !std::getenv("LLMC_CPU_NO_AVX512") &&
                        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  const char *asked = std::getenv("LLMC_CPU_DOT");
  const std::string want = asked ? asked : "avx512vnni";
  if (want != "avx512vnni" && want != "avxvnni" && want != "avx2") {
    error = "LLMC_CPU_DOT=" + want + ": expected avx512vnni, avxvnni or avx2";
    return false;
  }
  if (want == "avx512vnni" && vnni512 && nibbles)
    isa = DotIsa::Avx512Vnni;
  else if (want != "avx2" && vnniVex)
    isa = DotIsa::YmmVnniVex;
  else if (want != "avx2" && vnniEvex)
    isa = DotIsa::YmmVnniEvex;
  else
    isa = DotIsa::Avx2;
  return true;
}

/// Elements of x that share one int8 scale.
constexpr int64_t kQBlock = 32;

/// How a body lays out quantized x: blocks a step takes, int32 lanes per
/// block, the unsigned offset of W's codes, and (int4) whether a step's x
/// is its blocks' even elements then their odd ones.
struct QLayout {
  int64_t blocksPerStep = 1, lanesPerBlock = 8;
  int offset = 0;
  bool nibbles = false;
  static QLayout of(DotIsa isa, CodeKind codes) {
    const int zmmOffset = codes == CodeKind::Nf4 ? 128 : 8;
    if (isa == DotIsa::Avx512Vnni)
      return QLayout{4, 4, zmmOffset, true};
    switch (codes) {
    case CodeKind::Int4: return QLayout{1, 8, 8, true};
    case CodeKind::Nf4: return QLayout{1, 8, 0, true};
    case CodeKind::Int8: break;
    }
    return QLayout{1, 8, 0, false};
  }
};

/// x [m, k] quantized per block of 32, in a body's layout. Per row: q
/// (blocks rounded up to whole steps, padding zero), and per int32 lane of
/// a step, the bias (−offset · Σ q of the lane's block, in its first lane)
/// and the block's scale d.
struct QuantizedX {
  QLayout layout;
  int64_t m = 0, k = 0, blocks = 0, paddedBlocks = 0;
  std::vector<int8_t> q;
  std::vector<int32_t> bias;
  std::vector<float> scale;

  void resize(QLayout l, int64_t rows, int64_t cols) {
    layout = l, m = rows, k = cols, blocks = cols / kQBlock;
    paddedBlocks = (blocks + l.blocksPerStep - 1) / l.blocksPerStep * l.blocksPerStep;
    q.assign(m * paddedBlocks * kQBlock, 0);
    bias.assign(m * paddedBlocks * l.lanesPerBlock, 0);
    scale.assign(m * paddedBlocks * l.lanesPerBlock, 0.0f);
  }
  const int8_t *qRow(int64_t i) const { return q.data() + i * paddedBlocks * kQBlock; }
  const int32_t *biasRow(int64_t i) const {
    return bias.data() + i * paddedBlocks * layout.lanesPerBlock;
  }
  const float *scaleRow(int64_t i) const {
    return scale.data() + i * paddedBlocks * layout.lanesPerBlock;
  }

  /// Quantizes x [m, k] (k a multiple of 32).
  void quantize(const float *x) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t b = 0; b < blocks; ++b) quantizeBlock(i, b, x + i * k + b * kQBlock);
  }

private:
  /// Block b's 32 elements (four ymm of x): its scale d and the codes
  /// round-to-nearest-even(x · (1 / d)) in order, as int8; returns Σ q.
  /// A block with an infinity or NaN gets codes 0 and d NaN, so the dots
  /// it enters are NaN, as the fp32 product's would be (or infinite).
  static int32_t quantizeCodes(const float *xb, float &d, int8_t codes[kQBlock]) {
    __m256 v[4], amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_and_ps(v[j], magnitude));
      // x · 0 is 0 for finite x, NaN for an infinity or NaN.
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_mul_ps(v[j], _mm256_setzero_ps()),
                                            _mm256_setzero_ps(), _CMP_NEQ_UQ));
    }
    if (_mm256_movemask_ps(bad) != 0) {
      d = std::nanf("");
      std::memset(codes, 0, kQBlock);
      return 0;
    }
    d = max256(amax) / 127.0f;
    const __m256 inv = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    // vcvtps2dq rounds to nearest even (the default MXCSR mode, as nearbyint).
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inv));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    // int32 → int8 (|q| ≤ 127), back in element order after the packs'
    // per-lane interleaving.
    const __m256i words = _mm256_packs_epi32(q[0], q[1]), words2 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words2),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes), bytes);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    return _mm_cvtsi128_si32(s4);
  }

  static float max256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }

  void quantizeBlock(int64_t i, int64_t b, const float *xb) {
    float d;
    alignas(32) int8_t codes[kQBlock];
    const int32_t sum = quantizeCodes(xb, d, codes);
    int8_t *qi = q.data() + i * paddedBlocks * kQBlock;
    if (!layout.nibbles) {
      std::memcpy(qi + b * kQBlock, codes, kQBlock);
    } else {
      // A step's blocks' even elements (16 each), then their odd ones.
      const int64_t g = layout.blocksPerStep, half = kQBlock / 2;
      int8_t *even = qi + (b / g) * g * kQBlock + (b % g) * half, *odd = even + g * half;
      for (int64_t e = 0; e < half; ++e) even[e] = codes[2 * e], odd[e] = codes[2 * e + 1];
    }
    const int64_t lanes = layout.lanesPerBlock, first = (i * paddedBlocks + b) * lanes;
    bias[first] = -layout.offset * sum;
    std::fill(scale.begin() + first, scale.begin() + first + lanes, d);
  }
};

/// Rows of x quantized, for the integer bodies.
struct QRows {
  const QuantizedX *x = nullptr;
  float *y = nullptr;
  int64_t ldy = 0;
};

/// Starts loading `bytes` from `at` into the cache, a line at a time.
inline void prefetchBytes(const void *at, int64_t bytes) {
  for (int64_t c = 0; c < bytes; c += 64)
    _mm_prefetch(static_cast<const char *>(at) + c, _MM_HINT_T0);
}

/// W's scale of each 32-element block: flat block j has scale j / per.
/// The bodies take any type with `per`, `row` and `prefetch` (matmul_nf4
/// computes its scales a row at a time into `scratch`).
struct BlockScales {
  const float *scales;
  int64_t per; ///< blocks of 32 per scale (run / 32)
  /// Floats of scratch `row` writes for a row of K elements.
  static int64_t scratchFloats(int64_t) { return 0; }

  /// Row r's scales (K a multiple of 32): block b of the row has
  /// row(...)[b / per], since runs divide K or are whole rows.
  const float *row(int64_t r, int64_t k, float * /*scratch*/) const {
    return scales + r * (k / kQBlock) / per;
  }
  /// Starts loading row r's scales.
  void prefetch(int64_t r, int64_t k) const {
    prefetchBytes(row(r, k, nullptr), std::max<int64_t>(1, k / kQBlock / per) * sizeof(float));
  }
};

/// This thread's scratch for row scales a body computes (matmul_nf4's),
/// at least `floats` long: grown on a thread's first products, so a step
/// allocates nothing.
inline float *rowScaleScratch(int64_t floats) {
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < floats)
    scratch.resize(floats);
  return scratch.data();
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLMC_VNNI512 __attribute__((target("avx512f,avx512bw,avx512vnni")))

/// W's scales of a row's blocks b.. (n of them; lanes past them 0), one
/// per lane of its block: `at` the row's scales, `per` blocks per scale.
LLMC_VNNI512 inline __m512 scaleLanes(const float *at, int64_t per, int64_t b, int n,
                                      __m512i laneBlock) {
  __m512 v;
  if (per == 1) {
    v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), at + b);
  } else {
    float f[4] = {0, 0, 0, 0};
    for (int t = 0; t < n; ++t) f[t] = at[(b + t) / per];
    v = _mm512_castps128_ps512(_mm_loadu_ps(f));
  }
  return _mm512_permutexvar_ps(laneBlock, v);
}

/// NF4's levels + 128 by index, in each 128-bit lane (vpshufb's table):
/// vpdpbusd's unsigned operand for NF4 codes.
LLMC_VNNI512 inline __m512i nf4ExcessLevels512() {
  uint8_t excess[64];
  for (int c = 0; c < 64; ++c)
    excess[c] = static_cast<uint8_t>(quant::kNf4Int8Levels[c % 16] + 128);
  return _mm512_loadu_si512(excess);
}

/// Rows [r0, r1) of y, M rows of x from i0, AVX-512 VNNI, int4 or NF4
/// codes (row r's at codes + r · K / 2); S parts of the range side by side
/// (as DecodeGemv.h's rows512).
template <int M, int S, CodeKind Codes, typename Scales>
LLMC_VNNI512 void intRows512(const uint8_t *codes, const Scales &ws, int64_t r0, int64_t r1,
                             const QRows &d, int64_t i0) {
  static_assert(Codes != CodeKind::Int8, "int8 codes have no zmm body (chooseDotIsa)");
  const QuantizedX &qx = *d.x;
  // A step: 64 bytes of codes, 4 blocks (QLayout), 4 int32 lanes each.
  constexpr int64_t g = 4, blockBytes = 16, lanes = 4;
  const int64_t k = qx.k, blocks = qx.blocks, rowBytes = k / 2, q = (r1 - r0) / S;
  const __m512i laneBlock =
      _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x88));
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i levels = nf4ExcessLevels512();
  const bool oneScale = ws.per >= blocks; // a scale per row, or for all of W
  float *scratch = rowScaleScratch(S * ws.scratchFloats(k));
  for (int64_t t = 0; t < q; ++t) {
    int64_t row[S];
    const float *at[S];
    __m512 acc[S][M], rowScale[S];
    for (int s = 0; s < S; ++s) {
      row[s] = r0 + s * q + t;
      at[s] = ws.row(row[s], k, scratch + s * ws.scratchFloats(k));
      rowScale[s] = _mm512_set1_ps(*at[s]);
      for (int i = 0; i < M; ++i) acc[s][i] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < blocks; b += g) {
      const int n = static_cast<int>(std::min(g, blocks - b));
      for (int s = 0; s < S; ++s) {
        // The last step of a row may hold fewer blocks: read only theirs.
        const uint8_t *p = codes + row[s] * rowBytes + b * blockBytes;
        const __m512i bytes = n == g ? _mm512_loadu_si512(p)
                                     : _mm512_maskz_loadu_epi8((1ull << (n * blockBytes)) - 1, p);
        const __m512 wl = oneScale ? rowScale[s] : scaleLanes(at[s], ws.per, b, n, laneBlock);
        __m512i lo, hi;
        if constexpr (Codes == CodeKind::Int4) {
          const __m512i w = _mm512_xor_si512(bytes, flip);
          lo = _mm512_and_si512(w, nibble);
          hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), nibble);
        } else {
          lo = _mm512_shuffle_epi8(levels, _mm512_and_si512(bytes, nibble));
          hi = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble));
        }
        for (int i = 0; i < M; ++i) {
          const int8_t *xq = qx.qRow(i0 + i) + b * kQBlock;
          const int64_t lane = b * lanes;
          __m512i sum = _mm512_loadu_si512(qx.biasRow(i0 + i) + lane);
          sum = _mm512_dpbusd_epi32(sum, lo, _mm512_loadu_si512(xq));
          sum = _mm512_dpbusd_epi32(sum, hi, _mm512_loadu_si512(xq + 64));
          const __m512 f = _mm512_mul_ps(_mm512_loadu_ps(qx.scaleRow(i0 + i) + lane), wl);
          acc[s][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), f, acc[s][i]);
        }
      }
    }
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < M; ++i) d.y[(i0 + i) * d.ldy + row[s]] = _mm512_reduce_add_ps(acc[s][i]);
  }
  if constexpr (S > 1)
    intRows512<M, 1, Codes>(codes, ws, r0 + S * q, r1, d, i0);
}

#undef LLMC_VNNI512
#pragma GCC diagnostic pop

/// acc + the byte dot of unsigned u and signed v, 4 bytes per int32 lane.
template <DotIsa Isa> inline __m256i dot256(__m256i acc, __m256i u, __m256i v) {
  if constexpr (Isa == DotIsa::Avx2) {
    const __m256i pairs = _mm256_maddubs_epi16(u, v);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  } else if constexpr (Isa == DotIsa::YmmVnniVex) {
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(v));
    return acc;
  } else {
    __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(v));
    return acc;
  }
}

/// NF4's int8 levels by index for vpshufb, in each 128-bit lane: their
/// magnitudes, and the levels themselves (whose signs the ymm bodies
/// apply to x, vpmaddubsw taking its first operand unsigned).
struct Nf4Tables256 {
  __m256i magnitude, level;
  static Nf4Tables256 load() {
    alignas(16) int8_t magnitudes[16];
    for (int c = 0; c < 16; ++c)
      magnitudes[c] = static_cast<int8_t>(std::abs(quant::kNf4Int8Levels[c]));
    return {
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i *>(magnitudes))),
        _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i *>(quant::kNf4Int8Levels)))};
  }
};

/// intRows512 with ymm: one block a step.
template <int M, int S, CodeKind Codes, DotIsa Isa, typename Scales>
void intRows256(const uint8_t *codes, const Scales &ws, int64_t r0, int64_t r1, const QRows &d,
                int64_t i0) {
  const QuantizedX &qx = *d.x;
  const int64_t k = qx.k, blocks = qx.blocks;
  const int64_t q = (r1 - r0) / S;
  const bool oneScale = ws.per >= blocks; // a scale per row, or for all of W
  const Nf4Tables256 nf4 = Nf4Tables256::load();
  const __m256i levelAbs = nf4.magnitude, levelSigned = nf4.level;
  float *scratch = rowScaleScratch(S * ws.scratchFloats(k));
  for (int64_t t = 0; t < q; ++t) {
    int64_t row[S];
    const float *at[S];
    __m256 acc[S][M];
    for (int s = 0; s < S; ++s) {
      row[s] = r0 + s * q + t;
      at[s] = ws.row(row[s], k, scratch + s * ws.scratchFloats(k));
      for (int i = 0; i < M; ++i) acc[s][i] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < blocks; ++b)
      for (int s = 0; s < S; ++s) {
        const int64_t j = (row[s] * k) / kQBlock + b;
        const __m256 wl = _mm256_set1_ps(oneScale ? *at[s] : at[s][ws.per == 1 ? b : b / ws.per]);
        __m256i u, sign;
        if constexpr (Codes == CodeKind::Int4) {
          const __m128i bytes =
              _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(codes + j * 16)),
                            _mm_set1_epi8(static_cast<char>(0x88)));
          u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes),
                               _mm256_set1_epi8(0x0F));
        } else if constexpr (Codes == CodeKind::Nf4) {
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(codes + j * 16));
          const __m256i index = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes),
                                                 _mm256_set1_epi8(0x0F));
          u = _mm256_shuffle_epi8(levelAbs, index);
          sign = _mm256_shuffle_epi8(levelSigned, index);
        } else {
          sign = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(codes + j * kQBlock));
          u = _mm256_sign_epi8(sign, sign); // |w|
        }
        for (int i = 0; i < M; ++i) {
          const int64_t lane = b * qx.layout.lanesPerBlock;
          __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qx.qRow(i0 + i) + b * kQBlock));
          __m256i sum;
          if constexpr (Codes == CodeKind::Int4) {
            sum = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qx.biasRow(i0 + i) + lane));
          } else {
            sum = _mm256_setzero_si256();
            v = _mm256_sign_epi8(v, sign); // sign(w) · q: |w| · that = w · q
          }
          sum = dot256<Isa>(sum, u, v);
          const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(qx.scaleRow(i0 + i) + lane), wl);
          acc[s][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), f, acc[s][i]);
        }
      }
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < M; ++i) d.y[(i0 + i) * d.ldy + row[s]] = sum256(acc[s][i]);
  }
  if constexpr (S > 1)
    intRows256<M, 1, Codes, Isa>(codes, ws, r0 + S * q, r1, d, i0);
}

} // namespace llmc::cpu::decode

#endif
