//===- shape_test.cpp - transpose, slice, pad, concat, reduce_sum ---------===//
//
// Data movement is exact (tolerance 0) in every dtype; reduce_sum uses the
// norm metric (a sum over rows can cancel).

#include "KernelTest.h"

namespace llmc::test {
namespace {

const std::vector<DType> kAllTypes = {DType::F32, DType::BF16, DType::I32, DType::I64};

RefTensor valuesFor(std::vector<int64_t> shape, uint64_t seed, DType dtype) {
  if (dtype == DType::I32 || dtype == DType::I64) return randomIds(std::move(shape), seed, -50, 50);
  return roundTo(randomTensor(std::move(shape), seed), dtype);
}

TEST(ShapeKernels, TransposeMatchesReference) {
  struct Case {
    std::vector<int64_t> shape, perm;
  };
  const Case cases[] = {
      {{2, 7, 3, 13}, {0, 2, 1, 3}}, {{2, 7, 3, 13}, {3, 1, 0, 2}}, {{33, 65}, {1, 0}}, {{7}, {0}},
      {{1, 5, 1, 3}, {2, 3, 0, 1}},  {{4, 1, 6}, {0, 2, 1}}};
  for (DType dtype : kAllTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " rank " + std::to_string(c.shape.size()));
      RefTensor x = valuesFor(c.shape, 901, dtype);
      RefTensor expected = ref::transpose(x, c.perm);
      Buffer in = Buffer::of(x, dtype), out(dtype, expected.shape);
      out.poison();
      KernelAttrs a;
      a.setInts("permutation", c.perm);
      ASSERT_TRUE(runKernel("transpose", {&in}, {&out}, a));
      EXPECT_EQ(out.toRef().data, expected.data);
    }
}

TEST(ShapeKernels, SliceAndPadMatchReferenceAndInvertEachOther) {
  struct Case {
    std::vector<int64_t> shape, offsets, sizes;
  };
  const Case cases[] = {{{4, 7, 39}, {0, 0, 13}, {4, 7, 13}},
                        {{4, 7, 39}, {1, 2, 0}, {2, 5, 39}},
                        {{13}, {5}, {7}},
                        {{3, 5, 7}, {2, 4, 6}, {1, 1, 1}}};
  for (DType dtype : kAllTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " rank " + std::to_string(c.shape.size()));
      RefTensor x = valuesFor(c.shape, 911, dtype);
      KernelAttrs a;
      a.setInts("offsets", c.offsets);
      Buffer in = Buffer::of(x, dtype), sliced(dtype, c.sizes), padded(dtype, c.shape);
      sliced.poison(), padded.poison();
      ASSERT_TRUE(runKernel("slice", {&in}, {&sliced}, a));
      RefTensor expected = ref::slice(x, c.offsets, c.sizes);
      EXPECT_EQ(sliced.toRef().data, expected.data);
      ASSERT_TRUE(runKernel("pad", {&sliced}, {&padded}, a));
      EXPECT_EQ(padded.toRef().data, ref::pad(expected, c.offsets, c.shape).data);
    }
}

TEST(ShapeKernels, ConcatMatchesReference) {
  for (DType dtype : kAllTypes)
    for (int64_t dim : {0, 1, 2, -1}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " dim " + std::to_string(dim));
      std::vector<RefTensor> xs;
      std::vector<Buffer> buffers;
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<int64_t> shape = {3, 5, 7};
        shape[dim < 0 ? 2 : dim] = 2 + i * 3;
        xs.push_back(valuesFor(shape, 920 + i, dtype));
        buffers.push_back(Buffer::of(xs.back(), dtype));
      }
      RefTensor expected = ref::concat(xs, dim);
      std::vector<Buffer *> inputs;
      for (Buffer &b : buffers) inputs.push_back(&b);
      Buffer out(dtype, expected.shape);
      out.poison();
      ASSERT_TRUE(runKernel("concat", inputs, {&out}, attrs({}, {{"dim", dim}})));
      EXPECT_EQ(out.toRef().data, expected.data);
    }
}

TEST(ShapeKernels, ReduceSumMatchesReference) {
  struct Case {
    std::vector<int64_t> shape, suffix;
  };
  const Case cases[] = {{{3, 7, 13}, {13}}, {{3, 7, 13}, {7, 13}}, {{3, 7, 13}, {3, 7, 13}},
                        {{3, 7, 13}, {}},   {{5000, 3}, {3}},      {{600, 5000}, {5000}},
                        {{70000}, {}}};
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " rank " + std::to_string(c.shape.size()) +
                   " -> " + std::to_string(c.suffix.size()));
      RefTensor x = roundTo(randomTensor(c.shape, 931), dtype);
      Buffer in = Buffer::of(x, dtype), out(dtype, c.suffix);
      out.poison();
      ASSERT_TRUE(runKernel("reduce_sum", {&in}, {&out}));
      EXPECT_CLOSE(out.toRef(), ref::reduceSum(x, c.suffix), Metric::Norm, tolerance(dtype));
    }
}

} // namespace
} // namespace llmc::test
