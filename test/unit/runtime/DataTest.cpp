//===- DataTest.cpp - token shards, datasets, tokenizer, data loader ------===//

#include "TestUtil.h"
#include "runtime/data/ByteTokenizer.h"
#include "runtime/data/DataLoader.h"
#include "runtime/data/Dataset.h"
#include "runtime/data/Packing.h"
#include "runtime/data/ShardWriter.h"
#include "runtime/data/TokenShard.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

using namespace llmc;

namespace {
std::vector<uint32_t> ramp(size_t n, uint32_t from = 0) {
  std::vector<uint32_t> t(n);
  std::iota(t.begin(), t.end(), from);
  return t;
}

/// A one-shard dataset of `tokens` (uint16) in `dir`.
Dataset shardOf(const test::TempDir &dir, const std::vector<uint32_t> &tokens,
                const std::string &name = "d.bin") {
  writeTokenShard(dir.file(name), tokens.data(), tokens.size(), 2, 0);
  return openDataset(dir.file(name));
}

void setHeaderField(const std::string &path, int field, int32_t value) {
  std::string bytes = test::readBytes(path);
  std::memcpy(bytes.data() + 4 * field, &value, 4);
  test::writeBytes(path, bytes);
}
} // namespace

TEST(TokenShard, Uint16AndUint32RoundTrip) {
  test::TempDir dir;
  writeTokenShard(dir.file("a.bin"), {1, 2, 3, 65535, 0});
  TokenShard a = openTokenShard(dir.file("a.bin"));
  EXPECT_EQ(a.width, 2);
  EXPECT_EQ(a.count, 5);
  EXPECT_EQ(a.vocab, 0);
  EXPECT_EQ(readAll(openDataset(dir.file("a.bin"))), (std::vector<uint32_t>{1, 2, 3, 65535, 0}));

  std::vector<uint32_t> big = {0, 70000, 128255, 5};
  writeTokenShard(dir.file("b.bin"), big.data(), big.size(), 4, 128256);
  TokenShard b = openTokenShard(dir.file("b.bin"));
  EXPECT_EQ(b.width, 4);
  EXPECT_EQ(b.vocab, 128256);
  EXPECT_EQ(test::readBytes(dir.file("b.bin")).size(), 1024u + 16u);
  EXPECT_EQ(readAll(openDataset(dir.file("b.bin"))), big);
  // The header is llm.c's: magic, version, count, then (ours) the vocabulary.
  int32_t header[4];
  std::memcpy(header, test::readBytes(dir.file("b.bin")).data(), 16);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(header[2], 4);
  EXPECT_EQ(header[3], 128256);
  EXPECT_RUNTIME_ERROR(writeTokenShard(dir.file("c.bin"), big.data(), big.size(), 2, 0),
                       "token 70000 at offset 1 does not fit uint16");
}

TEST(TokenShard, EveryCorruptionNamesTheFileAndTheField) {
  test::TempDir dir;
  std::string path = dir.file("d.bin");
  writeTokenShard(path, {1, 2, 3, 4, 5});
  std::string bytes = test::readBytes(path);
  test::writeBytes(path, bytes.substr(0, 100));
  EXPECT_RUNTIME_ERROR(openTokenShard(path), path + ": 100 bytes is shorter than the 1024-byte");
  test::writeBytes(path, bytes.substr(0, bytes.size() - 2));
  EXPECT_RUNTIME_ERROR(openTokenShard(path),
                       "header says 5 tokens (1034 bytes) but the file has 1032 bytes (truncated)");
  test::writeBytes(path, bytes + "xx");
  EXPECT_RUNTIME_ERROR(openTokenShard(path), "but the file has 1036 bytes");
  test::writeBytes(path, bytes);
  setHeaderField(path, 0, 1);
  EXPECT_RUNTIME_ERROR(openTokenShard(path), path + ": bad magic 1");
  test::writeBytes(path, bytes);
  setHeaderField(path, 1, 7);
  EXPECT_RUNTIME_ERROR(openTokenShard(path),
                       "unsupported shard version 7 (expected 1 with magic 20240520)");
  test::writeBytes(path, bytes);
  setHeaderField(path, 0, 20240801);
  EXPECT_RUNTIME_ERROR(openTokenShard(path),
                       "unsupported shard version 1 (expected 7 with magic 20240801)");
  test::writeBytes(path, bytes);
  setHeaderField(path, 2, -3);
  EXPECT_RUNTIME_ERROR(openTokenShard(path), "negative token count -3");
  EXPECT_RUNTIME_ERROR(openTokenShard(dir.file("none.bin")), "cannot open token shard");
  EXPECT_RUNTIME_ERROR(openDataset(dir.file("none.bin")), "none.bin");
}

