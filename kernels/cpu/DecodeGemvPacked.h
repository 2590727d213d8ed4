//===- DecodeGemvPacked.h - 4-bit decode dots over repacked rows -*- C++ -*-===//
//
// DecodeGemvInt8.h's int4 and NF4 products on AVX-512 VNNI CPUs, from a
// copy of W's codes and scales repacked sixteen rows together, as
// llama.cpp repacks Q4_0 and IQ4_NL at load. Read in place, `llmc
// quantize`'s layout costs each block of each row its own int32 sum,
// conversion, scale product and multiply-add plus a horizontal sum per
// row (intRows512 reached ~20 G weights/s on a Zen 4 core); here one
// vpdpbusd advances sixteen rows, so a block's fp32 work is paid once per
// sixteen rows, and a thread reads one sequential stream (about twice the
// weights per second on that core, the rest of the time waiting on
// memory).
//
// Layout: rows in groups of 16 (the last group padded with zero scales);
// group g's blocks one after the other, each a 320-byte tile
//
//   bytes   0..63   the 16 rows' fp32 scales of the block (BlockScales'
//                   scale of the block, whatever run it came from)
//   bytes  64..319  four chunks of 64 bytes: lane t (4 bytes) of chunk c
//                   holds row t's code bytes 4c..4c+3 of the block
//                   (elements 8c..8c+7: low nibbles the even ones)
//
// so groups and tiles follow each other in memory. int4 codes are stored
// as level + 8 (the nibble ^ 8) and NF4's as their index; the body looks
// NF4's up as level + 128 (vpshufb), and x's bias takes the excess off,
// as intRows512 does. x is quantized a block at a time (QLayout::packed):
// the block's even elements, then its odd ones, so that the four bytes of
// x a chunk's low (high) nibbles meet are one broadcast int32.
//
// The copy costs as much memory as the codes and their scales at fp32 per
// block (5/8 byte per weight) and is made at the first decode product,
// when the weights have been loaded; the stored codes stay for prefill.
// LLMC_CPU_NO_PACK=1 keeps to the in-place bodies.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMVPACKED_H
#define LLMC_KERNELS_CPU_DECODEGEMVPACKED_H

#include "kernels/cpu/DecodeGemvInt8.h"

#include <cstdlib>
#include <memory>

namespace llmc::cpu::decode {

/// Whether 4-bit decode products take the repacked body: an AVX-512 VNNI
/// body chosen, and LLMC_CPU_NO_PACK unset. Read when a kernel binds.
inline bool usePackedNibbles(DotIsa isa) {
  return isa == DotIsa::Avx512Vnni && !std::getenv("LLMC_CPU_NO_PACK");
}

/// W [N, K]'s 4-bit codes and block scales repacked (layout above).
class PackedNibbles {
public:
  static constexpr int64_t kRows = 16, kTileBytes = 320;

  /// How x is quantized for the body: a block a step, one bias and scale
  /// per block, codes unsigned with the excess of `codes`.
  static QLayout xLayout(CodeKind codes) {
    return QLayout{1, 1, codes == CodeKind::Nf4 ? 128 : 8, true};
  }

  bool empty() const { return !tiles_; }
  int64_t groups() const { return (n_ + kRows - 1) / kRows; }

  /// Repacks rows of K / 2 code bytes (`codes` Int4 or Nf4) with block
  /// scales `ws` (BlockScales' interface), the groups over threads.
  template <typename Scales>
  static PackedNibbles pack(const uint8_t *codes, const Scales &ws, int64_t n, int64_t k,
                            CodeKind kind) {
    PackedNibbles p;
    p.n_ = n, p.k_ = k, p.kind_ = kind;
    const int64_t bytes = p.groups() * p.groupBytes();
    p.tiles_.reset(static_cast<uint8_t *>(std::aligned_alloc(64, bytes)));
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < p.groups(); ++g) p.packGroup(codes, ws, g);
    return p;
  }

