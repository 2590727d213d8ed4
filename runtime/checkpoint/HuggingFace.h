//===- HuggingFace.h - Hugging Face model directories -----------*- C++ -*-===//
//
// A Hugging Face model directory — config.json and model.safetensors (or
// shards listed by model.safetensors.index.json) — as transformers'
// `save_pretrained` writes it for GPT2LMHeadModel and LlamaForCausalLM.
// llmc's models already use HF's layouts (GPT-2's Conv1D [in, out] weights
// with the fused c_attn; Llama's [out, in] projections and rotate_half
// RoPE over the two halves of a head), so a tensor maps to a parameter by
// name alone: HF's "transformer." (GPT-2) or "model." (Llama) prefix,
// lm_head.weight as is; a tied head is the embedding table in both. A
// mixture of experts' stacked projections are the per-expert tensors
// (expertSliceNames), one slice each.
//
// Loading (`llmc-run --weights hf_dir/`) checks config.json against the
// artifact's model first; the tensors then take llmc's one loading path
// (runtime/checkpoint/Weights.h), so every layout gets its pieces.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_HUGGINGFACE_H
#define LLMC_RUNTIME_CHECKPOINT_HUGGINGFACE_H

#include "runtime/Artifact.h"
#include "runtime/checkpoint/Safetensors.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace llmc {

/// The Hugging Face name of parameter `name` of a `family` model.
std::string huggingFaceName(const std::string &family, const std::string &name);

/// A mixture of experts' stacked parameter ("layers.0.block_sparse_moe.
/// experts.w1.weight", [E, ...]) is E tensors in a Hugging Face directory,
/// one per expert ("model.layers.0.block_sparse_moe.experts.<e>.w1.weight"):
/// their names, in expert order, given E; empty for any other parameter.
std::vector<std::string> expertSliceNames(const std::string &family, const std::string &name,
                                          int64_t experts);

/// Whether `path` is a directory (then it must be a Hugging Face model).
bool isDirectory(const std::string &path);

/// The tensor files of a Hugging Face model directory — model.safetensors,
/// or the shards model.safetensors.index.json lists — mapped, each tensor
/// found by its HF name in whichever file holds it (not where the index
/// says). Throws naming a missing file or a tensor two files hold.
class HuggingFaceFiles {
public:
  explicit HuggingFaceFiles(const std::string &dir);

  /// The file holding the tensor of HF name `name`, or null.
  const SafetensorsFile *find(const std::string &name) const;
  /// Every tensor's HF name and its file.
  const std::map<std::string, const SafetensorsFile *> &tensors() const { return where_; }

private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile *> where_;
};

/// The family of the Hugging Face model directory `dir`: its config.json's
/// model_type, gpt2 or llama; throws naming the file otherwise.
std::string huggingFaceFamily(const std::string &dir);
/// The same for callers built without exceptions: false with `error`.
bool huggingFaceFamily(const std::string &dir, std::string &family, std::string &error);

/// A Hugging Face model directory, opened for loading into an artifact.
class HuggingFaceModel {
public:
  /// Reads `dir`'s config.json and checks it against the artifact's model,
  /// then opens the tensor files and checks that each tensor is a
  /// parameter of the model (on any rank: a pipeline stage knows the other
  /// stages' names too). Throws naming the first field that differs, the
  /// missing file or the tensor.
  HuggingFaceModel(const std::string &dir, const Artifact &artifact);

  const std::string &family() const { return family_; }
  /// The file holding parameter `name` and the tensor's name in it, or
  /// null when no file does.
  const SafetensorsFile *find(const std::string &name, std::string &stored) const;
  /// The file holding the tensor of HF name `hfName`, or null.
  const SafetensorsFile *findTensor(const std::string &hfName) const {
    return files_->find(hfName);
  }

private:
  void checkNoExtraTensors() const;

  std::string family_;
  bool tied_ = false;
  std::unique_ptr<HuggingFaceFiles> files_;
  std::set<std::string> parameters_; ///< the model's, under HF's names
};

struct HuggingFaceExport {
  int64_t tensors = 0;
  std::string dtype; ///< of the written tensors
};

/// `llmc export-hf`: writes `outDir`/config.json (from the artifact's
/// model) and `outDir`/model.safetensors (every parameter at full
/// precision, under HF's name) from `source`, a checkpoint directory (any
/// layout) or an llmc weights file; in `dtype` ("float32", "bfloat16",
/// "float16": HF's torch_dtype) when given, else as stored. False with
/// `error` naming what is missing or cannot be exported (LoRA adapters:
/// merge them first).
bool exportHuggingFace(const std::string &source, const std::string &artifactPath,
                       const std::string &outDir, const std::string &dtype,
                       HuggingFaceExport &report, std::string &error);

} // namespace llmc

#endif
