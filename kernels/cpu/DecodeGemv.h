//===- DecodeGemv.h - few-row products over W [N, K] from storage -*- C++ -*-===//
//
// y[i, r] = Σ_c x[i, c] · W[r, c] for rows r of W [N, K] held as fp32,
// bf16, int8, E4M3, int4 or NF4 codes: a decode step's product (M = 1..few rows
// of x), which reads every weight once and so runs at the speed the
// weights stream from memory where the arithmetic per weight is small.
//
// Each weight is decoded in registers and multiplied in at once: nothing
// expanded is written to memory. A row is walked in steps of 32 elements
// (two zmm or four ymm of weights) within runs of one scale (a block, or
// the row); a run's products are summed in fp32 and multiplied by its scale
// once, and what is left of a run under 32 elements is done element by
// element. 4-bit codes hold element 2j in the low nibble of byte j: the
// low nibbles of 16 bytes are 16 even elements, the high ones 16 odd
// ones, so x is permuted once per call (evens then odds in every 32) and
// the codes need no interleaving; E4M3 codes are widened through 16-bit
// lanes, whose low and high bytes are likewise the evens and the odds.
// int4 levels and NF4 levels are both a 16-entry table lookup (vpermps).
// Threads take contiguous ranges of W's rows; for one row of x a thread
// walks four parts of its range side by side, four streams of reads in
// flight instead of one.
//
// Symmetric int8/int4 codes in whole blocks of 32 take DecodeGemvInt8.h
// instead (x quantized to int8, integer dots); NF4 and the rest stay here.
//
// AVX-512 (chosen at bind time, LLMC_CPU_NO_AVX512 forces AVX2) and AVX2
// bodies; the library is built for x86-64-v3, the AVX-512 ones carry a
// target attribute. Sums are fp32 in an order of their own, so results
// differ from the expanded weight's product by rounding (relative ~1e-6).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMV_H
#define LLMC_KERNELS_CPU_DECODEGEMV_H

#include "common/Fp8.h"
#include "common/Half.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <immintrin.h>
#include <omp.h>

namespace llmc::cpu {

/// Whether the AVX-512 bodies run: where the CPU has it, unless
/// LLMC_CPU_NO_AVX512 is set (so the AVX2 path can be tested and compared
/// on such a CPU). Read when a kernel binds.
inline bool useAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         !std::getenv("LLMC_CPU_NO_AVX512");
}

