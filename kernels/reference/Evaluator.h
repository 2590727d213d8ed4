//===- Evaluator.h - reference evaluators registered by op name -*- C++ -*-===//
//
// How the compiler's IR interpreter (compiler/Interpreter.cpp) evaluates an
// op without knowing it: each reference source registers, beside its
// functions, one evaluator per op name ("llm.matmul", "qat.fake_quant")
// that reads the op's operands, attributes and result shapes from a
// RefCall and returns the op's results. A new op therefore needs its
// reference and one registration here, and no edit of the interpreter.
//
// A RefCall carries what the interpreter sees of the op, encoded as the
// exec lowering encodes kernel attributes: integers and booleans as ints
// (a unit attribute present is 1), floats as doubles, integer arrays as
// ints, a #qat.scheme as the kernels' `format`, `granularity`, `axis`,
// `block`, `symmetric` (and `outlier`) of common/QuantScheme.h. An
// attribute with a default in the op's definition is always there (MLIR
// fills it in when the op is made), so evaluators read it as required;
// only an optional attribute (OptionalAttr) may be absent.
//
// MLIR-free like the rest of the reference library.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_REFERENCE_EVALUATOR_H
#define LLMC_KERNELS_REFERENCE_EVALUATOR_H

#include "kernels/reference/Reference.h"

#include <map>
#include <string>
#include <vector>

namespace llmc::ref {

/// One op to evaluate: its operands (already evaluated), attributes and
/// result shapes. Accessors abort naming the op and what is missing.
struct RefCall {
  std::string op; ///< the op's name, for messages
  std::vector<const RefTensor *> operands;
  /// Operands per declared operand, when the op declares several optional
  /// or variadic ones (MLIR's operandSegmentSizes); empty otherwise, when
  /// operand i is simply operands[i] (a single optional or variadic
  /// operand is always the last).
  std::vector<int64_t> segments;
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, std::vector<int64_t>> arrays;
  std::vector<std::vector<int64_t>> resultShapes;
  int64_t step = 1; ///< the optimizer step (dropout masks)

  /// The tensors of declared operand `i` (none for an absent optional).
  std::vector<const RefTensor *> group(size_t i) const;
  /// Declared operand `i`, which must be present.
  const RefTensor &in(size_t i) const;
  /// Declared operand `i`, or null when absent.
  const RefTensor *optional(size_t i) const;
  /// Copies of the tensors of declared operand `i`; without segments,
  /// every operand from `i` on (the trailing variadic one).
  std::vector<RefTensor> variadic(size_t i) const;
  /// The single value of the scalar operand `i`.
  double scalar(size_t i) const;

  bool has(const std::string &name) const;
  /// A required integer (or boolean) attribute.
  int64_t integer(const std::string &name) const;
  int64_t integer(const std::string &name, int64_t fallback) const;
  /// A boolean or unit attribute: false when absent.
  bool flag(const std::string &name) const { return integer(name, 0) != 0; }
  /// A required float attribute (an integer one is widened).
  double real(const std::string &name) const;
  double real(const std::string &name, double fallback) const;
  /// An integer array attribute; empty when absent.
  std::vector<int64_t> array(const std::string &name) const;
  /// The `format`, `granularity`, ... encoding of a #qat.scheme.
  quant::Scheme scheme() const;
  /// A zero tensor of result `i`'s shape (a scratch result).
  RefTensor zeroResult(size_t i) const;
};

/// An op's results, in order.
using Results = std::vector<RefTensor>;

/// Evaluates one op: its results, one per result of the op.
using Evaluator = std::vector<RefTensor> (*)(const RefCall &call);

/// Registers `evaluator` for op `name`; called from static initialisers.
bool registerEvaluator(const char *name, Evaluator evaluator);
/// The evaluator of op `name`, or null when there is none.
Evaluator findEvaluator(const std::string &name);
/// Every op name with an evaluator, sorted.
std::vector<std::string> evaluatorNames();

} // namespace llmc::ref

#define LLMC_REF_CONCAT_(a, b) a##b
#define LLMC_REF_CONCAT(a, b) LLMC_REF_CONCAT_(a, b)
/// Registers an evaluator (a function or captureless lambda, the variadic
/// part, so that commas in a lambda's body need no parentheses) for op
/// `NAME` at static-initialisation time.
#define LLMC_REGISTER_EVALUATOR(NAME, ...)                                                         \
  static const bool LLMC_REF_CONCAT(llmc_evaluator_registered_, __LINE__) =                        \
      ::llmc::ref::registerEvaluator(NAME, __VA_ARGS__)

#endif
