//===- cuda_optimizer_test.cpp - CUDA optimizer steps beyond conformance --===//
//
// adamw, adamw8bit and multi_tensor_adamw against the CPU are conformance
// cases (optimizer_test.cpp, adamw8bit_test.cpp). Here: the one-launch
// update of a tensor list equals bit for bit the CUDA adamw and cast
// kernels run tensor by tensor (the same device code per element), a
// non-finite norm keeps the state, and binding errors match the CPU's.

#include "CudaConformance.h"

#include <cmath>
#include <limits>

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

/// One tensor of a multi_tensor_adamw conformance call.
struct MultiSpec {
  std::vector<int64_t> shape;
  DType param, grad;
  int castTo; ///< -1: no cast, else a DType
  bool decay;
};

/// Sizes across the CUDA kernel's chunks (16·256 elements) and the CPU's
/// (2^15): one element, odd ones, many chunks, GPT-2's MLP weight; every
/// dtype combination the optimizer makes.
const std::vector<MultiSpec> kMultiSpecs = {
    {{1}, DType::F32, DType::F32, static_cast<int>(DType::BF16), false},
    {{33, 7}, DType::F32, DType::BF16, static_cast<int>(DType::BF16), true},
    {{4097}, DType::F32, DType::F32, -1, true},
    {{768, 3072}, DType::F32, DType::F32, static_cast<int>(DType::BF16), true},
    {{5, 2049}, DType::F32, DType::F16, static_cast<int>(DType::F16), true},
    {{129}, DType::BF16, DType::BF16, -1, false},
    {{3, 3}, DType::F16, DType::F16, -1, true}};

/// Buffers and attributes of one multi_tensor_adamw call over kMultiSpecs.
struct MultiBuffers {
  std::vector<Buffer> p, g, m, v, p1, m1, v1, casts;
  Buffer lr = scalar(3e-4), step = scalar(17.0), norm = scalar(40.0), lossScale = scalar(1.0);
  KernelAttrs attrs = adamAttrs(1.0);

  explicit MultiBuffers(uint64_t seed) {
    std::vector<int64_t> decay, castOf;
    for (size_t i = 0; i < kMultiSpecs.size(); ++i) {
      const MultiSpec &t = kMultiSpecs[i];
      RefTensor vValues = randomTensor(t.shape, ++seed, 1e-3);
      for (double &x : vValues.data) x = std::abs(x);
      p.push_back(Buffer::of(randomTensor(t.shape, ++seed), t.param));
      g.push_back(Buffer::of(randomTensor(t.shape, ++seed, 0.3), t.grad));
      m.push_back(Buffer::of(randomTensor(t.shape, ++seed, 0.03), t.param));
      v.push_back(Buffer::of(vValues, t.param));
      p1.emplace_back(t.param, t.shape), m1.emplace_back(t.param, t.shape);
      v1.emplace_back(t.param, t.shape);
      decay.push_back(t.decay ? 1 : 0);
      if (t.castTo >= 0) {
        castOf.push_back(static_cast<int64_t>(i));
        casts.emplace_back(static_cast<DType>(t.castTo), t.shape);
      }
    }
    attrs.setInts("decay", decay);
    attrs.setInts("cast_of", castOf);
  }
  std::vector<Buffer *> inputs(bool withNorm, bool withScale) {
    std::vector<Buffer *> in;
    for (auto *list : {&p, &g, &m, &v})
      for (Buffer &b : *list) in.push_back(&b);
    in.push_back(&lr), in.push_back(&step);
    if (withNorm) in.push_back(&norm);
    if (withScale) in.push_back(&lossScale);
    const int64_t n = static_cast<int64_t>(p.size());
    attrs.setInts("operand_segments", {n, n, n, n, 1, 1, withNorm ? 1 : 0, withScale ? 1 : 0});
    return in;
  }
  std::vector<Buffer *> outputs(bool inPlace) {
    std::vector<Buffer *> out;
    for (auto *list : inPlace ? std::vector<std::vector<Buffer> *>{&p, &m, &v}
                              : std::vector<std::vector<Buffer> *>{&p1, &m1, &v1})
      for (Buffer &b : *list) out.push_back(&b);
    for (Buffer &b : casts) out.push_back(&b);
    return out;
  }
};

