//===- Validator.h - binding-time checks shared by every backend -*- C++ -*-===//
//
// Every kernel factory, CPU or CUDA, checks its arguments once at load time
// and reports the first problem as "<kernel>: <operand or attribute> ...".
// One validator keeps the wording uniform across kernels and backends.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_VALIDATOR_H
#define LLMC_KERNELS_VALIDATOR_H

#include "kernels/Kernel.h"

#include <memory>
#include <string>
#include <vector>

namespace llmc {

//===----------------------------------------------------------------------===//

std::string describeType(DType dtype, const std::vector<int64_t> &shape);
int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end);
inline int64_t product(const std::vector<int64_t> &shape) {
  return product(shape, 0, shape.size());
}

/// Checks a KernelArgs against a kernel's contract. Every check returns
/// false after writing "<kernel>: <reason>" to the error string.
class Validator {
public:
  Validator(const char *kernel, const KernelArgs &args, std::string &error)
      : kernel_(kernel), args_(args), error_(error) {}

  const TensorView &in(size_t i) const { return args_.inputs[i]; }
  const TensorView &out(size_t i) const { return args_.outputs[i]; }
  const KernelAttrs &attrs() const { return args_.attrs; }

  bool fail(const std::string &reason);
  /// fail() for a factory's return statement.
  std::unique_ptr<Kernel> reject(const std::string &reason) {
    fail(reason);
    return nullptr;
  }

  /// Exactly `outputs` outputs and between `minInputs` and `maxInputs` inputs.
  bool arity(size_t minInputs, size_t maxInputs, size_t outputs);
  bool arity(size_t inputs, size_t outputs) { return arity(inputs, inputs, outputs); }

  /// f32, bf16 or f16.
  bool isFloat(const TensorView &t, const char *what);
  /// i32 or i64.
  bool isIndex(const TensorView &t, const char *what);
  bool hasDType(const TensorView &t, const char *what, DType dtype);
  bool hasRank(const TensorView &t, const char *what, int rank);
  /// Exactly `dtype[shape]`.
  bool hasType(const TensorView &t, const char *what, DType dtype,
               const std::vector<int64_t> &shape);
  /// A `dtype` tensor of `n` elements, of any shape (quantized storage is
  /// flat, or shaped after its weight where tensor parallelism splits it).
  bool holds(const TensorView &t, const char *what, DType dtype, int64_t n);
  /// An f32 scalar (rank 0 or one element).
  bool isF32Scalar(const TensorView &t, const char *what);
  /// Every dimension fits a BLAS int.
  bool fitsInt(const TensorView &t, const char *what);

  /// A required float attribute (an int attribute is accepted and widened).
  bool floatAttr(const char *name, double *value);
  /// An optional float attribute (an int one is widened).
  bool floatAttr(const char *name, double *value, double fallback);
  /// An optional int attribute.
  bool intAttr(const char *name, int64_t *value, int64_t fallback);
  /// An optional 0/1 attribute; absent means false.
  bool flagAttr(const char *name, bool *value);
  /// A required int-array attribute.
  bool intsAttr(const char *name, std::vector<int64_t> *value);

private:
  const char *kernel_;
  const KernelArgs &args_;
  std::string &error_;
};

} // namespace llmc

#endif