TEST(Dataset, TextIsMappedThroughTheByteTokenizer) {
  test::TempDir dir;
  test::writeBytes(dir.file("t.txt"), "hi!");
  Dataset text = openDataset(dir.file("t.txt"));
  EXPECT_EQ(readAll(text), (std::vector<uint32_t>{'h', 'i', '!'}));
  EXPECT_EQ(text.shards[0].width, 1);
  test::writeBytes(dir.file("empty.txt"), "");
  EXPECT_RUNTIME_ERROR(openDataset(dir.file("empty.txt")), "is empty");
  EXPECT_RUNTIME_ERROR(openDataset(dir.file("none.txt")), "cannot open data file");
  EXPECT_GT(openDataset("bundled").tokens(), 500000);
  EXPECT_EQ(ByteTokenizer::decode(ByteTokenizer::encode("Once upon a time")), "Once upon a time");
  EXPECT_RUNTIME_ERROR(ByteTokenizer::decode({65, 256}), "token 256 at position 1 is not a byte");
}

TEST(Dataset, DirectoriesAndGlobsListShardsInNameOrder) {
  test::TempDir dir;
  for (const char *name : {"s/train_002.bin", "s/train_000.bin", "s/val_000.bin",
                           "s/train_001.bin"}) {
    makeDirectories(dir.file("s"));
    writeTokenShard(dir.file(name), {uint16_t(name[8]), 1});
  }
  test::writeBytes(dir.file("s/notes.txt"), "not a shard");
  EXPECT_EQ(expandDataSpec(dir.file("s")),
            (std::vector<std::string>{dir.file("s/train_000.bin"), dir.file("s/train_001.bin"),
                                      dir.file("s/train_002.bin"), dir.file("s/val_000.bin")}));
  EXPECT_EQ(expandDataSpec(dir.file("s/train_*.bin")).size(), 3u);
  EXPECT_EQ(openDataset(dir.file("s/train_*.bin")).tokens(), 6);
  EXPECT_RUNTIME_ERROR(expandDataSpec(dir.file("s/test_*.bin")), "no data files match");
  makeDirectories(dir.file("empty"));
  EXPECT_RUNTIME_ERROR(expandDataSpec(dir.file("empty")), "holds no .bin shards");
}

TEST(Dataset, ValidationSplits) {
  test::TempDir dir;
  ShardWriter writer(dir.file("d/x"), 100, 2, 0);
  for (uint32_t t : ramp(350)) writer.add(t);
  EXPECT_EQ(writer.finish().size(), 4u); // 100, 100, 100, 50
  Dataset train = openDataset(dir.file("d"));
  Dataset val = holdOutShards(train, 2, "d");
  EXPECT_EQ(train.tokens(), 200);
  EXPECT_EQ(val.tokens(), 150);
  EXPECT_EQ(val.shards[0].name, dir.file("d/x_000002.bin"));
  EXPECT_RUNTIME_ERROR(holdOutShards(train, 2, "d"), "cannot hold out 2 validation shards of 'd': "
                                                     "it has 2 shards");

  Dataset one = shardOf(dir, ramp(1000));
  Dataset tail = holdOutTail(one, 10);
  EXPECT_EQ(one.tokens(), 900);
  EXPECT_EQ(readAll(tail), ramp(100, 900));
  Dataset small = shardOf(dir, ramp(20), "s.bin");
  EXPECT_RUNTIME_ERROR(holdOutTail(small, 10), "too few to hold out a validation split for T=10");
}