/// The CUDA adamw and cast kernels tensor by tensor on `b`'s inputs; the
/// results in multi_tensor_adamw's output order.
std::vector<RefTensor> cudaPerTensor(MultiBuffers &b, bool withNorm, bool withScale) {
  std::vector<RefTensor> ps, ms, vs, casts;
  const Comparison any{Metric::Norm, {1e-2}};
  for (size_t i = 0; i < kMultiSpecs.size(); ++i) {
    const MultiSpec &t = kMultiSpecs[i];
    Buffer p = b.p[i], m = b.m[i], v = b.v[i], g = b.g[i];
    if (t.grad != t.param) {
      Buffer wide(t.param, t.shape);
      g = Buffer::of(expectCudaMatchesCpu("cast", {&g}, {&wide}, {}, any).at(0), t.param);
    }
    std::vector<Buffer *> in = {&p, &g, &m, &v, &b.lr, &b.step};
    if (withNorm) in.push_back(&b.norm);
    if (withScale) in.push_back(&b.lossScale);
    KernelAttrs a = b.attrs;
    a.setFloat("weight_decay", t.decay ? 0.1 : 0.0);
    Buffer p1(t.param, t.shape), m1(t.param, t.shape), v1(t.param, t.shape);
    std::vector<RefTensor> r = expectCudaMatchesCpu("adamw", in, {&p1, &m1, &v1}, a, any);
    ps.push_back(r.at(0)), ms.push_back(r.at(1)), vs.push_back(r.at(2));
    if (t.castTo >= 0) {
      Buffer master = Buffer::of(r.at(0), t.param), low(static_cast<DType>(t.castTo), t.shape);
      casts.push_back(expectCudaMatchesCpu("cast", {&master}, {&low}, {}, any).at(0));
    }
  }
  std::vector<RefTensor> all = ps;
  all.insert(all.end(), ms.begin(), ms.end());
  all.insert(all.end(), vs.begin(), vs.end());
  all.insert(all.end(), casts.begin(), casts.end());
  return all;
}

TEST(CudaStepMultiTensorAdamW, IsThePerTensorKernelsBitForBit) {
  LLMC_REQUIRE_GPU();
  for (int variant = 0; variant < 4; ++variant) { // norm, no norm, loss scale, in place
    SCOPED_TRACE("variant " + std::to_string(variant));
    const bool withNorm = variant != 1, withScale = variant == 2, inPlace = variant == 3;
    MultiBuffers b(10600 + 100 * variant);
    const std::vector<RefTensor> expected = cudaPerTensor(b, withNorm, withScale);
    std::vector<Buffer *> outputs = b.outputs(inPlace);
    std::vector<double> tolerances;
    for (Buffer *o : outputs) tolerances.push_back(tolerance(o->dtype));
    std::vector<RefTensor> got = expectCudaMatchesCpu(
        "multi_tensor_adamw", b.inputs(withNorm, withScale), outputs, b.attrs,
        {Metric::Elementwise, tolerances});
    ASSERT_EQ(got.size(), expected.size());
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].data, expected[k].data) << "output " << k;
  }
}

TEST(CudaStepMultiTensorAdamW, NonFiniteNormKeepsStateAndCastsTheMasters) {
  LLMC_REQUIRE_GPU();
  for (bool inPlace : {false, true}) {
    SCOPED_TRACE(inPlace ? "in place" : "out of place");
    MultiBuffers b(10900);
    b.norm = scalar(std::numeric_limits<double>::infinity());
    std::vector<Buffer *> outputs = b.outputs(inPlace);
    std::vector<RefTensor> got = expectCudaMatchesCpu(
        "multi_tensor_adamw", b.inputs(true, false), outputs, b.attrs,
        {Metric::Elementwise, {0.0}});
    const size_t n = kMultiSpecs.size();
    ASSERT_EQ(got.size(), 3 * n + b.casts.size());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i].data, b.p[i].toRef().data) << "param " << i;
      EXPECT_EQ(got[n + i].data, b.m[i].toRef().data) << "m " << i;
      EXPECT_EQ(got[2 * n + i].data, b.v[i].toRef().data) << "v " << i;
    }
  }
}

TEST(CudaStepMultiTensorAdamW, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  TensorView p = typeOnly(DType::F32, {50, 100}), s = typeOnly(DType::F32, {});
  KernelAttrs config = adamAttrs(0.0);
  config.setInts("decay", {1});
  config.setInts("cast_of", {0});
  config.setInts("operand_segments", {1, 1, 1, 1, 1, 1, 0, 0});
  TensorView low = typeOnly(DType::BF16, {50, 100});
  std::vector<TensorView> in = {p, p, p, p, s, s};
  EXPECT_EQ(cudaBindError("multi_tensor_adamw", in, {p, p, p, low}, config), "");
  KernelAttrs badSegments = config;
  badSegments.setInts("operand_segments", {1, 1, 1, 1, 1, 1, 1, 0});
  EXPECT_EQ(cudaBindError("multi_tensor_adamw", in, {p, p, p, low}, badSegments),
            bindError("multi_tensor_adamw", in, {p, p, p, low}, badSegments));
  EXPECT_EQ(cudaBindError("multi_tensor_adamw", in, {p, p, p, typeOnly(DType::BF16, {5})}, config),
            bindError("multi_tensor_adamw", in, {p, p, p, typeOnly(DType::BF16, {5})}, config));
}

} // namespace
} // namespace llmc::test
