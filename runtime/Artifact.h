//===- Artifact.h - a loaded, verified .llmc artifact -----------*- C++ -*-===//
//
// loadArtifact() runs the FlatBuffers verifier, checks the schema version and
// content hash, then decodes the rank's role into plain structs and checks
// their semantics (every buffer inside the arena, every instruction operand a
// valid buffer index, parameters consistent with their buffers). Errors throw
// RuntimeError naming the file, program, instruction index and field.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_ARTIFACT_H
#define LLMC_RUNTIME_ARTIFACT_H

#include "common/QuantScheme.h"
#include "kernels/Kernel.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llmc {

/// How persistent state is split over mesh axes (tensor parallelism, ZeRO):
/// starting from a tensor of `globalShape`, each level cuts dimension `dim`
/// into `blocks` equal blocks and splits each block over the ranks of
/// `axes`; this rank keeps its piece of every block. A level with `padTo`
/// (and no axes) instead grows dimension `dim` to `padTo`, the new tail
/// zeros that are no part of the global tensor (a vocabulary padded inside
/// the artifact, `llmc compile --vocab-multiple`). No levels: the whole
/// tensor.
struct ShardLevel {
  std::vector<std::string> axes;
  int dim = 0;
  int blocks = 1;
  int64_t padTo = 0; ///< > 0: a padding level
  bool pads() const { return padTo > 0; }
};
struct ShardInfo {
  std::vector<int64_t> globalShape;
  std::vector<ShardLevel> levels;
  bool sharded() const { return !levels.empty(); }
};

struct BufferInfo {
  std::string name, category;
  uint64_t offset = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  ShardInfo shard;
  /// In host memory (ZeRO-Offload): offsets [arena, arena + hostBytes).
  bool host = false;
  size_t bytes() const;
};

enum class InstructionKind : uint8_t {
  Kernel, AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll,
  Send, Recv, RecordEvent, WaitEvent, AllSlice
};
const char *instructionKindName(InstructionKind kind);

/// Element `index` of kernel attribute `attr` grows by the rank's position
/// in the group over `axes` times `stride` (resolved when binding).
struct RankOffsetInfo {
  std::string attr;
  int32_t index = 0;
  std::vector<std::string> axes;
  int64_t stride = 0;
};

struct InstructionInfo {
  InstructionKind kind = InstructionKind::Kernel;
  std::string kernel;
  std::vector<uint32_t> inputs, outputs;
  KernelAttrs attrs;
  std::vector<RankOffsetInfo> rankOffsets;
  std::string action; ///< the part of the step ("F0", "B1.2"), for traces
  /// After this instruction a fault test overwrites the buffer it writes
  /// with NaN (exec.fault_site; never set before schema 1.6).
  bool faultSite = false;
  /// A kernel that runs on the host's cores on host buffers (ZeRO-Offload).
  bool onHost = false;
  std::vector<std::string> group;
  std::string reduction, axis;
  int64_t root = 0, shift = 0, tag = 0, event = 0;
  int32_t stream = 0;
  /// Send/Recv: the communicator it travels on (common/TransferChannel.h;
  /// 0, the collectives', before schema 1.7).
  int32_t channel = 0;
  std::string location;
};

struct ProgramInfo {
  std::string name;
  std::vector<BufferInfo> buffers;
  std::vector<InstructionInfo> instructions;
  uint64_t peakBytes = 0;
  /// The most transient bytes live at one instruction (0: not recorded,
  /// before schema 1.4).
  uint64_t liveBytesBound = 0;
  /// Index of the buffer with this name, or -1.
  int findBuffer(const std::string &name) const;
};

struct ParameterInfo {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  uint64_t offset = 0;
  std::string init;
  double scale = 0;
  bool trainable = true;
  ShardInfo shard;
  int64_t numel() const;
};

struct MemoryPlanInfo {
  uint64_t arenaBytes = 0, persistentBytes = 0, peakBytes = 0;
  /// Host memory beside the arena (ZeRO-Offload; 0 without), numbered
  /// after it, and how much of it is optimizer state.
  uint64_t hostBytes = 0, hostOptimizerStateBytes = 0, hostActivationsBytes = 0,
           hostWeightsBytes = 0;
  std::vector<std::pair<std::string, uint64_t>> breakdown;
  /// Per category of transient bytes, the most ever live at once.
  std::map<std::string, uint64_t> categoryPeaks;
  /// The gradients live at the gradient peak, by what they are:
  /// "gradients", "buckets", "fp32 copies".
  std::map<std::string, uint64_t> gradientPeakParts;
  /// At the peak, the activations by the microbatch that produced them.
  std::map<int64_t, uint64_t> activationsByMicrobatch;
  /// Bytes each layer keeps for its backward, per microbatch, in model
  /// order (h.2 before h.10).
  std::vector<std::pair<std::string, uint64_t>> savedPerLayer;
};

/// Another role's persistent state, as checkpoints need it: every rank
/// must agree on which role's ranks write each tensor.
struct RoleState {
  std::vector<int> ranks;
  std::vector<BufferInfo> persistent; ///< named param / optim buffers, once each
};

struct Artifact {
  std::string path;
  uint32_t schemaVersion = 0;
  uint64_t contentHash = 0;
  std::string producer, backend;
  std::vector<std::pair<std::string, int>> mesh;
  int worldSize = 1;
  std::vector<int> ranks; ///< ranks that run this role
  std::vector<RoleState> roles; ///< every role's persistent state, in order
  std::vector<ProgramInfo> programs;
  std::vector<ParameterInfo> parameters;
  MemoryPlanInfo memory;
  std::map<std::string, std::string> metadata;

  /// The program with this name, or null.
  const ProgramInfo *program(const std::string &name) const;
  /// Metadata as text / number, with a fallback when absent.
  std::string meta(const std::string &key, const std::string &fallback = "") const;
  double metaNumber(const std::string &key, double fallback) const;
  /// A comma-separated metadata value ("dp,fsdp"), its empty items dropped.
  std::vector<std::string> metaList(const std::string &key) const;
};

/// Whether an embedding lookup of `artifact`'s programs reads parameter
/// `weight`, as stored or expanded from its NF4 storage (QLoRA): a tied
/// head's table.
bool lookupReads(const Artifact &artifact, const std::string &weight);

/// The format of the absmax levels of every NF4 storage `artifact` holds
/// (`--double-quant`; int8 for an artifact that does not record it);
/// throws naming the artifact for a value it does not know.
quant::AbsmaxFormat nf4AbsmaxFormat(const Artifact &artifact);

/// Loads the role of `rank` from `path`.
Artifact loadArtifact(const std::string &path, int rank = 0);

} // namespace llmc

#endif