namespace decode {

/// Elements a step decodes.
constexpr int64_t kStep = 32;
/// Rows of x up to which an fp32 or bf16 product with W [N, K] is row dots
/// (denseRows) rather than sgemm: matmul's, linear's and grouped_matmul's
/// decode products.
constexpr int64_t kDenseRows = 4;
/// Rows of W read side by side for one row of x.
constexpr int kStreams = 4;

/// The rows of x and y one call covers: x [m, k] (and, for 4-bit codes,
/// its copy permuted per 32 elements, evens then odds), y [m, ldy] from
/// column 0.
struct Rows {
  const float *x = nullptr;
  const float *xStep = nullptr; ///< what steps multiply: x, or the permuted copy
  int64_t m = 0, k = 0;
  float *y = nullptr;
  int64_t ldy = 0;
};

/// Writes x [m, k] permuted for codes stepped evens then odds into `out`: in every whole 32
/// elements of a row, the 16 even ones, then the 16 odd ones.
inline void permuteEvensThenOdds(const float *x, int64_t m, int64_t k, float *out) {
  for (int64_t i = 0; i < m; ++i) {
    const float *xi = x + i * k;
    float *oi = out + i * k;
    int64_t c = 0;
    for (; c + kStep <= k; c += kStep)
      for (int64_t t = 0; t < kStep / 2; ++t) {
        oi[c + t] = xi[c + 2 * t];
        oi[c + kStep / 2 + t] = xi[c + 2 * t + 1];
      }
    for (; c < k; ++c) oi[c] = xi[c];
  }
}

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined operands (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLMC_AVX512 __attribute__((target("avx512f,avx512bw")))

/// fp32 weights.
struct F32Codes {
  const float *w;
  static constexpr bool kEvensThenOdds = false;
  float element(int64_t e) const { return w[e]; }
  LLMC_AVX512 void step512(int64_t e, __m512 &a, __m512 &b) const {
    a = _mm512_loadu_ps(w + e), b = _mm512_loadu_ps(w + e + 16);
  }
  void step256(int64_t e, __m256 *v) const {
    for (int q = 0; q < 4; ++q) v[q] = _mm256_loadu_ps(w + e + 8 * q);
  }
};

/// bf16 weights (the high half of an fp32).
struct Bf16Codes {
  const uint16_t *w;
  static constexpr bool kEvensThenOdds = false;
  float element(int64_t e) const {
    uint32_t bits = static_cast<uint32_t>(w[e]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  LLMC_AVX512 static __m512 widen512(const uint16_t *p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  LLMC_AVX512 void step512(int64_t e, __m512 &a, __m512 &b) const {
    a = widen512(w + e), b = widen512(w + e + 16);
  }
  void step256(int64_t e, __m256 *v) const {
    for (int q = 0; q < 4; ++q) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(w + e + 8 * q));
      v[q] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
};

/// Signed int8 codes.
struct Int8Codes {
  const int8_t *w;
  static constexpr bool kEvensThenOdds = false;
  float element(int64_t e) const { return static_cast<float>(w[e]); }
  LLMC_AVX512 void step512(int64_t e, __m512 &a, __m512 &b) const {
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + e));
    a = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    b = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  }
  void step256(int64_t e, __m256 *v) const {
    for (int q = 0; q < 4; ++q) {
      __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(w + e + 8 * q));
      v[q] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    }
  }
};

/// OCP E4M3 codes (common/Fp8.h), widened through fp16: a code in the high
/// byte of a 16-bit lane (S.EEEE.MMM.xxxxxxxx), shifted right by one with
/// its sign copied, then bit 14 and bits 0..6 cleared, is the fp16
/// S.0EEEE.MMM0000000 of value · 2^−8, subnormals included (the biases
/// differ by 8), which vcvtph2ps widens exactly. A 16-bit load of 32 codes
/// holds the odd ones in its high bytes and the even ones in its low bytes
/// (shifted up by 8), so steps take x evens then odds, as for 4-bit codes.
/// Steps and element() give value · 2^−8; E4m3Scale multiplies the 2^8
/// back into each scale (exact: powers of two). E4M3's NaN, S.1111.111,
/// would read as ±1.875: a step holding one gives NaN in every lane, which
/// is what that row's sums come to anyway (NaN times anything is NaN).
struct E4m3Codes {
  const uint8_t *w;
  static constexpr bool kEvensThenOdds = true;
  float element(int64_t e) const { return fp8::decode(w[e], fp8::Kind::E4M3) * 0x1p-8f; }
  /// 32 codes' evens and odds as fp16 bits; whether any is NaN.
  static bool split(const uint8_t *p, __m256i &evens, __m256i &odds) {
    const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    const __m256i keep = _mm256_set1_epi16(static_cast<int16_t>(0xBF80));
    evens = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(pairs, 8), 1), keep);
    odds = _mm256_and_si256(_mm256_srai_epi16(pairs, 1), keep);
    const __m256i nan =
        _mm256_cmpeq_epi8(_mm256_or_si256(pairs, _mm256_set1_epi8(-0x80)), _mm256_set1_epi8(-1));
    return !_mm256_testz_si256(nan, nan);
  }
  LLMC_AVX512 void step512(int64_t e, __m512 &a, __m512 &b) const {
    __m256i evens, odds;
    const bool nan = split(w + e, evens, odds);
    a = _mm512_cvtph_ps(evens), b = _mm512_cvtph_ps(odds);
    if (nan)
      a = b = _mm512_set1_ps(__builtin_nanf(""));
  }
  void step256(int64_t e, __m256 *v) const {
    __m256i evens, odds;
    const bool nan = split(w + e, evens, odds);
    v[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(evens));
    v[1] = _mm256_cvtph_ps(_mm256_extracti128_si256(evens, 1));
    v[2] = _mm256_cvtph_ps(_mm256_castsi256_si128(odds));
    v[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(odds, 1));
    if (nan)
      v[0] = v[1] = v[2] = v[3] = _mm256_set1_ps(__builtin_nanf(""));
  }
};

