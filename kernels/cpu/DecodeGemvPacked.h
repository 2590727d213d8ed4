//===- DecodeGemvPacked.h - 4-bit decode dots over repacked rows -*- C++ -*-===//
//
// DecodeGemvInt8.h's int4 and NF4 products from a copy of W's codes and
// scales repacked sixteen rows together, as llama.cpp repacks Q4_0 and
// IQ4_NL at load. Read in place, `llmc quantize`'s layout costs each block
// of each row its own int32 sum, conversion, scale product and
// multiply-add plus a horizontal sum per row (intRows512 reached ~20 G
// weights/s on a Zen 4 core), or eight rows transposed in registers from
// eight streams (intGroups256); here one byte dot advances sixteen rows
// (zmm) or eight (ymm), a block's fp32 work is paid once for them, and a
// thread reads one sequential stream.
//
// Layout: rows in groups of 16 (the last group padded with zero scales);
// group g's blocks one after the other, in units of 64 bytes of scales
// and the codes of one block (fp32 scales) or two (fp16 scales):
//
//   bytes   0..63   the 16 rows' scales of the unit's block, fp32 (the
//                   scale of the block BlockScales gives, whatever run it
//                   came from); or of its two blocks, fp16, the first
//                   block's 16 then the second's
//   then per block  four chunks of 64 bytes: lane t (4 bytes) of chunk c
//                   holds row t's code bytes 4c..4c+3 of the block
//                   (elements 8c..8c+7: low nibbles the even ones)
//
// so groups and units follow each other in memory, each unit a whole
// number of cache lines (320 or 576 bytes; a group's last fp16 unit keeps
// room for a second block when the blocks are odd). The scales are stored
// in fp16 when every one of W's is an fp16 value (`llmc quantize
// --scale-dtype f16` writes such scales, as GGUF's Q4_0 and GPTQ store
// theirs): the copy then reads 4.5 bits a weight instead of 5, and
// multiplies by the same values. int4 codes are stored as level + 8 (the
// nibble ^ 8), NF4's as their index. x is quantized a block at a time
// (xLayout): the block's even elements, then its odd ones, so that the
// four bytes of x a chunk's low (high) nibbles meet are one broadcast
// int32. The bodies are DecodeGemvPackedBodies.h's.
//
// The copy costs as much memory as the codes and their scales per block
// (5/8 byte per weight with fp32 scales, 9/16 with fp16) and is made when
// the kernel is prepared with its weights constant parameters
// (Kernel::prepare: llmc generate, once they are loaded); unprepared
// kernels, and weights a program writes (layers streamed into a reused
// slot), take the in-place bodies. The stored codes stay for prefill.
// LLMC_CPU_NO_PACK=1 keeps to the in-place bodies.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMVPACKED_H
#define LLMC_KERNELS_CPU_DECODEGEMVPACKED_H

#include "common/Half.h"
#include "kernels/cpu/DecodeGemvPackedBodies.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

namespace llmc::cpu::decode {

/// Whether 4-bit decode products take the repacked bodies: unless
/// LLMC_CPU_NO_PACK is set. Read when a kernel binds.
inline bool usePackedNibbles() { return !std::getenv("LLMC_CPU_NO_PACK"); }

/// W [N, K]'s 4-bit codes and block scales repacked (layout above).
class PackedNibbles {
public:
  /// How x is quantized for `isa`'s body: a block a step, one bias and
  /// scale per block, the bias taking off the codes' excess (int4's 8;
  /// NF4's 128 on zmm, none on ymm, whose NF4 dots are signed).
  static QLayout xLayout(DotIsa isa, CodeKind codes) {
    const int excess = codes == CodeKind::Int4 ? 8 : isa == DotIsa::Avx512Vnni ? 128 : 0;
    return QLayout{1, 1, excess, true};
  }

  int64_t groups() const { return (n_ + kRows - 1) / kRows; }

  /// The copy of rows of K / 2 code bytes (`codes` Int4 or Nf4) with
  /// block scales `ws` (BlockScales' interface) for `isa`'s body, shared
  /// by every kernel that reads those codes (a prefill program of up to
  /// 16 rows and the decode program): made by the first to ask, the
  /// groups over threads, and kept while a kernel holds it. Null, after a
  /// one-line notice, where the memory for it cannot be had: the products
  /// then read the codes in place.
  template <typename Scales>
  static std::shared_ptr<const PackedNibbles>
  shared(const uint8_t *codes, const Scales &ws, int64_t n, int64_t k, CodeKind kind, DotIsa isa) {
    static std::mutex lock;
    static std::map<std::tuple<const uint8_t *, int64_t, int64_t, CodeKind, DotIsa>,
                    std::weak_ptr<const PackedNibbles>>
        copies;
    std::lock_guard<std::mutex> hold(lock);
    for (auto it = copies.begin(); it != copies.end();) // forget copies no kernel holds
      it = it->second.expired() ? copies.erase(it) : std::next(it);
    std::weak_ptr<const PackedNibbles> &slot = copies[{codes, n, k, kind, isa}];
    if (std::shared_ptr<const PackedNibbles> kept = slot.lock())
      return kept;
    auto p = std::make_shared<PackedNibbles>();
    p->n_ = n, p->k_ = k, p->kind_ = kind, p->isa_ = isa;
    p->half_ = scalesAreHalves(ws, n, k);
    const int64_t bytes = p->groups() * p->groupBytes();
    if (bytes == 0) // no rows or columns: nothing to copy
      return nullptr;
    p->tiles_.reset(static_cast<uint8_t *>(std::aligned_alloc(64, bytes)));
    if (!p->tiles_) {
      std::fprintf(stderr,
                   "llmc: no memory for a repacked copy of a [%lld, %lld] 4-bit weight (%lld "
                   "bytes); its decode products read its codes in place\n",
                   static_cast<long long>(n), static_cast<long long>(k),
                   static_cast<long long>(bytes));
      return nullptr;
    }
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < p->groups(); ++g) p->packGroup(codes, ws, g);
    slot = p;
    return p;
  }

