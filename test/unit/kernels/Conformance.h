//===- Conformance.h - each kernel case written once, run on every backend ===//
//
// A conformance case is one kernel call: its inputs (fixed seeds, stored in
// the dtype under test), its attributes, and the double reference of its
// outputs computed from the stored inputs. Each concept's test file lists
// its cases once (LLMC_CONFORMANCE_CASES); two parameterized fixtures run
// every case:
//  - KernelConformance.CpuMatchesReference: the CPU kernel (outputs
//    poisoned with NaN) against the reference, with the case's metric and
//    tolerances;
//  - CudaKernelConformance.CudaMatchesCpu: the CUDA kernel of the same name
//    against the CPU kernel (CudaConformance.h: same inputs, outputs
//    poisoned on both, compared with the case's CUDA tolerances), once per
//    CudaVariant where a kernel has several CUDA implementations (each
//    pinned, with its planned workspace and tolerances); skipped with the
//    reason where no GPU is usable or the tests were built without CUDA.
// Every case also records its kernel's name, so KernelRegistry's coverage
// test can require a case for every registered kernel.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_CONFORMANCE_H
#define LLMC_TEST_UNIT_KERNELS_CONFORMANCE_H

#include "KernelTest.h"

#include "kernels/AttentionImpl.h"

#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace llmc::test {

/// The double reference of a call's outputs, given its stored inputs
/// widened to double (before the kernel ran: in-place kernels overwrite
/// them).
using ReferenceFn = std::function<std::vector<RefTensor>(const std::vector<RefTensor> &inputs)>;

/// One run of a call's CUDA half, for kernels with several CUDA
/// implementations (attention: cuDNN, tensor cores, CUDA cores).
struct CudaVariant {
  /// Pinned for the run (`llmc-run --attention`), and every kernel bound
  /// must note that it ran there (kernels/cuda/AttentionChoice.h). Auto:
  /// nothing pinned, nothing required. A cuDNN run without a loadable
  /// cuDNN is skipped, saying why.
  AttentionImpl attention = AttentionImpl::Auto;
  /// Bytes of a u8 workspace appended to the outputs on both backends (what
  /// `llmc compile --target cuda` plans); left unchecked. 0: none.
  int64_t workspaceBytes = 0;
  /// The run's tolerances (as KernelCall::cudaTolerances); empty: the call's.
  std::vector<double> tolerances;
  /// Environment variables set while the run binds and runs (a kernel's
  /// choice of implementation, as LLMC_CUDA_FP8_MMA=1); empty: none.
  std::vector<std::pair<std::string, std::string>> env;
};

/// One kernel call, built when its case runs.
struct KernelCall {
  /// The call's storage; `inputs` and `outputs` index it, and one index in
  /// both is an in-place operand (aliased on both backends).
  std::vector<Buffer> buffers;
  std::vector<size_t> inputs, outputs;
  KernelAttrs attrs;
  int64_t step = 1;
  /// Outputs start from their contents (accumulating kernels) instead of
  /// poison.
  bool keepOutputs = false;
  ReferenceFn reference;
  /// Against the reference: the metric and a tolerance per output (one
  /// value applies to all; empty: tolerance() of each output's dtype; an
  /// infinite one skips an output the kernel leaves unspecified, or one
  /// that `check` judges). `metrics` names one per output where they
  /// differ (an update whose outputs are maps and sums that can cancel);
  /// empty: `metric` for all.
  Metric metric = Metric::Elementwise;
  std::vector<Metric> metrics;
  std::vector<double> tolerances;
  /// CUDA against the CPU: as above (empty: tolerance() of the dtype).
  /// Integer outputs are always compared exactly.
  Metric cudaMetric = Metric::Elementwise;
  std::vector<Metric> cudaMetrics;
  std::vector<double> cudaTolerances;
  /// A further check of the CPU's outputs, for what no metric states (an
  /// 8-bit code that must be the nearest table entry up to rounding):
  /// given the stored inputs, the outputs and the reference's.
  std::function<::testing::AssertionResult(const std::vector<RefTensor> &inputs,
                                           const std::vector<RefTensor> &outputs,
                                           const std::vector<RefTensor> &reference)>
      check;
  /// The CUDA half's runs (empty: one, nothing pinned), and a further check
  /// of the GPU's outputs (given them, in order) after each.
  std::vector<CudaVariant> cudaVariants;
  std::function<::testing::AssertionResult(const std::vector<RefTensor> &outputs)> cudaCheck;

  /// Adds a buffer as the next input; returns its index.
  size_t input(Buffer b);
  /// Adds a buffer as the next output; returns its index.
  size_t output(Buffer b);
  /// Adds a float input: `values` stored as `dtype`.
  size_t input(const RefTensor &values, DType dtype) { return input(Buffer::of(values, dtype)); }
  /// Adds an output of `dtype` and `shape`.
  size_t output(DType dtype, std::vector<int64_t> shape) {
    return output(Buffer(dtype, std::move(shape)));
  }
  /// Adds an output of `dtype` and `shape`, or, `inPlace`, names input
  /// `input` as the output: the kernel writes over it.
  size_t outputMaybeInPlace(bool inPlace, size_t input, DType dtype, std::vector<int64_t> shape) {
    if (!inPlace)
      return output(dtype, std::move(shape));
    outputs.push_back(input);
    return input;
  }
};

/// A named call of one kernel.
struct ConformanceCase {
  std::string kernel;
  std::string label; ///< unique among its concept's cases: [A-Za-z0-9_]
  std::function<KernelCall()> build;
};

/// What gtest prints for a case's parameter: "<kernel> <label>".
void PrintTo(const ConformanceCase &c, std::ostream *os);

/// `label` made a test-name suffix: other characters become '_'.
std::string caseLabel(const std::string &label);

/// Records that `cases` cover their kernels; returns the cases.
std::vector<ConformanceCase> coverCases(std::vector<ConformanceCase> cases);
/// Every kernel name some case covers.
const std::set<std::string> &coveredKernels();

/// The fixtures every concept's cases instantiate: the CPU against the
/// reference, and CUDA against the CPU (named Cuda* like every GPU test, so
/// `--gtest_filter='Cuda*'` selects them and `-Cuda*` leaves them out).
class KernelConformance : public ::testing::TestWithParam<ConformanceCase> {};
class CudaKernelConformance : public ::testing::TestWithParam<ConformanceCase> {};

/// gtest's name of a case: "<kernel>_<label>".
std::string conformanceName(const ::testing::TestParamInfo<ConformanceCase> &info);

/// Instantiates both fixtures over the cases `FN()` returns, as the suites
/// `CONCEPT/KernelConformance` (CpuMatchesReference) and
/// `CudaCONCEPT/CudaKernelConformance` (CudaMatchesCpu).
#define LLMC_CONFORMANCE_CASES(CONCEPT, FN)                                                        \
  INSTANTIATE_TEST_SUITE_P(CONCEPT, KernelConformance,                                             \
                           ::testing::ValuesIn(::llmc::test::coverCases(FN())),                    \
                           ::llmc::test::conformanceName);                                         \
  INSTANTIATE_TEST_SUITE_P(Cuda##CONCEPT, CudaKernelConformance, ::testing::ValuesIn(FN()),        \
                           ::llmc::test::conformanceName)

/// The CUDA half of a case (CudaConformance.cpp, with CUDA); `why` says why
/// it did not run.
bool runCudaConformance(const ConformanceCase &c, std::string &why);

/// Shapes written "3x7x13" ("scalar" for rank 0), for labels.
std::string shapeLabel(const std::vector<int64_t> &shape);

} // namespace llmc::test

#endif
