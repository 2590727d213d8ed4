//===- Checkpoint.cpp - save and resume training state --------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/Mesh.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>

namespace llmc {
namespace {

/// Every persistent buffer of a category, by name (from any program).
std::vector<const BufferInfo *> persistentBuffers(const Artifact &artifact,
                                                  const std::string &category) {
  std::vector<const BufferInfo *> found;
  std::vector<std::string> seen;
  for (const ProgramInfo &p : artifact.programs)
    for (const BufferInfo &b : p.buffers)
      if (b.category == category && !b.name.empty() &&
          std::find(seen.begin(), seen.end(), b.name) == seen.end()) {
        seen.push_back(b.name);
        found.push_back(&b);
      }
  return found;
}

std::vector<int64_t> globalShapeOf(const BufferInfo &b) {
  return b.shard.sharded() ? b.shard.globalShape : b.shape;
}

/// Rows [offset, offset + length) of dimension 0 that `rank` holds.
std::pair<int64_t, int64_t> rowsOf(const BufferInfo &b, const Mesh &mesh, int rank) {
  if (!b.shard.sharded())
    return {0, b.shape.empty() ? 1 : b.shape[0]};
  int position = groupPosition(mesh, rank, b.shard.axes).first;
  return {position * b.shape[0], b.shape[0]};
}

/// A rank writes a buffer when its coordinates outside the shard axes are
/// all 0 (the first replica of its shard).
bool writes(const BufferInfo &b, const Mesh &mesh, int rank) {
  std::vector<int> coords = meshCoordinates(mesh, rank);
  for (size_t i = 0; i < mesh.size(); ++i)
    if (coords[i] != 0 &&
        std::find(b.shard.axes.begin(), b.shard.axes.end(), mesh[i].first) == b.shard.axes.end())
      return false;
  return true;
}

std::string rankFile(const std::string &kind, int rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s-rank%05d.safetensors", kind.c_str(), rank);
  return name;
}

std::string fileKind(const BufferInfo &b) { return b.category == "param" ? "model" : "optimizer"; }

std::string readText(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail("cannot read '", path, "'");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t rowBytes(const BufferInfo &b) {
  size_t n = dtypeSize(b.dtype);
  for (size_t d = 1; d < b.shape.size(); ++d) n *= static_cast<size_t>(b.shape[d]);
  return n;
}

} // namespace

void saveCheckpoint(const std::string &dir, const Artifact &artifact, const Arena &arena,
                    const TrainState &state, int rank, Communicator &comm) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld", static_cast<long long>(state.step));
  std::string stepDir = dir + "/" + name;
  makeDirectories(stepDir);
  for (const char *category : {"param", "optim"}) {
    std::vector<SafeTensor> mine;
    for (const BufferInfo *b : persistentBuffers(artifact, category))
      if (writes(*b, artifact.mesh, rank))
        mine.push_back({b->name, b->dtype, b->shape, arena.base() + b->offset, b->bytes()});
    if (!mine.empty())
      writeSafetensors(stepDir + "/" + rankFile(category == std::string("param") ? "model" : "optimizer", rank),
                       mine, {{"format", "llmc"}, {"step", std::to_string(state.step)}});
  }
  comm.barrier(); // every rank's files are on disk
  if (rank == 0) {
    // The index follows from the artifact alone: which rank wrote which rows.
    json::Value tensors = json::Value::object();
    for (const char *category : {"param", "optim"})
      for (const BufferInfo *b : persistentBuffers(artifact, category)) {
        json::Value entry = json::Value::object();
        entry.set("dtype", json::Value(dtypeName(b->dtype)));
        json::Value shape = json::Value::array();
        for (int64_t d : globalShapeOf(*b)) shape.push(json::Value(d));
        entry.set("shape", shape);
        json::Value shards = json::Value::array();
        for (int r = 0; r < artifact.worldSize; ++r)
          if (writes(*b, artifact.mesh, r)) {
            auto [offset, length] = rowsOf(*b, artifact.mesh, r);
            json::Value shard = json::Value::object();
            shard.set("file", json::Value(rankFile(fileKind(*b), r)));
            json::Value rows = json::Value::array();
            rows.push(json::Value(offset));
            rows.push(json::Value(offset + length));
            shard.set("rows", rows);
            shards.push(shard);
          }
        entry.set("shards", shards);
        tensors.set(b->name, entry);
      }
    json::Value index = json::Value::object();
    index.set("format", json::Value("llmc-sharded-1"));
    index.set("tensors", tensors);
    std::string text = index.dump(1) + "\n";
    writeFileAtomic(stepDir + "/index.json", text.data(), text.size());

    json::Value s = json::Value::object();
    s.set("format_version", json::Value(1));
    s.set("step", json::Value(state.step));
    s.set("seed", json::Value(state.seed));
    s.set("loss", json::Value(state.loss));
    s.set("data_position", json::Value(state.step)); // global batches consumed
    std::string mesh;
    for (auto &[axis, size] : artifact.mesh)
      mesh += (mesh.empty() ? "" : ",") + axis + "=" + std::to_string(size);
    s.set("mesh", json::Value(mesh.empty() ? "1" : mesh));
    std::ostringstream hash;
    hash << std::hex << artifact.contentHash;
    s.set("artifact_hash", json::Value(hash.str()));
    text = s.dump(2) + "\n";
    writeFileAtomic(stepDir + "/state.json", text.data(), text.size());
    // Published last: until here, `latest` still names the previous checkpoint.
    std::string latest = std::string(name) + "\n";
    writeFileAtomic(dir + "/latest", latest.data(), latest.size());
  }
  comm.barrier(); // nobody moves on before `latest` names this checkpoint
}

TrainState loadCheckpoint(const std::string &dir, const Artifact &artifact,
                          const Arena &arena, int rank) {
  std::string latest = readText(dir + "/latest");
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' '))
    latest.pop_back();
  if (latest.empty() || latest.find('/') != std::string::npos)
    fail(dir, "/latest: does not name a checkpoint");
  std::string stepDir = dir + "/" + latest;
  json::Value s = json::parse(readText(stepDir + "/state.json"), stepDir + "/state.json");
  TrainState state;
  state.step = s.at("step").asInt(stepDir + "/state.json: step");
  state.seed = static_cast<uint64_t>(s.at("seed").asInt(stepDir + "/state.json: seed"));
  state.loss = s.at("loss").isNull() ? 0.0 : s.at("loss").asDouble("loss");

  std::string indexPath = stepDir + "/index.json";
  json::Value index = json::parse(readText(indexPath), indexPath);
  const json::Value &tensors = index.at("tensors");
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
  for (const char *category : {"param", "optim"})
    for (const BufferInfo *b : persistentBuffers(artifact, category)) {
      const json::Value *entry = tensors.find(b->name);
      if (!entry)
        fail(indexPath, ": checkpoint has no tensor '", b->name, "'");
      std::vector<int64_t> shape;
      for (const json::Value &d : entry->at("shape").asArray()) shape.push_back(d.asInt());
      if (entry->at("dtype").asString() != dtypeName(b->dtype) || shape != globalShapeOf(*b))
        fail(indexPath, ": tensor '", b->name, "' is ",
             TensorView{nullptr, DType::F32, shape}.describe().substr(3), " ",
             entry->at("dtype").asString(), " but the model needs ",
             TensorView{nullptr, b->dtype, globalShapeOf(*b)}.describe());
      // Copy the rows this rank holds from every shard that has some.
      auto [want, count] = rowsOf(*b, artifact.mesh, rank);
      size_t row = rowBytes(*b);
      int64_t covered = 0;
      for (const json::Value &shard : entry->at("shards").asArray()) {
        const auto &rows = shard.at("rows").asArray();
        int64_t begin = rows[0].asInt(), end = rows[1].asInt();
        int64_t lo = std::max(begin, want), hi = std::min(end, want + count);
        if (lo >= hi)
          continue;
        std::string file = shard.at("file").asString(indexPath + ": shard file");
        if (file.find('/') != std::string::npos)
          fail(indexPath, ": shard file '", file, "' must be a plain file name");
        auto &handle = files[file];
        if (!handle)
          handle = std::make_unique<SafetensorsFile>(stepDir + "/" + file);
        const SafeTensor *t = handle->find(b->name);
        if (!t || t->bytes != static_cast<size_t>(end - begin) * row)
          fail(stepDir, "/", file, ": missing or mis-sized tensor '", b->name, "'");
        std::memcpy(arena.base() + b->offset + (lo - want) * row,
                    static_cast<const uint8_t *>(t->data) + (lo - begin) * row,
                    static_cast<size_t>(hi - lo) * row);
        covered += hi - lo;
      }
      if (covered != count)
        fail(indexPath, ": the shards of '", b->name, "' cover ", covered, " of the ", count,
             " rows rank ", rank, " needs");
    }
  return state;
}

void dumpGradients(const std::string &path, const Artifact &artifact, const Arena &arena,
                   const BoundProgram &grad, const std::vector<SafeTensor> &batch) {
  std::vector<SafeTensor> tensors;
  for (const BufferInfo *b : persistentBuffers(artifact, "param"))
    tensors.push_back({b->name, b->dtype, b->shape, arena.base() + b->offset, b->bytes()});
  tensors.insert(tensors.end(), batch.begin(), batch.end());
  for (const BufferInfo &b : grad.info().buffers)
    if (b.category == "output" && b.name.rfind("grad/", 0) == 0)
      tensors.push_back({b.name, b.dtype, b.shape, arena.base() + b.offset, b.bytes()});
  TensorView loss = grad.view("loss");
  std::ostringstream os;
  os.precision(17);
  os << *loss.as<float>();
  writeSafetensors(path, tensors, {{"loss", os.str()}});
}

} // namespace llmc
