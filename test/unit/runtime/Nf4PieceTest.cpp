//===- Nf4PieceTest.cpp - NF4 storage cut into tensor-parallel pieces -----===//
//
// One quantized file serves every layout: a weight quantized whole (NF4,
// double-quantized absmax, as `llmc quantize` stores it) is cut into each
// rank's piece by the runtime's ShardMap, as `--weights` and checkpoint
// restore cut it (codes [rows, bytes per row] and absmax levels [rows,
// blocks per row] split with the weight; the fp32 scales whole), and the
// kernels, told where the piece lies (whole_shape, chunks, piece_offset),
// must give exactly the whole weight's values there: qat_dequantize_nf4 bit
// for bit, matmul_nf4 within fp32 rounding of a double product of those
// values. Splits along rows and columns, in one chunk or several (GPT-2's
// fused QKV), with pieces whose blocks' 256-block scale groups cross piece
// and row boundaries. Flat and shaped storage fit each other in files and
// checkpoints (restored into each other through copySaved); other shapes
// do not.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "kernels/Kernel.h"
#include "runtime/Sharding.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/quant/QuantizedTensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

using namespace llmc;

namespace {

/// A split of a [rows, cols] weight: dimension `dim` is `chunks` chunks,
/// each over `ranks` ranks.
struct Split {
  int dim, chunks, ranks;
};

std::string describe(const Split &s) {
  return "dim " + std::to_string(s.dim) + ", " + std::to_string(s.chunks) + " chunks over " +
         std::to_string(s.ranks) + " ranks";
}

/// Rank `rank`'s piece of the row-major tensor `whole` of `shape`, as the
/// runtime cuts it (ShardMap, one level over a "tp" axis).
template <typename T>
std::vector<T> pieceOf(const std::vector<T> &whole, std::vector<int64_t> shape, const Split &s,
                       int rank) {
  ShardInfo info;
  info.globalShape = shape;
  info.levels.push_back({{"tp"}, s.dim, s.chunks});
  Mesh mesh{{"tp", s.ranks}};
  shape[s.dim] /= s.ranks;
  ShardMap map(info, shape, mesh);
  std::vector<int> at = map.positions(rank);
  std::vector<T> out(static_cast<size_t>(map.localNumel()));
  for (int64_t i = 0; i < map.localNumel(); ++i) out[i] = whole[map.toGlobal(at, i)];
  return out;
}

quant::QuantizedTensor quantizedWhole(int64_t rows, int64_t cols, int64_t block, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(rows * cols);
  for (float &v : x) v = normal(rng);
  x[x.size() / 3] = 0.4f; // an outlier block
  for (int64_t i = 0; i < block; ++i) x[cols + i] = 0.0f; // an empty block
  quant::QuantizedTensor q;
  quant::Scheme scheme =
      quant::makeScheme(quant::Format::Nf4, quant::Granularity::Block, 0, block);
  EXPECT_EQ(quant::quantize(x.data(), {rows, cols}, scheme, quant::DoubleQuant::Int8, q), "");
  return q;
}

/// A rank's storage and the attributes that place its piece.
struct Piece {
  std::vector<int64_t> shape;
  std::vector<uint8_t> codes, absmaxQ;
  KernelAttrs attrs;
};

Piece cut(const quant::QuantizedTensor &q, int64_t block, const Split &s, int rank) {
  const int64_t rows = q.shape[0], cols = q.shape[1];
  Piece p;
  p.shape = q.shape;
  p.shape[s.dim] /= s.ranks;
  p.codes = pieceOf(q.codes, {rows, cols / 2}, s, rank);
  p.absmaxQ = pieceOf(q.absmaxCodes, {rows, cols / block}, s, rank);
  std::vector<int64_t> offset = {0, 0};
  offset[s.dim] = rank * (q.shape[s.dim] / (s.chunks * s.ranks));
  std::vector<int64_t> chunks = {1, 1};
  chunks[s.dim] = s.chunks;
  p.attrs.setInt("block", block);
  p.attrs.setInts("whole_shape", q.shape);
  p.attrs.setInts("chunks", chunks);
  p.attrs.setInts("piece_offset", offset);
  return p;
}

std::unique_ptr<Kernel> bind(const char *kernel, KernelArgs &args, std::string &error) {
  return findKernel(Backend::CPU, kernel)(args, error);
}

/// The NF4 storage inputs of a piece, in kernel order.
void addStorage(KernelArgs &args, Piece &p, quant::QuantizedTensor &q) {
  args.inputs.push_back({p.codes.data(), DType::U8, {p.shape[0], p.shape[1] / 2}});
  args.inputs.push_back(
      {p.absmaxQ.data(), DType::U8, {static_cast<int64_t>(p.absmaxQ.size())}});
  args.inputs.push_back(
      {q.absmaxScales.data(), DType::F32, {static_cast<int64_t>(q.absmaxScales.size())}});
  args.inputs.push_back({&q.absmaxMean, DType::F32, {}});
  args.attrs = p.attrs;
}

/// qat_dequantize_nf4's arguments for piece `p` of `q`, into `out` (sized
/// to the piece and filled with NaN, so an element left unwritten shows).
KernelArgs dequantizeArgs(Piece &p, quant::QuantizedTensor &q, std::vector<float> &out) {
  out.assign(static_cast<size_t>(p.shape[0] * p.shape[1]), std::nanf(""));
  KernelArgs args;
  addStorage(args, p, q);
  args.outputs.push_back({out.data(), DType::F32, p.shape});
  return args;
}

const std::vector<Split> kSplits = {{1, 1, 2}, {1, 3, 2}, {1, 1, 4}, {0, 1, 2}, {0, 3, 2}};

TEST(Nf4Piece, DequantizedPiecesAreTheWholeWeightsValuesBitForBit) {
  // 96 x 768 in blocks of 32: 2304 blocks, 9 scale groups of 256, each
  // crossing rows (24 blocks a row) and pieces.
  const int64_t block = 32;
  quant::QuantizedTensor q = quantizedWhole(96, 768, block, 5);
  ASSERT_EQ(q.absmaxScales.size(), 9u);
  const std::vector<float> whole = quant::dequantize(q);
  for (const Split &s : kSplits)
    for (int rank = 0; rank < s.ranks; ++rank) {
      SCOPED_TRACE(describe(s) + ", rank " + std::to_string(rank));
      Piece p = cut(q, block, s, rank);
      std::vector<float> out;
      KernelArgs args = dequantizeArgs(p, q, out);
      std::string error;
      std::unique_ptr<Kernel> k = bind("qat_dequantize_nf4", args, error);
      ASSERT_TRUE(k) << error;
      k->run(StepContext{});
      std::vector<float> expected = pieceOf(whole, q.shape, s, rank);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], expected[i]) << "element " << i;
    }
}

