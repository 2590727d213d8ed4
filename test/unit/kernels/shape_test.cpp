//===- shape_test.cpp - transpose, slice, pad, concat, reduce_sum, fill --===//
//
// Conformance cases (Conformance.h) of the data-movement kernels, exact
// (tolerance 0) in every dtype on both backends, and of reduce_sum, which
// uses the norm metric (a sum over rows can cancel); both backends add in
// double and round once, so f32 sums agree within 1e-6. The 1-byte and
// f16 paths of the CUDA kernels, which the test buffers cannot widen, are
// compared as raw bytes in cuda_shape_test.cpp.

#include "Conformance.h"
#include "ShapeCases.h"

#include <algorithm>

namespace llmc::test {
namespace {

const std::vector<DType> kAllTypes = {DType::F32, DType::BF16, DType::I32, DType::I64};

RefTensor valuesFor(std::vector<int64_t> shape, uint64_t seed, DType dtype) {
  if (dtype == DType::I32 || dtype == DType::I64)
    return randomIds(std::move(shape), seed, -50, 50);
  return randomTensor(std::move(shape), seed);
}

/// A call of one input and one output, compared exactly.
KernelCall moveCall(const RefTensor &x, DType dtype, std::vector<int64_t> outShape, KernelAttrs a,
                    ReferenceFn reference) {
  KernelCall k;
  k.input(x, dtype);
  k.output(dtype, std::move(outShape));
  k.attrs = std::move(a);
  k.reference = std::move(reference);
  k.tolerances = k.cudaTolerances = {0.0};
  return k;
}

std::vector<ConformanceCase> transposeCases() {
  std::vector<ConformanceCase> cases;
  for (DType dtype : kAllTypes)
    for (const TransposeCase &c : kTransposes) {
      std::string label =
          std::string(dtypeName(dtype)) + "_" + shapeLabel(c.shape) + "_to_" + shapeLabel(c.perm);
      cases.push_back({"transpose", label, [=] {
                         std::vector<int64_t> outShape;
                         for (int64_t p : c.perm) outShape.push_back(c.shape[p]);
                         KernelAttrs a;
                         a.setInts("permutation", c.perm);
                         return moveCall(valuesFor(c.shape, 901, dtype), dtype, outShape, a,
                                         [=](const std::vector<RefTensor> &in) {
                                           return std::vector<RefTensor>{
                                               ref::transpose(in[0], c.perm)};
                                         });
                       }});
    }
  return cases;
}

std::vector<ConformanceCase> slicePadCases() {
  std::vector<ConformanceCase> cases;
  for (DType dtype : kAllTypes)
    for (const BoxCase &c : kBoxes) {
      std::string label = std::string(dtypeName(dtype)) + "_" + shapeLabel(c.shape) + "_box_" +
                          shapeLabel(c.sizes) + "_at_" + shapeLabel(c.offsets);
      KernelAttrs a;
      a.setInts("offsets", c.offsets);
      cases.push_back({"slice", label, [=] {
                         return moveCall(valuesFor(c.shape, 911, dtype), dtype, c.sizes, a,
                                         [=](const std::vector<RefTensor> &in) {
                                           return std::vector<RefTensor>{
                                               ref::slice(in[0], c.offsets, c.sizes)};
                                         });
                       }});
      cases.push_back({"pad", label, [=] {
                         return moveCall(valuesFor(c.sizes, 912, dtype), dtype, c.shape, a,
                                         [=](const std::vector<RefTensor> &in) {
                                           return std::vector<RefTensor>{
                                               ref::pad(in[0], c.offsets, c.shape)};
                                         });
                       }});
    }
  return cases;
}

/// Three pieces of [3, 5, 7] along `dim`, `base + 3·i` wide (base 0: an
/// empty piece among them).
ConformanceCase concatCase(DType dtype, int64_t dim, int64_t base) {
  std::string label =
      std::string(dtypeName(dtype)) + "_dim" + std::to_string(dim) + "_base" + std::to_string(base);
  return {"concat", caseLabel(label), [=] {
            KernelCall k;
            const size_t axis = dim < 0 ? 2 : static_cast<size_t>(dim);
            std::vector<int64_t> outShape = {3, 5, 7};
            outShape[axis] = 0;
            for (int64_t i = 0; i < 3; ++i) {
              std::vector<int64_t> shape = {3, 5, 7};
              shape[axis] = base + i * 3;
              outShape[axis] += shape[axis];
              k.input(valuesFor(shape, 920 + i, dtype), dtype);
            }
            k.output(dtype, outShape);
            k.attrs = attrs({}, {{"dim", dim}});
            k.reference = [dim](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{ref::concat(in, dim)};
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

/// `count` pieces of `shape` joined along the last dimension (one piece: a
/// copy; three of [2, 64, 768]: GPT-2's q, k, v).
ConformanceCase concatLastCase(DType dtype, const std::vector<int64_t> &shape, int count) {
  std::string label =
      std::string(dtypeName(dtype)) + "_" + std::to_string(count) + "x" + shapeLabel(shape);
  return {"concat", label, [=] {
            KernelCall k;
            std::vector<int64_t> outShape = shape;
            outShape.back() *= count;
            for (int i = 0; i < count; ++i) k.input(valuesFor(shape, 930 + i, dtype), dtype);
            k.output(dtype, outShape);
            k.attrs = attrs({}, {{"dim", -1}});
            k.reference = [](const std::vector<RefTensor> &in) {
              return std::vector<RefTensor>{ref::concat(in, -1)};
            };
            k.tolerances = k.cudaTolerances = {0.0};
            return k;
          }};
}

std::vector<ConformanceCase> concatCases() {
  std::vector<ConformanceCase> cases;
  for (DType dtype : kAllTypes)
    for (int64_t dim : {0, 1, 2, -1})
      for (int64_t base : {0, 1, 8}) cases.push_back(concatCase(dtype, dim, base));
  for (DType dtype : kFloatTypes) {
    cases.push_back(concatLastCase(dtype, {37, 129}, 1));
    cases.push_back(concatLastCase(dtype, {2, 64, 768}, 3));
  }
  return cases;
}

struct SumCase {
  std::vector<int64_t> shape, suffix;
};

// Narrow suffixes (rows split into chunks and a second pass), wide ones (one
// pass), the whole tensor (a scalar), nothing reduced, no rows, and the
// bias gradients of GPT-2 (B·T rows of 768 and 3072).
const std::vector<SumCase> kSums = {
    {{3, 7, 13}, {13}}, {{3, 7, 13}, {7, 13}},   {{3, 7, 13}, {3, 7, 13}},
    {{3, 7, 13}, {}},   {{5000, 3}, {3}},        {{600, 5000}, {5000}},
    {{70000}, {}},      {{1, 1}, {1}},           {{37, 1}, {1}},
    {{1, 129}, {129}},  {{37, 1000}, {1000}},    {{3, 50257}, {50257}},
    {{100000, 7}, {7}}, {{4, 1024, 768}, {768}}, {{1024, 3072}, {3072}},
    {{0, 5}, {5}},
};

std::vector<ConformanceCase> reduceSumCases() {
  std::vector<ConformanceCase> cases;
  uint64_t seed = 100;
  for (DType dtype : kFloatTypes)
    for (const SumCase &c : kSums) {
      std::string label =
          std::string(dtypeName(dtype)) + "_" + shapeLabel(c.shape) + "_to_" + shapeLabel(c.suffix);
      const uint64_t caseSeed = ++seed;
      cases.push_back({"reduce_sum", label, [=] {
                         KernelCall k;
                         k.input(randomTensor(c.shape, caseSeed), dtype);
                         k.output(dtype, c.suffix);
                         k.reference = [=](const std::vector<RefTensor> &in) {
                           return std::vector<RefTensor>{ref::reduceSum(in[0], c.suffix)};
                         };
                         k.metric = k.cudaMetric = Metric::Norm;
                         // f32 sums are rounded once from double on both backends.
                         if (dtype == DType::F32)
                           k.cudaTolerances = {1e-6};
                         return k;
                       }});
    }
  return cases;
}

/// fill writes `value` (exact in every float type) to every element; copy
/// moves every byte of a same-sized buffer of any shape.
std::vector<ConformanceCase> fillCopyCases() {
  std::vector<ConformanceCase> cases;
  for (DType dtype : kFloatTypes)
    for (int64_t n : {1, 7, 1000, 1 << 20 | 3})
      cases.push_back({"fill", std::string(dtypeName(dtype)) + "_" + std::to_string(n), [=] {
                         KernelCall k;
                         k.output(dtype, {n});
                         k.attrs = attrs({{"value", -1.25}});
                         k.reference = [n](const std::vector<RefTensor> &) {
                           RefTensor t = RefTensor::zeros({n});
                           std::fill(t.data.begin(), t.data.end(), -1.25);
                           return std::vector<RefTensor>{t};
                         };
                         k.tolerances = k.cudaTolerances = {0.0};
                         return k;
                       }});
  struct CopyCase {
    DType dtype;
    std::vector<int64_t> from, to;
  };
  for (const CopyCase &c :
       {CopyCase{DType::F32, {6, 35}, {210}}, CopyCase{DType::F32, {123, 45}, {45, 123}},
        CopyCase{DType::BF16, {3, 1000}, {3000}}, CopyCase{DType::I32, {5, 4}, {20}}})
    cases.push_back({"copy", std::string(dtypeName(c.dtype)) + "_" + shapeLabel(c.from), [=] {
                       return moveCall(valuesFor(c.from, 51, c.dtype), c.dtype, c.to, {},
                                       [to = c.to](const std::vector<RefTensor> &in) {
                                         RefTensor out = in[0];
                                         out.shape = to;
                                         return std::vector<RefTensor>{out};
                                       });
                     }});
  // ZeRO-Offload's copies between device and host memory: the same bytes
  // and shape.
  for (const char *name : {"copy_to_host", "copy_to_device"})
    for (const CopyCase &c : {CopyCase{DType::F32, {6, 35}, {6, 35}},
                              CopyCase{DType::BF16, {3, 1000}, {3, 1000}}})
      cases.push_back({name, std::string(dtypeName(c.dtype)) + "_" + shapeLabel(c.from), [=] {
                         return moveCall(valuesFor(c.from, 52, c.dtype), c.dtype, c.to, {},
                                         [](const std::vector<RefTensor> &in) { return in; });
                       }});
  return cases;
}

LLMC_CONFORMANCE_CASES(Transpose, transposeCases);
LLMC_CONFORMANCE_CASES(SlicePad, slicePadCases);
LLMC_CONFORMANCE_CASES(Concat, concatCases);
LLMC_CONFORMANCE_CASES(ReduceSum, reduceSumCases);
LLMC_CONFORMANCE_CASES(FillCopy, fillCopyCases);

} // namespace
} // namespace llmc::test
