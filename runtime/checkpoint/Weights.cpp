//===- Weights.cpp - parameters from a safetensors file -------------------===//

#include "runtime/checkpoint/Weights.h"

#include "runtime/Sharding.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/quant/QuantizedFile.h"
#include "runtime/support/Error.h"

#include <fstream>
#include <map>
#include <set>

namespace llmc {
namespace {

/// Writes this rank's piece of the global tensor `global` into `data`.
void fillPiece(const FloatTensor &global, void *data, DType dtype, const ShardMap &map, int rank,
               const std::string &name) {
  std::vector<int> positions = map.positions(rank);
  const int64_t n = map.localNumel();
  switch (dtype) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      static_cast<float *>(data)[i] = global.data[map.toGlobal(positions, i)];
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(data)[i] = floatToBf16(global.data[map.toGlobal(positions, i)]);
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i)
      static_cast<double *>(data)[i] = global.data[map.toGlobal(positions, i)];
    break;
  case DType::U8: // storage (QLoRA's NF4 codes), read back exactly
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint8_t *>(data)[i] =
          static_cast<uint8_t>(global.data[map.toGlobal(positions, i)]);
    break;
  default: fail("parameter '", name, "': cannot load dtype ", dtypeName(dtype));
  }
}

} // namespace

WeightsLoaded loadWeights(const std::string &path, const Artifact &artifact, const Arena &arena,
                          int rank) {
  if (!std::ifstream(path))
    fail("--weights: cannot open '", path, "'");
  SafetensorsFile file(path);
  WeightsLoaded loaded;
  std::map<std::string, FloatTensor> cache;
  // Null for a LoRA adapter the file lacks (a base model's weights): it
  // keeps its initial value, as checkpoint restore does.
  auto global = [&](const std::string &name, const std::vector<int64_t> &shape) -> const FloatTensor * {
    auto it = cache.find(name);
    if (it != cache.end())
      return &it->second;
    FloatTensor t;
    if (!readFloatTensor(file, name, t)) {
      if (isAdapterTensor(name))
        return nullptr;
      fail(path, ": no tensor '", name, "' (a parameter of the model)");
    }
    if (t.shape != shape)
      fail(path, ": tensor '", name, "' is ", shapeList(t.shape), " but the model needs ",
           shapeList(shape));
    ++loaded.tensors;
    loaded.dequantized += t.scheme.empty() ? 0 : 1;
    return &cache.emplace(name, std::move(t)).first->second;
  };
  for (const ParameterInfo &p : artifact.parameters) {
    std::vector<int64_t> shape = p.shard.sharded() ? p.shard.globalShape : p.shape;
    if (const FloatTensor *t = global(p.name, shape))
      fillPiece(*t, arena.base() + p.offset, p.dtype, ShardMap(p.shard, p.shape, artifact.mesh),
                rank, p.name);
    else
      ++loaded.freshAdapters;
  }
  // A mixed-precision master copy holds the parameter in full precision;
  // observer states (activation ranges) come along when the file has them.
  std::set<std::string> observersSeen;
  for (const ProgramInfo &program : artifact.programs)
    for (const BufferInfo &b : program.buffers) {
      if (b.category == "optim" && b.name.rfind("qat_state/", 0) == 0 && file.find(b.name)) {
        std::vector<int64_t> shape = b.shard.sharded() ? b.shard.globalShape : b.shape;
        if (const FloatTensor *t = global(b.name, shape))
          fillPiece(*t, arena.base() + b.offset, b.dtype,
                    ShardMap(b.shard, b.shape, artifact.mesh), rank, b.name);
        observersSeen.insert(b.name);
        continue;
      }
      if (b.category != "optim" || b.name.rfind("master/", 0) != 0)
        continue;
      std::string name = b.name.substr(7);
      std::vector<int64_t> shape = b.shard.sharded() ? b.shard.globalShape : b.shape;
      if (const FloatTensor *t = global(name, shape))
        fillPiece(*t, arena.base() + b.offset, b.dtype, ShardMap(b.shard, b.shape, artifact.mesh),
                  rank, b.name);
    }
  loaded.observers = static_cast<int64_t>(observersSeen.size());
  loaded.tensors -= loaded.observers;
  return loaded;
}

} // namespace llmc
