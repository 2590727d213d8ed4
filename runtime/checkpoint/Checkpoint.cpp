//===- Checkpoint.cpp - save and resume training state --------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
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

std::vector<SafeTensor> tensorsOf(const std::vector<const BufferInfo *> &buffers,
                                  const Arena &arena) {
  std::vector<SafeTensor> tensors;
  for (const BufferInfo *b : buffers)
    tensors.push_back({b->name, b->dtype, b->shape, arena.base() + b->offset, b->bytes()});
  return tensors;
}

void restore(const SafetensorsFile &file, const std::vector<const BufferInfo *> &buffers,
             const Arena &arena) {
  for (const BufferInfo *b : buffers) {
    const SafeTensor *t = file.find(b->name);
    if (!t)
      fail(file.path(), ": checkpoint has no tensor '", b->name, "'");
    if (t->dtype != b->dtype || t->shape != b->shape)
      fail(file.path(), ": tensor '", b->name, "' is ",
           TensorView{nullptr, t->dtype, t->shape}.describe(), " but the model needs ",
           TensorView{nullptr, b->dtype, b->shape}.describe());
    std::memcpy(arena.base() + b->offset, t->data, t->bytes);
  }
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail("cannot read '", path, "'");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

} // namespace

void saveCheckpoint(const std::string &dir, const Artifact &artifact, const Arena &arena,
                    const TrainState &state) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld", static_cast<long long>(state.step));
  std::string stepDir = dir + "/" + name;
  makeDirectories(stepDir);
  writeSafetensors(stepDir + "/model.safetensors",
                   tensorsOf(persistentBuffers(artifact, "param"), arena),
                   {{"format", "llmc"}, {"step", std::to_string(state.step)}});
  writeSafetensors(stepDir + "/optimizer.safetensors",
                   tensorsOf(persistentBuffers(artifact, "optim"), arena),
                   {{"optimizer", artifact.meta("optimizer", "adamw")}});
  json::Value s = json::Value::object();
  s.set("format_version", json::Value(1));
  s.set("step", json::Value(state.step));
  s.set("seed", json::Value(state.seed));
  s.set("loss", json::Value(state.loss));
  s.set("data_position", json::Value(state.step)); // global batches consumed
  std::ostringstream hash;
  hash << std::hex << artifact.contentHash;
  s.set("artifact_hash", json::Value(hash.str()));
  std::string text = s.dump(2) + "\n";
  writeFileAtomic(stepDir + "/state.json", text.data(), text.size());
  // Published last: until here, `latest` still names the previous checkpoint.
  std::string latest = std::string(name) + "\n";
  writeFileAtomic(dir + "/latest", latest.data(), latest.size());
}

TrainState loadCheckpoint(const std::string &dir, const Artifact &artifact,
                          const Arena &arena) {
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
  restore(SafetensorsFile(stepDir + "/model.safetensors"), persistentBuffers(artifact, "param"),
          arena);
  restore(SafetensorsFile(stepDir + "/optimizer.safetensors"),
          persistentBuffers(artifact, "optim"), arena);
  return state;
}

void dumpGradients(const std::string &path, const Artifact &artifact, const Arena &arena,
                   const BoundProgram &grad, const std::vector<SafeTensor> &batch) {
  std::vector<SafeTensor> tensors = tensorsOf(persistentBuffers(artifact, "param"), arena);
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