TEST(Dataset, VocabularyLargerThanTheModelsIsRefused) {
  test::TempDir dir;
  std::vector<uint32_t> t = {1, 2, 3};
  writeTokenShard(dir.file("v.bin"), t.data(), t.size(), 2, 50257);
  EXPECT_RUNTIME_ERROR(checkVocabulary(openDataset(dir.file("v.bin")), 256),
                       "v.bin: its header states a vocabulary of 50257 tokens, larger than the "
                       "model's 256");
  checkVocabulary(openDataset(dir.file("v.bin")), 50304); // a padded vocabulary is fine
}

TEST(ShardWriter, RefusesTokensOutsideItsVocabularyOrWidth) {
  test::TempDir dir;
  ShardWriter v(dir.file("v"), 10, 2, 256);
  v.add(255);
  EXPECT_RUNTIME_ERROR(v.add(256), "token 256 at position 1 of the input is outside the "
                                   "vocabulary of 256");
  ShardWriter w(dir.file("w"), 10, 2, 0);
  EXPECT_RUNTIME_ERROR(w.add(70000), "does not fit uint16");
  EXPECT_RUNTIME_ERROR(ShardWriter(dir.file("x"), 10, 2, 100000), "needs uint32 shards");
  ShardWriter empty(dir.file("e"), 10, 2, 0);
  EXPECT_RUNTIME_ERROR(empty.finish(), "no tokens to write");
}

TEST(DataLoader, TargetsAreShiftedInputsAndEveryWindowIsVisitedOncePerEpoch) {
  test::TempDir dir;
  Dataset data = shardOf(dir, ramp(1001));
  const int64_t T = 10;
  DataLoader loader(data, T, 42);
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

TEST(DataLoader, OneShardKeepsTheReferenceOrder) {
  // The order test/reference/torch_reference.py replays: one permutation of
  // every window per epoch, splitmix64 + Fisher–Yates from seed·C + epoch.
  test::TempDir dir;
  const int64_t T = 8, windows = 62;
  Dataset data = shardOf(dir, ramp(500));
  DataLoader loader(data, T, 1337);
  std::vector<int32_t> x(T), y(T);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> perm(windows);
    std::iota(perm.begin(), perm.end(), 0);
    uint64_t state = 1337ull * 0xD1B54A32D192ED03ull + epoch;
    for (int64_t i = windows - 1; i > 0; --i) {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      std::swap(perm[i], perm[z % static_cast<uint64_t>(i + 1)]);
    }
    for (int64_t i = 0; i < windows; ++i) {
      loader.fill(epoch * windows + i, 1, 0, 1, x.data(), y.data());
      ASSERT_EQ(x[0], perm[i] * T) << "epoch " << epoch << " sample " << i;
    }
  }
}

TEST(DataLoader, ShardsNeverShareAWindowAndEachIsVisitedOncePerEpoch) {
  // Three shards (two uint16, one uint32) of distinct token ranges; a
  // window must lie in one shard, and an epoch must visit each exactly once.
  test::TempDir dir;
  const int64_t T = 7;
  std::vector<uint32_t> a = ramp(50, 0), b = ramp(71, 1000), c = ramp(30, 100000);
  makeDirectories(dir.file("s"));
  writeTokenShard(dir.file("s/a.bin"), a.data(), a.size(), 2, 0);
  writeTokenShard(dir.file("s/b.bin"), b.data(), b.size(), 2, 0);
  writeTokenShard(dir.file("s/c.bin"), c.data(), c.size(), 4, 0);
  Dataset data = openDataset(dir.file("s"));
  DataLoader loader(data, T, 3);
  const int64_t windows = 49 / T + 70 / T + 29 / T; // 7 + 10 + 4
  ASSERT_EQ(loader.windows(), windows);
  std::vector<int32_t> x(T), y(T);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<int32_t> starts;
    std::vector<int32_t> shardOfSample;
    for (int64_t i = 0; i < windows; ++i) {
      loader.fill(epoch * windows + i, 1, 0, 1, x.data(), y.data());
      int32_t first = x[0];
      int32_t base = first >= 100000 ? 100000 : first >= 1000 ? 1000 : 0;
      EXPECT_EQ((first - base) % T, 0);
      for (int t = 0; t < T; ++t) {
        EXPECT_EQ(x[t], first + t);
        EXPECT_EQ(y[t], first + t + 1) << "a window crossed a shard boundary";
      }
      starts.insert(first);
      shardOfSample.push_back(base);
    }
    EXPECT_EQ(std::set<int32_t>(starts.begin(), starts.end()).size(), size_t(windows));
    // One shard at a time: the epoch's samples come in three runs.
    int runs = 1;
    for (size_t i = 1; i < shardOfSample.size(); ++i) runs += shardOfSample[i] != shardOfSample[i - 1];
    EXPECT_EQ(runs, 3);
  }
}

