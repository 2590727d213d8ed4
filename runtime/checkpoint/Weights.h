//===- Weights.h - parameters from a safetensors file -----------*- C++ -*-===//
//
// `llmc-run --weights file.safetensors`: the parameters start from the
// global tensors of a file — plain, or quantized by `llmc quantize` and
// dequantized here (runtime/quant/QuantizedFile.h) — or of a Hugging Face
// model directory (runtime/checkpoint/HuggingFace.h), or of an llmc
// checkpoint directory (its latest step, any layout) instead of the random
// initialisation. Every rank takes its piece of each tensor through the
// same index mapping checkpoint restore and initialisation use, so one
// file serves any layout.
//
// Files are mapped (runtime/checkpoint/Safetensors.h): a plain tensor is
// converted element by element from the mapping into the rank's piece
// (bf16 or f16 widened, or narrowed to a bf16 parameter), so a rank reads
// only its piece's pages and holds no copy of the file; a checkpoint's
// piece is gathered from the saved pieces that hold it. Only a tensor
// stored quantized is dequantized whole first. Parameters are copied into
// the arena, never used in place from the mapping: the executor binds
// every buffer at its planned offset in the one arena.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_WEIGHTS_H
#define LLMC_RUNTIME_CHECKPOINT_WEIGHTS_H

#include "runtime/Arena.h"
#include "runtime/Artifact.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

struct WeightsLoaded {
  int64_t tensors = 0;     ///< parameters set from the file
  int64_t dequantized = 0; ///< of which stored quantized
  int64_t observers = 0;   ///< fake-quantization observer states (activation ranges)
  int64_t freshAdapters = 0; ///< LoRA adapters the file lacks: left as initialised
};

/// Parameters read in place from a mapped weights file instead of copied
/// into the arena: the ranges to place outside it (Arena::placeOutside)
/// and the files, which must stay mapped while programs read them.
struct WeightsInPlace {
  struct Range {
    size_t offset = 0, bytes = 0;
    const uint8_t *data = nullptr;
  };
  std::vector<Range> ranges;
  std::vector<std::shared_ptr<const void>> files;
  /// Places every range outside `arena`.
  void placeIn(Arena &arena) const;
};

/// Sets every parameter of this rank (and its master copy, when the
/// artifact keeps one) from `path`. Optimizer state, and LoRA adapters the
/// file lacks (it holds the base model), are left as they are (the caller
/// has initialised them). Throws naming the file and tensor when the file
/// is missing, lacks a parameter, or holds it with another shape; for a
/// Hugging Face directory also when config.json disagrees with the
/// artifact's model or a tensor is no parameter.
///
/// With `inPlace`, a parameter that a safetensors file (or a Hugging Face
/// directory's shard) holds exactly as the arena would — same dtype, the
/// whole tensor (unsharded), aligned to its element — is not copied: its
/// mapped bytes are recorded there instead, for a run whose programs only
/// read parameters (inference on the CPU).
WeightsLoaded loadWeights(const std::string &path, const Artifact &artifact, const Arena &arena,
                          int rank, WeightsInPlace *inPlace = nullptr);

/// Starts a run from `path`: zeroes the persistent state, initialises only
/// the LoRA adapters (a base model's file lacks them; one that holds them
/// overwrites them) and then loads the file. Drawing every parameter first
/// would cost a 1B model's start-up more than reading it.
WeightsLoaded initializeFromWeights(const std::string &path, const Artifact &artifact,
                                    const Arena &arena, uint64_t seed, int rank,
                                    WeightsInPlace *inPlace = nullptr);

} // namespace llmc

#endif