/// 4-bit codes whose value is table[nibble] (int4: the signed level; NF4:
/// the normalized level). A step's first half is the 16 low nibbles (even
/// elements), its second the 16 high ones.
struct NibbleCodes {
  const uint8_t *codes;
  const float *table; ///< 16 floats
  static constexpr bool kEvensThenOdds = true;
  float element(int64_t e) const {
    const uint8_t b = codes[e / 2];
    return table[e % 2 == 0 ? (b & 0x0F) : (b >> 4)];
  }
  LLMC_AVX512 void step512(int64_t e, __m512 &a, __m512 &b) const {
    const __m512 levels = _mm512_loadu_ps(table);
    __m512i v =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(codes + e / 2)));
    // vpermps reads the low 4 bits of each index.
    a = _mm512_permutexvar_ps(v, levels);
    b = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), levels);
  }
  void step256(int64_t e, __m256 *v) const {
    const __m256 low8 = _mm256_loadu_ps(table), high8 = _mm256_loadu_ps(table + 8);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(codes + e / 2));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(bytes, nibble);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int q = 0; q < 4; ++q) {
      __m256i idx = _mm256_cvtepu8_epi32(parts[q]);
      // Bit 3 of the index, moved to the sign bit, picks the upper half.
      __m256 pick = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
      v[q] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(low8, idx),
                              _mm256_permutevar8x32_ps(high8, idx), pick);
    }
  }
};

/// Weights without scales.
struct NoScale {
  static constexpr bool kScaled = false;
  float operator()(int64_t) const { return 1.0f; }
};

/// One fp32 scale per group.
struct ScaleArray {
  const float *scales;
  static constexpr bool kScaled = true;
  float operator()(int64_t g) const { return scales[g]; }
};

/// The scales of E4m3Codes, whose values are 2^−8 of the codes': each
/// scale times 2^8.
struct E4m3Scale {
  const float *scales;
  static constexpr bool kScaled = true;
  float operator()(int64_t g) const { return scales[g] * 256.0f; }
};

/// How a row's elements fall into runs of one scale: `run` consecutive
/// elements of the flat weight share scale run index e / run (run a
/// multiple of K, or dividing it).
struct Runs {
  int64_t run = 0;
  /// Elements of a row one scale covers, and the first run of row r.
  int64_t length(int64_t k) const { return std::min(run, k); }
  int64_t first(int64_t r, int64_t k) const { return run >= k ? r * k / run : r * (k / run); }
};

/// Whether rows of K elements in runs of `run` can be stepped: runs that
/// divide K or are whole rows, and for codes stepped evens then odds rows
/// and runs of whole steps (so that every step starts at a multiple of 32,
/// where the permuted x's groups of 32 start, and on a byte).
inline bool canStep(int64_t k, int64_t run, bool evensThenOdds) {
  if (k <= 0 || run <= 0 || (run < k ? k % run != 0 : run % k != 0))
    return false;
  return !evensThenOdds || (k % kStep == 0 && std::min(run, k) % kStep == 0);
}

