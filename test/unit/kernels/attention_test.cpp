//===- attention_test.cpp - fused attention and its backward --------------===//
//
// Norm metric throughout: outputs and gradients are weighted sums of many
// terms, and lse = m + log l can be near zero (its absolute error is what
// matters downstream, as exp(s − lse)). Shapes cover multi-head, GQA (H=4, KV=2), MQA
// (KV=1), causal and not, S != T, several query and key tiles with ragged
// edges, and packed sequences (segment ids) both contiguous and interleaved,
// with documents short and long enough that whole tiles are skipped. The
// packed-qkv kernels must give the unpacked ones' results bit for bit.

#include "KernelTest.h"

#include "common/AttentionWorkspace.h"
#include "kernels/cpu/SegmentTiles.h"

#include <cmath>
#include <random>

namespace llmc::test {
namespace {

enum class Segments { None, Packed, Documents, Interleaved };

struct AttentionCase {
  int64_t b, t, s, h, kv, d;
  bool causal;
  Segments segments;
};

std::string describe(const AttentionCase &c) {
  return "B" + std::to_string(c.b) + " T" + std::to_string(c.t) + " S" + std::to_string(c.s) +
         " H" + std::to_string(c.h) + " KV" + std::to_string(c.kv) + " D" + std::to_string(c.d) +
         (c.causal ? " causal" : "") +
         (c.segments == Segments::Packed        ? " packed"
          : c.segments == Segments::Documents   ? " documents"
          : c.segments == Segments::Interleaved ? " interleaved"
                                                : "");
}

const std::vector<AttentionCase> kCases = {
    {2, 33, 33, 4, 4, 16, false, Segments::None},
    {2, 33, 33, 4, 4, 16, true, Segments::None},
    {1, 70, 70, 4, 2, 32, true, Segments::None}, // GQA, two query tiles
    {1, 70, 70, 4, 2, 32, false, Segments::None},
    {2, 13, 13, 3, 1, 8, true, Segments::None},   // MQA
    {1, 7, 130, 2, 1, 64, false, Segments::None}, // S != T, three key tiles
    {2, 67, 67, 2, 1, 16, true, Segments::Packed},
    {2, 67, 67, 4, 2, 16, false, Segments::Packed},
    {1, 40, 40, 2, 2, 24, false, Segments::Interleaved},
    {1, 40, 40, 2, 1, 24, true, Segments::Interleaved},
    {1, 150, 150, 2, 2, 64, true, Segments::None}, // three tiles each way
    {2, 300, 300, 2, 1, 16, true, Segments::Documents}, // tiles hidden by segments
    {1, 260, 260, 4, 2, 32, false, Segments::Documents},
};

RefTensor segmentIds(const AttentionCase &c, uint64_t seed) {
  RefTensor ids = RefTensor::zeros({c.b, c.t});
  std::mt19937_64 rng(seed);
  for (int64_t b = 0; b < c.b; ++b) {
    int64_t id = 0;
    for (int64_t i = 0; i < c.t; ++i) {
      if (c.segments == Segments::Packed) {
        if (i > 0 && rng() % 9 == 0) ++id; // runs of ~9 tokens
      } else if (c.segments == Segments::Documents) {
        if (i > 0 && rng() % 80 == 0) ++id; // runs of ~80 tokens, across tiles
      } else {
        id = static_cast<int64_t>(rng() % 3);
      }
      ids.data[b * c.t + i] = static_cast<double>(id);
    }
  }
  return ids;
}

TEST(AttentionKernels, ForwardAndBackwardMatchReference) {
  uint64_t seed = 500;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kCases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c));
      double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      RefTensor q = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor k = roundTo(randomTensor({c.b, c.s, c.kv, c.d}, ++seed), dtype);
      RefTensor v = roundTo(randomTensor({c.b, c.s, c.kv, c.d}, ++seed), dtype);
      RefTensor dout = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      bool hasSegments = c.segments != Segments::None;
      RefTensor seg = hasSegments ? segmentIds(c, ++seed) : RefTensor{};
      const RefTensor *segPtr = hasSegments ? &seg : nullptr;