TEST(Nf4Piece, MatmulOnAPieceIsTheProductWithTheWholeWeightsValues) {
  const int64_t block = 32;
  quant::QuantizedTensor q = quantizedWhole(96, 768, block, 9);
  const std::vector<float> whole = quant::dequantize(q);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (bool transposeB : {false, true})
    for (const Split &s : kSplits)
      for (int rank = 0; rank < s.ranks; ++rank) {
        SCOPED_TRACE(describe(s) + ", rank " + std::to_string(rank) +
                     (transposeB ? ", transposed" : ""));
        Piece p = cut(q, block, s, rank);
        // Few rows of x times Wᵀ quantize x to int8 (a decode step's
        // products; matmul_nf4_test.cpp checks a piece's there): 17 rows
        // multiply the fp32 weights.
        const int64_t rows = transposeB ? 17 : 4;
        const int64_t k = transposeB ? p.shape[1] : p.shape[0];
        const int64_t n = transposeB ? p.shape[0] : p.shape[1];
        std::vector<float> x(rows * k), y(rows * n, std::nanf(""));
        for (float &v : x) v = normal(rng);
        KernelArgs args;
        args.inputs.push_back({x.data(), DType::F32, {rows, k}});
        addStorage(args, p, q);
        args.outputs.push_back({y.data(), DType::F32, {rows, n}});
        args.attrs.setInts("weight_shape", p.shape);
        args.attrs.setInt("transpose_b", transposeB ? 1 : 0);
        std::string error;
        std::unique_ptr<Kernel> kernel = bind("matmul_nf4", args, error);
        ASSERT_TRUE(kernel) << error;
        kernel->run(StepContext{});
        std::vector<float> w = pieceOf(whole, q.shape, s, rank);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0, scale = 0;
            for (int64_t i = 0; i < k; ++i) {
              double term = static_cast<double>(x[r * k + i]) *
                            (transposeB ? w[j * k + i] : w[i * n + j]);
              sum += term;
              scale += std::fabs(term);
            }
            ASSERT_NEAR(y[r * n + j], sum, 1e-5 * scale + 1e-12) << "y[" << r << ", " << j << "]";
          }
      }
}