/// Rows [r0, r1), M rows of x from `i0`, AVX-512. The range is cut into S
/// equal parts walked side by side (S streams of W, which keep more reads
/// in flight than one), the rows past S equal parts then one at a time.
template <int M, int S, typename Codes, typename Scale>
LLMC_AVX512 void rows512(const Codes &w, const Scale &scale, Runs runs, int64_t r0, int64_t r1,
                         const Rows &d, int64_t i0) {
  const int64_t k = d.k, len = runs.length(k), q = (r1 - r0) / S;
  for (int64_t t = 0; t < q; ++t) {
    int64_t row[S], g[S];
    __m512 acc[S][M];
    float tail[S][M];
    for (int s = 0; s < S; ++s) {
      row[s] = r0 + s * q + t, g[s] = runs.first(row[s], k);
      for (int i = 0; i < M; ++i) acc[s][i] = _mm512_setzero_ps(), tail[s][i] = 0.0f;
    }
    for (int64_t c0 = 0; c0 < k; c0 += len) {
      __m512 even[S][M], odd[S][M];
      float part[S][M];
      for (int s = 0; s < S; ++s)
        for (int i = 0; i < M; ++i) even[s][i] = odd[s][i] = _mm512_setzero_ps(), part[s][i] = 0.0f;
      int64_t c = 0;
      for (; c + kStep <= len; c += kStep) {
        __m512 xa[M], xb[M];
        for (int i = 0; i < M; ++i) {
          const float *xs = d.xStep + (i0 + i) * k + c0 + c;
          xa[i] = _mm512_loadu_ps(xs), xb[i] = _mm512_loadu_ps(xs + 16);
        }
        for (int s = 0; s < S; ++s) {
          __m512 a, b;
          w.step512(row[s] * k + c0 + c, a, b);
          for (int i = 0; i < M; ++i) {
            even[s][i] = _mm512_fmadd_ps(xa[i], a, even[s][i]);
            odd[s][i] = _mm512_fmadd_ps(xb[i], b, odd[s][i]);
          }
        }
      }
      for (; c < len; ++c)
        for (int s = 0; s < S; ++s) {
          const float v = w.element(row[s] * k + c0 + c);
          for (int i = 0; i < M; ++i) part[s][i] += d.x[(i0 + i) * k + c0 + c] * v;
        }
      for (int s = 0; s < S; ++s) {
        const float f = scale(g[s]++);
        for (int i = 0; i < M; ++i) {
          __m512 sum = _mm512_add_ps(even[s][i], odd[s][i]);
          if constexpr (Scale::kScaled) {
            acc[s][i] = _mm512_fmadd_ps(sum, _mm512_set1_ps(f), acc[s][i]);
            tail[s][i] += f * part[s][i];
          } else {
            acc[s][i] = _mm512_add_ps(acc[s][i], sum);
            tail[s][i] += part[s][i];
          }
        }
      }
    }
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < M; ++i)
        d.y[(i0 + i) * d.ldy + row[s]] = _mm512_reduce_add_ps(acc[s][i]) + tail[s][i];
  }
  if constexpr (S > 1)
    rows512<M, 1>(w, scale, runs, r0 + S * q, r1, d, i0);
}

/// The sum of a ymm's 8 floats.
inline float sum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// rows512 with AVX2: a step is four ymm of weights, summed in two chains.
template <int M, int S, typename Codes, typename Scale>
void rows256(const Codes &w, const Scale &scale, Runs runs, int64_t r0, int64_t r1, const Rows &d,
             int64_t i0) {
  const int64_t k = d.k, len = runs.length(k), q = (r1 - r0) / S;
  for (int64_t t = 0; t < q; ++t) {
    int64_t row[S], g[S];
    __m256 acc[S][M];
    float tail[S][M];
    for (int s = 0; s < S; ++s) {
      row[s] = r0 + s * q + t, g[s] = runs.first(row[s], k);
      for (int i = 0; i < M; ++i) acc[s][i] = _mm256_setzero_ps(), tail[s][i] = 0.0f;
    }
    for (int64_t c0 = 0; c0 < k; c0 += len) {
      __m256 first[S][M], second[S][M];
      float part[S][M];
      for (int s = 0; s < S; ++s)
        for (int i = 0; i < M; ++i)
          first[s][i] = second[s][i] = _mm256_setzero_ps(), part[s][i] = 0.0f;
      int64_t c = 0;
      for (; c + kStep <= len; c += kStep)
        for (int s = 0; s < S; ++s) {
          __m256 v[4];
          w.step256(row[s] * k + c0 + c, v);
          for (int i = 0; i < M; ++i) {
            const float *xs = d.xStep + (i0 + i) * k + c0 + c;
            first[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(xs), v[0], first[s][i]);
            second[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 8), v[1], second[s][i]);
            first[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 16), v[2], first[s][i]);
            second[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 24), v[3], second[s][i]);
          }
        }
      for (; c < len; ++c)
        for (int s = 0; s < S; ++s) {
          const float v = w.element(row[s] * k + c0 + c);
          for (int i = 0; i < M; ++i) part[s][i] += d.x[(i0 + i) * k + c0 + c] * v;
        }
      for (int s = 0; s < S; ++s) {
        const float f = scale(g[s]++);
        for (int i = 0; i < M; ++i) {
          __m256 sum = _mm256_add_ps(first[s][i], second[s][i]);
          if constexpr (Scale::kScaled) {
            acc[s][i] = _mm256_fmadd_ps(sum, _mm256_set1_ps(f), acc[s][i]);
            tail[s][i] += f * part[s][i];
          } else {
            acc[s][i] = _mm256_add_ps(acc[s][i], sum);
            tail[s][i] += part[s][i];
          }
        }
      }
    }
    for (int s = 0; s < S; ++s)
      for (int i = 0; i < M; ++i) d.y[(i0 + i) * d.ldy + row[s]] = sum256(acc[s][i]) + tail[s][i];
  }
  if constexpr (S > 1)
    rows256<M, 1>(w, scale, runs, r0 + S * q, r1, d, i0);
}

