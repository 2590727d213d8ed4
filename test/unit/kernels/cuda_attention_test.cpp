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
// CudaAttentionCudnn runs cuDNN's fused flash attention (`--attention
// cudnn`, kernels/cuda/attention_cudnn.cpp) on the cases it takes: bf16 and
// f16; causal and not, S != T; MHA, GQA, MQA; head dims 64 and 128; T = 17
// and 300 (not multiples of 64) and GPT-2 small's 1024; packed qkv;
// rope (at positions, with Llama 3.1's scaling); each op with the
// workspace `llmc compile --target cuda` plans for it (so the formula of
// common/AttentionWorkspace.h is checked against what cuDNN
// asks for). Its lse is compared with the CPU's (1e-3: cuDNN's exp2-based
// softmax), and its backward reads the CPU forward's lse: together, the
// proof that cuDNN's Stats and llmc's lse are the same quantity, so either
// forward feeds either backward. Its backward reruns bit for bit; a
// workspace too small, f32, segment ids and an odd head dim fall back to
// llmc's kernels, saying why. Each suite checks, from the notes the
// factories leave (AttentionChoice.h), that every op ran where the test
// pinned it.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"

#include "common/AttentionWorkspace.h"
#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/CudnnLibrary.h"
#include "kernels/cuda/Device.h"

#include <cmath>
#include <limits>
#include <memory>
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

constexpr double kUnchecked = std::numeric_limits<double>::infinity();

/// Pins what runs attention (`llmc-run --attention`) for one test.
class PinAttention {
public:
  explicit PinAttention(AttentionImpl impl) {
    cuda::setAttentionImpl(impl);
    cuda::takeAttentionNotes();
  }
  ~PinAttention() {
    cuda::setAttentionImpl(AttentionImpl::Auto);
    cuda::takeAttentionNotes();
  }
};

/// Every attention kernel bound since the last call ran where the test
/// pinned it, by the notes the factories leave (no reason given).
void expectBoundAsPinned() {
  const AttentionImpl pinned = cuda::attentionImpl();
  const std::string impl = pinned == AttentionImpl::Cudnn         ? "cudnn"
                           : pinned == AttentionImpl::TensorCores ? "tensor-cores"
                                                                  : "cuda-cores";
  for (const std::string &line : cuda::takeAttentionNotes())
    EXPECT_TRUE(line.rfind("attention: " + impl + " for ", 0) == 0 && line.back() != ')')
        << line;
}

/// lse's bound: cuDNN computes the softmax with exp2 and log2(e) folded
/// into the scale, so its fp32 lse is a few ulps from the CPU's.
double lseTolerance() { return cuda::attentionImpl() == AttentionImpl::Cudnn ? 1e-3 : 1e-5; }

/// Under --attention cudnn, the workspace `llmc compile --target cuda`
/// plans for the op (common/AttentionWorkspace.h); else none.
std::unique_ptr<Buffer> plannedWorkspace(const Case &c, DType dtype, bool backward, bool rope) {
  if (cuda::attentionImpl() != AttentionImpl::Cudnn) return nullptr;
  contracts::CudnnAttentionShape s;
  s.halfPrecision = dtype == DType::BF16 || dtype == DType::F16;
  s.elementBytes = static_cast<int64_t>(dtypeSize(dtype));
  s.b = c.b, s.t = c.t, s.s = c.s, s.h = c.h, s.kv = c.kv, s.d = c.d;
  s.backward = backward, s.rope = rope, s.segments = c.segments;
  const int64_t bytes = contracts::cudnnAttentionWorkspaceBytes(s);
  return bytes ? std::make_unique<Buffer>(DType::U8, std::vector<int64_t>{bytes}) : nullptr;
}

