//===- DecodeGemvQuantized.h - which integer-dot body a product takes -*- C++ -*-===//
//
// The decode products of symmetric int8, int4 and NF4 codes with x
// quantized to int8 (DecodeGemvInt8.h): which body runs for the codes and
// the CPU's dot instructions, over a range of W's rows.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CPU_DECODEGEMVQUANTIZED_H
#define LLMC_KERNELS_CPU_DECODEGEMVQUANTIZED_H

#include "kernels/cpu/DecodeGemvInt8.h"
#include "kernels/cpu/DecodeGemvRowGroups.h"

namespace llmc::cpu::decode {

/// Whether rows of K int8/int4 codes in runs of `run` (a block, a row, the
/// tensor) can take the integer bodies: whole blocks of 32, runs of them.
inline bool canDotQuantized(int64_t k, int64_t run) {
  return k > 0 && run > 0 && k % kQBlock == 0 && (run < k ? k % run == 0 : run % k == 0) &&
         run % kQBlock == 0;
}

/// A ymm body: 4-bit codes eight rows of W a step (DecodeGemvRowGroups.h),
/// int8 codes a row (or S) at a time.
template <int M, int S, CodeKind Codes, DotIsa Isa, typename Scales>
void ymmRows(const uint8_t *codes, const Scales &ws, int64_t r0, int64_t r1, const QRows &d,
             int64_t i0) {
  if constexpr (Codes == CodeKind::Int8)
    intRows256<M, S, Codes, Isa>(codes, ws, r0, r1, d, i0);
  else
    intGroups256<M, Codes, Isa>(codes, ws, r0, r1, d, i0);
}

/// Rows [r0, r1) of y for every row of x, through `isa`'s body (as
/// rowsOf in DecodeGemv.h).
template <CodeKind Codes, typename Scales>
void intRowsOf(DotIsa isa, const uint8_t *codes, const Scales &ws, int64_t r0, int64_t r1,
               const QRows &d) {
  forRowChunks(r0, r1, d.x->m, [&](auto rows, auto streams, int64_t a, int64_t b, int64_t i0) {
    constexpr int kM = decltype(rows)::value, kS = decltype(streams)::value;
    switch (isa) {
    case DotIsa::Avx512Vnni:
      if constexpr (Codes != CodeKind::Int8) // chooseDotIsa: int8 has no zmm body
        intRows512<kM, kS, Codes>(codes, ws, a, b, d, i0);
      break;
    case DotIsa::YmmVnniVex:
      ymmRows<kM, kS, Codes, DotIsa::YmmVnniVex>(codes, ws, a, b, d, i0);
      break;
    case DotIsa::YmmVnniEvex:
      ymmRows<kM, kS, Codes, DotIsa::YmmVnniEvex>(codes, ws, a, b, d, i0);
      break;
    case DotIsa::Avx2: ymmRows<kM, kS, Codes, DotIsa::Avx2>(codes, ws, a, b, d, i0); break;
    }
  });
}

} // namespace llmc::cpu::decode

#endif
