//===- cuda_attention_test.cpp - CUDA attention against the CPU -----------===//
//
// attention and attention_grad on the GPU against the CPU kernels, on the
// same stored inputs, with the norm metric (outputs and gradients are sums
// of many terms, and the two backends add them in different orders): 1e-5
// for f32, 1e-2 for bf16 (both backends round their fp32 results to bf16
// once, so they can differ by one bf16 step in a few elements); lse is f32
// for either storage type, so 1e-5 always. The backward consumes the CPU
// forward's out and lse, so both backends see the same inputs.
//
// Shapes: head dims 64 and 128 (the fast paths) and 7, 32, 80, 96, 256
// (the generic path, with idle lanes when D is not a multiple of 32);
// multi-head (H = KV), grouped-query (H = 4·KV) and multi-query (KV = 1);
// causal and not; T = 1, 17, 37, 128, 300 (one partial tile, several
// tiles with ragged edges); S != T both ways; packed sequences by segment
// ids (i32 and i64); B = 2; and GPT-2 small's attention (T = 1024, H = 12,
// D = 64). With a single key (T = S = 1) dq and dk are rounding noise around
// 0 and are checked for size, not against the CPU. The packed-qkv kernels
// (attention_packed, _grad) and the rotating ones (attention_rope, _grad:
// positions, segment ids, Llama 3.1's scaling) against their CPU twins on
// GPT-2- and Llama-like shapes, GQA, ragged tiles and generic head dims.
// CudaAttentionTensorCores runs the tensor-core kernels on every case with
// a head dim they take (64, 128), in bf16 and f16, with the same bounds.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"

#include "kernels/cuda/Device.h"

#include <cmath>
#include <limits>
#include <random>

namespace llmc::test {
namespace {

struct Case {
  int64_t b, t, s, h, kv, d;
  bool causal;
  bool segments;
};

std::string describe(const Case &c) {
  return "B" + std::to_string(c.b) + " T" + std::to_string(c.t) + " S" + std::to_string(c.s) +
         " H" + std::to_string(c.h) + " KV" + std::to_string(c.kv) + " D" + std::to_string(c.d) +
         (c.causal ? " causal" : "") + (c.segments ? " segments" : "");
}

/// Packed sequences: runs of about 9 positions share an id.
RefTensor packedSegments(int64_t b, int64_t t, uint64_t seed) {
  RefTensor ids = RefTensor::zeros({b, t});
  std::mt19937_64 rng(seed);
  for (int64_t row = 0; row < b; ++row) {
    int64_t id = 0;
    for (int64_t i = 0; i < t; ++i) {
      if (i > 0 && rng() % 9 == 0) ++id;
      ids.data[row * t + i] = static_cast<double>(id);
    }
  }
  return ids;
}

/// Forward and backward of one case on both backends.
void expectAttentionMatches(const Case &c, DType dtype, DType segmentType, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + describe(c));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  Buffer q = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed), dtype);
  Buffer k = Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, seed + 1), dtype);
  Buffer v = Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, seed + 2), dtype);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed + 3), dtype);
  Buffer segments = Buffer::of(packedSegments(c.b, c.t, seed + 4), segmentType);
  KernelAttrs a = attrs({{"scale", scale}}, {{"causal", c.causal ? 1 : 0}});

  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  std::vector<Buffer *> inputs = {&q, &k, &v};
  if (c.segments) inputs.push_back(&segments);
  expectCudaMatchesCpu("attention", inputs, {&out, &lse}, a,
                       {Metric::Norm, {tolerance(dtype), 1e-5}});

  // The CPU forward's out and lse feed both backwards.
  ASSERT_TRUE(runKernel("attention", inputs, {&out, &lse}, a));
  Buffer dq(dtype, {c.b, c.t, c.h, c.d}), dk(dtype, {c.b, c.s, c.kv, c.d}),
      dv(dtype, {c.b, c.s, c.kv, c.d});
  std::vector<Buffer *> gradInputs = {&q, &k, &v, &out, &lse, &dout};
  if (c.segments) gradInputs.push_back(&segments);
  if (c.s > 1) {
    expectCudaMatchesCpu("attention_grad", gradInputs, {&dq, &dk, &dv}, a,
                         {Metric::Norm, {tolerance(dtype)}});
    return;
  }
  // One key: the softmax is 1 whatever the scores, so dq and dk are 0 up
  // to rounding (dS = P·(dP − Drow) with dP = Drow), and relative errors of
  // rounding noise mean nothing. Those two are checked only for being
  // written (no NaN) and tiny; dv = dout still against the CPU.
  const double unchecked = std::numeric_limits<double>::infinity();
  std::vector<RefTensor> got =
      expectCudaMatchesCpu("attention_grad", gradInputs, {&dq, &dk, &dv}, a,
                           {Metric::Norm, {unchecked, unchecked, tolerance(dtype)}});
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 2; ++i)
    for (double x : got[i].data) EXPECT_LE(std::abs(x), 1e-4) << (i == 0 ? "dq" : "dk");
}

