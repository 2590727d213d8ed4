//===- DecodeGemvRowGroups.h - 4-bit decode dots, eight rows a step -*- C++ -*-===//
//
// DecodeGemvInt8.h's int4 and NF4 products with ymm registers, eight rows
// of W at a time: the ymm body that int4 and NF4 take from the codes in
// place on CPUs without AVX-512 VNNI (a weight that is not repacked,
// DecodeGemvPacked.h: an expert of a stack, a streamed layer, an
// unprepared kernel, LLMC_CPU_NO_PACK). The repacked bodies reuse its
// block dot. Walking one row at a time (intRows256), every block of 32
// weights costs its own int32 sum, conversion, scale product and
// fused multiply-add; here eight rows' blocks are transposed in registers
// so that each 32-bit lane holds one row:
//
//   lane t of chunk c = bytes 4c..4c+3 of row t's block (elements 8c..8c+7)
//
// The eight rows are one from each eighth of the range, so each lane walks
// its eighth of W from start to end: eight sequential streams the
// prefetchers follow (eight adjacent rows, 1 KiB each at K = 2048, would
// restart every stream each group and ran at a third of the speed).
// and x's four matching int8 codes are broadcast to every lane. One byte
// dot then advances all eight rows, the block's sums come out as one
// vector with a lane per row, and the conversion, the scales (x's block
// scale times the eight rows' block scales) and the multiply-add are paid
// once per eight rows. llama.cpp's AVX2 Q4_0 path gets the same effect
// from weights repacked eight rows together at load; the transpose here
// (eight shuffles per 8 × 32 weights) keeps `llmc quantize`'s layout, so
// the codes are read in place.
//
// int4 on AVX2 sums a block's eight vpmaddubsw results in int16 before one
// vpmaddwd: each is at most 2 · 15 · 127 = 3810, eight of them 30480 <
// 2^15, so nothing saturates. NF4's |level| · q reach 2 · 127 · 127 per
// pair, so each of its dots widens to int32 at once. The integer sums are
// exact; a block's is converted to fp32 whole (intRows256 converts and
// sums eight partial ones), so results differ from intRows256's by fp32
// rounding only.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMVROWGROUPS_H
#define LLMC_KERNELS_CPU_DECODEGEMVROWGROUPS_H

#include "kernels/cpu/DecodeGemvInt8.h"