      Buffer qb = Buffer::of(q, dtype), kb = Buffer::of(k, dtype), vb = Buffer::of(v, dtype),
             segb = Buffer::of(hasSegments ? seg : RefTensor::zeros({1}), DType::I32);
      Buffer out(dtype, q.shape), lse(DType::F32, {c.b, c.h, c.t});
      out.poison(), lse.poison();
      KernelAttrs a = attrs({{"scale", scale}}, {{"causal", c.causal}});
      std::vector<Buffer *> inputs = {&qb, &kb, &vb};
      if (hasSegments) inputs.push_back(&segb);
      ASSERT_TRUE(runKernel("attention", inputs, {&out, &lse}, a));
      std::vector<RefTensor> expected = ref::attention(q, k, v, segPtr, scale, c.causal);
      EXPECT_CLOSE(out.toRef(), expected[0], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(lse.toRef(), expected[1], Metric::Norm, 1e-5);

      // The backward consumes the forward's out (in storage precision) and lse.
      RefTensor refOut = roundTo(expected[0], dtype), refLse = roundTo(expected[1], DType::F32);
      Buffer ob = Buffer::of(refOut, dtype), lb = Buffer::of(refLse, DType::F32),
             db = Buffer::of(dout, dtype);
      Buffer dq(dtype, q.shape), dk(dtype, k.shape), dv(dtype, v.shape);
      dq.poison(), dk.poison(), dv.poison();
      std::vector<Buffer *> gradInputs = {&qb, &kb, &vb, &ob, &lb, &db};
      if (hasSegments) gradInputs.push_back(&segb);
      ASSERT_TRUE(runKernel("attention_grad", gradInputs, {&dq, &dk, &dv}, a));
      std::vector<RefTensor> grads =
          ref::attentionGrad(q, k, v, refOut, refLse, dout, segPtr, scale, c.causal);
      EXPECT_CLOSE(dq.toRef(), grads[0], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(dk.toRef(), grads[1], Metric::Norm, tolerance(dtype));
      EXPECT_CLOSE(dv.toRef(), grads[2], Metric::Norm, tolerance(dtype));
    }
}

TEST(AttentionKernels, SegmentIdsAcceptI64) {
  AttentionCase c{1, 20, 20, 2, 1, 8, true, Segments::Packed};
  RefTensor q = randomTensor({1, 20, 2, 8}, 601), k = randomTensor({1, 20, 1, 8}, 602),
            v = randomTensor({1, 20, 1, 8}, 603), seg = segmentIds(c, 604);
  Buffer qb = Buffer::of(q, DType::F32), kb = Buffer::of(k, DType::F32),
         vb = Buffer::of(v, DType::F32), segb = Buffer::of(seg, DType::I64);
  Buffer out(DType::F32, q.shape), lse(DType::F32, {1, 2, 20});
  ASSERT_TRUE(runKernel("attention", {&qb, &kb, &vb, &segb}, {&out, &lse},
                        attrs({{"scale", 0.3}}, {{"causal", 1}})));
  EXPECT_CLOSE(out.toRef(), ref::attention(q, k, v, &seg, 0.3, true)[0], Metric::Norm, 1e-5);
}

} // namespace
} // namespace llmc::test

