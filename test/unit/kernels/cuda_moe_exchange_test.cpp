//===- cuda_moe_exchange_test.cpp - CUDA expert-parallel copies vs CPU ----===//
//
// The four kernels are conformance cases (moe_exchange_test.cpp), compared
// with the CPU exactly. Here what a case cannot say: a DeepSeek-sized
// exchange (256 experts over 8 ranks, 16k routed rows) through the
// single-threaded device plan, with and without the batch's capacity over
// 16 data-parallel ranks (group counts), and the bind errors are the CPU's.

#include "CudaConformance.h"

#include <random>

namespace llmc::test {
namespace {

TEST(CudaMoeExchangeKernels, LargeExchangeMatchesCpu) {
  LLMC_REQUIRE_GPU();
  const int64_t ranks = 8, local = 32, experts = ranks * local, rows = 16 * 1024, width = 256;
  const int64_t capacity = 80, slotRows = local * capacity;
  std::mt19937_64 rng(18501);
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  RefTensor offsets = RefTensor::zeros({experts + 1});
  for (int64_t r = 0; r < rows; ++r) offsets.data[pick(rng) + 1] += 1;
  for (int64_t e = 0; e < experts; ++e) offsets.data[e + 1] += offsets.data[e];
  Buffer xs = Buffer::of(randomTensor({rows, width}, 18502), DType::BF16);
  Buffer off = Buffer::of(offsets, DType::I32);
  Buffer packed(DType::BF16, {ranks * slotRows, width}), kept(DType::I32, {ranks, local});
  const Comparison exact{Metric::Elementwise, {0.0}};
  const KernelAttrs cap = attrs({}, {{"capacity", capacity}});
  std::vector<RefTensor> gpu =
      expectCudaMatchesCpu("moe_pack", {&xs, &off}, {&packed, &kept}, cap, exact);
  ASSERT_EQ(gpu.size(), 2u);
  // Feed the GPU's results on: regroup as if every source sent these slots.
  Buffer recv = Buffer::of(gpu[0], DType::BF16), counts = Buffer::of(gpu[1], DType::I32);
  Buffer grouped(DType::BF16, {ranks * slotRows, width}), localOffsets(DType::I32, {local + 1});
  expectCudaMatchesCpu("moe_regroup", {&recv, &counts}, {&grouped, &localOffsets}, {}, exact);
  Buffer y(DType::BF16, {rows, width});
  expectCudaMatchesCpu("moe_unpack", {&recv, &off, &counts}, {&y}, {}, exact);
}

TEST(CudaMoeExchangeKernels, LargeBatchCapacityMatchesCpu) {
  LLMC_REQUIRE_GPU();
  const int64_t ranks = 8, local = 32, experts = ranks * local, rows = 16 * 1024, width = 256;
  // About 64 rows per expert and rank: the 11 ranks before this one use
  // up about 704 of the 736, so the experts keep some, none or all.
  const int64_t groupRanks = 16, position = 11, capacity = 736, slotRows = rows;
  std::mt19937_64 rng(18511);
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  RefTensor offsets = RefTensor::zeros({experts + 1});
  for (int64_t r = 0; r < rows; ++r) offsets.data[pick(rng) + 1] += 1;
  // Every rank routes about as this one does; this rank's row is its own.
  RefTensor counts = RefTensor::zeros({groupRanks, experts});
  std::uniform_int_distribution<int64_t> jitter(-20, 20);
  for (int64_t q = 0; q < groupRanks; ++q)
    for (int64_t e = 0; e < experts; ++e)
      counts.data[q * experts + e] =
          q == position ? offsets.data[e + 1]
                        : static_cast<double>(std::max<int64_t>(
                              0, static_cast<int64_t>(offsets.data[e + 1]) + jitter(rng)));
  for (int64_t e = 0; e < experts; ++e) offsets.data[e + 1] += offsets.data[e];
  Buffer xs = Buffer::of(randomTensor({rows, width}, 18512), DType::BF16);
  Buffer off = Buffer::of(offsets, DType::I32), group = Buffer::of(counts, DType::F32);
  Buffer packed(DType::BF16, {ranks * slotRows, width}), kept(DType::I32, {ranks, local});
  KernelAttrs a = attrs({}, {{"capacity", capacity}});
  a.setInts("group_position", {position});
  std::vector<RefTensor> gpu = expectCudaMatchesCpu(
      "moe_pack", {&xs, &off, &group}, {&packed, &kept}, a, {Metric::Elementwise, {0.0}});
  ASSERT_EQ(gpu.size(), 2u);
  int64_t partial = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const double n = offsets.data[e + 1] - offsets.data[e];
    partial += gpu[1].data[e] > 0 && gpu[1].data[e] < n;
  }
  EXPECT_GT(partial, 0) << "some expert should keep part of its rows";
}

TEST(CudaMoeExchangeKernels, BindErrorsMatchCpu) {
  LLMC_REQUIRE_GPU();
  const TensorView xs = typeOnly(DType::F32, {10, 4}), off = typeOnly(DType::I32, {7}),
                   packed = typeOnly(DType::F32, {12, 4}), kept = typeOnly(DType::I32, {2, 3});
  expectCudaBindErrorsMatchCpu({
      {"moe_pack", {xs, typeOnly(DType::I32, {6})}, {packed, kept}, {}},
      {"moe_pack", {xs, off}, {typeOnly(DType::F32, {11, 4}), kept}, {}},
      {"moe_pack", {xs, off}, {packed, kept}, attrs({}, {{"capacity", -1}})},
      {"moe_pack", {xs, off, typeOnly(DType::F32, {3, 6})}, {packed, kept}, {}},
      {"moe_pack",
       {xs, off, typeOnly(DType::F16, {3, 6})},
       {packed, kept},
       attrs({}, {{"capacity", 2}})},
      {"moe_unpack", {packed, off, typeOnly(DType::F32, {2, 3})}, {xs}, {}},
      {"moe_regroup", {packed, kept}, {packed, typeOnly(DType::I32, {3})}, {}},
      {"moe_ungroup", {typeOnly(DType::F32, {13, 4}), kept}, {packed}, {}},
  });
}

} // namespace
} // namespace llmc::test