TEST(DataLoader, DeterministicResumableAndLayoutIndependentAcrossShards) {
  test::TempDir dir;
  ShardWriter writer(dir.file("d/x"), 300, 2, 0);
  for (uint32_t t : ramp(5000)) writer.add(t);
  writer.finish();
  Dataset data = openDataset(dir.file("d"));
  const int64_t T = 16, rows = 8;
  DataLoader a(data, T, 7), b(data, T, 7), c(data, T, 8);
  std::vector<int32_t> xa(rows * T), ya(rows * T), xb(rows * T), yb(rows * T);
  for (int64_t batch : {0, 37, 38, 111}) { // 300 windows: batch 37 ends epoch 0
    // Batch k is the same whether or not batches 0..k-1 were drawn first.
    for (int64_t i = 0; i < batch; ++i) a.fill(i, rows, 0, rows, xa.data(), ya.data());
    a.fill(batch, rows, 0, rows, xa.data(), ya.data());
    b.fill(batch, rows, 0, rows, xb.data(), yb.data());
    EXPECT_EQ(xa, xb);
    c.fill(batch, rows, 0, rows, xb.data(), yb.data());
    EXPECT_NE(xa, xb) << "another seed gives another order";
    // 1, 2, 4 or 8 data-parallel ranks see the same global batch.
    for (int64_t ranks : {2, 4, 8}) {
      int64_t local = rows / ranks;
      DataLoader fresh(data, T, 7);
      for (int64_t rank = ranks - 1; rank >= 0; --rank)
        fresh.fill(batch, rows, rank * local, local, xb.data() + rank * local * T,
                   yb.data() + rank * local * T);
      EXPECT_EQ(xa, xb) << ranks << " ranks, batch " << batch;
      EXPECT_EQ(ya, yb);
    }
  }
}

TEST(DataLoader, TokensOutsideTheVocabularyNameShardAndOffset) {
  test::TempDir dir;
  std::vector<uint32_t> tokens(101, 3);
  tokens[57] = 300;
  writeTokenShard(dir.file("v.bin"), tokens.data(), tokens.size(), 2, 0);
  Dataset data = openDataset(dir.file("v.bin"));
  DataLoader loader(data, 100, 1, 256);
  std::vector<int32_t> x(100), y(100);
  EXPECT_RUNTIME_ERROR(loader.fill(0, 1, 0, 1, x.data(), y.data()),
                       dir.file("v.bin") + ": token 300 at token offset 57 is outside the "
                                           "model's vocabulary of 256");
}

TEST(DataLoader, TooShortDataIsAnError) {
  test::TempDir dir;
  EXPECT_RUNTIME_ERROR(DataLoader(shardOf(dir, ramp(10)), 10, 1),
                       "data has 10 tokens; need at least T+1 = 11");
}

// Packed rows: a document opens at the row start and at each separator
// that does not follow another; positions count from 0 in each.
TEST(Packing, DocumentsOpenAtSeparatorsAndRowStarts) {
  const int32_t S = 9;
  const std::vector<int32_t> tokens = {5, 6, S, 1, 2, S, S, 3,   // two openers in a run: one
                                       S, 4, 4, S, 7, 8, 8, 8};  // a row starting at one
  std::vector<int32_t> segments(16), positions(16);
  packRows(tokens.data(), 2, 8, S, segments.data(), positions.data());
  EXPECT_EQ(segments, (std::vector<int32_t>{0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(positions, (std::vector<int32_t>{0, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4}));
}
