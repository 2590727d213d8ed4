//===- cuda_quant_test.cpp - CUDA QAT and NF4 kernels against the CPU -----===//
//
// Model-sized qat_observe, qat_fake_quant and qat_fake_quant_grad (the
// observers' multi-piece and multi-band reductions), outlier columns and
// pieces of qat_dequantize_nf4 on the GPU against the CPU kernels, on the
// same stored inputs (the odd-sized cases of every QAT kernel are
// conformance cases: quant_test.cpp, matmul_nf4_test.cpp). Tolerances:
//  - observe: 0 (a max is exact, whatever the order);
//  - fake_quant: 0. Both backends decide the grid with the same fp32
//    operations (x / scale as an IEEE division, round half to even, the
//    same clamps) and none of them is a multiply-add a compiler could fuse,
//    so every element is the same fp32 value, rounded to bf16 the same way;
//  - fake_quant_grad: 0 (dx is dy or 0);
//  - dequantize_nf4: 0 (the CPU is built without FMA contraction, the GPU
//    rounds each operation explicitly).
//
// Shapes: model-sized tensors ([8192, 768] activations, GPT-2's [768, 3072]
// weight), which take the observers' multi-piece and multi-band reductions.
//
//===----------------------------------------------------------------------===//

#include "CudaConformance.h"
#include "QuantGroupings.h"

#include "common/QuantScheme.h"

#include <cmath>
#include <random>

namespace llmc::test {
namespace {

using quant::Format;
using quant::Granularity;
using quant::makeScheme;
using quant::Scheme;

const Comparison kExact{Metric::Elementwise, {0.0}};

KernelAttrs schemeAttrs(const Scheme &s) {
  KernelAttrs a = attrs({}, {{"format", static_cast<int64_t>(s.format)},
                             {"granularity", static_cast<int64_t>(s.granularity)},
                             {"axis", s.axis},
                             {"block", s.block},
                             {"symmetric", s.symmetric ? 1 : 0}});
  if (s.outlier > 0)
    a.setFloat("outlier", s.outlier);
  return a;
}

std::string describe(const Scheme &s, const std::vector<int64_t> &shape, DType dtype) {
  std::string out = std::string(quant::formatName(s.format)) + " " + dtypeName(dtype) + " [";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  out += "]";
  switch (s.granularity) {
  case Granularity::Tensor: out += " tensor"; break;
  case Granularity::Channel: out += " channel(axis " + std::to_string(s.axis) + ")"; break;
  case Granularity::Block: out += " block" + std::to_string(s.block); break;
  }
  if (s.outlier > 0)
    out += " outlier " + std::to_string(s.outlier);
  return out + (s.symmetric ? " symmetric" : " asymmetric");
}

/// Normal values whose spread changes by row (1/4 to 4), so groups differ.
RefTensor testData(const std::vector<int64_t> &shape, uint64_t seed) {
  RefTensor x = randomTensor(shape, seed);
  int64_t width = shape.back();
  for (int64_t i = 0; i < x.numel(); ++i) x.data[i] *= std::exp2((i / width) % 5 - 2);
  return x;
}

//===----------------------------------------------------------------------===//
// qat_observe
//===----------------------------------------------------------------------===//

void expectObserveMatches(const std::vector<int64_t> &shape, const Scheme &s, DType dtype,
                          uint64_t seed) {
  SCOPED_TRACE(describe(s, shape, dtype));
  Buffer x = Buffer::of(testData(shape, seed), dtype);
  Buffer range(DType::F32, {quant::groupCount(s, shape), 2});
  expectCudaMatchesCpu("qat_observe", {&x}, {&range}, schemeAttrs(s), kExact);
}

TEST(CudaQuant, ObserveModelSizedMatchesCpu) {
  LLMC_REQUIRE_GPU();
  // [8192, 768]: per tensor 768 pieces, per channel of the last axis 256
  // bands of rows; [768, 3072]: GPT-2's MLP weight.
  uint64_t seed = 200;
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{8192, 768}, {768, 3072}})
    for (DType dtype : kFloatTypes)
      for (const Scheme &s : groupings(shape, Format::Int8, true, {64}))
        expectObserveMatches(shape, s, dtype, ++seed);
}

//===----------------------------------------------------------------------===//
// qat_fake_quant, qat_fake_quant_grad
//===----------------------------------------------------------------------===//

