//===- MergeLoRA.h - adapters folded into their base weights ---*- C++ -*-===//
//
// `llmc merge-lora`: from a LoRA (or QLoRA) checkpoint and the artifact it
// was trained with, writes the base model's parameters with every adapter
// merged, W' = W + (alpha/rank)·A·B (a transposed weight: W + (alpha/rank)·
// B·A), in fp32 — QLoRA's NF4 base expanded first — so the plain model
// (`llmc-run base.llmc --weights merged.safetensors`) computes what the
// adapter form did.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_QUANT_MERGELORA_H
#define LLMC_RUNTIME_QUANT_MERGELORA_H

#include <cstdint>
#include <string>

namespace llmc {

struct MergeReport {
  int64_t merged = 0;  ///< weights with an adapter folded in
  int64_t expanded = 0; ///< of which stored in NF4 (QLoRA)
  int64_t copied = 0;  ///< other parameters, as stored
};

/// Reads the latest step of `ckptDir` (any layout) as the artifact at
/// `artifactPath` describes it, merges, writes `output`. False with `error`
/// naming the file and tensor on anything missing or mismatched.
bool mergeLoRA(const std::string &ckptDir, const std::string &artifactPath,
               const std::string &output, MergeReport &report, std::string &error);

} // namespace llmc

#endif