namespace llmc::test {
namespace {

/// Reductions are ordered by construction (no atomics): binding twice and
/// running gives bit-identical gradients.
TEST(AttentionKernels, BackwardIsDeterministic) {
  RefTensor q = randomTensor({2, 100, 4, 16}, 611), k = randomTensor({2, 100, 2, 16}, 612),
            v = randomTensor({2, 100, 2, 16}, 613), dout = randomTensor({2, 100, 4, 16}, 614);
  std::vector<RefTensor> fwd = ref::attention(q, k, v, nullptr, 0.25, true);
  Buffer qb = Buffer::of(q, DType::F32), kb = Buffer::of(k, DType::F32),
         vb = Buffer::of(v, DType::F32), ob = Buffer::of(fwd[0], DType::F32),
         lb = Buffer::of(fwd[1], DType::F32), db = Buffer::of(dout, DType::F32);
  std::vector<std::vector<uint64_t>> first;
  for (int run = 0; run < 2; ++run) {
    Buffer dq(DType::F32, q.shape), dk(DType::F32, k.shape), dv(DType::F32, v.shape);
    ASSERT_TRUE(runKernel("attention_grad", {&qb, &kb, &vb, &ob, &lb, &db}, {&dq, &dk, &dv},
                          attrs({{"scale", 0.25}}, {{"causal", 1}})));
    if (run == 0)
      first = {dq.storage, dk.storage, dv.storage};
    else
      EXPECT_TRUE(first ==
                  std::vector<std::vector<uint64_t>>({dq.storage, dk.storage, dv.storage}));
  }
}

/// One kernel bound once reads each step's segment ids: the tiles it skips
/// follow the rows, not the rows of the first run.
TEST(AttentionKernels, SegmentsAreReadEveryRun) {
  AttentionCase c{1, 200, 200, 2, 1, 16, true, Segments::Documents};
  RefTensor q = randomTensor({1, 200, 2, 16}, 621), k = randomTensor({1, 200, 1, 16}, 622),
            v = randomTensor({1, 200, 1, 16}, 623);
  Buffer qb = Buffer::of(q, DType::F32), kb = Buffer::of(k, DType::F32),
         vb = Buffer::of(v, DType::F32), segb(DType::I32, {1, 200});
  Buffer out(DType::F32, q.shape), lse(DType::F32, {1, 2, 200});
  KernelArgs args;
  args.inputs = {qb.view(), kb.view(), vb.view(), segb.view()};
  args.outputs = {out.view(), lse.view()};
  args.attrs = attrs({{"scale", 0.25}}, {{"causal", 1}});
  std::string error;
  std::unique_ptr<Kernel> kernel = findKernel(Backend::CPU, "attention")(args, error);
  ASSERT_TRUE(kernel) << error;
  for (uint64_t seed : {624, 625, 626}) {
    RefTensor seg = segmentIds(c, seed);
    Buffer fresh = Buffer::of(seg, DType::I32);
    std::copy(fresh.storage.begin(), fresh.storage.end(), segb.storage.begin());
    kernel->run(StepContext{});
    EXPECT_CLOSE(out.toRef(), ref::attention(q, k, v, &seg, 0.25, true)[0], Metric::Norm, 1e-5);
  }
}

/// q, k, v as the column blocks of one qkv [B, T, (H + 2·KV)·D].
RefTensor packQkv(std::vector<RefTensor> pieces) {
  for (RefTensor &piece : pieces)
    piece.shape = {piece.shape[0], piece.shape[1], piece.shape[2] * piece.shape[3]};
  return ref::concat(pieces, -1);
}

/// attention_packed and attention_packed_grad read q, k, v from qkv's rows
/// and write dq, dk, dv into dqkv's, with the same arithmetic as the
/// unpacked kernels: every output equals theirs exactly, in every storage
/// type (causal or not, GQA and MQA, T not a multiple of the 64-row tile,
/// segment ids).
TEST(AttentionKernels, PackedQkvIsBitIdenticalToSeparateTensors) {
  uint64_t seed = 700;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kCases) {
      if (c.s != c.t) continue; // one qkv holds queries and keys alike
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c));
      RefTensor q = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor k = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor v = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor dout = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      bool hasSegments = c.segments != Segments::None;
      Buffer qb = Buffer::of(q, dtype), kb = Buffer::of(k, dtype), vb = Buffer::of(v, dtype),
             qkv = Buffer::of(packQkv({q, k, v}), dtype), db = Buffer::of(dout, dtype),
             segb = Buffer::of(hasSegments ? segmentIds(c, ++seed) : RefTensor::zeros({1}),
                               DType::I32);
      KernelAttrs a = attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}},
                            {{"causal", c.causal}, {"heads", c.h}, {"kv_heads", c.kv}});
      auto withSegments = [&](std::vector<Buffer *> inputs) {
        if (hasSegments) inputs.push_back(&segb);
        return inputs;
      };

      Buffer out(dtype, q.shape), lse(DType::F32, {c.b, c.h, c.t});
      Buffer packedOut(dtype, q.shape), packedLse(DType::F32, {c.b, c.h, c.t});
      packedOut.poison(), packedLse.poison();
      ASSERT_TRUE(runKernel("attention", withSegments({&qb, &kb, &vb}), {&out, &lse}, a));
      ASSERT_TRUE(
          runKernel("attention_packed", withSegments({&qkv}), {&packedOut, &packedLse}, a));
      EXPECT_EQ(packedOut.storage, out.storage);
      EXPECT_EQ(packedLse.storage, lse.storage);

      Buffer dq(dtype, q.shape), dk(dtype, k.shape), dv(dtype, v.shape);
      Buffer dqkv(dtype, qkv.shape);
      dqkv.poison();
      ASSERT_TRUE(runKernel("attention_grad", withSegments({&qb, &kb, &vb, &out, &lse, &db}),
                            {&dq, &dk, &dv}, a));
      ASSERT_TRUE(runKernel("attention_packed_grad", withSegments({&qkv, &out, &lse, &db}),
                            {&dqkv}, a));
      Buffer expected = Buffer::of(packQkv({dq.toRef(), dk.toRef(), dv.toRef()}), dtype);
      EXPECT_EQ(dqkv.storage, expected.storage);
    }
}

