//===- Validator.cpp - binding-time validation shared by every backend ---===//
//
// Every factory checks its arguments once, at load time, and reports the
// first problem as "<kernel>: <operand or attribute> ...". Keeping the
// wording in one place keeps the messages uniform across kernels.
//
//===----------------------------------------------------------------------===//

#include "kernels/Validator.h"

#include <climits>
#include <cmath>

namespace llmc {

std::string describeType(DType dtype, const std::vector<int64_t> &shape) {
  TensorView view;
  view.dtype = dtype;
  view.shape = shape;
  return view.describe();
}

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

bool Validator::fail(const std::string &reason) {
  error_ = std::string(kernel_) + ": " + reason;
  return false;
}

bool Validator::arity(size_t minInputs, size_t maxInputs, size_t outputs) {
  auto count = [](size_t n, const char *noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
  };
  size_t n = args_.inputs.size();
  if (n < minInputs || n > maxInputs) {
    std::string expected = maxInputs == minInputs ? count(minInputs, "input")
                           : maxInputs == SIZE_MAX
                               ? std::to_string(minInputs) + " or more inputs"
                               : std::to_string(minInputs) + " to " + count(maxInputs, "input");
    return fail("expected " + expected + ", got " + std::to_string(n));
  }
  if (args_.outputs.size() != outputs)
    return fail("expected " + count(outputs, "output") + ", got " +
                std::to_string(args_.outputs.size()));
  return true;
}

bool Validator::isFloat(const TensorView &t, const char *what) {
  if (t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16) return true;
  return fail(std::string(what) + " must be f32, bf16 or f16, got " + t.describe());
}

bool Validator::isIndex(const TensorView &t, const char *what) {
  if (t.dtype == DType::I32 || t.dtype == DType::I64) return true;
  return fail(std::string(what) + " must be i32 or i64, got " + t.describe());
}

bool Validator::hasDType(const TensorView &t, const char *what, DType dtype) {
  if (t.dtype == dtype) return true;
  return fail(std::string(what) + " must be " + dtypeName(dtype) + ", got " + t.describe());
}

bool Validator::hasRank(const TensorView &t, const char *what, int rank) {
  if (t.rank() == rank) return true;
  return fail(std::string(what) + " must have rank " + std::to_string(rank) + ", got " +
              t.describe());
}

bool Validator::hasType(const TensorView &t, const char *what, DType dtype,
                        const std::vector<int64_t> &shape) {
  if (t.dtype == dtype && t.shape == shape) return true;
  return fail(std::string(what) + " must be " + describeType(dtype, shape) + ", got " +
              t.describe());
}

bool Validator::holds(const TensorView &t, const char *what, DType dtype, int64_t n) {
  if (!hasDType(t, what, dtype)) return false;
  if (t.numel() == n) return true;
  return fail(std::string(what) + " must hold " + std::to_string(n) + " elements, got " +
              t.describe());
}

bool Validator::isF32Scalar(const TensorView &t, const char *what) {
  if (t.dtype == DType::F32 && t.numel() == 1) return true;
  return fail(std::string(what) + " must be an f32 scalar, got " + t.describe());
}

bool Validator::fitsInt(const TensorView &t, const char *what) {
  for (int64_t d : t.shape)
    if (d > INT_MAX) return fail(std::string(what) + " is too large for BLAS: " + t.describe());
  return true;
}

bool Validator::floatAttr(const char *name, double *value) {
  const KernelAttrs &a = args_.attrs;
  if (a.hasFloat(name))
    *value = a.getFloat(name);
  else if (a.hasInt(name))
    *value = static_cast<double>(a.getInt(name));
  else
    return fail(std::string("missing float attribute '") + name + "'");
  if (!std::isfinite(*value)) return fail(std::string("attribute '") + name + "' must be finite");
  return true;
}

bool Validator::floatAttr(const char *name, double *value, double fallback) {
  const KernelAttrs &a = args_.attrs;
  if (!a.hasFloat(name) && !a.hasInt(name)) {
    *value = fallback;
    return true;
  }
  return floatAttr(name, value);
}

bool Validator::intAttr(const char *name, int64_t *value, int64_t fallback) {
  const KernelAttrs &a = args_.attrs;
  if (a.hasFloat(name) && !a.hasInt(name))
    return fail(std::string("attribute '") + name + "' must be an integer");
  *value = a.getInt(name, fallback);
  return true;
}

bool Validator::flagAttr(const char *name, bool *value) {
  int64_t v;
  if (!intAttr(name, &v, 0)) return false;
  if (v != 0 && v != 1)
    return fail(std::string("attribute '") + name + "' must be 0 or 1, got " + std::to_string(v));
  *value = v != 0;
  return true;
}

bool Validator::intsAttr(const char *name, std::vector<int64_t> *value) {
  if (!args_.attrs.hasInts(name))
    return fail(std::string("missing int-array attribute '") + name + "'");
  *value = args_.attrs.getInts(name);
  return true;
}

} // namespace llmc
