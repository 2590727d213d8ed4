//===- Embedding.h - binding contract of embedding and embedding_grad -*- C++ -*-===//
//
// What both backends check and derive when they bind embedding and
// embedding_grad: the dtypes and shapes of table, ids and rows, and which
// rows of the whole vocabulary the table holds (`row_offset`,
// `vocab_size`). The CPU and CUDA factories call the bind functions and add
// only what is specific to their backend.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_EMBEDDING_H
#define LLMC_KERNELS_CONTRACTS_EMBEDDING_H

#include "common/HostDevice.h"
#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// A table [tableRows × width] holding rows [rowOffset, rowOffset +
/// tableRows) of vocabSize, looked up by `ids` ids.
struct EmbeddingBinding {
  DType dtype = DType::F32; ///< of the table (embedding) or dy (embedding_grad)
  int64_t ids = 0, tableRows = 0, width = 0;
  int64_t rowOffset = 0, vocabSize = 0;
};
bool bindEmbedding(const KernelArgs &args, std::string &error, EmbeddingBinding *out);
bool bindEmbeddingGrad(const KernelArgs &args, std::string &error, EmbeddingBinding *out);

/// Which table row an id reads, on both backends (host and device).
struct VocabShard {
  int64_t rows, offset, vocab; ///< rows [offset, offset + rows) of vocab

  /// The local row of `id`, -1 for another shard's id, -2 for an invalid id.
  LLMC_HOST_DEVICE int64_t row(int64_t id) const {
    if (id < 0 || id >= vocab) return -2;
    int64_t r = id - offset;
    return r >= 0 && r < rows ? r : -1;
  }
};
inline VocabShard vocabShard(const EmbeddingBinding &b) {
  return {b.tableRows, b.rowOffset, b.vocabSize};
}

/// embedding_grad's order of summation, the same on both backends so they
/// agree bit for bit: the positions of this shard's ids, sorted by (row,
/// position), are cut into segments of this many; a row adds its dy rows
/// within each segment in position order (from 0), then its segments'
/// sums in segment order (from 0). A row whose positions lie in one
/// segment is the plain sum in position order. Segments bound the work of
/// one GPU warp: a frequent id's thousands of positions are summed by many
/// warps at once, not one.
inline constexpr int64_t kEmbeddingGradSegment = 32;

} // namespace llmc::contracts

#endif
