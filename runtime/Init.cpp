//===- Init.cpp - deterministic parameter initialisation ------------------===//

#include "runtime/Init.h"

#include "runtime/ArtifactFormat.h"
#include "runtime/Mesh.h"
#include "runtime/Sharding.h"
#include "runtime/support/Error.h"

#include <cmath>
#include <cstring>

namespace llmc {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t streamKey(uint64_t seed, const std::string &name) {
  return splitmix64(seed ^ fnv1a64(reinterpret_cast<const uint8_t *>(name.data()), name.size()));
}

/// Uniform in (0, 1].
double unit(uint64_t key, uint64_t counter) {
  uint64_t bits = splitmix64(key + counter * 0xD1B54A32D192ED03ull);
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

void initializeParameters(const Artifact &artifact, const Arena &arena, uint64_t seed,
                          int rank) {
  // Optimizer state (and everything else persistent) starts at zero.
  std::memset(arena.base(), 0, artifact.memory.persistentBytes);
  for (const ParameterInfo &p : artifact.parameters) {
    if (p.dtype != DType::F32 && p.dtype != DType::BF16 && p.dtype != DType::F64)
      fail("parameter '", p.name, "': cannot initialise dtype ", dtypeName(p.dtype));
    void *data = arena.base() + p.offset;
    int64_t n = p.numel();
    uint64_t key = streamKey(seed, p.name);
    ShardMap map(p.shard, p.shape, artifact.mesh);
    std::vector<int> positions = map.positions(rank);
    if (p.init == "zeros" || p.init == "ones") {
      double v = p.init == "ones" ? 1.0 : 0.0;
      for (int64_t i = 0; i < n; ++i) store(data, p.dtype, i, v);
    } else if (p.init == "normal") {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        store(data, p.dtype, i,
              p.scale * normalAt(key, map.toGlobal(positions, i)));
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        store(data, p.dtype, i,
              p.scale * (2.0 * unit(key, map.toGlobal(positions, i)) - 1.0));
    }
  }
}

} // namespace llmc
