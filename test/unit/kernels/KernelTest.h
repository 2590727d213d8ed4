//===- KernelTest.h - helpers for the kernel conformance tests ------------===//
//
// Kernel tests all follow one pattern: build random inputs (fixed seeds) as
// double RefTensors, store them in the dtype under test, poison the outputs
// with NaN, bind and run the CPU kernel through the registry, and compare
// against the double reference on the same (rounded) inputs.
//
// Two error measures, named at each use:
//  - elementwise: max_i |out−ref| / max(|ref_i|, 1e-3·‖ref‖∞) — for maps
//    whose every element is well conditioned;
//  - norm: ‖out−ref‖₂ / ‖ref‖₂ — for reductions and gradients, where single
//    elements can be cancellations (near-zero differences of large terms).
// Tolerances: 1e-5 for f32, 1e-2 for bf16 and f16 storage (f16 has more
// mantissa than bf16, so bf16's bound covers it; its range is what differs,
// and the random inputs stay far inside it).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_UNIT_KERNELS_KERNELTEST_H
#define LLMC_TEST_UNIT_KERNELS_KERNELTEST_H

#include "kernels/Kernel.h"
#include "kernels/reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace llmc::test {

using ref::RefTensor;

/// The float storage types every float kernel must support.
inline const std::vector<DType> kFloatTypes = {DType::F32, DType::BF16, DType::F16};

/// Standard-normal values times `scale` (plus `shift`), reproducible from `seed`.
RefTensor randomTensor(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0,
                       double shift = 0.0);
/// Uniform integers in [lo, hi).
RefTensor randomIds(std::vector<int64_t> shape, uint64_t seed, int64_t lo, int64_t hi);

/// Storage for one kernel operand.
class Buffer {
public:
  Buffer(DType dtype, std::vector<int64_t> shape);
  /// `values` stored as `dtype` (floats rounded to nearest even, ids truncated).
  static Buffer of(const RefTensor &values, DType dtype);

  TensorView view() const;
  /// The stored values, widened to double.
  RefTensor toRef() const;
  /// Fills with NaN (floats) or a sentinel (ints) so unwritten elements show.
  void poison();

  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint64_t> storage; // 8-byte aligned bytes
};

/// `values` rounded through `dtype` and back: what a kernel reading a
/// `dtype` tensor sees.
RefTensor roundTo(const RefTensor &values, DType dtype);

/// An environment variable set for a scope (kernels read theirs when they
/// bind), unset at its end.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
};

/// Binds `name` on the CPU backend; reports a failure (and returns null)
/// when binding fails.
std::unique_ptr<Kernel> bindKernel(const std::string &name, const std::vector<Buffer *> &inputs,
                                   const std::vector<Buffer *> &outputs,
                                   const KernelAttrs &attrs = {});
/// Binds `name` on the CPU backend, prepares it with every input constant
/// (Kernel::prepare) and runs it once; reports a failure (and returns
/// false) when binding fails.
bool runKernel(const std::string &name, const std::vector<Buffer *> &inputs,
               const std::vector<Buffer *> &outputs, const KernelAttrs &attrs = {},
               int64_t step = 1);
/// The factory's error for a binding expected to fail ("" if it bound).
std::string bindError(const std::string &name, const std::vector<TensorView> &inputs,
                      const std::vector<TensorView> &outputs, const KernelAttrs &attrs = {});
/// A binding of one kernel expected to fail: `expected` is part of its
/// message.
struct BindErrorCase {
  std::vector<TensorView> inputs, outputs;
  KernelAttrs attrs;
  std::string expected;
};
/// Each case fails to bind `kernel` with a message that names the kernel
/// and contains the case's `expected`.
void expectBindErrorsMention(const std::string &kernel, const std::vector<BindErrorCase> &cases);
/// A view with no data, for bindings that only check types.
TensorView typeOnly(DType dtype, std::vector<int64_t> shape);

double tolerance(DType dtype);

enum class Metric { Elementwise, Norm };

/// Compares out (all elements written, none NaN where ref is not) against
/// ref with the given metric and tolerance.
::testing::AssertionResult closeTo(const RefTensor &out, const RefTensor &ref, Metric metric,
                                   double tol);

/// Shorthand: EXPECT_TRUE(closeTo(...)) with a trace of what was compared.
#define EXPECT_CLOSE(out, ref, metric, tol)                                                        \
  EXPECT_TRUE(::llmc::test::closeTo(out, ref, metric, tol))

/// Attributes from initializer lists.
KernelAttrs attrs(std::initializer_list<std::pair<const char *, double>> floats = {},
                  std::initializer_list<std::pair<const char *, int64_t>> ints = {});

/// Finite-difference check: for L(x) = Σ f(x)·w, compares the analytic
/// gradient `grad` with central differences of `loss` at every element of
/// `x`; returns the norm-relative error.
template <typename LossFn>
double finiteDifferenceError(RefTensor x, const RefTensor &grad, LossFn loss, double h = 1e-6) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double saved = x.data[i];
    x.data[i] = saved + h;
    double up = loss(x);
    x.data[i] = saved - h;
    double down = loss(x);
    x.data[i] = saved;
    double fd = (up - down) / (2.0 * h);
    num += (fd - grad.data[i]) * (fd - grad.data[i]);
    den += fd * fd;
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Σ a·b over all elements.
double dot(const RefTensor &a, const RefTensor &b);

} // namespace llmc::test

#endif