#undef LLMC_AVX512
#pragma GCC diagnostic pop

/// body(std::integral_constant<int, M>) for M = min(4, rows): the rows of
/// x one call of a body takes, as a template argument.
template <typename Body> void withRowsOfX(int64_t rows, Body body) {
  switch (std::min<int64_t>(4, rows)) {
  case 1: body(std::integral_constant<int, 1>{}); break;
  case 2: body(std::integral_constant<int, 2>{}); break;
  case 3: body(std::integral_constant<int, 3>{}); break;
  default: body(std::integral_constant<int, 4>{}); break;
  }
}

/// Calls body(M, S, a, b, i0) (M, S integral constants) over rows [r0,
/// r1) of W for all m rows of x, four rows of x at a time; a single row
/// of x walks S = kStreams parts side by side. Past four rows of x, row by
/// row of W, so that its next four rows of x find it in L1.
template <typename Body> void forRowChunks(int64_t r0, int64_t r1, int64_t m, Body body) {
  auto chunk = [&](int64_t a, int64_t b, int64_t i0) {
    withRowsOfX(m - i0, [&](auto rows) {
      constexpr int kM = decltype(rows)::value, kS = kM == 1 ? kStreams : 1;
      body(rows, std::integral_constant<int, kS>{}, a, b, i0);
    });
  };
  if (m <= 4) {
    chunk(r0, r1, 0);
    return;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t i0 = 0; i0 < m; i0 += 4) chunk(r, r + 1, i0);
}

/// Rows [r0, r1) of y for every row of x (forRowChunks).
template <typename Codes, typename Scale>
void rowsOf(const Codes &w, const Scale &scale, Runs runs, int64_t r0, int64_t r1, const Rows &d,
            bool avx512) {
  forRowChunks(r0, r1, d.m, [&](auto rows, auto streams, int64_t a, int64_t b, int64_t i0) {
    constexpr int kM = decltype(rows)::value, kS = decltype(streams)::value;
    if (avx512)
      rows512<kM, kS>(w, scale, runs, a, b, d, i0);
    else
      rows256<kM, kS>(w, scale, runs, a, b, d, i0);
  });
}

/// All N rows of y, split into one contiguous range per OpenMP thread (one
/// stream of W each).
template <typename Codes, typename Scale>
void allRows(const Codes &w, const Scale &scale, Runs runs, int64_t n, const Rows &d, bool avx512) {
#pragma omp parallel if (n * d.k > (1 << 15))
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    rowsOf(w, scale, runs, n * t / threads, n * (t + 1) / threads, d, avx512);
  }
}

/// y = x · Wᵀ for a dense W [N, K] as stored, fp32 or bf16 (`bf16` says
/// which): matmul's and linear's decode-step products.
inline void denseRows(const void *w, bool bf16, int64_t n, const Rows &d, bool avx512) {
  if (bf16)
    allRows(Bf16Codes{static_cast<const uint16_t *>(w)}, NoScale{}, Runs{d.k}, n, d, avx512);
  else
    allRows(F32Codes{static_cast<const float *>(w)}, NoScale{}, Runs{d.k}, n, d, avx512);
}

} // namespace decode
} // namespace llmc::cpu

#endif
