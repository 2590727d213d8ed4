//===- Conformance.cpp - the two runs of every conformance case -----------===//
//
// Part of llmc: see Conformance.h.
//
//===----------------------------------------------------------------------===//

#include "Conformance.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace llmc::test {

size_t KernelCall::input(Buffer b) {
  buffers.push_back(std::move(b));
  inputs.push_back(buffers.size() - 1);
  return buffers.size() - 1;
}

size_t KernelCall::output(Buffer b) {
  buffers.push_back(std::move(b));
  outputs.push_back(buffers.size() - 1);
  return buffers.size() - 1;
}

void PrintTo(const ConformanceCase &c, std::ostream *os) { *os << c.kernel << " " << c.label; }

std::string caseLabel(const std::string &label) {
  std::string out = label;
  for (char &c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return out;
}

std::string shapeLabel(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

namespace {
std::set<std::string> &covered() {
  static std::set<std::string> names;
  return names;
}
} // namespace

std::vector<ConformanceCase> coverCases(std::vector<ConformanceCase> cases) {
  for (const ConformanceCase &c : cases) covered().insert(c.kernel);
  return cases;
}

const std::set<std::string> &coveredKernels() { return covered(); }

std::string conformanceName(const ::testing::TestParamInfo<ConformanceCase> &info) {
  return caseLabel(info.param.kernel + "_" + info.param.label);
}

namespace {

/// The tolerance of output `i`: the call's, else the dtype's.
double toleranceOf(const std::vector<double> &tolerances, size_t i, DType dtype) {
  if (tolerances.empty())
    return tolerance(dtype);
  return i < tolerances.size() ? tolerances[i] : tolerances.back();
}

/// The metric of output `i`: its own, else the call's.
Metric metricOf(const std::vector<Metric> &metrics, size_t i, Metric all) {
  return i < metrics.size() ? metrics[i] : all;
}

bool isInput(const KernelCall &call, size_t buffer) {
  return std::find(call.inputs.begin(), call.inputs.end(), buffer) != call.inputs.end();
}

} // namespace

TEST_P(KernelConformance, CpuMatchesReference) {
  const ConformanceCase &c = GetParam();
  KernelCall call = c.build();
  ASSERT_TRUE(call.reference) << "case without a reference";
  std::vector<RefTensor> stored;
  for (size_t i : call.inputs) stored.push_back(call.buffers[i].toRef());
  std::vector<Buffer *> inputs, outputs;
  for (size_t i : call.inputs) inputs.push_back(&call.buffers[i]);
  for (size_t i : call.outputs) {
    if (!isInput(call, i) && !call.keepOutputs)
      call.buffers[i].poison();
    outputs.push_back(&call.buffers[i]);
  }
  ASSERT_TRUE(runKernel(c.kernel, inputs, outputs, call.attrs, call.step));
  std::vector<RefTensor> want = call.reference(stored);
  ASSERT_EQ(want.size(), outputs.size()) << "the reference gives one tensor per output";
  std::vector<RefTensor> got;
  for (Buffer *out : outputs) got.push_back(out->toRef());
  for (size_t i = 0; i < outputs.size(); ++i) {
    double tol = toleranceOf(call.tolerances, i, outputs[i]->dtype);
    if (std::isinf(tol))
      continue; // left unspecified by the contract, or judged by `check`
    EXPECT_TRUE(closeTo(got[i], want[i], metricOf(call.metrics, i, call.metric), tol))
        << c.kernel << " output " << i;
  }
  if (call.check) {
    EXPECT_TRUE(call.check(stored, got, want)) << c.kernel;
  }
}

TEST_P(CudaKernelConformance, CudaMatchesCpu) {
  std::string why;
  if (!runCudaConformance(GetParam(), why))
    GTEST_SKIP() << why;
}

#ifndef LLMC_KERNEL_TESTS_CUDA
bool runCudaConformance(const ConformanceCase &, std::string &why) {
  why = "built without CUDA (LLMC_ENABLE_CUDA=OFF): no CUDA kernels to compare";
  return false;
}
#endif

} // namespace llmc::test
