//===- SavedPieceTest.cpp - what a checkpoint stores of a padded buffer ---===//
//
// A vocabulary padded inside the artifact is saved as its real rows when no
// split follows the padding, so a one-rank checkpoint's files are those of
// an unpadded artifact; a split after it keeps the padding (and the index
// says so). 8-bit codes keep theirs: a zero byte is no zero there.

#include "runtime/checkpoint/Checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>

namespace llmc {
namespace {

BufferInfo paddedBuffer(std::vector<int64_t> global, int dim, int64_t padTo, DType dtype) {
  BufferInfo b;
  b.name = "wte.weight";
  b.category = "param";
  b.dtype = dtype;
  b.shard.globalShape = global;
  ShardLevel pad;
  pad.dim = dim;
  pad.padTo = padTo;
  b.shard.levels.push_back(pad);
  b.shape = global;
  b.shape[dim] = padTo;
  return b;
}

TEST(SavedPiece, RowsPaddedOnOneRankAreSavedAsTheRealRows) {
  BufferInfo b = paddedBuffer({3, 2}, 0, 4, DType::F32);
  std::vector<float> data = {1, 2, 3, 4, 5, 6, 0, 0};
  SavedPiece p = savedPiece(b, reinterpret_cast<const uint8_t *>(data.data()), Mesh{});
  EXPECT_TRUE(p.shard.levels.empty());
  EXPECT_EQ(p.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(p.bytes, 6 * sizeof(float));
  EXPECT_EQ(p.data, reinterpret_cast<const uint8_t *>(data.data())) << "the buffer's head";
  EXPECT_TRUE(p.copy.empty());
}

TEST(SavedPiece, PaddedColumnsAreCopiedOut) {
  BufferInfo b = paddedBuffer({2, 3}, 1, 4, DType::F32);
  std::vector<float> data = {1, 2, 3, 0, 4, 5, 6, 0};
  SavedPiece p = savedPiece(b, reinterpret_cast<const uint8_t *>(data.data()), Mesh{});
  EXPECT_EQ(p.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(p.bytes, 6 * sizeof(float));
  std::vector<float> saved(6);
  std::memcpy(saved.data(), p.data, p.bytes);
  EXPECT_EQ(saved, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(SavedPiece, ASplitAfterThePaddingKeepsIt) {
  BufferInfo b = paddedBuffer({257, 2}, 0, 320, DType::F32);
  b.shard.levels.push_back({{"tp"}, 0, 1});
  b.shape = {160, 2};
  std::vector<float> data(320);
  SavedPiece p = savedPiece(b, reinterpret_cast<const uint8_t *>(data.data()), Mesh{{"tp", 2}});
  EXPECT_EQ(p.shard.levels.size(), 2u);
  EXPECT_EQ(p.shape, (std::vector<int64_t>{160, 2}));
  EXPECT_EQ(p.bytes, 320 * sizeof(float));
}

TEST(SavedPiece, CodesKeepTheirPadding) {
  BufferInfo b = paddedBuffer({3, 2}, 0, 4, DType::U8);
  std::vector<uint8_t> data(8, 7);
  SavedPiece p = savedPiece(b, data.data(), Mesh{});
  EXPECT_EQ(p.shard.levels.size(), 1u);
  EXPECT_EQ(p.shape, (std::vector<int64_t>{4, 2}));
}

} // namespace
} // namespace llmc
