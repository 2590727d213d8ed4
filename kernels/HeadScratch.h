//===- HeadScratch.h - the fused LM head's scratch layout -------*- C++ -*-===//
//
// The fused head + loss (llm.linear_cross_entropy and its forms) computes
// its logits chunk_rows rows at a time in an f32 scratch [rows_of_scratch,
// V]. The first chunk_rows rows hold the chunk (in fp32 on the CPU; in the
// head's own type, from the start of the buffer, on CUDA). When a bf16 or
// f16 weight's gradient sums over several chunks, D more rows follow: the
// [V, D] (or [D, V]) fp32 sum, rounded to the weight's type once at the
// end, so the gradient is not rounded once per chunk. The op's type
// inference, the kernels' contract and both backends read the layout here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_HEADSCRATCH_H
#define LLMC_KERNELS_HEADSCRATCH_H

#include <cstdint>

namespace llmc {

/// Scratch rows past the chunk: `width` (D) for the fp32 sum of a 16-bit
/// weight gradient (`weightGrad`) over several chunks of `rows` rows, else
/// none.
inline int64_t headAccumulatorRows(int64_t rows, int64_t width, int64_t chunkRows,
                                   bool sixteenBit, bool weightGrad) {
  return weightGrad && sixteenBit && chunkRows < rows ? width : 0;
}

} // namespace llmc

#endif
