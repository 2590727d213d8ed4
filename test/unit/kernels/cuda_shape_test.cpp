//===- cuda_shape_test.cpp - transpose, slice, pad, concat on the GPU -----===//
//
// Data movement is exact: every dtype is compared bit for bit with the CPU.
// f32, bf16, i32 and i64 are conformance cases (shape_test.cpp); here the
// 1-byte element path (u8) and f16 are compared as raw bytes, over the same
// shapes, and binding errors with the CPU's.

#include "CudaConformance.h"
#include "ShapeCases.h"

#include "kernels/cuda/Device.h"

#include <cstring>

namespace llmc::test {
namespace {

/// A buffer of any dtype filled with pseudo-random bytes.
Buffer randomBytes(DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  Buffer b(dtype, std::move(shape));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t &word : b.storage) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    word = state;
  }
  return b;
}

/// Runs `name` on both backends and compares the outputs' bytes.
void expectSameBytes(const std::string &name, const std::vector<Buffer *> &inputs, Buffer &out,
                     const KernelAttrs &attrs) {
  Buffer cpu = out;
  ASSERT_TRUE(runKernel(name, inputs, {&cpu}, attrs));
  const size_t bytes = out.view().bytes();
  std::vector<void *> device;
  KernelArgs args;
  for (Buffer *b : inputs) {
    device.push_back(cuda::deviceAlloc(b->view().bytes()));
    cuda::copyToDevice(device.back(), b->view().data, b->view().bytes());
    TensorView v = b->view();
    v.data = device.back();
    args.inputs.push_back(v);
  }
  device.push_back(cuda::deviceAlloc(bytes));
  cuda::deviceFill(device.back(), 0xA5, bytes);
  TensorView o = out.view();
  o.data = device.back();
  args.outputs.push_back(o);
  args.attrs = attrs;
  std::string error;
  std::unique_ptr<Kernel> kernel = findKernel(Backend::CUDA, name)(args, error);
  EXPECT_TRUE(kernel) << error;
  std::vector<uint8_t> got(bytes);
  if (kernel) {
    kernel->run(StepContext{});
    cuda::synchronize();
    cuda::copyToHost(got.data(), device.back(), bytes);
  }
  kernel.reset();
  for (void *p : device) cuda::deviceFree(p);
  EXPECT_EQ(0, std::memcmp(got.data(), cpu.view().data, bytes)) << name << " bytes differ";
}

TEST(CudaShape, TransposeOfOneAndTwoByteElements) {
  LLMC_REQUIRE_GPU();
  for (DType dtype : {DType::U8, DType::F16})
    for (const TransposeCase &c : kTransposes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " rank " + std::to_string(c.shape.size()));
      Buffer in = randomBytes(dtype, c.shape, 77);
      std::vector<int64_t> outShape;
      for (int64_t p : c.perm) outShape.push_back(c.shape[p]);
      Buffer out(dtype, outShape);
      KernelAttrs a;
      a.setInts("permutation", c.perm);
      expectSameBytes("transpose", {&in}, out, a);
    }
}

TEST(CudaShape, SliceAndPadOfOneAndTwoByteElements) {
  LLMC_REQUIRE_GPU();
  for (DType dtype : {DType::U8, DType::F16})
    for (const BoxCase &c : kBoxes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " shape " + shapeString(c.shape) + " box " +
                   shapeString(c.sizes));
      KernelAttrs a;
      a.setInts("offsets", c.offsets);
      Buffer in = randomBytes(dtype, c.shape, 78), sliced(dtype, c.sizes);
      expectSameBytes("slice", {&in}, sliced, a);
      Buffer small = randomBytes(dtype, c.sizes, 79), padded(dtype, c.shape);
      expectSameBytes("pad", {&small}, padded, a);
    }
}

TEST(CudaShape, BindingErrorsMatchTheCpu) {
  LLMC_REQUIRE_GPU();
  KernelAttrs perm;
  perm.setInts("permutation", {0, 0});
  std::vector<TensorView> x = {typeOnly(DType::F32, {3, 4})};
  std::vector<TensorView> out = {typeOnly(DType::F32, {4, 3})};
  EXPECT_EQ(cudaBindError("transpose", x, out, perm),
            "transpose: attribute 'permutation' [0, 0] is not a permutation of rank 2");
  EXPECT_EQ(cudaBindError("transpose", x, out, perm), bindError("transpose", x, out, perm));

  KernelAttrs offsets;
  offsets.setInts("offsets", {1, 2});
  std::vector<TensorView> big = {typeOnly(DType::F32, {3, 4})};
  EXPECT_EQ(cudaBindError("slice", x, big, offsets), bindError("slice", x, big, offsets));
  EXPECT_NE(bindError("slice", x, big, offsets), "");
  EXPECT_EQ(cudaBindError("pad", big, x, offsets), bindError("pad", big, x, offsets));
  EXPECT_NE(bindError("pad", big, x, offsets), "");

  std::vector<TensorView> parts = {typeOnly(DType::F32, {3, 4}), typeOnly(DType::BF16, {3, 4})};
  std::vector<TensorView> joined = {typeOnly(DType::F32, {6, 4})};
  KernelAttrs dim0 = attrs({}, {{"dim", 0}});
  EXPECT_EQ(cudaBindError("concat", parts, joined, dim0), bindError("concat", parts, joined, dim0));
  EXPECT_NE(bindError("concat", parts, joined, dim0), "");
  EXPECT_EQ(cudaBindError("concat", x, x), "concat: missing int attribute 'dim'");
}

} // namespace
} // namespace llmc::test
