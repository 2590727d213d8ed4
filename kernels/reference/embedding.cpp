//===- embedding.cpp - row lookup reference and its backward --------------===//
//
// Rows of the table picked by id, and the scatter-add of dy back into a
// zeroed table; with a vocabulary shard (vocab_size > 0) only this shard's
// rows are read or written.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor embedding(const RefTensor &table, const RefTensor &ids, int64_t rowOffset,
                    int64_t vocabSize) {
  require(table.shape.size() == 2, "embedding", "table must be [V, C]");
  int64_t rows = table.shape[0], c = table.shape[1];
  int64_t vocab = vocabSize > 0 ? vocabSize : rows;
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(c);
  RefTensor out = RefTensor::zeros(shape);
  for (int64_t n = 0; n < ids.numel(); ++n) {
    int64_t row = toId(ids.data[n], vocab, "embedding") - rowOffset;
    if (row < 0 || row >= rows) continue; // another shard's row
    for (int64_t i = 0; i < c; ++i) out.data[n * c + i] = table.data[row * c + i];
  }
  return out;
}

RefTensor embeddingGrad(const RefTensor &ids, const RefTensor &dy, int64_t rows,
                        int64_t rowOffset, int64_t vocabSize) {
  require(dy.shape.size() == ids.shape.size() + 1 &&
              std::equal(ids.shape.begin(), ids.shape.end(), dy.shape.begin()),
          "embeddingGrad", "dy must be ids.shape x [C]");
  int64_t c = dy.shape.back(), vocab = vocabSize > 0 ? vocabSize : rows;
  RefTensor dtable = RefTensor::zeros({rows, c});
  for (int64_t n = 0; n < ids.numel(); ++n) {
    int64_t row = toId(ids.data[n], vocab, "embeddingGrad") - rowOffset;
    if (row < 0 || row >= rows) continue;
    for (int64_t i = 0; i < c; ++i) dtable.data[row * c + i] += dy.data[n * c + i];
  }
  return dtable;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
// The op's defaults: the whole vocabulary (row_offset 0, vocab_size 0).
LLMC_REGISTER_EVALUATOR("llm.embedding", [](const RefCall &c) -> Results {
  return {embedding(c.in(0), c.in(1), c.integer("row_offset"), c.integer("vocab_size"))};
});
LLMC_REGISTER_EVALUATOR("llm.embedding_grad", [](const RefCall &c) -> Results {
  return {embeddingGrad(c.in(0), c.in(1), c.zeroResult(0).shape.at(0), c.integer("row_offset"),
                        c.integer("vocab_size"))};
});

} // namespace llmc::ref
