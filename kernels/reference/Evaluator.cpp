//===- Evaluator.cpp - op name -> reference evaluator ---------------------===//
//
// Part of llmc: see Evaluator.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Evaluator.h"
#include "kernels/reference/Common.h"

namespace llmc::ref {
namespace {

std::map<std::string, Evaluator> &table() {
  static std::map<std::string, Evaluator> evaluators;
  return evaluators;
}

[[noreturn]] void failCall(const RefCall &call, const std::string &why) {
  fail("evaluate", call.op + ": " + why);
}

} // namespace

std::vector<const RefTensor *> RefCall::group(size_t i) const {
  if (segments.empty()) {
    if (i < operands.size())
      return {operands[i]};
    return {};
  }
  if (i >= segments.size())
    failCall(*this, "no operand " + std::to_string(i) + " among " +
                        std::to_string(segments.size()) + " declared");
  size_t begin = 0;
  for (size_t s = 0; s < i; ++s) begin += static_cast<size_t>(segments[s]);
  size_t end = begin + static_cast<size_t>(segments[i]);
  if (end > operands.size())
    failCall(*this, "operand segments exceed the operands");
  return {operands.begin() + static_cast<std::ptrdiff_t>(begin),
          operands.begin() + static_cast<std::ptrdiff_t>(end)};
}

const RefTensor &RefCall::in(size_t i) const {
  std::vector<const RefTensor *> g = group(i);
  if (g.size() != 1)
    failCall(*this, "operand " + std::to_string(i) + " is missing");
  return *g[0];
}

const RefTensor *RefCall::optional(size_t i) const {
  std::vector<const RefTensor *> g = group(i);
  return g.empty() ? nullptr : g[0];
}

std::vector<RefTensor> RefCall::variadic(size_t i) const {
  std::vector<RefTensor> tensors;
  if (segments.empty()) {
    for (size_t k = i; k < operands.size(); ++k) tensors.push_back(*operands[k]);
    return tensors;
  }
  for (const RefTensor *t : group(i)) tensors.push_back(*t);
  return tensors;
}

double RefCall::scalar(size_t i) const {
  const RefTensor &t = in(i);
  if (t.data.empty())
    failCall(*this, "operand " + std::to_string(i) + " is empty");
  return t.data[0];
}

bool RefCall::has(const std::string &name) const {
  return ints.count(name) || floats.count(name) || arrays.count(name);
}

int64_t RefCall::integer(const std::string &name) const {
  auto it = ints.find(name);
  if (it == ints.end())
    failCall(*this, "missing integer attribute '" + name + "'");
  return it->second;
}

int64_t RefCall::integer(const std::string &name, int64_t fallback) const {
  auto it = ints.find(name);
  return it == ints.end() ? fallback : it->second;
}

double RefCall::real(const std::string &name) const {
  if (auto it = floats.find(name); it != floats.end())
    return it->second;
  if (auto it = ints.find(name); it != ints.end())
    return static_cast<double>(it->second);
  failCall(*this, "missing float attribute '" + name + "'");
}

double RefCall::real(const std::string &name, double fallback) const {
  return has(name) ? real(name) : fallback;
}

std::vector<int64_t> RefCall::array(const std::string &name) const {
  auto it = arrays.find(name);
  return it == arrays.end() ? std::vector<int64_t>{} : it->second;
}

quant::Scheme RefCall::scheme() const {
  quant::Scheme s;
  s.format = static_cast<quant::Format>(integer("format"));
  s.granularity = static_cast<quant::Granularity>(integer("granularity"));
  s.axis = integer("axis", 0);
  s.block = integer("block", 0);
  s.symmetric = integer("symmetric", 1) != 0;
  s.outlier = real("outlier", 0.0);
  return s;
}

RefTensor RefCall::zeroResult(size_t i) const {
  if (i >= resultShapes.size())
    failCall(*this, "no result " + std::to_string(i));
  return RefTensor::zeros(resultShapes[i]);
}

bool registerEvaluator(const char *name, Evaluator evaluator) {
  if (!table().emplace(name, evaluator).second)
    fail("registerEvaluator", std::string("two evaluators for ") + name);
  return true;
}

Evaluator findEvaluator(const std::string &name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> evaluatorNames() {
  std::vector<std::string> names;
  for (const auto &entry : table()) names.push_back(entry.first);
  return names;
}

} // namespace llmc::ref