  /// Rows of y in groups [g0, g1), for every row of x (four at a time).
  void rows(int64_t g0, int64_t g1, const QRows &d) const;

  /// Whether the copy holds its scales in fp16.
  bool halfScales() const { return half_; }

private:
  static constexpr int64_t kRows = kPackedRows;
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };

  int64_t blocks() const { return k_ / kQBlock; }
  PackedTiles tiles() const { return PackedTiles{tiles_.get(), n_, blocks(), half_}; }
  int64_t groupBytes() const { return tiles().units() * unitBytes(half_); }

  /// Whether every block scale of W [n, k] is an fp16 value (NaN is not).
  template <typename Scales> static bool scalesAreHalves(const Scales &ws, int64_t n, int64_t k) {
    float *scratch = rowScaleScratch(ws.scratchFloats(k));
    // A row's scales: one per run of `per` blocks, or one shared by rows.
    const int64_t perRow = std::max<int64_t>(1, k / kQBlock / ws.per);
    for (int64_t r = 0; r < n; ++r) {
      const float *scales = ws.row(r, k, scratch);
      for (int64_t j = 0; j < perRow; ++j)
        if (half::toFloat(half::fromFloat(scales[j])) != scales[j])
          return false;
    }
    return true;
  }

  template <typename Scales> void packGroup(const uint8_t *codes, const Scales &ws, int64_t g) {
    const int64_t rowBytes = k_ / 2, rowFloats = ws.scratchFloats(k_);
    float *scratch = rowScaleScratch(kRows * rowFloats);
    const float *scales[kRows] = {};
    for (int64_t t = 0; t < kRows; ++t)
      if (g * kRows + t < n_)
        scales[t] = ws.row(g * kRows + t, k_, scratch + t * rowFloats);
    // int4's level + 8; NF4's index as stored. Padding rows: scale 0.
    const uint32_t flip = kind_ == CodeKind::Int4 ? 0x88888888u : 0u;
    uint8_t *group = tiles_.get() + g * groupBytes();
    std::memset(group, 0, groupBytes()); // a last unit's missing block
    for (int64_t b = 0; b < blocks(); ++b) {
      // Where PackedTiles::block finds block b.
      const int64_t j = b % blocksPerUnit(half_);
      uint8_t *unit = group + b / blocksPerUnit(half_) * unitBytes(half_);
      uint8_t *tile = unit + kUnitScaleBytes + j * kBlockCodeBytes;
      for (int64_t t = 0; t < kRows; ++t) {
        const float scale = scales[t] ? scales[t][b / ws.per] : 0.0f;
        if (half_) {
          const uint16_t bits = half::fromFloat(scale);
          std::memcpy(unit + 2 * (kRows * j + t), &bits, 2);
        } else {
          std::memcpy(unit + 4 * t, &scale, 4);
        }
        const uint8_t *row =
            scales[t] ? codes + (g * kRows + t) * rowBytes + b * (kQBlock / 2) : nullptr;
        for (int c = 0; c < 4; ++c) { // row t's bytes 4c..4c+3 to lane t of chunk c
          uint32_t four = 0;
          if (row)
            std::memcpy(&four, row + 4 * c, 4);
          four ^= flip;
          std::memcpy(tile + 64 * c + 4 * t, &four, 4);
        }
      }
    }
  }

  template <int M, CodeKind Codes>
  void groupsOf(int64_t g0, int64_t g1, const QRows &d, int64_t i0) const;

  std::unique_ptr<uint8_t, Free> tiles_;
  int64_t n_ = 0, k_ = 0;
  bool half_ = false;
  CodeKind kind_ = CodeKind::Int4;
  DotIsa isa_ = DotIsa::Avx2;
};

template <int M, CodeKind Codes>
void PackedNibbles::groupsOf(int64_t g0, int64_t g1, const QRows &d, int64_t i0) const {
  const PackedTiles w = tiles();
  auto run = [&](auto half) {
    constexpr bool kHalf = decltype(half)::value;
    switch (isa_) {
    case DotIsa::Avx512Vnni: packedGroups512<M, Codes, kHalf>(w, g0, g1, d, i0); break;
    case DotIsa::YmmVnniVex:
      packedGroups256<M, Codes, DotIsa::YmmVnniVex, kHalf>(w, g0, g1, d, i0);
      break;
    case DotIsa::YmmVnniEvex:
      packedGroups256<M, Codes, DotIsa::YmmVnniEvex, kHalf>(w, g0, g1, d, i0);
      break;
    case DotIsa::Avx2: packedGroups256<M, Codes, DotIsa::Avx2, kHalf>(w, g0, g1, d, i0); break;
    }
  };
  if (half_)
    run(std::true_type{});
  else
    run(std::false_type{});
}

inline void PackedNibbles::rows(int64_t g0, int64_t g1, const QRows &d) const {
  for (int64_t i0 = 0; i0 < d.x->m; i0 += 4) {
    withRowsOfX(d.x->m - i0, [&](auto rows) {
      constexpr int kM = decltype(rows)::value;
      if (kind_ == CodeKind::Nf4)
        groupsOf<kM, CodeKind::Nf4>(g0, g1, d, i0);
      else
        groupsOf<kM, CodeKind::Int4>(g0, g1, d, i0);
    });
  }
}

} // namespace llmc::cpu::decode

#endif
