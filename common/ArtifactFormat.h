//===- ArtifactFormat.h - constants shared by writer and reader -*- C++ -*-===//
//
// The artifact is a FlatBuffer (schema/artifact.fbs) whose `content_hash`
// is the FNV-1a 64 hash of the whole buffer computed while the field holds 0
// (the writer builds with force-defaults so the field is always present,
// then patches it in place).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMMON_ARTIFACTFORMAT_H
#define LLMC_COMMON_ARTIFACTFORMAT_H

#include <cstddef>
#include <cstdint>

namespace llmc {

/// major * 100 + minor. The runtime accepts the same major version.
/// 1.5: padding shard levels (ShardLevel.pad_to).
/// 1.6: the fault-injection site (Instruction.fault_site).
/// 1.7: pipeline transfer channels (Instruction.channel).
/// 1.8: host memory (Buffer.space, Instruction.on_host, MemoryPlan.host_bytes).
/// 1.9: offloaded activations (MemoryPlan.host_activations_bytes).
/// 1.10: streamed generation weights (MemoryPlan.host_weights_bytes).
/// 1.11: collectives on the host (Instruction.on_host on a collective).
inline constexpr uint32_t kArtifactSchemaVersion = 111;

inline uint64_t fnv1a64(const uint8_t *data, size_t size) {
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

} // namespace llmc

#endif