  /// Rows of y in groups [g0, g1), for every row of x (four at a time).
  void rows(int64_t g0, int64_t g1, const QRows &d) const;

private:
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };

  int64_t blocks() const { return k_ / kQBlock; }
  int64_t groupBytes() const { return blocks() * kTileBytes; }

  template <typename Scales> void packGroup(const uint8_t *codes, const Scales &ws, int64_t g) {
    const int64_t rowBytes = k_ / 2, rowFloats = ws.scratchFloats(k_);
    float *scratch = rowScaleScratch(kRows * rowFloats);
    const float *scales[kRows] = {};
    for (int64_t t = 0; t < kRows; ++t)
      if (g * kRows + t < n_)
        scales[t] = ws.row(g * kRows + t, k_, scratch + t * rowFloats);
    // int4's level + 8; NF4's index as stored. Padding rows: scale 0.
    const uint8_t flip = kind_ == CodeKind::Int4 ? 0x88 : 0x00;
    uint8_t *tile = tiles_.get() + g * groupBytes();
    for (int64_t b = 0; b < blocks(); ++b, tile += kTileBytes) {
      float *s = reinterpret_cast<float *>(tile);
      for (int64_t t = 0; t < kRows; ++t) {
        s[t] = scales[t] ? scales[t][b / ws.per] : 0.0f;
        for (int c = 0; c < 4; ++c)
          for (int j = 0; j < 4; ++j)
            tile[64 + 64 * c + 4 * t + j] =
                scales[t] ? codes[(g * kRows + t) * rowBytes + b * (kQBlock / 2) + 4 * c + j] ^ flip
                          : flip;
      }
    }
  }

  template <int M, CodeKind Codes>
  void groupsOf(int64_t g0, int64_t g1, const QRows &d, int64_t i0) const;

  std::unique_ptr<uint8_t, Free> tiles_;
  int64_t n_ = 0, k_ = 0;
  CodeKind kind_ = CodeKind::Int4;
};

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

/// Rows of y in groups [g0, g1) for M rows of x from i0.
template <int M, CodeKind Codes>
LLMC_PACKED512 void PackedNibbles::groupsOf(int64_t g0, int64_t g1, const QRows &d,
                                            int64_t i0) const {
  const QuantizedX &qx = *d.x;
  const int64_t blocks = this->blocks();
  // Eight tiles ahead: the prefetchers alone left a thread waiting on
  // memory a quarter of the time.
  constexpr int64_t kAhead = 8 * kTileBytes;
  const __m512i low = _mm512_set1_epi8(0x0F);
  uint8_t excess[64];
  for (int c = 0; c < 64; ++c)
    excess[c] = static_cast<uint8_t>(quant::kNf4Int8Levels[c % 16] + 128);
  const __m512i levels = _mm512_loadu_si512(excess);
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t *tile = tiles_.get() + g * groupBytes();
    __m512 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b, tile += kTileBytes) {
      for (int64_t line = 0; line < kTileBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char *>(tile + kAhead + line), _MM_HINT_T0);
      __m512i lo[4], hi[4];
      for (int c = 0; c < 4; ++c) {
        const __m512i bytes = _mm512_load_si512(tile + 64 + 64 * c);
        lo[c] = unsignedCodes<Codes>(_mm512_and_si512(bytes, low), levels);
        hi[c] = unsignedCodes<Codes>(_mm512_and_si512(_mm512_srli_epi16(bytes, 4), low), levels);
      }
      const __m512 w = _mm512_load_ps(reinterpret_cast<const float *>(tile));
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
        const __m512 f = _mm512_mul_ps(w, _mm512_set1_ps(qx.scaleRow(i0 + i)[b]));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), f, acc[i]);
      }
    }
    const int64_t r0 = g * kRows, valid = std::min(kRows, n_ - r0);
    const auto mask = static_cast<__mmask16>((1u << valid) - 1);
    for (int i = 0; i < M; ++i) _mm512_mask_storeu_ps(d.y + (i0 + i) * d.ldy + r0, mask, acc[i]);
  }
}

#undef LLMC_PACKED512
#pragma GCC diagnostic pop

inline void PackedNibbles::rows(int64_t g0, int64_t g1, const QRows &d) const {
  for (int64_t i0 = 0; i0 < d.x->m; i0 += 4) {
    auto run = [&](auto rows) {
      constexpr int kM = decltype(rows)::value;
      if (kind_ == CodeKind::Nf4)
        groupsOf<kM, CodeKind::Nf4>(g0, g1, d, i0);
      else
        groupsOf<kM, CodeKind::Int4>(g0, g1, d, i0);
    };
    switch (std::min<int64_t>(4, d.x->m - i0)) {
    case 1: run(std::integral_constant<int, 1>{}); break;
    case 2: run(std::integral_constant<int, 2>{}); break;
    case 3: run(std::integral_constant<int, 3>{}); break;
    default: run(std::integral_constant<int, 4>{}); break;
    }
  }
}

} // namespace llmc::cpu::decode

#endif
