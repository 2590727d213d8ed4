//===- Checkpoint.h - save and resume training state ------------*- C++ -*-===//
//
// A checkpoint directory holds one subdirectory per saved step
// (`step_00000100/`: model.safetensors with the parameters,
// optimizer.safetensors with the AdamW moments, state.json with the step,
// seed, loss, data position and the artifact's content hash) and a `latest`
// file naming the newest one. Every file is written atomically and `latest`
// is replaced last, so an interrupted save never damages the previous
// checkpoint.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define LLMC_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/Arena.h"
#include "runtime/Artifact.h"
#include "runtime/Executor.h"
#include "runtime/checkpoint/Safetensors.h"

#include <cstdint>
#include <string>

namespace llmc {

struct TrainState {
  int64_t step = 0;       ///< optimizer steps completed
  uint64_t seed = 0;      ///< initialisation / data-order seed
  double loss = 0;        ///< training loss of the last step
};

/// Saves parameters, optimizer state and `state` under `dir`.
void saveCheckpoint(const std::string &dir, const Artifact &artifact, const Arena &arena,
                    const TrainState &state);

/// Restores the newest checkpoint under `dir` into `arena`; checks that every
/// persistent buffer is present with the right dtype and shape.
TrainState loadCheckpoint(const std::string &dir, const Artifact &artifact,
                          const Arena &arena);

/// Writes the parameters, the batch it ran on (`tokens`, `targets`: copies
/// taken before the run, since a program reuses its input buffers) and the
/// `grad/<name>` outputs of a grad program (plus its loss as metadata) to one
/// safetensors file.
void dumpGradients(const std::string &path, const Artifact &artifact, const Arena &arena,
                   const BoundProgram &grad, const std::vector<SafeTensor> &batch);

} // namespace llmc

#endif