/// Forward and gradient of scheme s on x with three ranges: the observed
/// one, half of it (clipping and saturation), and the observed one with
/// group 0 empty ((0, 0): y = 0, every nonzero x clipped).
void expectFakeQuantMatches(const std::vector<int64_t> &shape, const Scheme &s, DType dtype,
                            uint64_t seed) {
  SCOPED_TRACE(describe(s, shape, dtype));
  RefTensor xr = roundTo(testData(shape, seed), dtype);
  Buffer x = Buffer::of(xr, dtype), dy = Buffer::of(randomTensor(shape, seed + 1), dtype);
  RefTensor observed = ref::quantObserve(xr, s);
  RefTensor half = observed, empty = observed;
  for (double &value : half.data) value *= 0.5;
  empty.data[0] = empty.data[1] = 0.0;
  for (const RefTensor *range : {&observed, &half, &empty}) {
    Buffer r = Buffer::of(*range, DType::F32);
    Buffer y(dtype, shape), dx(dtype, shape);
    expectCudaMatchesCpu("qat_fake_quant", {&x, &r}, {&y}, schemeAttrs(s), kExact);
    expectCudaMatchesCpu("qat_fake_quant_grad", {&x, &r, &dy}, {&dx}, schemeAttrs(s), kExact);
  }
}

TEST(CudaQuant, FakeQuantModelSizedMatchesCpu) {
  LLMC_REQUIRE_GPU();
  const std::vector<int64_t> shape = {8192, 768};
  uint64_t seed = 400;
  for (DType dtype : kFloatTypes)
    for (auto [format, symmetric] : std::vector<std::pair<Format, bool>>{{Format::Int8, true},
                                                                         {Format::Int4, false},
                                                                         {Format::Fp8E4M3, true},
                                                                         {Format::Nf4, true}})
      for (const Scheme &s : groupings(shape, format, symmetric, {64}))
        expectFakeQuantMatches(shape, s, dtype, seed += 2);
}

//===----------------------------------------------------------------------===//
// Outlier columns
//===----------------------------------------------------------------------===//

/// testData scaled under the threshold t, with `count` planted outlier
/// columns (2–5·t) and one column whose largest |x| is exactly t (kept).
RefTensor dataWithOutliers(const std::vector<int64_t> &shape, double t, int count, uint64_t seed) {
  RefTensor x = testData(shape, seed);
  int64_t width = shape.back(), rows = x.numel() / width;
  double amax = 0.0;
  for (double v : x.data) amax = std::max(amax, std::abs(v));
  for (double &v : x.data) v *= 0.9 * t / amax;
  for (int k = 0; k < count; ++k) {
    int64_t column = (k * 37 + 5) % width, row = (k * 7919 + 3) % rows;
    x.data[row * width + column] = (k % 2 ? -1.0 : 1.0) * t * (2.0 + k % 4);
  }
  x.data[(rows - 1) * width + (width - 2)] = -t;
  return x;
}

TEST(CudaQuant, OutlierColumnsMatchCpu) {
  LLMC_REQUIRE_GPU();
  const double t = 6.0;
  uint64_t seed = 500;
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{37, 128}, {3, 5, 64}, {512, 768}})
    for (DType dtype : kFloatTypes)
      for (int count : {0, 3, 9}) {
        RefTensor xr = roundTo(dataWithOutliers(shape, t, count, ++seed), dtype);
        const int64_t last = static_cast<int64_t>(shape.size()) - 1;
        RefTensor columns =
            ref::quantObserve(xr, makeScheme(Format::Int8, Granularity::Channel, last));
        Buffer x = Buffer::of(xr, dtype), dy = Buffer::of(randomTensor(shape, ++seed), dtype),
               cb = Buffer::of(columns, DType::F32);
        for (Format format : {Format::Int8, Format::Int4})
          for (bool symmetric : {true, false})
            for (int64_t axis : {int64_t(-1), int64_t(0), last}) {
              Scheme s = axis < 0 ? makeScheme(format, Granularity::Tensor, 0, 0, symmetric)
                                  : makeScheme(format, Granularity::Channel, axis, 0, symmetric);
              s.outlier = t;
              SCOPED_TRACE(describe(s, shape, dtype) + ", " + std::to_string(count) +
                           " outlier columns");
              // Per channel of the last axis an outlier column is a group
              // with no elements, whose range is [−inf, −inf], which the
              // comparison cannot take: observe that scheme without outliers.
              const bool perColumn = axis == last;
              if (!perColumn || count == 0) {
                Buffer range(DType::F32, {quant::groupCount(s, shape), 2});
                expectCudaMatchesCpu("qat_observe", {&x, &cb}, {&range}, schemeAttrs(s), kExact);
              }
              Buffer r = Buffer::of(ref::quantObserve(xr, s, &columns), DType::F32);
              Buffer y(dtype, shape), dx(dtype, shape);
              expectCudaMatchesCpu("qat_fake_quant", {&x, &r, &cb}, {&y}, schemeAttrs(s), kExact);
              expectCudaMatchesCpu("qat_fake_quant_grad", {&x, &r, &dy, &cb}, {&dx}, schemeAttrs(s),
                                   kExact);
            }
      }
}

//===----------------------------------------------------------------------===//
// qat_dequantize_nf4
//===----------------------------------------------------------------------===//