const std::vector<Case> kFastHeadDimCases = {
    {2, 1, 1, 4, 4, 64, false, false},    // one query, one key
    {2, 1, 1, 4, 4, 128, true, false},
    {2, 17, 17, 4, 4, 64, true, false},   // one partial tile
    {2, 17, 17, 8, 2, 128, false, false}, // GQA
    {2, 128, 128, 8, 2, 64, true, false}, // four full tiles
    {2, 128, 128, 4, 1, 128, true, false}, // MQA
    {2, 128, 128, 4, 4, 128, false, false},
    {2, 300, 300, 4, 4, 128, true, false}, // ragged last tile
    {2, 300, 300, 8, 2, 64, false, false},
    {2, 300, 300, 4, 1, 64, true, false},
};

// Not causal, no segments: S may differ from T.
const std::vector<Case> kKeysOtherThanQueriesCases = {
    {2, 17, 300, 4, 1, 64, false, false},
    {2, 300, 17, 4, 2, 128, false, false},
    {2, 1, 129, 8, 2, 80, false, false},
};

const std::vector<Case> kSegmentCases = {
    {2, 300, 300, 4, 1, 64, true, true},
    {2, 128, 128, 8, 2, 128, false, true},
    {2, 37, 37, 2, 2, 80, true, true},
    {2, 17, 17, 4, 4, 64, false, true},
};

const Case kGpt2Small = {1, 1024, 1024, 12, 12, 64, true, false};

TEST(CudaAttention, FastHeadDimsMatchCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 7000;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kFastHeadDimCases)
      expectAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaAttention, GenericHeadDimsMatchCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {2, 37, 37, 4, 2, 32, true, false},
      {2, 37, 37, 2, 2, 80, true, false},
      {2, 65, 65, 4, 1, 96, false, false},
      {2, 45, 45, 2, 1, 7, false, false},
      {2, 33, 33, 2, 2, 256, true, false},
      {2, 70, 70, 4, 4, 256, false, false},
  };
  uint64_t seed = 7500;
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) expectAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaAttention, KeysOtherThanQueriesMatchCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 8000;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kKeysOtherThanQueriesCases)
      expectAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaAttention, SegmentIdsMatchCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 8500;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kSegmentCases) expectAttentionMatches(c, dtype, DType::I32, seed += 10);
  expectAttentionMatches({2, 128, 128, 4, 2, 64, true, true}, DType::F32, DType::I64, 8900);
}

TEST(CudaAttention, Gpt2SmallMatchesCpu) {
  LLMC_REQUIRE_GPU();
  expectAttentionMatches(kGpt2Small, DType::F32, DType::I32, 9000);
  expectAttentionMatches(kGpt2Small, DType::BF16, DType::I32, 9010);
}

/// attention_packed and its backward on both backends, q, k and v the
/// column blocks of one qkv.
void expectPackedMatches(const Case &c, DType dtype, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " packed " + describe(c));
  const int64_t width = (c.h + 2 * c.kv) * c.d;
  Buffer qkv = Buffer::of(randomTensor({c.b, c.t, width}, seed), dtype);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed + 1), dtype);
  Buffer segments = Buffer::of(packedSegments(c.b, c.t, seed + 2), DType::I32);
  KernelAttrs a = attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}},
                        {{"causal", c.causal ? 1 : 0}, {"heads", c.h}, {"kv_heads", c.kv}});
  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  std::vector<Buffer *> inputs = {&qkv};
  if (c.segments) inputs.push_back(&segments);
  expectCudaMatchesCpu("attention_packed", inputs, {&out, &lse}, a,
                       {Metric::Norm, {tolerance(dtype), 1e-5}});
  ASSERT_TRUE(runKernel("attention_packed", inputs, {&out, &lse}, a));
  Buffer dqkv(dtype, {c.b, c.t, width});
  std::vector<Buffer *> gradInputs = {&qkv, &out, &lse, &dout};
  if (c.segments) gradInputs.push_back(&segments);
  expectCudaMatchesCpu("attention_packed_grad", gradInputs, {&dqkv}, a,
                       {Metric::Norm, {tolerance(dtype)}});
}

