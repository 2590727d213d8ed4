//===- Embedding.cpp - binding contract of embedding and embedding_grad ---===//
//
// The checks and derivations kernels/cpu/embedding.cpp and
// kernels/cuda/embedding.cu share.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Embedding.h"

#include "kernels/Validator.h"

#include <vector>

namespace llmc::contracts {
namespace {

/// Reads and checks row_offset / vocab_size for a table of `rows` rows.
bool vocabShard(Validator &v, int64_t rows, EmbeddingBinding *out) {
  int64_t offset, vocab;
  if (!v.intAttr("row_offset", &offset, 0) || !v.intAttr("vocab_size", &vocab, 0)) return false;
  if (vocab == 0) vocab = rows;
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

} // namespace

bool bindEmbedding(const KernelArgs &args, std::string &error, EmbeddingBinding *out) {
  Validator v("embedding", args, error);
  if (!v.arity(2, 1)) return false;
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

bool bindEmbeddingGrad(const KernelArgs &args, std::string &error, EmbeddingBinding *out) {
  Validator v("embedding_grad", args, error);
  if (!v.arity(2, 1)) return false;
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
