//===- Checkpoint.h - save and resume training state ------------*- C++ -*-===//
//
// A checkpoint directory holds one subdirectory per saved step and a
// `latest` file naming the newest one. A step directory (`step_00000100/`)
// has
//   model-rank00003.safetensors      parameters this rank holds,
//   optimizer-rank00003.safetensors  AdamW moments this rank holds,
//   index.json                       every tensor's global shape and which
//                                    file holds which rows of it,
//   state.json                       step, seed, loss, data position, mesh.
// A rank writes a tensor when it holds a shard of it, or for a replicated
// tensor when it is the first of its replicas; loading reads each rank's
// rows from whichever files hold them, so a checkpoint saved under one
// layout (dp2 with ZeRO-3, say) loads under any other (one rank, dp4, ...).
// Files are written atomically; `latest` is replaced last (after every rank
// finished), so an interrupted save never damages the previous checkpoint.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define LLMC_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "common/Mesh.h"
#include "runtime/checkpoint/Retention.h"
#include "runtime/Arena.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/Sharding.h"
#include "runtime/comm/Communicator.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/Json.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>
#include <string>

namespace llmc {

struct TrainState {
  int64_t step = 0;       ///< optimizer steps completed
  uint64_t seed = 0;      ///< initialisation / data-order seed
  double loss = 0;        ///< training loss of the last step
  /// Steps among the first `step` that were skipped (non-finite loss or
  /// gradient norm): AdamW's bias correction counts only applied updates.
  int64_t skippedSteps = 0;
  /// fp16 dynamic loss scaling: the scale the next step uses and the clean
  /// steps since it last changed, so a resumed run scales exactly as an
  /// uninterrupted one. 0: the artifact does not scale its loss.
  double lossScale = 0;
  int64_t lossScaleCleanSteps = 0;
  /// Fake-quantization observer states the checkpoint did not have (it
  /// was saved without --qat): they start fresh, as never observed.
  int64_t freshObservers = 0;
  /// LoRA adapter tensors (and their optimizer state) the checkpoint did
  /// not have (it holds the base model): they keep their initial values.
  int64_t freshAdapters = 0;
};

/// Every persistent buffer of `category` ("param", "optim") of this rank's
/// programs, each name once.
std::vector<const BufferInfo *> persistentBuffers(const Artifact &artifact,
                                                  const std::string &category);

/// The global shape of persistent buffer `b` (its own when not sharded).
std::vector<int64_t> globalShapeOf(const BufferInfo &b);

/// Every parameter of the model and its global shape, from every role (a
/// pipeline stage runs only its own layers).
std::map<std::string, std::vector<int64_t>> modelParameters(const Artifact &artifact);

/// A persistent buffer's piece as checkpoints store it: its trailing
/// padding levels dropped, so a vocabulary padded inside the artifact is
/// saved as its real rows unless a split follows the padding (tensor
/// parallelism, ZeRO: then the pieces keep it and the index says so).
struct SavedPiece {
  std::string name;
  DType dtype = DType::F32;
  ShardInfo shard;               ///< the buffer's levels, trailing padding dropped
  std::vector<int64_t> shape;    ///< the saved piece's
  const uint8_t *data = nullptr; ///< into the arena, or into `copy`
  size_t bytes = 0;
  std::vector<uint8_t> copy;     ///< the real part when it is not the buffer's head
};
/// `b`'s saved piece from its bytes at `data` (null: the layout alone).
SavedPiece savedPiece(const BufferInfo &b, const uint8_t *data, const Mesh &mesh);

/// Copies one piece of saved tensor `name` into `out`: the piece at
/// `positions` of layout `target`, `elementBytes` per element, gathered
/// from the saved pieces the index `entry` describes, whatever layout saved
/// them. The saved tensor's global shape is `savedShape`: the target's, or
/// another of as many elements whose row-major order is the target's
/// (quantized storage, savedShapeFits). Opens rank files in `stepDir`
/// through the cache `files`; throws naming `where` on a bad level or a
/// missing or mis-sized piece.
void copySaved(const json::Value &entry, const std::string &name,
               const std::vector<int64_t> &savedShape, size_t elementBytes,
               const ShardMap &target, const std::vector<int> &positions, uint8_t *out,
               const std::string &stepDir, const std::string &where,
               std::map<std::string, std::unique_ptr<SafetensorsFile>> &files);

/// Whether persistent tensor `name` ("<param>" or "<role>/<param>") belongs
/// to a LoRA adapter.
bool isAdapterTensor(const std::string &name);

/// Whether tensor `name` is part of a weight's quantized storage
/// (`<weight>.qweight`, `.scale`, `.zero_point`, `.absmax_q`): flat in a
/// file or a one-rank checkpoint, shaped after its weight ([rows, bytes or
/// groups per row]) where tensor parallelism splits the weight.
bool isQuantizedStorage(const std::string &name);

/// Whether tensor `name` holds NF4's double-quantized absmax levels
/// (`<weight>.absmax_q`), whose format (int8 or E4M3) the bytes do not say:
/// a checkpoint's index records it per tensor (`absmax_format`).
bool isNf4AbsmaxLevels(const std::string &name);

/// The absmax level format a checkpoint index `entry` records for a
/// tensor (int8 when it records none, as before fp8 levels existed);
/// throws naming `where` for one it does not know.
quant::AbsmaxFormat savedAbsmaxFormat(const json::Value &entry, const std::string &where);

/// Throws, naming `where` and tensor `name`, when absmax levels saved in
/// format `saved` are not the ones the model reads (`wanted`): the bytes
/// would be read as the other format's numbers.
void checkAbsmaxFormat(quant::AbsmaxFormat saved, quant::AbsmaxFormat wanted,
                       const std::string &where, const std::string &name);

/// Whether a stored tensor `name` of shape `stored` fills a tensor of global
/// shape `wanted`: the same shape, or quantized storage of as many elements
/// (flat and shaped storage hold their elements in the same order).
bool storedShapeFits(const std::string &name, const std::vector<int64_t> &stored,
                     const std::vector<int64_t> &wanted);

/// Saves this rank's part of parameters and optimizer state, and (rank 0)
/// the index and `state`, under `dir`; then (rank 0) deletes the older
/// checkpoints `retention` does not keep. Every rank calls it.
void saveCheckpoint(const std::string &dir, const Artifact &artifact, const Arena &arena,
                    const TrainState &state, int rank, Communicator &comm,
                    const RetentionPolicy &retention = {});

/// Restores the newest checkpoint under `dir` into this rank's `arena`;
/// checks that every persistent tensor is present with the right dtype and
/// global shape. Observer states may be absent (QAT fine-tuning of a
/// checkpoint trained without it: they are zeroed), and so may LoRA adapters
/// and their optimizer state (fine-tuning the base model: they keep what
/// `arena` holds, so initialise it first).
TrainState loadCheckpoint(const std::string &dir, const Artifact &artifact,
                          const Arena &arena, int rank);

/// Writes the parameters, the batch it ran on (`tokens`, `targets`: copies
/// taken before the run, since a program reuses its input buffers) and the
/// `grad/<name>` outputs of a grad program (plus its loss as metadata) to one
/// safetensors file.
void dumpGradients(const std::string &path, const Artifact &artifact, const Arena &arena,
                   const BoundProgram &grad, const std::vector<SafeTensor> &batch);

} // namespace llmc

#endif
