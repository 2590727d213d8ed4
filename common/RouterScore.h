//===- RouterScore.h - how a mixture of experts scores its experts -*- C++ -*-===//
//
// llm.moe_route's `score` attribute is a string in the IR ("softmax",
// "sigmoid") and an integer in the artifact, which the kernels and the
// reference evaluators read; both sides take the encoding from here.
//
// softmax: Mixtral's and Qwen-MoE's probabilities over the experts.
// sigmoid: DeepSeek-V3's scoring_func "sigmoid", each expert's σ(logit)
// on its own, optionally biased for the choice alone.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_ROUTERSCORE_H
#define LLMC_COMMON_ROUTERSCORE_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace llmc {

enum class RouterScore : int64_t { Softmax = 0, Sigmoid = 1 };

/// The score named `name`, or nullopt for any other name.
inline std::optional<RouterScore> parseRouterScore(std::string_view name) {
  if (name == "softmax")
    return RouterScore::Softmax;
  if (name == "sigmoid")
    return RouterScore::Sigmoid;
  return std::nullopt;
}

} // namespace llmc

#endif