namespace llmc::cpu::decode {

/// Rows of W a group body takes at once (one per 32-bit lane of a ymm).
constexpr int64_t kGroupRows = 8;

/// out[j · 8 + t] = rows[t][b + j] for j, t < 8: eight rows' scales of
/// blocks b..b+7, a block's eight together.
inline void transpose8x8(const float *const rows[kGroupRows], int64_t b, float *out) {
  __m256 v[8], t[8];
  for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(rows[i] + b);
  for (int i = 0; i < 8; i += 2) { // pairs of rows interleaved
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) { // then quads
    v[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) { // 128-bit halves: blocks 0-3 and 4-7
    _mm256_storeu_ps(out + i * 8, _mm256_permute2f128_ps(v[i], v[i + 4], 0x20));
    _mm256_storeu_ps(out + (i + 4) * 8, _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
  }
}

/// The block scales of rows r, r + gap, ..., r + 7 · gap, transposed:
/// out[b · 8 + t] is row r + t · gap's scale of block b (so one load gives
/// a block's eight). `rowScratch` holds 8 × ws.scratchFloats(k) floats.
template <typename Scales>
void groupScales(const Scales &ws, int64_t r, int64_t gap, int64_t k, float *rowScratch,
                 float *out) {
  const int64_t blocks = k / kQBlock;
  const float *rows[kGroupRows];
  int64_t b = 0;
  const int64_t rowFloats = ws.scratchFloats(k);
  if (ws.per == 1) { // a scale a block: 8 × 8 at a time
    for (int64_t t = 0; t < kGroupRows; ++t)
      rows[t] = ws.row(r + t * gap, k, rowScratch + t * rowFloats);
    for (; b + kGroupRows <= blocks; b += kGroupRows) transpose8x8(rows, b, out + b * kGroupRows);
  }
  // Runs of `per` blocks share a scale (a whole row's when per ≥ blocks).
  const int64_t per = std::min(ws.per, blocks);
  for (int64_t t = 0; t < kGroupRows && b < blocks; ++t) {
    const float *at = ws.row(r + t * gap, k, rowScratch + t * rowFloats) + b / per;
    for (int64_t j = b; j < blocks; ++at)
      for (int64_t e = 0; e < per; ++e, ++j) out[j * kGroupRows + t] = *at;
  }
}

/// Starts loading what the scales of the next group's rows are made
/// from, whose misses would otherwise stall groupScales (eight more
/// streams beside the codes').
template <typename Scales>
void prefetchScales(const Scales &ws, int64_t r, int64_t gap, int64_t k) {
  for (int64_t t = 0; t < kGroupRows; ++t) ws.prefetch(r + t * gap, k);
}

/// The 16 code bytes of block b of rows r..r+7 (`p` row r's, rows
/// `stride` bytes apart) as four chunks: lane t of chunk c holds row t's
/// bytes 4c..4c+3.
inline void transposeBlock(const uint8_t *p, int64_t stride, __m256i chunk[4]) {
  auto pair = [&](int t) {
    return _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(p + (t + 4) * stride),
                               reinterpret_cast<const __m128i *>(p + t * stride));
  };
  const __m256i y0 = pair(0), y1 = pair(1), y2 = pair(2), y3 = pair(3);
  const __m256i t0 = _mm256_unpacklo_epi32(y0, y1), t1 = _mm256_unpackhi_epi32(y0, y1);
  const __m256i t2 = _mm256_unpacklo_epi32(y2, y3), t3 = _mm256_unpackhi_epi32(y2, y3);
  chunk[0] = _mm256_unpacklo_epi64(t0, t2), chunk[1] = _mm256_unpackhi_epi64(t0, t2);
  chunk[2] = _mm256_unpacklo_epi64(t1, t3), chunk[3] = _mm256_unpackhi_epi64(t1, t3);
}

/// x's int8 codes matching nibble half h (0: even elements, 1: odd ones)
/// of chunk c, broadcast to every lane (QLayout's nibble order).
inline __m256i broadcastCodes(const int8_t *xq, int c, int h) {
  int32_t four;
  std::memcpy(&four, xq + h * (kQBlock / 2) + 4 * c, 4);
  return _mm256_set1_epi32(four);
}

/// Σ over a block of (u · v) for the eight rows: u the unsigned codes of
/// each chunk's two nibble halves, x the block's int8 codes.
template <CodeKind Codes, DotIsa Isa>
inline __m256i blockDot(const __m256i u[8], const __m256i sign[8], const int8_t *xq,
                        __m256i start) {
  if constexpr (Isa == DotIsa::Avx2 && Codes == CodeKind::Int4) {
    __m256i pairs = _mm256_setzero_si256(); // ≤ 8 · 3810 per int16 lane
    for (int j = 0; j < 8; ++j)
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(u[j], broadcastCodes(xq, j / 2, j % 2)));
    return _mm256_add_epi32(start, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  } else {
    __m256i sum = start;
    for (int j = 0; j < 8; ++j) {
      __m256i v = broadcastCodes(xq, j / 2, j % 2);
      if constexpr (Codes == CodeKind::Nf4)
        v = _mm256_sign_epi8(v, sign[j]); // sign(w) · q, against |w|
      sum = dot256<Isa>(sum, u[j], v);
    }
    return sum;
  }
}

/// Rows [r0, r1) of y for M rows of x from i0, int4 or NF4 codes of rows
/// of K / 2 bytes, eight rows of W a step (one from each eighth of the
/// range); the rows past eight equal parts go to intRows256.
template <int M, CodeKind Codes, DotIsa Isa, typename Scales>
void intGroups256(const uint8_t *codes, const Scales &ws, int64_t r0, int64_t r1, const QRows &d,
                  int64_t i0) {
  static_assert(Codes != CodeKind::Int8, "int8 codes take intRows256");
  const QuantizedX &qx = *d.x;
  const int64_t k = qx.k, blocks = qx.blocks, rowBytes = k / 2;
  const int64_t gap = (r1 - r0) / kGroupRows, rowFloats = kGroupRows * ws.scratchFloats(k);
  float *scratch = rowScaleScratch(rowFloats + blocks * kGroupRows);
  float *scales = scratch + rowFloats;
  const Nf4Tables256 nf4 = Nf4Tables256::load();
  const __m256i levelAbs = nf4.magnitude, levelSigned = nf4.level;
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t r = r0; r < r0 + gap; ++r) {
    groupScales(ws, r, gap, k, scratch, scales);
    if (r + 1 < r0 + gap)
      prefetchScales(ws, r + 1, gap, k);
    __m256 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m256i chunk[4], u[8], sign[8];
      transposeBlock(codes + r * rowBytes + b * (kQBlock / 2), gap * rowBytes, chunk);
      for (int c = 0; c < 4; ++c) {
        __m256i bytes = chunk[c];
        if constexpr (Codes == CodeKind::Int4)
          bytes = _mm256_xor_si256(bytes, _mm256_set1_epi8(static_cast<char>(0x88))); // level + 8
        const __m256i lo = _mm256_and_si256(bytes, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
        if constexpr (Codes == CodeKind::Int4) {
          u[2 * c] = lo, u[2 * c + 1] = hi;
        } else {
          u[2 * c] = _mm256_shuffle_epi8(levelAbs, lo);
          u[2 * c + 1] = _mm256_shuffle_epi8(levelAbs, hi);
          sign[2 * c] = _mm256_shuffle_epi8(levelSigned, lo);
          sign[2 * c + 1] = _mm256_shuffle_epi8(levelSigned, hi);
        }
      }
      const __m256 w = _mm256_loadu_ps(scales + b * kGroupRows);
      for (int i = 0; i < M; ++i) {
        const int64_t lane = b * qx.layout.lanesPerBlock;
        const __m256i start = _mm256_set1_epi32(qx.biasRow(i0 + i)[lane]);
        const __m256i sum = blockDot<Codes, Isa>(u, sign, qx.qRow(i0 + i) + b * kQBlock, start);
        const __m256 f = _mm256_mul_ps(_mm256_set1_ps(qx.scaleRow(i0 + i)[lane]), w);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), f, acc[i]);
      }
    }
    for (int i = 0; i < M; ++i) {
      alignas(32) float lanes[kGroupRows];
      _mm256_store_ps(lanes, acc[i]);
      for (int64_t t = 0; t < kGroupRows; ++t) d.y[(i0 + i) * d.ldy + r + t * gap] = lanes[t];
    }
  }
  if (r0 + kGroupRows * gap < r1)
    intRows256<M, 1, Codes, Isa>(codes, ws, r0 + kGroupRows * gap, r1, d, i0);
}

} // namespace llmc::cpu::decode

#endif
