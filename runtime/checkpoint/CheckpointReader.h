//===- CheckpointReader.h - whole tensors of a saved checkpoint -*- C++ -*-===//
//
// Reads the newest checkpoint under a directory (runtime/checkpoint/
// Checkpoint.h) tensor by tensor, each assembled whole from whichever rank
// files hold its pieces, whatever layout saved it: what a tool that works
// on global tensors (`llmc quantize`) needs, without an artifact. A piece
// of a tensor (one rank's, under any layout) is gathered alone: the rank
// files are mapped, so only the saved bytes that hold it are read.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_CHECKPOINTREADER_H
#define LLMC_RUNTIME_CHECKPOINT_CHECKPOINTREADER_H

#include "common/QuantScheme.h"
#include "runtime/Sharding.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/Json.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

/// A global tensor read from a checkpoint.
struct GlobalTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// A float tensor's values widened to fp32; throws naming `name` for any
/// other dtype.
std::vector<float> floatValues(const GlobalTensor &t, const std::string &name);

class CheckpointReader {
public:
  /// Opens `dir`'s latest step; throws naming what is missing.
  explicit CheckpointReader(const std::string &dir);

  const std::string &stepDir() const { return stepDir_; }
  int64_t step() const { return step_; }
  bool has(const std::string &name) const;
  /// Every tensor's name, in the index's order.
  std::vector<std::string> names() const;
  /// The whole tensor `name`; throws when absent or when a piece is.
  GlobalTensor read(const std::string &name);
  /// Parameter `name` at full precision: its fp32 master copy when a
  /// mixed-precision run kept one, else the parameter itself.
  GlobalTensor readParameter(const std::string &name);
  /// The tensor readParameter(name) reads: "master/<name>" when the
  /// checkpoint has it, else `name`.
  std::string parameterSource(const std::string &name) const;
  /// The saved dtype and global shape of tensor `name`; throws when absent.
  void describe(const std::string &name, DType &dtype, std::vector<int64_t> &shape) const;
  /// The piece at `positions` of layout `target` of tensor `name` (saved
  /// with global shape `savedShape`, describe()), in its saved dtype;
  /// padding of the target's layout is zero.
  std::vector<uint8_t> readPiece(const std::string &name, const std::vector<int64_t> &savedShape,
                                 const ShardMap &target, const std::vector<int> &positions);
  /// The parameters' names (tensors that are no role's state), in order.
  std::vector<std::string> parameterNames() const;
  /// The format of NF4 absmax levels tensor `name` (`<weight>.absmax_q`)
  /// holds, as the index records it; throws when absent.
  quant::AbsmaxFormat absmaxFormat(const std::string &name) const;

private:
  std::string stepDir_, indexPath_;
  int64_t step_ = 0;
  json::Value index_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
};

} // namespace llmc

#endif