/// `outputs` with the workspace (if any) appended, and `cmp` with the
/// workspace left unchecked.
Comparison withWorkspace(std::vector<Buffer *> &outputs, Comparison cmp, Buffer *workspace) {
  if (!workspace) return cmp;
  while (cmp.tolerances.size() < outputs.size()) cmp.tolerances.push_back(cmp.tolerances.back());
  outputs.push_back(workspace);
  cmp.tolerances.push_back(kUnchecked);
  return cmp;
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
  std::unique_ptr<Buffer> forwardWorkspace = plannedWorkspace(c, dtype, false, false);
  std::vector<Buffer *> outputs = {&out, &lse};
  Comparison forward = withWorkspace(outputs, {Metric::Norm, {tolerance(dtype), lseTolerance()}},
                                     forwardWorkspace.get());
  expectCudaMatchesCpu("attention", inputs, outputs, a, forward);
  expectBoundAsPinned();

  // The CPU forward's out and lse feed both backwards.
  ASSERT_TRUE(runKernel("attention", inputs, {&out, &lse}, a));
  Buffer dq(dtype, {c.b, c.t, c.h, c.d}), dk(dtype, {c.b, c.s, c.kv, c.d}),
      dv(dtype, {c.b, c.s, c.kv, c.d});
  std::vector<Buffer *> gradInputs = {&q, &k, &v, &out, &lse, &dout};
  if (c.segments) gradInputs.push_back(&segments);
  std::unique_ptr<Buffer> backwardWorkspace = plannedWorkspace(c, dtype, true, false);
  std::vector<Buffer *> grads = {&dq, &dk, &dv};
  if (c.s > 1) {
    expectCudaMatchesCpu("attention_grad", gradInputs, grads, a,
                         withWorkspace(grads, {Metric::Norm, {tolerance(dtype)}},
                                       backwardWorkspace.get()));
    expectBoundAsPinned();
    return;
  }
  // One key: the softmax is 1 whatever the scores, so dq and dk are 0 up
  // to rounding (dS = P·(dP − Drow) with dP = Drow), and relative errors of
  // rounding noise mean nothing. Those two are checked only for being
  // written (no NaN) and tiny; dv = dout still against the CPU.
  std::vector<RefTensor> got = expectCudaMatchesCpu(
      "attention_grad", gradInputs, grads, a,
      withWorkspace(grads, {Metric::Norm, {kUnchecked, kUnchecked, tolerance(dtype)}},
                    backwardWorkspace.get()));
  expectBoundAsPinned();
  ASSERT_GE(got.size(), 3u);
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
  PinAttention pin(AttentionImpl::CudaCores);
  uint64_t seed = 7000;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kFastHeadDimCases)
      expectAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaAttention, GenericHeadDimsMatchCpu) {
  LLMC_REQUIRE_GPU();
  PinAttention pin(AttentionImpl::CudaCores);
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
  PinAttention pin(AttentionImpl::CudaCores);
  uint64_t seed = 8000;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kKeysOtherThanQueriesCases)
      expectAttentionMatches(c, dtype, DType::I32, seed += 10);
}

TEST(CudaAttention, SegmentIdsMatchCpu) {
  LLMC_REQUIRE_GPU();
  PinAttention pin(AttentionImpl::CudaCores);
  uint64_t seed = 8500;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kSegmentCases) expectAttentionMatches(c, dtype, DType::I32, seed += 10);
  expectAttentionMatches({2, 128, 128, 4, 2, 64, true, true}, DType::F32, DType::I64, 8900);
}

TEST(CudaAttention, Gpt2SmallMatchesCpu) {
  LLMC_REQUIRE_GPU();
  PinAttention pin(AttentionImpl::CudaCores);
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
  std::unique_ptr<Buffer> forwardWorkspace = plannedWorkspace(c, dtype, false, false);
  std::vector<Buffer *> outputs = {&out, &lse};
  expectCudaMatchesCpu("attention_packed", inputs, outputs, a,
                       withWorkspace(outputs, {Metric::Norm, {tolerance(dtype), lseTolerance()}},
                                     forwardWorkspace.get()));
  expectBoundAsPinned();
  ASSERT_TRUE(runKernel("attention_packed", inputs, {&out, &lse}, a));
  Buffer dqkv(dtype, {c.b, c.t, width});
  std::vector<Buffer *> gradInputs = {&qkv, &out, &lse, &dout};
  if (c.segments) gradInputs.push_back(&segments);
  std::unique_ptr<Buffer> backwardWorkspace = plannedWorkspace(c, dtype, true, false);
  std::vector<Buffer *> grads = {&dqkv};
  expectCudaMatchesCpu("attention_packed_grad", gradInputs, grads, a,
                       withWorkspace(grads, {Metric::Norm, {tolerance(dtype)}},
                                     backwardWorkspace.get()));
  expectBoundAsPinned();
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
  PinAttention pin(AttentionImpl::CudaCores);
  uint64_t seed = 9500;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kPackedCases) expectPackedMatches(c, dtype, seed += 10);
  expectPackedMatches({1, 1024, 1024, 12, 12, 64, true, false}, DType::F32, 9900);
}

