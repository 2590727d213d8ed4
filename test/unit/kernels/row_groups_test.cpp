//===- row_groups_test.cpp - qat_group_ranges and qat_row_ranges ----------===//
//
// The ranges of a mixture of experts' row groups (Conformance.h): the CPU
// against the references of kernels/reference/row_groups.cpp, exactly (a
// max and a copy round nothing), a GPU against the CPU; layouts with empty
// groups first, inside and last and rows past the last group; i64
// offsets. Invalid offsets make every output NaN; a NaN row makes its
// group's range NaN. Here also: the binding errors.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <cmath>
#include <limits>

namespace llmc::test {
namespace {

struct Layout {
  std::string name;
  std::vector<int64_t> offsets; ///< [G + 1]
  int64_t rows;                 ///< M >= offsets.back()
};

std::vector<Layout> layouts() {
  return {{"one", {0, 7}, 7},
          {"empty_first_inside_last", {0, 0, 3, 3, 9, 9}, 9},
          {"tail", {0, 5, 12}, 40}};
}

RefTensor offsetsTensor(const std::vector<int64_t> &offsets) {
  RefTensor t = RefTensor::zeros({static_cast<int64_t>(offsets.size())});
  for (size_t i = 0; i < offsets.size(); ++i) t.data[i] = static_cast<double>(offsets[i]);
  return t;
}

int64_t groupsOf(const Layout &l) { return static_cast<int64_t>(l.offsets.size()) - 1; }

std::vector<ConformanceCase> cases() {
  std::vector<ConformanceCase> out;
  uint64_t seed = 6100;
  for (const Layout &l : layouts())
    for (DType index : {DType::I32, DType::I64}) {
      std::string label = l.name + (index == DType::I64 ? "_i64" : "");
      out.push_back({"qat_group_ranges", label, [=, s = seed += 2] {
                       KernelCall k;
                       k.input(randomTensor({l.rows, 2}, s, 4.0), DType::F32);
                       k.input(Buffer::of(offsetsTensor(l.offsets), index));
                       k.output(Buffer::of(randomTensor({groupsOf(l), 2}, s + 1), DType::F32));
                       k.reference = [](const std::vector<RefTensor> &in) {
                         return std::vector<RefTensor>{ref::groupRanges(in[0], in[1])};
                       };
                       k.tolerances = k.cudaTolerances = {0.0};
                       return k;
                     }});
      out.push_back({"qat_row_ranges", label, [=, s = seed += 2] {
                       KernelCall k;
                       k.input(randomTensor({groupsOf(l), 2}, s, 4.0), DType::F32);
                       k.input(Buffer::of(offsetsTensor(l.offsets), index));
                       k.output(Buffer::of(randomTensor({l.rows, 2}, s + 1), DType::F32));
                       const int64_t rows = l.rows;
                       k.reference = [rows](const std::vector<RefTensor> &in) {
                         return std::vector<RefTensor>{ref::rowRanges(in[0], in[1], rows)};
                       };
                       k.tolerances = k.cudaTolerances = {0.0};
                       return k;
                     }});
    }
  return out;
}

LLMC_CONFORMANCE_CASES(QatRowGroups, cases);

bool allNaN(const RefTensor &t) {
  for (double v : t.data)
    if (!std::isnan(v))
      return false;
  return true;
}

/// Offsets that do not cut the rows into groups (decreasing, or past M)
/// make every output NaN, started from finite values.
TEST(RowGroups, InvalidOffsetsMakeEveryOutputNaN) {
  for (const RefTensor &bad : {RefTensor{{3}, {0, 4, 2}}, RefTensor{{3}, {0, 2, 9}}}) {
    Buffer offsets = Buffer::of(bad, DType::I32);
    Buffer rows = Buffer::of(randomTensor({6, 2}, 1), DType::F32);
    Buffer groups = Buffer::of(randomTensor({2, 2}, 2), DType::F32);
    Buffer toGroups = Buffer::of(randomTensor({2, 2}, 3), DType::F32);
    Buffer toRows = Buffer::of(randomTensor({6, 2}, 4), DType::F32);
    ASSERT_TRUE(runKernel("qat_group_ranges", {&rows, &offsets}, {&toGroups}, {}));
    ASSERT_TRUE(runKernel("qat_row_ranges", {&groups, &offsets}, {&toRows}, {}));
    EXPECT_TRUE(allNaN(toGroups.toRef()));
    EXPECT_TRUE(allNaN(toRows.toRef()));
  }
}

/// A NaN in a row's range (a non-finite gradient) makes its group's range
/// NaN, whatever comes after it, and leaves the other groups alone.
TEST(RowGroups, NaNRowMakesItsGroupNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Buffer rows = Buffer::of(RefTensor{{4, 2}, {1, 2, nan, 1, 3, 5, 0.5, 0.25}}, DType::F32);
  Buffer offsets = Buffer::of(RefTensor{{3}, {0, 3, 4}}, DType::I32);
  Buffer out(DType::F32, {2, 2});
  ASSERT_TRUE(runKernel("qat_group_ranges", {&rows, &offsets}, {&out}, {}));
  RefTensor r = out.toRef();
  EXPECT_TRUE(std::isnan(r.data[0]));
  EXPECT_EQ(r.data[1], 5.0);
  EXPECT_EQ(r.data[2], 0.5);
  EXPECT_EQ(r.data[3], 0.25);
}

TEST(RowGroups, BindingErrors) {
  auto f32 = [](std::vector<int64_t> s) { return typeOnly(DType::F32, std::move(s)); };
  auto i32 = [](std::vector<int64_t> s) { return typeOnly(DType::I32, std::move(s)); };
  EXPECT_EQ(bindError("qat_group_ranges", {f32({6, 2}), i32({3})}, {f32({3, 2})}, {}),
            "qat_group_ranges: result must be f32[2x2], got f32[3x2]");
  EXPECT_EQ(bindError("qat_row_ranges", {f32({2, 2}), i32({1})}, {f32({6, 2})}, {}),
            "qat_row_ranges: offsets must be [G + 1] for G >= 1 groups, got i32[1]");
  EXPECT_EQ(bindError("qat_row_ranges", {f32({2, 3}), i32({3})}, {f32({6, 2})}, {}),
            "qat_row_ranges: ranges must be f32[2x2], got f32[2x3]");
}

} // namespace
} // namespace llmc::test
