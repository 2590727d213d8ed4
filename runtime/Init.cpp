//===- Init.cpp - deterministic parameter initialisation ------------------===//

#include "runtime/Init.h"
#include "common/Half.h"

#include "common/ArtifactFormat.h"
#include "common/Mesh.h"
#include "runtime/Sharding.h"
#include "runtime/support/Error.h"
#include "runtime/support/SplitMix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace llmc {
namespace {

uint64_t streamKey(uint64_t seed, const std::string &name) {
  return splitMix64(seed ^ fnv1a64(reinterpret_cast<const uint8_t *>(name.data()), name.size()));
}

/// Uniform in (0, 1].
double unit(uint64_t key, uint64_t counter) {
  uint64_t bits = splitMix64(key + counter * 0xD1B54A32D192ED03ull);
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}

double normalAt(uint64_t key, uint64_t index) {
  double u1 = unit(key, 2 * index), u2 = unit(key, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

void store(void *data, DType dtype, int64_t i, double value) {
  switch (dtype) {
  case DType::F32: static_cast<float *>(data)[i] = static_cast<float>(value); break;
  case DType::BF16: static_cast<uint16_t *>(data)[i] = floatToBf16(static_cast<float>(value)); break;
  case DType::F16: static_cast<uint16_t *>(data)[i] = half::fromFloat(static_cast<float>(value)); break;
  case DType::F64: static_cast<double *>(data)[i] = value; break;
  default: break; // rejected before any loop (initializeParameters)
  }
}

} // namespace

double initNormal(uint64_t seed, const std::string &name, uint64_t index) {
  return normalAt(streamKey(seed, name), index);
}

double initUniform(uint64_t seed, const std::string &name, uint64_t index) {
  return 2.0 * unit(streamKey(seed, name), index) - 1.0;
}

namespace {

/// Fills `n` elements of a tensor holding the piece of parameter `p` that
/// `map` describes, with the values of p's initializer.
void fill(const ParameterInfo &p, void *data, DType dtype, const ShardMap &map, uint64_t seed,
          int rank) {
  // Quantized storage (8-bit codes, int32 zero points) starts as zeros,
  // like the state.
  if ((dtype == DType::U8 || dtype == DType::I32) && p.init == "zeros")
    return;
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F64)
    fail("parameter '", p.name, "': cannot initialise dtype ", dtypeName(dtype));
  int64_t n = map.localNumel();
  uint64_t key = streamKey(seed, p.name);
  std::vector<int> positions = map.positions(rank);
  if (p.init == "zeros" || p.init == "ones") {
    double v = p.init == "ones" ? 1.0 : 0.0;
    for (int64_t i = 0; i < n; ++i) store(data, dtype, i, map.toGlobal(positions, i) < 0 ? 0.0 : v);
  } else if (p.init == "normal") {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      int64_t g = map.toGlobal(positions, i);
      store(data, dtype, i, g < 0 ? 0.0 : p.scale * normalAt(key, g));
    }
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      int64_t g = map.toGlobal(positions, i);
      store(data, dtype, i, g < 0 ? 0.0 : p.scale * (2.0 * unit(key, g) - 1.0));
    }
  }
}

/// Zeroes the persistent state (optimizer state and everything else)
/// except the parameters `wanted` rejects and their master copies: the
/// caller sets those next, and a parameter it reads from outside the arena
/// keeps its pages untouched.
void zeroPersistentState(const Artifact &artifact, const Arena &arena,
                         const std::function<bool(const std::string &)> &wanted) {
  std::vector<std::pair<uint64_t, uint64_t>> keep; // [offset, end) left as they are
  for (const ParameterInfo &p : artifact.parameters)
    if (!wanted(p.name))
      keep.push_back({p.offset, p.offset + ShardMap(p.shard, p.shape, artifact.mesh).localNumel() *
                                               dtypeSize(p.dtype)});
  for (const ProgramInfo &program : artifact.programs)
    for (const BufferInfo &b : program.buffers)
      if (b.category == "optim" && b.name.rfind("master/", 0) == 0 && !wanted(b.name.substr(7)))
        keep.push_back({b.offset, b.offset + b.bytes()});
  std::sort(keep.begin(), keep.end());
  // The persistent state: the arena's first bytes, and the optimizer state
  // in host memory (ZeRO-Offload).
  auto zeroRange = [&](uint64_t from, uint64_t to) {
    uint64_t at = from;
    for (auto [begin, end] : keep) {
      if (end <= from || begin >= to)
        continue;
      if (begin > at)
        std::memset(arena.base() + at, 0, begin - at);
      at = std::max(at, end);
    }
    if (to > at)
      std::memset(arena.base() + at, 0, to - at);
  };
  zeroRange(0, artifact.memory.persistentBytes);
  for (const ProgramInfo &program : artifact.programs)
    for (const BufferInfo &b : program.buffers)
      if (b.host && b.category == "optim" && !b.name.empty())
        zeroRange(b.offset, b.offset + b.bytes());
}

} // namespace

void initializeParameters(const Artifact &artifact, const Arena &arena, uint64_t seed,
                          int rank) {
  initializeParameters(artifact, arena, seed, rank, [](const std::string &) { return true; });
}

void initializeParameters(const Artifact &artifact, const Arena &arena, uint64_t seed, int rank,
                          const std::function<bool(const std::string &)> &wanted) {
  zeroPersistentState(artifact, arena, wanted);
  for (const ParameterInfo &p : artifact.parameters)
    if (wanted(p.name))
      fill(p, arena.base() + p.offset, p.dtype, ShardMap(p.shard, p.shape, artifact.mesh), seed,
           rank);
  // A mixed-precision master copy ("master/<name>", optimizer state) starts
  // at its parameter's values in full precision; the parameter is their
  // rounding, drawn from the same stream.
  for (const ProgramInfo &program : artifact.programs)
    for (const BufferInfo &b : program.buffers) {
      if (b.category != "optim" || b.name.rfind("master/", 0) != 0)
        continue;
      std::string name = b.name.substr(7);
      if (!wanted(name))
        continue;
      auto p = std::find_if(artifact.parameters.begin(), artifact.parameters.end(),
                            [&](const ParameterInfo &q) { return q.name == name; });
      if (p == artifact.parameters.end())
        fail("optimizer state '", b.name, "' has no parameter '", name, "'");
      fill(*p, arena.base() + b.offset, b.dtype, ShardMap(b.shard, b.shape, artifact.mesh),
           seed, rank);
    }
}

} // namespace llmc