/// attention_rope and its backward on both backends, at packed rows'
/// positions (restarting at each segment) with their segment ids when
/// `c.segments`, at those positions alone when `positionsOnly`.
void expectRopeMatches(const Case &c, DType dtype, bool scaled, uint64_t seed,
                       bool positionsOnly = false) {
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
  const int64_t withPositions = c.segments || positionsOnly;
  a.setInts("operand_segments", {1, 1, 1, withPositions, c.segments});
  grad.setInts("operand_segments", {1, 1, 1, 1, 1, 1, withPositions, c.segments});
  auto extras = [&](std::vector<Buffer *> inputs) {
    if (withPositions) inputs.push_back(&pos);
    if (c.segments) inputs.push_back(&segments);
    return inputs;
  };
  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  std::unique_ptr<Buffer> forwardWorkspace = plannedWorkspace(c, dtype, false, true);
  std::vector<Buffer *> outputs = {&out, &lse};
  expectCudaMatchesCpu("attention_rope", extras({&q, &k, &v}), outputs, a,
                       withWorkspace(outputs, {Metric::Norm, {tolerance(dtype), lseTolerance()}},
                                     forwardWorkspace.get()));
  expectBoundAsPinned();
  ASSERT_TRUE(runKernel("attention_rope", extras({&q, &k, &v}), {&out, &lse}, a));
  Buffer dq(dtype, {c.b, c.t, c.h, c.d}), dk(dtype, {c.b, c.t, c.kv, c.d}),
      dv(dtype, {c.b, c.t, c.kv, c.d});
  std::unique_ptr<Buffer> backwardWorkspace = plannedWorkspace(c, dtype, true, true);
  std::vector<Buffer *> grads = {&dq, &dk, &dv};
  expectCudaMatchesCpu("attention_rope_grad", extras({&q, &k, &v, &out, &lse, &dout}), grads,
                       grad,
                       withWorkspace(grads, {Metric::Norm, {tolerance(dtype)}},
                                     backwardWorkspace.get()));
  expectBoundAsPinned();
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
  PinAttention pin(AttentionImpl::CudaCores);
  uint64_t seed = 9700;
  for (DType dtype : kFloatTypes)
    for (const Case &c : kRopeCases) {
      expectRopeMatches(c, dtype, false, seed += 10);
      expectRopeMatches(c, dtype, true, seed += 10);
    }
}

// The tensor-core kernels (`llmc-run --attention tensor-cores`) on every
// case above that they take: bf16 and f16 at head dims 64 and 128.

bool takesTensorCores(const Case &c) { return c.d == 64 || c.d == 128; }