const std::vector<Case> kPackedCases = {
    {2, 17, 17, 4, 4, 64, true, false},     // one partial tile
    {2, 300, 300, 4, 4, 64, true, false},   // ragged last tile
    {2, 128, 128, 8, 2, 128, false, false}, // GQA
    {2, 37, 37, 4, 1, 80, true, true},      // MQA, generic D, segments
    {2, 65, 65, 2, 2, 32, false, true},
};

TEST(CudaAttention, PackedQkvMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9500;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kPackedCases) expectPackedMatches(c, dtype, seed += 10);
  expectPackedMatches({1, 1024, 1024, 12, 12, 64, true, false}, DType::F32, 9900);
}

/// attention_rope and its backward on both backends, at packed rows'
/// positions (restarting at each segment) when `c.segments`.
void expectRopeMatches(const Case &c, DType dtype, bool scaled, uint64_t seed) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " rope " + describe(c) + (scaled ? " scaled" : ""));
  Buffer q = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed), dtype);
  Buffer k = Buffer::of(randomTensor({c.b, c.t, c.kv, c.d}, seed + 1), dtype);
  Buffer v = Buffer::of(randomTensor({c.b, c.t, c.kv, c.d}, seed + 2), dtype);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, seed + 3), dtype);
  RefTensor ids = packedSegments(c.b, c.t, seed + 4), positions = RefTensor::zeros({c.b, c.t});
  for (int64_t i = 0; i < ids.numel(); ++i)
    positions.data[i] =
        i % c.t > 0 && ids.data[i] == ids.data[i - 1] ? positions.data[i - 1] + 1 : 0;
  Buffer segments = Buffer::of(ids, DType::I32), pos = Buffer::of(positions, DType::I32);
  KernelAttrs a = attrs({{"scale", 1.0 / std::sqrt(static_cast<double>(c.d))}, {"theta", 1e4}},
                        {{"causal", c.causal ? 1 : 0}});
  if (scaled) {
    a.setFloat("scaling_factor", 8.0), a.setFloat("low_freq_factor", 1.0);
    a.setFloat("high_freq_factor", 4.0), a.setInt("original_max_positions", 64);
  }
  KernelAttrs grad = a;
  a.setInts("operand_segments", {1, 1, 1, c.segments, c.segments});
  grad.setInts("operand_segments", {1, 1, 1, 1, 1, 1, c.segments, c.segments});
  auto extras = [&](std::vector<Buffer *> inputs) {
    if (c.segments) inputs.insert(inputs.end(), {&pos, &segments});
    return inputs;
  };
  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  expectCudaMatchesCpu("attention_rope", extras({&q, &k, &v}), {&out, &lse}, a,
                       {Metric::Norm, {tolerance(dtype), 1e-5}});
  ASSERT_TRUE(runKernel("attention_rope", extras({&q, &k, &v}), {&out, &lse}, a));
  Buffer dq(dtype, {c.b, c.t, c.h, c.d}), dk(dtype, {c.b, c.t, c.kv, c.d}),
      dv(dtype, {c.b, c.t, c.kv, c.d});
  expectCudaMatchesCpu("attention_rope_grad", extras({&q, &k, &v, &out, &lse, &dout}),
                       {&dq, &dk, &dv}, grad, {Metric::Norm, {tolerance(dtype)}});
}

const std::vector<Case> kRopeCases = {
    {2, 17, 17, 4, 4, 64, true, false},
    {2, 300, 300, 8, 2, 64, true, true},   // GQA, positions and segments
    {2, 128, 128, 4, 1, 128, false, false}, // MQA
    {2, 37, 37, 4, 2, 80, true, true},      // generic D, half not a multiple of 32
    {2, 45, 45, 2, 1, 6, false, false},
};

TEST(CudaAttention, RopeMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 9700;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kRopeCases) {
      expectRopeMatches(c, dtype, false, seed += 10);
      expectRopeMatches(c, dtype, true, seed += 10);
    }
}

