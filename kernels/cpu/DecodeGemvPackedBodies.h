//===- DecodeGemvPackedBodies.h - products over repacked 4-bit tiles -*- C++ -*-===//
//
// The bodies that multiply DecodeGemvPacked.h's units (sixteen rows of W,
// their scales of one block in fp32 or of two blocks in fp16, then the
// blocks' codes) with x quantized a block at a time.
//
// zmm (AVX-512 VNNI): a block's four 64-byte chunks are sixteen rows wide,
// one vpdpbusd per nibble half advances all of them, and NF4's indices are
// looked up as level + 128 (vpshufb), the excess taken off by x's bias as
// int4's level + 8 is.
//
// ymm (AVX-VNNI, AVX-512 VNNI's EVEX ymm form, AVX2): each group is two
// halves of eight rows (bytes 0-31 and 32-63 of every chunk), each half
// the block dot of DecodeGemvRowGroups.h without its transposes: int4 as
// level + 8 with the bias, NF4 as |level| against sign(level) · q.
//
// Both prefetch eight units ahead: the prefetchers alone left a Zen 4 core
// waiting on memory a quarter of the time.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMVPACKEDBODIES_H
#define LLMC_KERNELS_CPU_DECODEGEMVPACKEDBODIES_H

#include "kernels/cpu/DecodeGemvRowGroups.h"

namespace llmc::cpu::decode {

/// Rows of W a unit holds; bytes of its scales (16 fp32, or 2 × 16 fp16)
/// and of one block's codes (4 chunks of 64 bytes).
constexpr int64_t kPackedRows = 16, kUnitScaleBytes = 64, kBlockCodeBytes = 256;

/// Blocks a unit holds (1 with fp32 scales, 2 with fp16) and its bytes.
constexpr int64_t blocksPerUnit(bool halfScales) { return halfScales ? 2 : 1; }
constexpr int64_t unitBytes(bool halfScales) {
  return kUnitScaleBytes + blocksPerUnit(halfScales) * kBlockCodeBytes;
}

/// Block b of a group: the unit holding it, its place j there, its codes.
struct PackedBlock {
  const uint8_t *unit;
  int64_t j;
  const uint8_t *codes;
};

/// Repacked units of W [N, K]: group g's unit u at
/// tiles + (g · units + u) · unitBytes, the last one of a group holding
/// fewer blocks when they do not fill it.
struct PackedTiles {
  const uint8_t *tiles;
  int64_t n, blocks;
  bool halfScales;
  int64_t units() const {
    return (blocks + blocksPerUnit(halfScales) - 1) / blocksPerUnit(halfScales);
  }
  const uint8_t *group(int64_t g) const { return tiles + g * units() * unitBytes(halfScales); }
  /// Block b of the group at `group` (Half: halfScales).
  template <bool Half> static PackedBlock block(const uint8_t *group, int64_t b) {
    const int64_t j = b % blocksPerUnit(Half);
    const uint8_t *unit = group + b / blocksPerUnit(Half) * unitBytes(Half);
    return {unit, j, unit + kUnitScaleBytes + j * kBlockCodeBytes};
  }
  /// Rows of group g that are W's (the last group's may be fewer).
  int64_t validRows(int64_t g) const { return std::min(kPackedRows, n - g * kPackedRows); }
};

/// Starts loading the unit eight ahead of block `at`'s, once per unit.
template <bool Half> inline void prefetchUnitAhead(const PackedBlock &at) {
  if (at.j != 0)
    return;
  const uint8_t *ahead = at.unit + 8 * unitBytes(Half);
  for (int64_t line = 0; line < unitBytes(Half); line += 64)
    _mm_prefetch(reinterpret_cast<const char *>(ahead + line), _MM_HINT_T0);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLMC_PACKED512 __attribute__((target("avx512f,avx512bw,avx512vnni")))

/// Four bytes of x from `at`, in every int32 lane.
LLMC_PACKED512 inline __m512i broadcastFour(const int8_t *at) {
  int32_t four;
  std::memcpy(&four, at, 4);
  return _mm512_set1_epi32(four);
}

/// Nibbles as vpdpbusd's unsigned operand: int4's as stored (level + 8),
/// NF4's looked up as level + 128 (`levels`, per 128-bit lane).
template <CodeKind Codes>
LLMC_PACKED512 inline __m512i unsignedCodes(__m512i nibbles, __m512i levels) {
  if constexpr (Codes == CodeKind::Nf4)
    return _mm512_shuffle_epi8(levels, nibbles);
  else
    return nibbles;
}

/// Block `at`'s sixteen scales, as fp32.
template <bool Half> LLMC_PACKED512 inline __m512 blockScales512(const PackedBlock &at) {
  if constexpr (Half)
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i *>(at.unit) + at.j));
  else
    return _mm512_load_ps(reinterpret_cast<const float *>(at.unit));
}