TEST(AttentionKernels, PackedBindingErrors) {
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  KernelAttrs gqa = attrs({{"scale", 0.5}}, {{"heads", 4}, {"kv_heads", 2}});
  KernelAttrs uneven = attrs({{"scale", 0.5}}, {{"heads", 3}, {"kv_heads", 2}});
  expectBindErrorsMention(
      "attention_packed",
      {{{f32({2, 8, 64})}, {f32({2, 8, 4, 8}), f32({2, 4, 8})}, uneven,
        "'heads' (3) must be a positive multiple of 'kv_heads' (2)"},
       {{f32({2, 8, 60})}, {f32({2, 8, 4, 8}), f32({2, 4, 8})}, gqa,
        "qkv must be [B, T, (heads + 2·kv_heads)·D] with heads = 4, kv_heads = 2, got f32[2x8x60]"},
       {{f32({2, 8, 64})}, {f32({2, 8, 4, 4}), f32({2, 4, 8})}, gqa, "out"},
       {{f32({2, 8, 64}), f32({2, 8})}, {f32({2, 8, 4, 8}), f32({2, 4, 8})}, gqa, "segment_ids"}});
  expectBindErrorsMention(
      "attention_packed_grad",
      {{{f32({2, 8, 64}), f32({2, 8, 4, 8}), f32({2, 4, 8}), f32({2, 8, 4, 8})},
        {f32({2, 8, 32})}, gqa, "dqkv"},
       {{f32({2, 8, 64}), f32({2, 8, 2, 8}), f32({2, 4, 8}), f32({2, 8, 4, 8})},
        {f32({2, 8, 64})}, gqa, "out"}});
}

/// Positions that restart at every document (packed rows), or none.
RefTensor documentPositions(const RefTensor &segments) {
  RefTensor positions = RefTensor::zeros(segments.shape);
  const int64_t t = segments.shape[1];
  for (int64_t i = 0; i < segments.numel(); ++i)
    positions.data[i] = i % t > 0 && segments.data[i] == segments.data[i - 1]
                            ? positions.data[i - 1] + 1
                            : 0;
  return positions;
}

