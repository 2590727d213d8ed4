//===- cuda_attention_test.cpp - CUDA attention beyond its cases ----------===//
//
// The six attention kernels' CUDA halves are conformance cases
// (attention_test.cpp: every case on llmc's CUDA-core kernels, on its
// tensor-core kernels and on cuDNN's fused attention where each applies,
// pinned and checked to have run there). What no case states is here:
// cuDNN's backward reruns bit for bit; a workspace too small, f32, segment
// ids and an odd head dim fall back to llmc's kernels, saying why; and the
// CUDA factories reject bad bindings with the CPU's messages.
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

constexpr double kUnchecked = std::numeric_limits<double>::infinity();

/// Under --attention cudnn, the workspace `llmc compile --target cuda`
/// plans for the op (common/AttentionWorkspace.h); else none.
std::unique_ptr<Buffer> plannedWorkspace(const Case &c, DType dtype, bool backward, bool rope) {
  if (cuda::attentionImpl() != AttentionImpl::Cudnn)
    return nullptr;
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
  if (!workspace)
    return cmp;
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
      if (i > 0 && rng() % 9 == 0)
        ++id;
      ids.data[row * t + i] = static_cast<double>(id);
    }
  }
  return ids;
}

//===----------------------------------------------------------------------===//
// cuDNN (`--attention cudnn`)
//===----------------------------------------------------------------------===//

/// GPU and a cuDNN that loads, else skipped with the loader's reason.
#define LLMC_REQUIRE_CUDNN()                                                                       \
  LLMC_REQUIRE_GPU();                                                                              \
  if (const cuda::CudnnLoad &cudnn_ = cuda::processCudnn(); !cudnn_.handle)                        \
  GTEST_SKIP() << "cuDNN is not loaded (" << cudnn_.why << ")"

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
    run = expectCudaMatchesCpu(
        "attention_grad", {&q, &k, &v, &out, &lse, &dout}, grads, a,
        withWorkspace(grads, {Metric::Norm, {tolerance(dtype)}}, workspace.get()));
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
  expectCudaMatchesCpu(
      "attention_grad", {&q, &k, &v, &out, &lse, &dout}, {&dq, &dk, &dv, &tiny}, a,
      {Metric::Norm,
       {tolerance(DType::BF16), tolerance(DType::BF16), tolerance(DType::BF16), kUnchecked}});
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
  EXPECT_EQ(cudaBindError("attention",
                          {f32({1, 4, 2, 300}), f32({1, 4, 2, 300}), f32({1, 4, 2, 300})},
                          {f32({1, 4, 2, 300}), f32({1, 2, 4})}, plain),
            "attention: head dim D = 300 is outside the CUDA kernels' range [1, 256]: q is "
            "f32[1x4x2x300]");
}

} // namespace
} // namespace llmc::test
