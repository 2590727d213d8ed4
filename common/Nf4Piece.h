//===- Nf4Piece.h - one rank's piece of an NF4-stored weight ---*- C++ -*-===//
//
// Tensor parallelism splits an NF4-stored weight (QLoRA's storage,
// common/QuantScheme.h) with the weight: each rank holds the codes and the
// 8-bit absmax levels (int8 or E4M3) of its piece's blocks, shaped after
// the piece. The fp32 scales of the second quantization level are not
// split: each covers 256 consecutive blocks of the *whole* weight in
// row-major order, a run that crosses rows and pieces, so cutting them
// would mean quantizing the absmax again, per piece, and a piece would no
// longer hold the file's values. Every rank keeps all of them (one fp32 per 16384 elements in
// blocks of 64) and finds a block's scale through the block's index in the
// whole weight, which Nf4Piece computes.
//
// Along each dimension (rows in elements, columns in blocks) the whole
// weight is `chunks` equal chunks, each split alike over the ranks (GPT-2's
// fused QKV columns are three), and the piece holds, of each chunk, the
// `extent / chunks` consecutive indices from `offset`. A piece may hold
// only some of the chunks (`held` consecutive ones): a stack of experts
// whose rows tensor parallelism splits within each expert (a chunk per
// expert) and expert parallelism splits into runs of whole experts; its
// offset then counts from the whole weight's start, its first chunk's
// start included.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_NF4PIECE_H
#define LLMC_COMMON_NF4PIECE_H

#include "common/HostDevice.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

/// One dimension of a piece: where its indices lie in the whole weight's.
struct Nf4PieceDim {
  int64_t whole = 1;  ///< the whole weight's extent
  int64_t extent = 1; ///< the piece's
  int64_t chunks = 1; ///< equal chunks of the dimension, each split alike
  int64_t offset = 0; ///< the whole weight's index of the piece's first one
  int64_t held = 0;   ///< the consecutive chunks the piece holds (0: all)

  LLMC_HOST_DEVICE int64_t heldChunks() const { return held > 0 ? held : chunks; }
  /// The whole weight's index of the piece's index `i`.
  LLMC_HOST_DEVICE int64_t wholeIndex(int64_t i) const {
    const int64_t width = extent / heldChunks();
    return (i / width) * (whole / chunks) + offset + i % width;
  }
};

/// A piece of a [rows, columns] NF4 weight in blocks along its rows; the
/// default is the whole weight, whose block indices are its own.
struct Nf4Piece {
  bool split = false;
  Nf4PieceDim rows, blocks; ///< blocks: the columns, in blocks

  /// The whole weight's index of the piece's block `g` (row-major).
  LLMC_HOST_DEVICE int64_t wholeBlock(int64_t g) const {
    if (!split)
      return g;
    return rows.wholeIndex(g / blocks.extent) * blocks.whole +
           blocks.wholeIndex(g % blocks.extent);
  }
  /// Whether each row's blocks are one run of the whole weight's row (the
  /// columns in one chunk): a row's block j is then the whole weight's
  /// wholeBlock(first of the row) + j.
  LLMC_HOST_DEVICE bool rowsAreRuns() const { return !split || blocks.chunks == 1; }
  /// The blocks of the whole weight, of which a piece's `pieceBlocks` are.
  int64_t wholeBlocks(int64_t pieceBlocks) const {
    return split ? rows.whole * blocks.whole : pieceBlocks;
  }
};

/// The piece `pieceShape` (in blocks of `block` along its rows) of a weight
/// of `wholeShape`, whose dimensions are `chunks` equal chunks split alike,
/// holding of `held` consecutive chunks (empty: of all) the indices from
/// `offset` (counted from the whole's start): its Nf4Piece; or, with
/// `error` saying why the numbers describe no such piece, a whole one. A
/// piece of more than two dimensions (a stack of experts' matrices, split
/// within each expert) is read as its 2-D view, the leading dimensions
/// flattened into rows, as its storage holds it. The compiler's verifiers
/// and the kernels' contracts share this check.
inline Nf4Piece makeNf4Piece(const std::vector<int64_t> &pieceShape, int64_t block,
                             const std::vector<int64_t> &wholeShape,
                             const std::vector<int64_t> &chunks, const std::vector<int64_t> &offset,
                             std::string &error, const std::vector<int64_t> &held = {}) {
  auto list = [](const std::vector<int64_t> &v) {
    std::string text;
    for (int64_t x : v) text += (text.empty() ? "" : "x") + std::to_string(x);
    return text;
  };
  std::vector<int64_t> shape = pieceShape;
  if (shape.size() > 2) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
    shape = {rows, shape.back()};
  }
  Nf4Piece piece;
  if (shape.size() != 2 || wholeShape.size() != 2 || chunks.size() != 2 || offset.size() != 2 ||
      (!held.empty() && held.size() != 2)) {
    error = "a piece of a weight (whole_shape, chunks, piece_offset, held_chunks) is 2-D, with "
            "two entries each; got the weight " +
            list(shape);
    return piece;
  }
  if (block < 1 || shape[1] % block != 0 || wholeShape[1] % block != 0 || offset[1] % block != 0 ||
      shape[1] % 2 != 0) {
    error = "the piece " + list(shape) + " at piece_offset " + list(offset) + " of whole_shape " +
            list(wholeShape) + " is not in whole blocks of " + std::to_string(block) +
            " and whole bytes of codes";
    return piece;
  }
  const int64_t unit[2] = {1, block}; // rows in elements, columns in blocks
  Nf4PieceDim dims[2];
  for (int d = 0; d < 2; ++d) {
    Nf4PieceDim &p = dims[d];
    p = {wholeShape[d] / unit[d], shape[d] / unit[d], chunks[d], offset[d] / unit[d],
         held.empty() ? 0 : held[d]};
    const int64_t size = p.chunks < 1 ? 0 : p.whole / p.chunks, count = p.heldChunks();
    if (p.chunks < 1 || size < 1 || count < 1 || count > p.chunks || p.extent % count != 0 ||
        p.whole % p.chunks != 0 || p.offset < 0 || p.offset % size + p.extent / count > size ||
        p.offset / size + count > p.chunks) {
      error = "the piece " + list(shape) + " at piece_offset " + list(offset) + " in chunks " +
              list(chunks) + (held.empty() ? "" : ", holding " + list(held) + " of them,") +
              " does not lie within whole_shape " + list(wholeShape) + " (dimension " +
              std::to_string(d) + ")";
      return piece;
    }
  }
  piece.split = true;
  piece.rows = dims[0];
  piece.blocks = dims[1];
  return piece;
}

} // namespace llmc

#endif
