//===- HeadScratch.h - the fused LM head's chunks and scratch ---*- C++ -*-===//
//
// The fused head + loss (llm.linear_cross_entropy and its forms) computes
// its logits chunk_rows rows at a time in an f32 scratch [rows_of_scratch,
// V]. The first chunk_rows rows hold the chunk (in fp32 on the CPU; in the
// head's own type, from the start of the buffer, on CUDA). When a bf16 or
// f16 weight's gradient sums over several chunks, D more rows follow: the
// [V, D] (or [D, V]) fp32 sum, rounded to the weight's type once at the
// end, so the sum is not rounded once per chunk. (The CPU adds each
// chunk's fp32 product into it; CUDA's cuBLASLt GEMMs write and accumulate
// it in fp32 from 16-bit operands.) llmc-fuse sizes the
// chunks, the op's type inference, the kernels' contract and both backends
// read the layout, and bench/head_gpu.cpp times it, all from here.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_HEADSCRATCH_H
#define LLMC_COMMON_HEADSCRATCH_H

#include <cstdint>

namespace llmc {

/// Scratch rows past the chunk: `width` (D) for the fp32 sum of a 16-bit
/// weight gradient (`weightGrad`) over several chunks of `rows` rows, else
/// none.
inline int64_t headAccumulatorRows(int64_t rows, int64_t width, int64_t chunkRows,
                                   bool sixteenBit, bool weightGrad) {
  return weightGrad && sixteenBit && chunkRows < rows ? width : 0;
}

/// Rows per chunk of a head's [rows, vocab] logits, `elementBytes` each as
/// the kernel holds them (the CPU in fp32, CUDA in the compute type): as
/// few chunks as fit `chunkBytes` each, of equal rows rounded up to a
/// multiple of 128 (GEMM tiles) where the budget allows, so only the last
/// chunk may be shorter. Equal chunks rather than full ones and a
/// remainder: a short last chunk's GEMMs (91 of GPT-2 124M's 4096 rows at
/// B=4, T=1024 with 1335-row chunks) run well below the GEMM rate of the
/// others, and the scratch is no larger than the chunks need.
inline int64_t headChunkRows(int64_t rows, int64_t vocab, int64_t elementBytes,
                             double chunkBytes) {
  constexpr int64_t kTileRows = 128;
  double fit = chunkBytes / static_cast<double>(elementBytes * vocab);
  int64_t most = fit < 1 ? 1 : fit > static_cast<double>(rows) ? rows : static_cast<int64_t>(fit);
  if (most == rows)
    return rows;
  if (most >= kTileRows)
    most = most / kTileRows * kTileRows;
  const int64_t chunks = (rows + most - 1) / most;
  const int64_t even = (rows + chunks - 1) / chunks;
  if (most < kTileRows)
    return even;
  const int64_t tiled = (even + kTileRows - 1) / kTileRows * kTileRows;
  return tiled < most ? tiled : most;
}

} // namespace llmc

#endif
