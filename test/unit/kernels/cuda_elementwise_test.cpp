//===- cuda_elementwise_test.cpp - cast and binding errors on the GPU ----===//
//
// add, mul, scale and sqrt are conformance cases (binary_test.cpp), run on
// the GPU by KernelConformance.CudaMatchesCpu. Here: their binding errors,
// and cast, compared as raw bytes, which also covers infinities, NaN,
// overflow to infinity and subnormals.

#include "CudaConformance.h"

#include "kernels/cuda/Device.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace llmc::test {
namespace {

TEST(CudaElementwise, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  std::vector<TensorView> notSuffix = {typeOnly(DType::F32, {3, 4}), typeOnly(DType::F32, {3})};
  std::vector<TensorView> out = {typeOnly(DType::F32, {3, 4})};
  for (const char *name : {"add", "mul"}) {
    EXPECT_EQ(cudaBindError(name, notSuffix, out), bindError(name, notSuffix, out));
    EXPECT_NE(bindError(name, notSuffix, out), "");
  }
  std::vector<TensorView> x = {typeOnly(DType::F32, {3, 4})};
  EXPECT_EQ(cudaBindError("scale", x, out), "scale: missing float attribute 'factor'");
  std::vector<TensorView> bf = {typeOnly(DType::BF16, {3, 4})};
  EXPECT_EQ(cudaBindError("sqrt", bf, bf), bindError("sqrt", bf, bf));
  EXPECT_NE(bindError("sqrt", bf, bf), "");
  std::vector<TensorView> ids = {typeOnly(DType::I32, {3, 4})};
  EXPECT_EQ(cudaBindError("cast", ids, out), "cast: x must be f32, bf16 or f16, got i32[3x4]");
  EXPECT_EQ(cudaBindError("cast", ids, out), bindError("cast", ids, out));
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

/// f32 values with every special case first: signed zeros, infinities,
/// NaN (unless `withNaN` is false), f16 overflow (65520 rounds to inf,
/// 65504 is the largest half), f16 subnormals and underflow, an f32
/// subnormal, ties for both narrower formats; then random values spread
/// over many binades.
Buffer castSource(int64_t n, uint64_t seed, bool withNaN) {
  RefTensor values = randomTensor({n}, seed);
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             65504.0,
                             65520.0,
                             -70000.0,
                             3.0e-5,
                             -5.96e-8,
                             2.0e-8,
                             6.1035e-5,
                             1.0e-40,
                             1.0 + 1.0 / 256.0,  // bf16 tie
                             1.0 + 1.0 / 2048.0, // f16 tie
                             3.0e38,
                             std::numeric_limits<double>::quiet_NaN()};
  size_t count = sizeof(specials) / sizeof(specials[0]) - (withNaN ? 0 : 1);
  for (int64_t i = 0; i < n; ++i) {
    if (static_cast<size_t>(i) < count)
      values.data[i] = specials[i];
    else
      values.data[i] *= std::exp2(static_cast<double>((i * 7) % 41) - 20.0);
  }
  Buffer b(DType::F32, {n});
  float *f = b.view().as<float>();
  for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(values.data[i]);
  return b;
}

/// `from` values of `source` (converted by the CPU when not f32).
Buffer castInput(const Buffer &source, DType from) {
  if (from == DType::F32)
    return source;
  Buffer converted(from, source.shape);
  Buffer in = source;
  EXPECT_TRUE(runKernel("cast", {&in}, {&converted}));
  return converted;
}

/// The GPU's cast of `x` to `to`, as bytes.
std::vector<uint8_t> castOnGpu(const Buffer &x, DType to) {
  Buffer out(to, x.shape);
  size_t inBytes = x.view().bytes(), outBytes = out.view().bytes();
  void *din = cuda::deviceAlloc(inBytes), *dout = cuda::deviceAlloc(outBytes);
  cuda::copyToDevice(din, x.view().data, inBytes);
  cuda::deviceFill(dout, 0xA5, outBytes);
  KernelArgs args;
  args.inputs.push_back(x.view());
  args.inputs.back().data = din;
  args.outputs.push_back(out.view());
  args.outputs.back().data = dout;
  std::string error;
  std::unique_ptr<Kernel> kernel = findKernel(Backend::CUDA, "cast")(args, error);
  EXPECT_TRUE(kernel) << error;
  std::vector<uint8_t> bytes(outBytes);
  if (kernel) {
    kernel->run(StepContext{});
    cuda::synchronize();
    cuda::copyToHost(bytes.data(), dout, outBytes);
  }
  cuda::deviceFree(din);
  cuda::deviceFree(dout);
  return bytes;
}

TEST(CudaElementwise, CastMatchesCpuBitForBit) {
  LLMC_REQUIRE_GPU();
  const DType types[] = {DType::F32, DType::BF16, DType::F16};
  for (int64_t n : {1, 7, 1000, 3 * 50257})
    for (DType from : types)
      for (DType to : types) {
        SCOPED_TRACE(std::string(dtypeName(from)) + " -> " + dtypeName(to) + " n " +
                     std::to_string(n));
        // NaN payloads narrow differently into bf16 (the CPU keeps the
        // payload, the GPU's __float2bfloat16_rn makes it canonical): both
        // are NaN, but not the same bits.
        Buffer x = castInput(castSource(n, 42 + n, to != DType::BF16), from);
        Buffer cpu(to, x.shape);
        ASSERT_TRUE(runKernel("cast", {&x}, {&cpu}));
        std::vector<uint8_t> gpu = castOnGpu(x, to);
        EXPECT_EQ(0, std::memcmp(gpu.data(), cpu.view().data, gpu.size()));
      }
}

} // namespace
} // namespace llmc::test