/// The tensor-core kernels (`llmc-run --attention-tensor-cores`) on every
/// case above that they take: bf16 and f16 at head dims 64 and 128.
class TensorCoreAttention {
public:
  TensorCoreAttention() { cuda::setAttentionTensorCores(true); }
  ~TensorCoreAttention() { cuda::setAttentionTensorCores(false); }
};

bool takesTensorCores(const Case &c) { return c.d == 64 || c.d == 128; }

TEST(CudaAttentionTensorCores, MatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorCoreAttention on;
  uint64_t seed = 11000;
  for (DType dtype : {DType::BF16, DType::F16}) {
    for (const auto *cases : {&kFastHeadDimCases, &kKeysOtherThanQueriesCases, &kSegmentCases})
      for (const Case &c : *cases)
        if (takesTensorCores(c)) expectAttentionMatches(c, dtype, DType::I32, seed += 10);
    expectAttentionMatches(kGpt2Small, dtype, DType::I32, seed += 10);
  }
  expectAttentionMatches({2, 128, 128, 4, 2, 64, true, true}, DType::BF16, DType::I64, 11900);
}

TEST(CudaAttentionTensorCores, PackedAndRopeMatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorCoreAttention on;
  uint64_t seed = 12000;
  for (DType dtype : {DType::BF16, DType::F16}) {
    for (const Case &c : kPackedCases)
      if (takesTensorCores(c)) expectPackedMatches(c, dtype, seed += 10);
    for (const Case &c : kRopeCases)
      if (takesTensorCores(c)) {
        expectRopeMatches(c, dtype, false, seed += 10);
        expectRopeMatches(c, dtype, true, seed += 10);
      }
  }
  expectPackedMatches(kGpt2Small, DType::BF16, 12900);
}

TEST(CudaAttention, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  KernelAttrs causal = attrs({{"scale", 0.125}}, {{"causal", 1}});
  KernelAttrs plain = attrs({{"scale", 0.125}});
  const std::vector<CudaBindErrorCase> cases = {
      // H not a multiple of KV.
      {"attention",
       {f32({2, 8, 6, 64}), f32({2, 8, 4, 64}), f32({2, 8, 4, 64})},
       {f32({2, 8, 6, 64}), f32({2, 6, 8})},
       plain},
      // Causal with S != T.
      {"attention",
       {f32({2, 8, 4, 64}), f32({2, 9, 4, 64}), f32({2, 9, 4, 64})},
       {f32({2, 8, 4, 64}), f32({2, 4, 8})},
       causal},
      // lse of the wrong shape.
      {"attention",
       {f32({2, 8, 4, 64}), f32({2, 8, 4, 64}), f32({2, 8, 4, 64})},
       {f32({2, 8, 4, 64}), f32({2, 8, 4})},
       plain},
      // Segment ids as floats.
      {"attention",
       {f32({2, 8, 4, 64}), f32({2, 8, 4, 64}), f32({2, 8, 4, 64}), f32({2, 8})},
       {f32({2, 8, 4, 64}), f32({2, 4, 8})},
       plain},
      // dk of the wrong shape.
      {"attention_grad",
       {f32({2, 8, 4, 64}), f32({2, 8, 2, 64}), f32({2, 8, 2, 64}), f32({2, 8, 4, 64}),
        f32({2, 4, 8}), f32({2, 8, 4, 64})},
       {f32({2, 8, 4, 64}), f32({2, 8, 4, 64}), f32({2, 8, 2, 64})},
       causal},
      // Too few inputs.
      {"attention_grad",
       {f32({2, 8, 4, 64}), f32({2, 8, 2, 64}), f32({2, 8, 2, 64})},
       {f32({2, 8, 4, 64}), f32({2, 8, 2, 64}), f32({2, 8, 2, 64})},
       causal},
  };
  expectCudaBindErrorsMatchCpu(cases);

  // A head dim the CPU takes but the CUDA kernels do not: a clear error.
  EXPECT_EQ(cudaBindError("attention", {f32({1, 4, 2, 300}), f32({1, 4, 2, 300}),
                                        f32({1, 4, 2, 300})},
                          {f32({1, 4, 2, 300}), f32({1, 2, 4})}, plain),
            "attention: head dim D = 300 is outside the CUDA kernels' range [1, 256]: q is "
            "f32[1x4x2x300]");
}

} // namespace
} // namespace llmc::test