TEST(CudaAttentionTensorCores, MatchCpu) {
  LLMC_REQUIRE_GPU();
  PinAttention pin(AttentionImpl::TensorCores);
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
  PinAttention pin(AttentionImpl::TensorCores);
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

//===----------------------------------------------------------------------===//
// cuDNN (`--attention cudnn`)
//===----------------------------------------------------------------------===//

/// GPU and a cuDNN that loads, else skipped with the loader's reason.
#define LLMC_REQUIRE_CUDNN()                                                                      \
  LLMC_REQUIRE_GPU();                                                                             \
  if (const cuda::CudnnLoad &cudnn_ = cuda::processCudnn(); !cudnn_.handle)                       \
  GTEST_SKIP() << "cuDNN is not loaded (" << cudnn_.why << ")"

const std::vector<Case> kCudnnCases = {
    {2, 17, 17, 4, 4, 64, true, false},     // T not a multiple of 64
    {2, 300, 300, 8, 2, 128, true, false},  // GQA, ragged
    {2, 128, 128, 4, 1, 64, true, false},   // MQA
    {2, 300, 300, 4, 4, 128, false, false}, // not causal
    {2, 17, 300, 4, 1, 64, false, false},   // S != T
    {2, 300, 17, 4, 2, 128, false, false},
};

TEST(CudaAttentionCudnn, MatchCpu) {
  LLMC_REQUIRE_CUDNN();
  PinAttention pin(AttentionImpl::Cudnn);
  uint64_t seed = 13000;
  for (DType dtype : {DType::BF16, DType::F16}) {
    for (const Case &c : kCudnnCases) expectAttentionMatches(c, dtype, DType::I32, seed += 10);
    expectAttentionMatches(kGpt2Small, dtype, DType::I32, seed += 10);
  }
}

TEST(CudaAttentionCudnn, PackedQkvMatchesCpu) {
  LLMC_REQUIRE_CUDNN();
  PinAttention pin(AttentionImpl::Cudnn);
  uint64_t seed = 13500;
  for (DType dtype : {DType::BF16, DType::F16}) {
    for (const Case &c : {Case{2, 17, 17, 4, 4, 64, true, false},
                          Case{2, 300, 300, 4, 4, 64, true, false},
                          Case{2, 128, 128, 8, 2, 128, false, false},
                          Case{2, 300, 300, 4, 1, 128, true, false}})
      expectPackedMatches(c, dtype, seed += 10);
    expectPackedMatches(kGpt2Small, dtype, seed += 10);
  }
}

/// q and k rotated by rope's kernel into the workspace, then cuDNN; dq and
/// dk rotated back in place.
TEST(CudaAttentionCudnn, RopeMatchesCpu) {
  LLMC_REQUIRE_CUDNN();
  PinAttention pin(AttentionImpl::Cudnn);
  uint64_t seed = 14000;
  for (DType dtype : {DType::BF16, DType::F16})
    for (const Case &c : {Case{2, 17, 17, 4, 4, 64, true, false},
                          Case{2, 300, 300, 8, 2, 64, true, false},
                          Case{2, 128, 128, 4, 1, 128, false, false}}) {
      expectRopeMatches(c, dtype, false, seed += 10);
      expectRopeMatches(c, dtype, true, seed += 10, /*positionsOnly=*/true);
    }
}

/// The deterministic backward: the same inputs give the same bits.
TEST(CudaAttentionCudnn, BackwardIsDeterministic) {
  LLMC_REQUIRE_CUDNN();
  PinAttention pin(AttentionImpl::Cudnn);
  const Case c = {2, 300, 300, 8, 2, 64, true, false};
  const DType dtype = DType::BF16;
  Buffer q = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 14500), dtype);
  Buffer k = Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, 14501), dtype);
  Buffer v = Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, 14502), dtype);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 14503), dtype);
  KernelAttrs a = attrs({{"scale", 0.125}}, {{"causal", 1}});
  Buffer out(dtype, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  ASSERT_TRUE(runKernel("attention", {&q, &k, &v}, {&out, &lse}, a));
  std::vector<RefTensor> runs[2];
  for (auto &run : runs) {
    Buffer dq(dtype, {c.b, c.t, c.h, c.d}), dk(dtype, {c.b, c.s, c.kv, c.d}),
        dv(dtype, {c.b, c.s, c.kv, c.d});
    std::unique_ptr<Buffer> workspace = plannedWorkspace(c, dtype, true, false);
    std::vector<Buffer *> grads = {&dq, &dk, &dv};
    run = expectCudaMatchesCpu("attention_grad", {&q, &k, &v, &out, &lse, &dout}, grads, a,
                               withWorkspace(grads, {Metric::Norm, {tolerance(dtype)}},
                                             workspace.get()));
    expectBoundAsPinned();
  }
  ASSERT_GE(runs[0].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(runs[0][i].data, runs[1][i].data) << "gradient " << i;
}

/// What cuDNN does not take runs on llmc's kernels, with the reason in the
/// notes: a workspace smaller than cuDNN asks for, f32, segment ids, a head
/// dim that is not a multiple of 8.
TEST(CudaAttentionCudnn, FallsBackSayingWhy) {
  LLMC_REQUIRE_CUDNN();
  PinAttention pin(AttentionImpl::Cudnn);
  auto expectNote = [](const std::string &contains) {
    std::vector<std::string> notes = cuda::takeAttentionNotes();
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0].rfind("attention: cuda-cores for ", 0), 0u) << notes[0];
    EXPECT_NE(notes[0].find(contains), std::string::npos) << notes[0];
  };
  const Case c = {2, 128, 128, 4, 2, 64, true, false};
  Buffer q = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 15000), DType::BF16);
  Buffer k = Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, 15001), DType::BF16);
  Buffer v = Buffer::of(randomTensor({c.b, c.s, c.kv, c.d}, 15002), DType::BF16);
  Buffer dout = Buffer::of(randomTensor({c.b, c.t, c.h, c.d}, 15003), DType::BF16);
  KernelAttrs a = attrs({{"scale", 0.125}}, {{"causal", 1}});
  Buffer out(DType::BF16, {c.b, c.t, c.h, c.d}), lse(DType::F32, {c.b, c.h, c.t});
  ASSERT_TRUE(runKernel("attention", {&q, &k, &v}, {&out, &lse}, a));
  Buffer dq(DType::BF16, {c.b, c.t, c.h, c.d}), dk(DType::BF16, {c.b, c.s, c.kv, c.d}),
      dv(DType::BF16, {c.b, c.s, c.kv, c.d}), tiny(DType::U8, {256});
  expectCudaMatchesCpu("attention_grad", {&q, &k, &v, &out, &lse, &dout}, {&dq, &dk, &dv, &tiny},
                       a, {Metric::Norm, {tolerance(DType::BF16), tolerance(DType::BF16),
                                          tolerance(DType::BF16), kUnchecked}});
  expectNote("(cuDNN: cuDNN needs a workspace of ");

  {
    Buffer q32 = Buffer::of(randomTensor({1, c.t, c.h, c.d}, 15010), DType::F32);
    Buffer k32 = Buffer::of(randomTensor({1, c.s, c.kv, c.d}, 15011), DType::F32);
    Buffer v32 = Buffer::of(randomTensor({1, c.s, c.kv, c.d}, 15012), DType::F32);
    Buffer o32(DType::F32, {1, c.t, c.h, c.d}), l32(DType::F32, {1, c.h, c.t});
    expectCudaMatchesCpu("attention", {&q32, &k32, &v32}, {&o32, &l32}, a,
                         {Metric::Norm, {1e-5, 1e-5}});
    expectNote("(cuDNN: f32 (cuDNN's fused attention takes bf16 and f16))");
  }
  {
    Buffer segments = Buffer::of(packedSegments(c.b, c.t, 15020), DType::I32);
    Buffer o(DType::BF16, {c.b, c.t, c.h, c.d}), l(DType::F32, {c.b, c.h, c.t});
    expectCudaMatchesCpu("attention", {&q, &k, &v, &segments}, {&o, &l}, a,
                         {Metric::Norm, {tolerance(DType::BF16), 1e-5}});
    expectNote("(cuDNN: segment ids (packed documents run on llmc's kernels))");
  }
  {
    Buffer q36 = Buffer::of(randomTensor({1, 17, 2, 36}, 15030), DType::BF16);
    Buffer k36 = Buffer::of(randomTensor({1, 17, 2, 36}, 15031), DType::BF16);
    Buffer v36 = Buffer::of(randomTensor({1, 17, 2, 36}, 15032), DType::BF16);
    Buffer o(DType::BF16, {1, 17, 2, 36}), l(DType::F32, {1, 2, 17});
    expectCudaMatchesCpu("attention", {&q36, &k36, &v36}, {&o, &l}, a,
                         {Metric::Norm, {tolerance(DType::BF16), 1e-5}});
    expectNote("(cuDNN: head dim 36 (cuDNN takes multiples of 8 up to 256))");
  }
}

TEST(CudaAttention, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  PinAttention pin(AttentionImpl::CudaCores);
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
