//===- DataTest.cpp - token shards, tokenizer, data loader ----------------===//

#include "TestUtil.h"
#include "runtime/data/ByteTokenizer.h"
#include "runtime/data/DataLoader.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/TokenShard.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

using namespace llmc;

TEST(TokenShard, RoundTripAndCorruption) {
  test::TempDir dir;
  std::vector<uint16_t> tokens = {1, 2, 3, 65535, 0};
  std::string path = dir.file("d.bin");
  writeTokenShard(path, tokens);
  EXPECT_EQ(readTokenShard(path), tokens);
  EXPECT_EQ(loadTokens(path), tokens);

  std::string bytes = test::readBytes(path);
  test::writeBytes(path, bytes.substr(0, 100));
  EXPECT_RUNTIME_ERROR(readTokenShard(path), "shorter than the 1024-byte shard header");
  test::writeBytes(path, bytes.substr(0, bytes.size() - 2));
  EXPECT_RUNTIME_ERROR(readTokenShard(path), "header says 5 tokens (1034 bytes) but the file has 1032 bytes");
  std::string badMagic = bytes;
  badMagic[0] = 1;
  test::writeBytes(path, badMagic);
  EXPECT_RUNTIME_ERROR(readTokenShard(path), "bad magic");
  std::string badVersion = bytes;
  int32_t v = 7;
  std::memcpy(badVersion.data() + 4, &v, 4);
  test::writeBytes(path, badVersion);
  EXPECT_RUNTIME_ERROR(readTokenShard(path), "unsupported shard version 7");
  EXPECT_RUNTIME_ERROR(readTokenShard(dir.file("none.bin")), "cannot open token shard");
}

TEST(Dataset, TextBundledAndValidation) {
  test::TempDir dir;
  test::writeBytes(dir.file("t.txt"), "hi!");
  EXPECT_EQ(loadTokens(dir.file("t.txt")), (std::vector<uint16_t>{'h', 'i', '!'}));
  test::writeBytes(dir.file("empty.txt"), "");
  EXPECT_RUNTIME_ERROR(loadTokens(dir.file("empty.txt")), "is empty");
  EXPECT_GT(loadTokens("bundled").size(), 500000u);
  EXPECT_RUNTIME_ERROR(validateTokens({1, 2, 300}, 256, "x.bin"),
                       "x.bin: token 300 at position 2 is outside the model's vocabulary of 256");
  EXPECT_EQ(ByteTokenizer::decode(ByteTokenizer::encode("Once upon a time")), "Once upon a time");
  EXPECT_RUNTIME_ERROR(ByteTokenizer::decode({65, 256}), "token 256 at position 1 is not a byte");
}

namespace {
std::vector<uint16_t> ramp(size_t n) {
  std::vector<uint16_t> t(n);
  std::iota(t.begin(), t.end(), 0);
  return t;
}
} // namespace

TEST(DataLoader, TargetsAreShiftedInputsAndEveryWindowIsVisitedOncePerEpoch) {
  std::vector<uint16_t> tokens = ramp(1001);
  const int64_t T = 10;
  DataLoader loader(tokens, T, 42);
  ASSERT_EQ(loader.windows(), 100);
  std::set<int32_t> starts;
  std::vector<int32_t> x(4 * T), y(4 * T);
  for (int64_t b = 0; b < 25; ++b) {
    loader.fill(b, 4, 0, 4, x.data(), y.data());
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(x[r * T] % T, 0);
      for (int t = 0; t < T; ++t) EXPECT_EQ(y[r * T + t], x[r * T + t] + 1);
      starts.insert(x[r * T]);
    }
  }
  EXPECT_EQ(starts.size(), 100u); // one epoch = every window once
}

TEST(DataLoader, DeterministicResumableAndLayoutIndependent) {
  std::vector<uint16_t> tokens = ramp(5000);
  const int64_t T = 16, rows = 8;
  DataLoader a(tokens, T, 7), b(tokens, T, 7), c(tokens, T, 8);
  std::vector<int32_t> xa(rows * T), ya(rows * T), xb(rows * T), yb(rows * T);
  // Batch 37 is the same whether or not batches 0..36 were drawn first.
  for (int64_t i = 0; i < 37; ++i) a.fill(i, rows, 0, rows, xa.data(), ya.data());
  a.fill(37, rows, 0, rows, xa.data(), ya.data());
  b.fill(37, rows, 0, rows, xb.data(), yb.data());
  EXPECT_EQ(xa, xb);
  c.fill(37, rows, 0, rows, xb.data(), yb.data());
  EXPECT_NE(xa, xb) << "another seed gives another order";
  // Four data-parallel ranks filling two rows each see the same global batch.
  for (int rank = 0; rank < 4; ++rank)
    b.fill(37, rows, rank * 2, 2, xb.data() + rank * 2 * T, yb.data() + rank * 2 * T);
  EXPECT_EQ(xa, xb);
  EXPECT_EQ(ya, yb);
}

TEST(DataLoader, TooShortDataIsAnError) {
  EXPECT_RUNTIME_ERROR(DataLoader(ramp(10), 10, 1), "data has 10 tokens; need at least T+1 = 11");
}