/// Rows of y in groups [g0, g1) for M rows of x from i0, zmm.
template <int M, CodeKind Codes, bool Half>
LLMC_PACKED512 void packedGroups512(const PackedTiles &w, int64_t g0, int64_t g1, const QRows &d,
                                    int64_t i0) {
  const QuantizedX &qx = *d.x;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i levels = nf4ExcessLevels512();
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t *group = w.group(g);
    __m512 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < w.blocks; ++b) {
      const PackedBlock at = PackedTiles::block<Half>(group, b);
      prefetchUnitAhead<Half>(at);
      __m512i lo[4], hi[4];
      for (int c = 0; c < 4; ++c) {
        const __m512i bytes = _mm512_load_si512(at.codes + 64 * c);
        lo[c] = unsignedCodes<Codes>(_mm512_and_si512(bytes, low), levels);
        hi[c] = unsignedCodes<Codes>(_mm512_and_si512(_mm512_srli_epi16(bytes, 4), low), levels);
      }
      const __m512 scales = blockScales512<Half>(at);
      for (int i = 0; i < M; ++i) {
        const int8_t *xq = qx.qRow(i0 + i) + b * kQBlock;
          // Two chains of four dots (even and odd chunks), added once.
        __m512i even = _mm512_set1_epi32(qx.biasRow(i0 + i)[b]), odd = _mm512_setzero_si512();
        for (int c = 0; c < 4; c += 2) {
          even = _mm512_dpbusd_epi32(even, lo[c], broadcastFour(xq + 4 * c));
          even = _mm512_dpbusd_epi32(even, hi[c], broadcastFour(xq + 16 + 4 * c));
          odd = _mm512_dpbusd_epi32(odd, lo[c + 1], broadcastFour(xq + 4 * c + 4));
          odd = _mm512_dpbusd_epi32(odd, hi[c + 1], broadcastFour(xq + 20 + 4 * c));
        }
        const __m512 f = _mm512_mul_ps(scales, _mm512_set1_ps(qx.scaleRow(i0 + i)[b]));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), f, acc[i]);
      }
    }
    const auto mask = static_cast<__mmask16>((1u << w.validRows(g)) - 1);
    for (int i = 0; i < M; ++i)
      _mm512_mask_storeu_ps(d.y + (i0 + i) * d.ldy + g * kPackedRows, mask, acc[i]);
  }
}

#undef LLMC_PACKED512
#pragma GCC diagnostic pop

/// Stores the first `count` (≤ 8) lanes of v at `at`.
inline void storeFirst(float *at, __m256 v, int64_t count) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  _mm256_maskstore_ps(at, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lane), v);
}

/// Half h (rows 8h..8h+7) of block `at`'s scales, as fp32.
template <bool Half> inline __m256 blockScales256(const PackedBlock &at, int h) {
  if constexpr (Half)
    return _mm256_cvtph_ps(
        _mm_load_si128(reinterpret_cast<const __m128i *>(at.unit) + 2 * at.j + h));
  else
    return _mm256_load_ps(reinterpret_cast<const float *>(at.unit) + 8 * h);
}

/// Rows of y in groups [g0, g1) for M rows of x from i0, ymm: each
/// block's two halves of eight rows in turn.
template <int M, CodeKind Codes, DotIsa Isa, bool Half>
void packedGroups256(const PackedTiles &w, int64_t g0, int64_t g1, const QRows &d, int64_t i0) {
  const QuantizedX &qx = *d.x;
  const __m256i low = _mm256_set1_epi8(0x0F);
  const Nf4Tables256 nf4 = Nf4Tables256::load();
  for (int64_t g = g0; g < g1; ++g) {
    __m256 acc[2][M];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < M; ++i) acc[h][i] = _mm256_setzero_ps();
    const uint8_t *group = w.group(g);
    for (int64_t b = 0; b < w.blocks; ++b) {
      const PackedBlock at = PackedTiles::block<Half>(group, b);
      prefetchUnitAhead<Half>(at);
      for (int h = 0; h < 2; ++h) {
        __m256i nibbles[8], sign[8];
        for (int c = 0; c < 4; ++c) {
          const __m256i bytes =
              _mm256_load_si256(reinterpret_cast<const __m256i *>(at.codes + 64 * c + 32 * h));
          const __m256i lo = _mm256_and_si256(bytes, low);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
          if constexpr (Codes == CodeKind::Int4) {
            nibbles[2 * c] = lo, nibbles[2 * c + 1] = hi;
          } else {
            nibbles[2 * c] = _mm256_shuffle_epi8(nf4.magnitude, lo);
            nibbles[2 * c + 1] = _mm256_shuffle_epi8(nf4.magnitude, hi);
            sign[2 * c] = _mm256_shuffle_epi8(nf4.level, lo);
            sign[2 * c + 1] = _mm256_shuffle_epi8(nf4.level, hi);
          }
        }
        const __m256 scales = blockScales256<Half>(at, h);
        for (int i = 0; i < M; ++i) {
          const __m256i start = _mm256_set1_epi32(qx.biasRow(i0 + i)[b]);
          const __m256i sum =
              blockDot<Codes, Isa>(nibbles, sign, qx.qRow(i0 + i) + b * kQBlock, start);
          const __m256 f = _mm256_mul_ps(scales, _mm256_set1_ps(qx.scaleRow(i0 + i)[b]));
          acc[h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), f, acc[h][i]);
        }
      }
    }
    const int64_t valid = w.validRows(g);
    for (int i = 0; i < M; ++i) {
      float *y = d.y + (i0 + i) * d.ldy + g * kPackedRows;
      storeFirst(y, acc[0][i], std::min<int64_t>(8, valid));
      if (valid > 8)
        storeFirst(y + 8, acc[1][i], valid - 8);
    }
  }
}

} // namespace llmc::cpu::decode

#endif