/// attention_rope rotates q and k while loading them and its backward
/// rotates dq and dk back while storing them; every output equals rope,
/// attention, attention_grad and the inverse rope run in turn exactly, in
/// every storage type, with and without positions, segment ids and Llama
/// 3.1's scaling.
TEST(AttentionKernels, RopeIsBitIdenticalToRopeThenAttention) {
  uint64_t seed = 800;
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : kCases) {
      if (c.s != c.t || c.d % 2 != 0) continue;
      const bool hasSegments = c.segments != Segments::None, scaled = c.t % 2 == 0;
      // Packed rows give positions; one plain case gives positions alone.
      const bool hasPositions = hasSegments || c.t == 33;
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c) +
                   (hasPositions ? " positions" : "") + (scaled ? " scaled" : ""));
      RefTensor q = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor k = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor v = roundTo(randomTensor({c.b, c.t, c.kv, c.d}, ++seed), dtype);
      RefTensor dout = roundTo(randomTensor({c.b, c.t, c.h, c.d}, ++seed), dtype);
      RefTensor seg = hasSegments ? segmentIds(c, ++seed) : RefTensor::zeros({c.b, c.t});
      Buffer qb = Buffer::of(q, dtype), kb = Buffer::of(k, dtype), vb = Buffer::of(v, dtype),
             db = Buffer::of(dout, dtype), segb = Buffer::of(seg, DType::I32),
             posb = Buffer::of(documentPositions(seg), DType::I64);
      KernelAttrs rope = attrs({{"theta", 10000.0}});
      if (scaled)
        rope = attrs({{"theta", 500000.0}, {"scaling_factor", 8.0}, {"low_freq_factor", 1.0},
                      {"high_freq_factor", 4.0}},
                     {{"original_max_positions", 16}});
      KernelAttrs inverse = rope, a = rope;
      inverse.setInt("inverse", 1);
      a.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(c.d)));
      a.setInt("causal", c.causal);
      KernelAttrs grad = a;
      a.setInts("operand_segments", {1, 1, 1, hasPositions, hasSegments});
      grad.setInts("operand_segments", {1, 1, 1, 1, 1, 1, hasPositions, hasSegments});
      auto rotate = [&](Buffer &x, const KernelAttrs &attrs) {
        Buffer out(dtype, x.shape);
        std::vector<Buffer *> inputs = {&x};
        if (hasPositions) inputs.push_back(&posb);
        EXPECT_TRUE(runKernel("rope", inputs, {&out}, attrs));
        return out;
      };
      auto extras = [&](std::vector<Buffer *> inputs) {
        if (hasPositions) inputs.push_back(&posb);
        if (hasSegments) inputs.push_back(&segb);
        return inputs;
      };

      // Unfused: rope, attention, attention_grad, inverse rope.
      Buffer qr = rotate(qb, rope), kr = rotate(kb, rope);
      Buffer out(dtype, q.shape), lse(DType::F32, {c.b, c.h, c.t});
      std::vector<Buffer *> plain = {&qr, &kr, &vb};
      if (hasSegments) plain.push_back(&segb);
      KernelAttrs attention = attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}},
                                    {{"causal", c.causal}});
      ASSERT_TRUE(runKernel("attention", plain, {&out, &lse}, attention));
      Buffer dqr(dtype, q.shape), dkr(dtype, k.shape), dv(dtype, v.shape);
      std::vector<Buffer *> plainGrad = {&qr, &kr, &vb, &out, &lse, &db};
      if (hasSegments) plainGrad.push_back(&segb);
      ASSERT_TRUE(runKernel("attention_grad", plainGrad, {&dqr, &dkr, &dv}, attention));
      Buffer dq = rotate(dqr, inverse), dk = rotate(dkr, inverse);

      Buffer fusedOut(dtype, q.shape), fusedLse(DType::F32, {c.b, c.h, c.t});
      fusedOut.poison(), fusedLse.poison();
      ASSERT_TRUE(runKernel("attention_rope", extras({&qb, &kb, &vb}), {&fusedOut, &fusedLse}, a));
      EXPECT_EQ(fusedOut.storage, out.storage);
      EXPECT_EQ(fusedLse.storage, lse.storage);
      Buffer fusedDq(dtype, q.shape), fusedDk(dtype, k.shape), fusedDv(dtype, v.shape);
      fusedDq.poison(), fusedDk.poison(), fusedDv.poison();
      ASSERT_TRUE(runKernel("attention_rope_grad", extras({&qb, &kb, &vb, &out, &lse, &db}),
                            {&fusedDq, &fusedDk, &fusedDv}, grad));
      EXPECT_EQ(fusedDq.storage, dq.storage);
      EXPECT_EQ(fusedDk.storage, dk.storage);
      EXPECT_EQ(fusedDv.storage, dv.storage);
    }
}

TEST(AttentionKernels, RopeBindingErrors) {
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  KernelAttrs a = attrs({{"scale", 0.5}, {"theta", 1e4}});
  KernelAttrs noTheta = attrs({{"scale", 0.5}});
  KernelAttrs partial = attrs({{"scale", 0.5}, {"theta", 1e4}, {"scaling_factor", 8.0}});
  KernelAttrs positionsOnly = a;
  positionsOnly.setInts("operand_segments", {1, 1, 1, 1, 0});
  const std::vector<TensorView> outs = {f32({2, 8, 4, 8}), f32({2, 4, 8})};
  expectBindErrorsMention(
      "attention_rope",
      {{{f32({2, 8, 4, 7}), f32({2, 8, 4, 7}), f32({2, 8, 4, 7})},
        {f32({2, 8, 4, 7}), f32({2, 4, 8})}, a, "even head dim"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8})}, outs, noTheta, "theta"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8})}, outs, partial, "go together"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8})}, outs,
        positionsOnly, "positions"},
       {{f32({2, 8, 4, 8}), f32({2, 8, 4, 8}), f32({2, 8, 4, 8})}, outs, positionsOnly,
        "'operand_segments' does not match the 3 inputs"}});
}

