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
#include "kernels/Validator.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::contracts {

/// A table [tableRows × width] holding rows [rowOffset, rowOffset +
/// tableRows) of vocabSize, looked up by `ids` ids.
struct EmbeddingBinding {
  DType dtype = DType::F32; ///< of the table (embedding) or dy (embedding_grad)
  int64_t ids = 0, tableRows = 0, width = 0;
  int64_t rowOffset = 0, vocabSize = 0;
};
inline bool bindEmbedding(const KernelArgs &args, std::string &error, EmbeddingBinding *out);
inline bool bindEmbeddingGrad(const KernelArgs &args, std::string &error, EmbeddingBinding *out);

/// Which table row an id reads, on both backends (host and device).
struct VocabShard {
  int64_t rows, offset, vocab; ///< rows [offset, offset + rows) of vocab

  /// The local row of `id`, -1 for another shard's id, -2 for an invalid id.
  LLMC_HOST_DEVICE int64_t row(int64_t id) const {
    if (id < 0 || id >= vocab)
      return -2;
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

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

namespace embedding_impl {

/// Reads and checks row_offset / vocab_size for a table of `rows` rows.
inline bool vocabShard(Validator &v, int64_t rows, EmbeddingBinding *out) {
  int64_t offset, vocab;
  if (!v.intAttr("row_offset", &offset, 0) || !v.intAttr("vocab_size", &vocab, 0))
    return false;
  if (vocab == 0)
    vocab = rows;
  // Rows past vocab_size are padding of the last shards of a vocabulary
  // padded to a multiple of the ranks (equal shards: the offset is a
  // multiple of the shard's rows); no id reaches them.
  if (offset < 0 || (offset + rows > vocab && offset % rows != 0))
    return v.fail("rows [" + std::to_string(offset) + ", " + std::to_string(offset + rows) +
                  ") do not fit in vocab_size " + std::to_string(vocab));
  out->rowOffset = offset;
  out->vocabSize = vocab;
  return true;
}

} // namespace embedding_impl
using namespace embedding_impl;

inline bool bindEmbedding(const KernelArgs &args, std::string &error, EmbeddingBinding *out) {
  Validator v("embedding", args, error);
  if (!v.arity(2, 1))
    return false;
  const TensorView &table = v.in(0), &ids = v.in(1);
  if (!v.isFloat(table, "table") || !v.hasRank(table, "table", 2) || !v.isIndex(ids, "ids"))
    return false;
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(table.dim(1));
  if (!v.hasType(v.out(0), "out", table.dtype, shape) || !vocabShard(v, table.dim(0), out))
    return false;
  out->dtype = table.dtype;
  out->ids = ids.numel();
  out->tableRows = table.dim(0);
  out->width = table.dim(1);
  return true;
}

inline bool bindEmbeddingGrad(const KernelArgs &args, std::string &error, EmbeddingBinding *out) {
  Validator v("embedding_grad", args, error);
  if (!v.arity(2, 1))
    return false;
  const TensorView &ids = v.in(0), &dy = v.in(1), &dtable = v.out(0);
  if (!v.isIndex(ids, "ids") || !v.isFloat(dy, "dy") || !v.hasDType(dtable, "dtable", dy.dtype) ||
      !v.hasRank(dtable, "dtable", 2))
    return false;
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(dtable.dim(1));
  if (!v.hasType(dy, "dy", dtable.dtype, shape) || !vocabShard(v, dtable.dim(0), out))
    return false;
  out->dtype = dy.dtype;
  out->ids = ids.numel();
  out->tableRows = dtable.dim(0);
  out->width = dtable.dim(1);
  return true;
}

} // namespace llmc::contracts

#endif