/// A stack of 4 experts of 24 rows, its view [96, 768] split as ep × tp
/// split it: each expert's rows over tp (4 chunks), then runs of whole
/// experts over ep. A piece holds 2 of the 4 chunks (held_chunks), its
/// offset counting from the whole's start: ep's term plus tp's.
TEST(Nf4Piece, PiecesOfWholeExpertsSplitTwiceAreTheWholeWeightsValues) {
  const int64_t block = 32, experts = 4, rows = 24;
  quant::QuantizedTensor q = quantizedWhole(experts * rows, 768, block, 13);
  const std::vector<float> whole = quant::dequantize(q);
  ShardInfo info;
  info.globalShape = q.shape;
  info.levels = {{{"tp"}, 0, static_cast<int>(experts)}, {{"ep"}, 0, 1}};
  Mesh mesh{{"ep", 2}, {"tp", 2}};
  const std::vector<int64_t> shape = {q.shape[0] / 4, q.shape[1]};
  ShardMap map(info, shape, mesh);
  auto cutStorage = [&](const std::vector<uint8_t> &values, int64_t perRow,
                        const std::vector<int> &at) {
    ShardInfo storage = info;
    storage.globalShape = {q.shape[0], perRow};
    ShardMap m(storage, {shape[0], perRow}, mesh);
    std::vector<uint8_t> out(static_cast<size_t>(m.localNumel()));
    for (int64_t i = 0; i < m.localNumel(); ++i) out[i] = values[m.toGlobal(at, i)];
    return out;
  };
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::vector<int> at = map.positions(rank); // {tp, ep}
    Piece p;
    p.shape = shape;
    p.codes = cutStorage(q.codes, q.shape[1] / 2, at);
    p.absmaxQ = cutStorage(q.absmaxCodes, q.shape[1] / block, at);
    p.attrs.setInt("block", block);
    p.attrs.setInts("whole_shape", q.shape);
    p.attrs.setInts("chunks", {experts, 1});
    p.attrs.setInts("held_chunks", {experts / 2, 1});
    p.attrs.setInts("piece_offset", {at[1] * (q.shape[0] / 2) + at[0] * (rows / 2), 0});
    std::vector<float> out;
    KernelArgs args = dequantizeArgs(p, q, out);
    std::string error;
    std::unique_ptr<Kernel> k = bind("qat_dequantize_nf4", args, error);
    ASSERT_TRUE(k) << error;
    k->run(StepContext{});
    for (int64_t i = 0; i < map.localNumel(); ++i)
      ASSERT_EQ(out[i], whole[map.toGlobal(at, i)]) << "element " << i;
    // Three held chunks from the third would run past the whole's four.
    KernelArgs bad = args;
    bad.attrs.setInts("held_chunks", {3, 1});
    bad.attrs.setInts("piece_offset", {48, 0});
    EXPECT_FALSE(bind("qat_dequantize_nf4", bad, error));
    EXPECT_NE(error.find("holding 3x1 of them, does not lie within"), std::string::npos) << error;
  }
}