/// The cost claim: documents of 2, 1 and 3 tiles leave 3 + 1 + 6 causal
/// tile pairs of the 21 a row of 6 tiles has, i.e. Σ s_i², not (Σ s_i)².
TEST(AttentionKernels, SegmentTilesKeepOnlyEachDocumentsTiles) {
  std::vector<int32_t> ids;
  for (auto [id, tiles] : {std::pair{0, 2}, {1, 1}, {2, 3}}) ids.insert(ids.end(), tiles * 64, id);
  TensorView view;
  view.data = ids.data(), view.dtype = DType::I32, view.shape = {1, 384};
  cpu::SegmentTiles tiles;
  tiles.resize(1, 384, 64);
  tiles.update(cpu::IdView(view));
  int pairs = 0;
  for (int64_t i0 = 0; i0 < 384; i0 += 64)
    for (int64_t j0 = 0; j0 <= i0; j0 += 64) pairs += tiles.meet(0, i0, j0);
  EXPECT_EQ(pairs, 10);
  // A document that starts mid-tile shares that tile with its neighbour.
  std::fill(ids.begin() + 100, ids.begin() + 128, 1);
  tiles.update(cpu::IdView(view));
  EXPECT_TRUE(tiles.meet(0, 64, 64) && tiles.meet(0, 128, 64) && !tiles.meet(0, 192, 64));
}

/// Every attention kernel may end its outputs with a u8 workspace (planned
/// under --target cuda for cuDNN): the CPU kernels give the same bits with
/// it as without it and leave its bytes alone.
TEST(AttentionKernels, WorkspaceOutputIsAcceptedAndLeftAlone) {
  const AttentionCase c{2, 33, 33, 4, 2, 16, true, Segments::None};
  const DType dtype = DType::BF16;
  Buffer q = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 800), dtype);
  Buffer k = Buffer::of(randomTensor({c.b, c.t, c.kv, c.d}, 801), dtype);
  Buffer v = Buffer::of(randomTensor({c.b, c.t, c.kv, c.d}, 802), dtype);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 803), dtype);
  Buffer qkv = Buffer::of(packQkv({q.toRef(), k.toRef(), v.toRef()}), dtype);
  KernelAttrs a = attrs({{"scale", 0.25}, {"theta", 1e4}},
                        {{"causal", 1}, {"heads", c.h}, {"kv_heads", c.kv}});
  Buffer workspace(DType::U8, {1000});
  workspace.poison();
  const std::vector<uint64_t> untouched = workspace.storage;
  using Output = std::pair<DType, std::vector<int64_t>>;
  struct Call {
    const char *kernel;
    std::vector<Buffer *> inputs;
    std::vector<Output> outputs;
  };
  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  ASSERT_TRUE(runKernel("attention", {&q, &k, &v}, {&out, &lse}, a));
  const Output o{dtype, {c.b, c.t, c.h, c.d}}, l{DType::F32, {c.b, c.h, c.t}},
      kv{dtype, {c.b, c.t, c.kv, c.d}};
  const std::vector<Call> calls = {
      {"attention", {&q, &k, &v}, {o, l}},
      {"attention_grad", {&q, &k, &v, &out, &lse, &dout}, {o, kv, kv}},
      {"attention_packed", {&qkv}, {o, l}},
      {"attention_packed_grad", {&qkv, &out, &lse, &dout}, {{dtype, qkv.shape}}},
      {"attention_rope", {&q, &k, &v}, {o, l}},
      {"attention_rope_grad", {&q, &k, &v, &out, &lse, &dout}, {o, kv, kv}},
  };
  for (const Call &call : calls) {
    SCOPED_TRACE(call.kernel);
    std::vector<Buffer> plain, with;
    for (const auto &[type, shape] : call.outputs)
      plain.emplace_back(type, shape), with.emplace_back(type, shape);
    std::vector<Buffer *> plainOut, withOut;
    for (Buffer &b : plain) plainOut.push_back(&b);
    for (Buffer &b : with) withOut.push_back(&b);
    withOut.push_back(&workspace);
    ASSERT_TRUE(runKernel(call.kernel, call.inputs, plainOut, a));
    ASSERT_TRUE(runKernel(call.kernel, call.inputs, withOut, a));
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].storage, with[i].storage) << i;
    EXPECT_EQ(workspace.storage, untouched);
  }
}

