//===- Nf4.cuh - one element of an NF4-stored weight on the GPU -*- CUDA -*-===//
//
// The expansion qat_dequantize_nf4 and matmul_nf4 share: element i's
// nibble (two per byte, low first), its block's absmax = level · scale +
// mean, the level its 8-bit code read as an int8 or as an E4M3 number
// (quant::nf4AbsmaxLevel, common/Fp8.h's decode), as two separately
// rounded fp32 operations (__fmul_rn, __fadd_rn:
// never an FMA, as the CPU, built with -ffp-contract=off, computes it), and
// level · absmax (0 where absmax ≤ 0) — the CPU's value bit for bit. A
// piece of a weight split by tensor parallelism finds its blocks' scales by
// their index in the whole weight (common/Nf4Piece.h). The 16 levels
// travel as a kernel parameter, copied from quant::kNf4Levels.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CUDA_NF4_CUH
#define LLMC_KERNELS_CUDA_NF4_CUH

#include "common/Nf4Piece.h"
#include "common/QuantScheme.h"

#include <cstdint>

namespace llmc::cuda {

struct Nf4Levels {
  float value[16];

  static Nf4Levels fromScheme() {
    Nf4Levels levels;
    for (int i = 0; i < 16; ++i) levels.value[i] = quant::kNf4Levels[i];
    return levels;
  }
};

__device__ inline float nf4Element(const uint8_t *codes, const uint8_t *absmaxQ,
                                   const float *absmaxScale, float absmaxMean,
                                   const Nf4Levels &levels, const Nf4Piece &piece,
                                   quant::AbsmaxFormat format, int64_t i, int64_t block) {
  const int64_t g = i / block;
  const float deviation = __fmul_rn(quant::nf4AbsmaxLevel(absmaxQ[g], format),
                                    absmaxScale[piece.wholeBlock(g) / quant::kNf4DoubleQuantBlock]);
  const float absmax = __fadd_rn(deviation, absmaxMean);
  const uint8_t byte = codes[i / 2];
  const int index = (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
  return absmax > 0.0f ? __fmul_rn(levels.value[index], absmax) : 0.0f;
}

} // namespace llmc::cuda

#endif