/// A tensor-parallel piece: rank 1's of GPT-2's fused QKV columns in three
/// chunks over two ranks, and rank 1's of a row split over four, whose
/// blocks' scales the kernel finds by their index in the whole weight;
/// int8 and E4M3 absmax levels.
TEST(CudaQuant, DequantizeNf4PieceMatchesCpu) {
  LLMC_REQUIRE_GPU();
  struct Case {
    std::vector<int64_t> piece, whole, chunks, offset;
  };
  const int64_t block = 64;
  const std::vector<Case> cases = {{{768, 1152}, {768, 2304}, {1, 3}, {0, 384}},
                                   {{192, 3072}, {768, 3072}, {1, 1}, {192, 0}}};
  uint64_t seed = 750;
  for (DType dtype : kFloatTypes)
    for (quant::AbsmaxFormat format : {quant::AbsmaxFormat::Int8, quant::AbsmaxFormat::Fp8E4M3})
      for (const Case &c : cases) {
        Nf4PieceStorage w =
            randomNf4Piece(c.piece[0] * c.piece[1], c.whole[0] * c.whole[1], block, seed);
        Buffer out(dtype, c.piece);
        KernelAttrs a = attrs({}, {{"block", block}});
        a.setInts("whole_shape", c.whole);
        a.setInts("chunks", c.chunks);
        a.setInts("piece_offset", c.offset);
        a.setInt("absmax_format", static_cast<int64_t>(format));
        expectCudaMatchesCpu("qat_dequantize_nf4", {&w.codes, &w.absmaxQ, &w.scale, &w.mean},
                             {&out}, a, kExact);
      }
}

//===----------------------------------------------------------------------===//
// Binding errors
//===----------------------------------------------------------------------===//

TEST(CudaQuant, BindingErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  auto f32 = [](std::vector<int64_t> shape) { return typeOnly(DType::F32, std::move(shape)); };
  auto bf16 = [](std::vector<int64_t> shape) { return typeOnly(DType::BF16, std::move(shape)); };
  auto u8 = [](std::vector<int64_t> shape) { return typeOnly(DType::U8, std::move(shape)); };
  auto fq = [](std::initializer_list<std::pair<const char *, int64_t>> ints) {
    return attrs({}, ints);
  };
  const std::vector<CudaBindErrorCase> cases = {
      {"qat_observe", {f32({4, 64})}, {f32({2, 2})}, fq({{"granularity", 0}})},
      {"qat_observe", {f32({4, 64})}, {f32({4, 2})}, fq({{"granularity", 1}, {"axis", 2}})},
      {"qat_observe", {f32({4, 64})}, {f32({8, 2})}, fq({{"granularity", 2}, {"block", 48}})},
      {"qat_observe", {f32({4, 64})}, {f32({1, 2})}, attrs({{"outlier", 6.0}})},
      {"qat_fake_quant", {f32({4, 64}), f32({1, 2})}, {f32({4, 64})}, {}},
      {"qat_fake_quant", {f32({4, 64}), f32({1, 2})}, {f32({4, 64})}, fq({{"format", 7}})},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2})},
       {f32({4, 64})},
       fq({{"format", 2}, {"symmetric", 0}})},
      {"qat_fake_quant", {bf16({4, 64}), f32({1, 2})}, {f32({4, 64})}, fq({{"format", 0}})},
      {"qat_fake_quant",
       {f32({4, 64}), f32({1, 2}), f32({64, 2})},
       {f32({4, 64})},
       attrs({{"outlier", 6.0}}, {{"format", 2}})},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), bf16({4, 64})},
       {f32({4, 64})},
       fq({{"format", 0}})},
      {"qat_fake_quant_grad",
       {f32({4, 64}), f32({1, 2}), f32({4, 64}), f32({4, 2})},
       {f32({4, 64})},
       attrs({{"outlier", 6.0}}, {{"format", 0}})},
      {"qat_ema", {f32({4, 2}), f32({4, 2})}, {f32({4, 2})}, attrs({{"momentum", 1.5}})},
      {"qat_ema", {f32({4, 3}), f32({4, 3})}, {f32({4, 3})}, attrs({{"momentum", 0.9}})},
      {"qat_ema", {f32({4, 2}), f32({5, 2})}, {f32({4, 2})}, attrs({{"momentum", 0.9}})},
      {"qat_dequantize_nf4",
       {u8({64}), u8({2}), f32({1}), f32({1})},
       {f32({2, 64})},
       fq({{"block", 48}})},
      {"qat_dequantize_nf4",
       {u8({63}), u8({2}), f32({1}), f32({1})},
       {f32({2, 64})},
       fq({{"block", 64}})},
      {"qat_dequantize_nf4",
       {u8({64}), u8({2}), f32({1}), f32({1})},
       {typeOnly(DType::I32, {2, 64})},
       fq({{"block", 64}})},
  };
  expectCudaBindErrorsMatchCpu(cases);
}

} // namespace
} // namespace llmc::test