TEST(AttentionKernels, WorkspaceBindingErrors) {
  auto view = [](DType t, std::vector<int64_t> shape) { return typeOnly(t, std::move(shape)); };
  auto bf16 = [&](std::vector<int64_t> shape) { return view(DType::BF16, std::move(shape)); };
  KernelAttrs a = attrs({{"scale", 0.5}}, {{"causal", 1}, {"heads", 4}, {"kv_heads", 2}});
  const std::vector<TensorView> qkv = {bf16({2, 8, 4, 8}), bf16({2, 8, 2, 8}), bf16({2, 8, 2, 8})};
  const TensorView out = bf16({2, 8, 4, 8}), lse = view(DType::F32, {2, 4, 8});
  expectBindErrorsMention(
      "attention",
      {{qkv, {out, lse, view(DType::F32, {64})}, a,
        "workspace (output 2) must be a 1-D u8 buffer, got f32[64]"},
       {qkv, {out, lse, view(DType::U8, {8, 8})}, a,
        "workspace (output 2) must be a 1-D u8 buffer, got u8[8x8]"},
       {qkv, {out, lse, view(DType::U8, {8}), view(DType::U8, {8})}, a,
        "expected 2 outputs, got 4"}});
  expectBindErrorsMention("attention_packed_grad",
                          {{{bf16({2, 8, 64}), out, lse, out},
                            {bf16({2, 8, 64}), view(DType::I32, {16})}, a,
                            "workspace (output 1) must be a 1-D u8 buffer, got i32[16]"}});
}

/// The rules and the formula the compiler plans cuDNN's workspace by
/// (common/AttentionWorkspace.h), on GPT-2 124M's attention at
/// B = 16, T = 1024 and a Llama-like GQA with rope.
TEST(AttentionWorkspace, RefusalsAndFormula) {
  contracts::CudnnAttentionShape s;
  s.halfPrecision = true, s.elementBytes = 2;
  s.b = 16, s.t = s.s = 1024, s.h = s.kv = 12, s.d = 64;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(s), "");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(s), int64_t(1) << 20); // forward: the reserve
  s.backward = true;
  // dP (2·16·12·1024²) and the softmax sums (4·16·12·1024), plus the reserve.
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(s), 402653184 + 786432 + 1048576);
  // T not a multiple of 128: dP's sequences are rounded up to cuDNN's tiles.
  s.t = s.s = 1000;
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(s),
            contracts::alignWorkspace(2 * 16 * 12 * 1024 * 1024 + 4 * 16 * 12 * 1000) + 1048576);

  contracts::CudnnAttentionShape llama = s;
  llama.b = 2, llama.t = llama.s = 300, llama.h = 8, llama.kv = 2, llama.d = 128;
  llama.rope = true, llama.backward = false;
  const int64_t staging = contracts::alignWorkspace(2 * 300 * 8 * 128 * 2) +
                          contracts::alignWorkspace(2 * 300 * 2 * 128 * 2);
  EXPECT_EQ(contracts::cudnnRopeStagingBytes(llama), staging);
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(llama), staging + 1048576);

  contracts::CudnnAttentionShape refused = s;
  refused.halfPrecision = false, refused.elementBytes = 4;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused),
            "f32 (cuDNN's fused attention takes bf16 and f16)");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(refused), 0);
  refused = s, refused.d = 60;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused),
            "head dim 60 (cuDNN takes multiples of 8 up to 256)");
  refused = s, refused.d = 264;
  EXPECT_NE(contracts::cudnnAttentionRefusal(refused), "");
  refused = s, refused.segments = true;
  EXPECT_EQ(contracts::cudnnAttentionRefusal(refused),
            "segment ids (packed documents run on llmc's kernels)");
  EXPECT_EQ(contracts::cudnnAttentionWorkspaceBytes(refused), 0);
}

} // namespace
} // namespace llmc::test
