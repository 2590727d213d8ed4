//===- cuda_optimizer_test.cpp - CUDA adamw and adamw8bit against the CPU -===//
//
// Both backends run the same float operations per element (AdamWStep.cuh
// mirrors the CPU's fused multiply-adds), so p', m', v' agree to rounding
// of the step constants, and adamw8bit's codes are compared exactly (the
// harness compares integer outputs exactly): a code could only differ if
// m'/absmax' landed within an ulp of a decision threshold *and* the two
// backends' constants differed in their last bit.

#include "CudaConformance.h"

#include "kernels/Validator.h"

#include <cmath>
#include <cstring>
#include <random>

namespace llmc::test {
namespace {

Buffer scalar(double value) { return Buffer::of(RefTensor{{}, {value}}, DType::F32); }

KernelAttrs adamAttrs(double maxGradNorm) {
  return attrs({{"beta1", 0.9},
                {"beta2", 0.999},
                {"epsilon", 1e-8},
                {"weight_decay", 0.1},
                {"max_grad_norm", maxGradNorm}});
}

const std::vector<std::vector<int64_t>> kParamShapes = {{1}, {7}, {3, 129}, {2047}, {2049},
                                                        {37, 1000}, {768, 3072}};

TEST(CudaOptimizerKernels, AdamWMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 10300;
  for (DType t : kFloatTypes)
    for (const auto &shape : kParamShapes)
      for (int variant = 0; variant < 3; ++variant) { // 0 plain, 1 clipped, 2 in place
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape) + " variant " +
                     std::to_string(variant));
        RefTensor vValues = randomTensor(shape, ++seed, 1e-3);
        for (double &x : vValues.data) x = std::abs(x);
        Buffer p = Buffer::of(randomTensor(shape, ++seed), t);
        Buffer g = Buffer::of(randomTensor(shape, ++seed, 0.3), t);
        Buffer m = Buffer::of(randomTensor(shape, ++seed, 0.03), t);
        Buffer v = Buffer::of(vValues, t);
        Buffer lr = scalar(3e-4), step = scalar(variant == 1 ? 1.0 : 17.0), norm = scalar(4.5);
        Buffer p1(t, shape), m1(t, shape), v1(t, shape);
        std::vector<Buffer *> inputs = {&p, &g, &m, &v, &lr, &step};
        if (variant == 1) inputs.push_back(&norm);
        std::vector<Buffer *> outputs =
            variant == 2 ? std::vector<Buffer *>{&p, &m, &v} : std::vector<Buffer *>{&p1, &m1, &v1};
        expectCudaMatchesCpu("adamw", inputs, outputs, adamAttrs(variant == 1 ? 1.0 : 0.0),
                             {Metric::Elementwise, {tolerance(t)}});
      }
}

/// Random 8-bit state of about `scale`, or the all-zero fresh state.
void fillState(Buffer &codes, Buffer &absmax, uint64_t seed, double scale, bool fresh) {
  uint8_t *c = static_cast<uint8_t *>(codes.view().data);
  float *a = static_cast<float *>(absmax.view().data);
  const int64_t n = codes.view().numel(), blocks = absmax.view().numel();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> factor(0.1f, 1.0f);
  for (int64_t i = 0; i < n; ++i) c[i] = fresh ? 0 : static_cast<uint8_t>(code(rng));
  for (int64_t b = 0; b < blocks; ++b) a[b] = fresh ? 0.0f : static_cast<float>(scale) * factor(rng);
}

TEST(CudaOptimizerKernels, AdamW8bitMatchesCpu) {
  LLMC_REQUIRE_GPU();
  uint64_t seed = 10400;
  for (DType t : kFloatTypes)
    for (const auto &shape : kParamShapes)
      for (int variant = 0; variant < 4; ++variant) { // plain, clipped, in place, fresh
        SCOPED_TRACE(std::string(dtypeName(t)) + " " + shapeString(shape) + " variant " +
                     std::to_string(variant));
        int64_t n = ::llmc::product(shape), blocks = (n + 2047) / 2048;
        Buffer p = Buffer::of(randomTensor(shape, ++seed), t);
        Buffer g = Buffer::of(randomTensor(shape, ++seed, 0.3), t);
        Buffer mCodes(DType::U8, shape), vCodes(DType::U8, shape);
        Buffer mAbsmax(DType::F32, {blocks}), vAbsmax(DType::F32, {blocks});
        fillState(mCodes, mAbsmax, ++seed, 0.05, variant == 3);
        fillState(vCodes, vAbsmax, ++seed, 0.01, variant == 3);
        Buffer lr = scalar(1e-3), step = scalar(variant == 3 ? 1.0 : 25.0), norm = scalar(7.0);
        Buffer p1(t, shape), mCodes1(DType::U8, shape), vCodes1(DType::U8, shape);
        Buffer mAbsmax1(DType::F32, {blocks}), vAbsmax1(DType::F32, {blocks});
        std::vector<Buffer *> inputs = {&p, &g, &mCodes, &mAbsmax, &vCodes, &vAbsmax, &lr, &step};
        if (variant == 1) inputs.push_back(&norm);
        std::vector<Buffer *> outputs =
            variant == 2 ? std::vector<Buffer *>{&p, &mCodes, &mAbsmax, &vCodes, &vAbsmax}
                         : std::vector<Buffer *>{&p1, &mCodes1, &mAbsmax1, &vCodes1, &vAbsmax1};
        expectCudaMatchesCpu("adamw8bit", inputs, outputs, adamAttrs(variant == 1 ? 1.0 : 0.0),
                             {Metric::Elementwise, {tolerance(t), 0.0, 1e-6, 0.0, 1e-6}});
      }
}

TEST(CudaOptimizerKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorView p = typeOnly(DType::F32, {50, 100}), s = typeOnly(DType::F32, {});
  TensorView codes = typeOnly(DType::U8, {50, 100}), absmax = typeOnly(DType::F32, {3});
  KernelAttrs config = adamAttrs(0.0);
  EXPECT_EQ(cudaBindError("adamw", {p, p, p, p, s}, {p, p, p}, config),
            bindError("adamw", {p, p, p, p, s}, {p, p, p}, config));
  KernelAttrs badBeta = config;
  badBeta.setFloat("beta1", 1.0);
  EXPECT_EQ(cudaBindError("adamw", {p, p, p, p, s, s}, {p, p, p}, badBeta),
            "adamw: attributes 'beta1' and 'beta2' must be in [0, 1)");
  std::vector<TensorView> outputs = {p, codes, absmax, codes, absmax};
  EXPECT_EQ(cudaBindError("adamw8bit", {p, p, codes, absmax, codes, typeOnly(DType::F32, {2}), s, s},
                          outputs, config),
            "adamw8bit: v_absmax must be f32[3], got f32[2]");
}

} // namespace
} // namespace llmc::test
