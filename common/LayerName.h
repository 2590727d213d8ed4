//===- LayerName.h - the layer a parameter belongs to -----------*- C++ -*-===//
//
// Parameter names number their decoder layers: "h.3.attn.c_attn.weight"
// (GPT-2), "layers.3.self_attn.q_proj.weight" (Llama and its relatives),
// "layers.3.block_sparse_moe.experts.w1.weight". A parameter's layer is the
// name up to and including its first all-digit component ("h.3",
// "layers.3"); embeddings, final norms and heads have none.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_LAYERNAME_H
#define LLMC_COMMON_LAYERNAME_H

#include <cstdint>
#include <string>
#include <string_view>

namespace llmc {

/// The layer prefix of `parameter` ("h.3"), or "" when it names no layer.
inline std::string_view layerOfParameter(std::string_view parameter) {
  size_t begin = 0;
  while (begin < parameter.size()) {
    size_t end = parameter.find('.', begin);
    if (end == std::string_view::npos)
      end = parameter.size();
    std::string_view part = parameter.substr(begin, end - begin);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos;
    // A leading number is not a layer index ("0.weight" names no layer).
    if (digits && begin > 0)
      return parameter.substr(0, end);
    begin = end + 1;
  }
  return {};
}

/// The index of layer prefix `layer` ("h.3" → 3); -1 for "".
inline int64_t layerIndex(std::string_view layer) {
  size_t dot = layer.rfind('.');
  if (layer.empty() || dot == std::string_view::npos)
    return -1;
  return std::stoll(std::string(layer.substr(dot + 1)));
}

} // namespace llmc

#endif