TEST(Nf4Piece, APieceOutsideItsWholeWeightIsRefusedAtBinding) {
  const int64_t block = 32;
  quant::QuantizedTensor q = quantizedWhole(96, 768, block, 3);
  Piece p = cut(q, block, {1, 1, 2}, 1);
  std::vector<float> out;
  auto error = [&](const std::string &attr, std::vector<int64_t> value) {
    Piece bad = p;
    bad.attrs.setInts(attr, std::move(value));
    KernelArgs args = dequantizeArgs(bad, q, out);
    std::string message;
    EXPECT_FALSE(bind("qat_dequantize_nf4", args, message));
    return message;
  };
  EXPECT_NE(error("piece_offset", {0, 416}).find("does not lie within whole_shape 96x768"),
            std::string::npos);
  EXPECT_NE(error("piece_offset", {0, 16}).find("is not in whole blocks of 32"),
            std::string::npos);
  EXPECT_NE(error("chunks", {1, 5}).find("does not lie within"), std::string::npos);
  // The whole weight's scales: a piece's own count is not enough.
  EXPECT_NE(error("whole_shape", {96, 1536}).find("absmax_scale must be f32[18]"),
            std::string::npos);
}

/// Codes saved as tp=2 pieces of [4, 6] storage in three column chunks
/// (each rank's file holding its piece, as the index says) restore into
/// flat storage of 24 bytes, every byte in its row-major place; and flat
/// saved codes restore into each rank's shaped piece.
TEST(Nf4Piece, ShapedAndFlatCheckpointStorageRestoreIntoEachOther) {
  test::TempDir temp;
  const std::string &dir = temp.path();
  std::vector<uint8_t> whole(24);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<uint8_t>(7 * i + 1);
  const Split split{1, 3, 2};
  std::vector<std::vector<uint8_t>> pieces;
  for (int rank = 0; rank < 2; ++rank) {
    pieces.push_back(pieceOf(whole, {4, 6}, split, rank));
    writeSafetensors(dir + "/model-rank" + std::to_string(rank) + ".safetensors",
                     {{"w.qweight", DType::U8, {4, 3}, pieces.back().data(), 12}});
  }
  json::Value shaped = json::parse(
      R"({"levels": [{"dim": 1, "blocks": 3, "parts": 2}], "shards": [
          {"file": "model-rank0.safetensors", "positions": [0]},
          {"file": "model-rank1.safetensors", "positions": [1]}]})");
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
  ShardMap flat(ShardInfo{}, {24}, Mesh{});
  std::vector<uint8_t> out(24, 0);
  copySaved(shaped, "w.qweight", {4, 6}, 1, flat, flat.positions(0), out.data(), dir, "test",
            files);
  EXPECT_EQ(out, whole);

  writeSafetensors(dir + "/flat.safetensors", {{"w.qweight", DType::U8, {24}, whole.data(), 24}});
  json::Value saved = json::parse(
      R"({"levels": [], "shards": [{"file": "flat.safetensors", "positions": []}]})");
  ShardInfo info;
  info.globalShape = {4, 6};
  info.levels.push_back({{"tp"}, 1, 3});
  Mesh mesh{{"tp", 2}};
  ShardMap piece(info, {4, 3}, mesh);
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<uint8_t> mine(12, 0);
    copySaved(saved, "w.qweight", {24}, 1, piece, piece.positions(rank), mine.data(), dir,
              "test", files);
    EXPECT_EQ(mine, pieces[rank]) << "rank " << rank;
  }
}

TEST(Nf4Piece, FlatAndShapedStorageFitEachOther) {
  EXPECT_TRUE(storedShapeFits("h.0.attn.c_attn.weight.qweight", {24576}, {128, 192}));
  EXPECT_TRUE(storedShapeFits("h.0.attn.c_attn.weight.absmax_q", {128, 6}, {768}));
  EXPECT_TRUE(storedShapeFits("w.scale", {128, 6}, {768}));
  EXPECT_FALSE(storedShapeFits("w.qweight", {24576}, {128, 190}));
  EXPECT_FALSE(storedShapeFits("h.0.attn.c_attn.weight", {49152}, {128, 384}));
  EXPECT_FALSE(storedShapeFits("w.absmax_scale", {3}, {1, 3}));
  EXPECT_TRUE(storedShapeFits("w.absmax_scale", {3}, {3}));
}

} // namespace
