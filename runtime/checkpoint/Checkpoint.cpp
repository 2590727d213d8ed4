//===- Checkpoint.cpp - save and resume training state --------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "common/Mesh.h"
#include "runtime/Sharding.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <algorithm>
#include <cstdio>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>

namespace llmc {

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

std::map<std::string, std::vector<int64_t>> modelParameters(const Artifact &artifact) {
  std::map<std::string, std::vector<int64_t>> params;
  for (const RoleState &role : artifact.roles)
    for (const BufferInfo &b : role.persistent)
      if (b.category == "param")
        params[b.name] = globalShapeOf(b);
  return params;
}

namespace {

/// The first role holding a tensor writes it (a pipeline repeats a tied
/// parameter on several stages); within that role, the rank whose
/// coordinates are 0 on every axis the role's ranks vary over and the
/// tensor is not split over (the first replica of its piece).
bool writes(const Artifact &artifact, const BufferInfo &b, int rank) {
  const RoleState *owner = nullptr;
  for (const RoleState &role : artifact.roles)
    if (std::any_of(role.persistent.begin(), role.persistent.end(),
                    [&](const BufferInfo &o) { return o.name == b.name; })) {
      owner = &role;
      break;
    }
  if (owner && std::find(owner->ranks.begin(), owner->ranks.end(), rank) == owner->ranks.end())
    return false;
  const Mesh &mesh = artifact.mesh;
  std::vector<int> coords = meshCoordinates(mesh, rank);
  for (size_t i = 0; i < mesh.size(); ++i) {
    bool split = false;
    for (const ShardLevel &level : b.shard.levels)
      split |= std::find(level.axes.begin(), level.axes.end(), mesh[i].first) != level.axes.end();
    bool varies = !owner;
    if (owner)
      for (int r : owner->ranks)
        varies |= meshCoordinates(mesh, r)[i] != coords[i];
    if (!split && varies && coords[i] != 0)
      return false;
  }
  return true;
}

std::string rankFile(const std::string &kind, int rank) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s-rank%05d.safetensors", kind.c_str(), rank);
  return name;
}

std::string fileKind(const BufferInfo &b) { return b.category == "param" ? "model" : "optimizer"; }

/// Copies the leading box `box` of a row-major tensor of shape `shape`
/// (`elementBytes` each) into `out`.
void copyLeadingBox(const uint8_t *data, const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &box, size_t elementBytes, uint8_t *out) {
  const size_t rank = shape.size();
  const size_t run = static_cast<size_t>(box.back()) * elementBytes;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= box[d];
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) offset = offset * shape[d] + index[d];
    std::memcpy(out + r * run, data + offset * elementBytes, run);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) { // next row of the box
      if (++index[d] < box[d]) break;
      index[d] = 0;
    }
  }
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    fail("cannot read '", path, "'");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}


} // namespace

SavedPiece savedPiece(const BufferInfo &b, const uint8_t *data, const Mesh &mesh) {
  SavedPiece piece;
  piece.name = b.name;
  piece.dtype = b.dtype;
  piece.shard = b.shard;
  piece.shape = b.shape;
  piece.data = data;
  piece.bytes = b.bytes();
  // Codes (8-bit AdamW's moments) keep their padding: there a zero byte
  // does not decode to zero, so the padding must come back as it was.
  size_t kept = b.shard.levels.size();
  while (kept > 0 && b.shard.levels[kept - 1].pads() && b.dtype != DType::U8)
    --kept;
  if (kept == b.shard.levels.size())
    return piece;
  ShardMap map(b.shard, b.shape, mesh);
  piece.shard.levels.resize(kept);
  piece.shape = map.shapeAfter(kept);
  size_t elementBytes = dtypeSize(b.dtype);
  int64_t numel = 1;
  for (int64_t d : piece.shape) numel *= d;
  piece.bytes = static_cast<size_t>(numel) * elementBytes;
  // Padding of dimension 0 only: the real tensor is the buffer's head.
  if (!data || std::equal(piece.shape.begin() + 1, piece.shape.end(), b.shape.begin() + 1))
    return piece;
  piece.copy.resize(piece.bytes);
  copyLeadingBox(data, b.shape, piece.shape, elementBytes, piece.copy.data());
  piece.data = piece.copy.data();
  return piece;
}

void saveCheckpoint(const std::string &dir, const Artifact &artifact, const Arena &arena,
                    const TrainState &state, int rank, Communicator &comm,
                    const RetentionPolicy &retention) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld", static_cast<long long>(state.step));
  std::string stepDir = dir + "/" + name;
  makeDirectories(stepDir);
  for (const char *category : {"param", "optim"}) {
    std::vector<SafeTensor> mine;
    std::vector<SavedPiece> pieces; // what `mine` points into
    for (const BufferInfo *b : persistentBuffers(artifact, category))
      if (writes(artifact, *b, rank))
        pieces.push_back(savedPiece(*b, arena.base() + b->offset, artifact.mesh));
    for (const SavedPiece &p : pieces)
      mine.push_back({p.name, p.dtype, p.shape, p.data, p.bytes});
    if (!mine.empty())
      writeSafetensors(stepDir + "/" + rankFile(category == std::string("param") ? "model" : "optimizer", rank),
                       mine, {{"format", "llmc"}, {"step", std::to_string(state.step)}});
  }
  comm.barrier(); // every rank's files are on disk
  if (rank == 0) {
    // The index follows from the artifact alone: every tensor's global
    // shape, how it is split, and which file holds which piece.
    json::Value tensors = json::Value::object();
    std::vector<const BufferInfo *> all; // every role's state, each name once
    for (const RoleState &role : artifact.roles)
      for (const BufferInfo &b : role.persistent)
        if (std::none_of(all.begin(), all.end(),
                         [&](const BufferInfo *o) { return o->name == b.name; }))
          all.push_back(&b);
    for (const BufferInfo *b : all) {
      SavedPiece piece = savedPiece(*b, nullptr, artifact.mesh); // the layout alone
      ShardMap map(piece.shard, piece.shape, artifact.mesh);
      json::Value entry = json::Value::object();
      entry.set("dtype", json::Value(dtypeName(b->dtype)));
      json::Value shape = json::Value::array();
      for (int64_t d : globalShapeOf(*b)) shape.push(json::Value(d));
      entry.set("shape", shape);
      json::Value levels = json::Value::array();
      for (size_t k = 0; k < piece.shard.levels.size(); ++k) {
        const ShardLevel &saved = piece.shard.levels[k];
        json::Value level = json::Value::object();
        level.set("dim", json::Value(saved.dim));
        level.set("blocks", json::Value(saved.blocks));
        level.set("parts", json::Value(map.parts()[k]));
        if (saved.pads())
          level.set("pad_to", json::Value(saved.padTo));
        levels.push(level);
      }
      entry.set("levels", levels);
      if (isNf4AbsmaxLevels(b->name))
        entry.set("absmax_format", json::Value(quant::absmaxFormatName(nf4AbsmaxFormat(artifact))));
      json::Value shards = json::Value::array();
      for (int r = 0; r < artifact.worldSize; ++r)
        if (writes(artifact, *b, r)) {
          json::Value shard = json::Value::object();
          shard.set("file", json::Value(rankFile(fileKind(*b), r)));
          json::Value positions = json::Value::array();
          for (int p : map.positions(r)) positions.push(json::Value(p));
          shard.set("positions", positions);
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
    s.set("skipped_steps", json::Value(state.skippedSteps));
    if (state.lossScale > 0) {
      s.set("loss_scale", json::Value(state.lossScale));
      s.set("loss_scale_clean_steps", json::Value(state.lossScaleCleanSteps));
    }
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
    // Only now: `latest` no longer names anything pruning may delete.
    pruneCheckpoints(dir, retention);
  }
  comm.barrier(); // nobody moves on before `latest` names this checkpoint
}

/// A saved tensor's pieces, as the index describes them: the layout it was
/// saved under (one axis per level) and each piece's bytes by position.
struct SavedPieces {
  ShardInfo shard;
  std::vector<int64_t> localShape;
  Mesh mesh;
  std::map<std::vector<int>, const uint8_t *> bytes;
};

static SavedPieces openSavedPieces(const json::Value &entry, const std::string &name,
                            const std::vector<int64_t> &globalShape, size_t elementBytes,
                            const std::string &stepDir, const std::string &where,
                            std::map<std::string, std::unique_ptr<SafetensorsFile>> &files) {
  // The saved layout, rebuilt from the index as a one-axis-per-level mesh.
  SavedPieces saved;
  saved.shard.globalShape = globalShape;
  saved.localShape = globalShape;
  const auto &levels = entry.at("levels").asArray(where + ": levels");
  for (size_t k = 0; k < levels.size(); ++k) {
    ShardLevel level;
    level.dim = static_cast<int>(levels[k].at("dim").asInt("dim"));
    level.blocks = static_cast<int>(levels[k].at("blocks").asInt("blocks"));
    int parts = static_cast<int>(levels[k].at("parts").asInt("parts"));
    if (const json::Value *padTo = levels[k].find("pad_to")) // absent before padded vocabularies
      level.padTo = padTo->asInt("pad_to");
    if (level.dim < 0 || level.dim >= static_cast<int>(saved.localShape.size()) || parts < 1 ||
        level.blocks < 1 ||
        (level.blocks != 1 && saved.localShape[level.dim] % (level.blocks * parts) != 0) ||
        (level.pads() && (parts != 1 || level.blocks != 1 ||
                          level.padTo < saved.localShape[level.dim])))
      fail(where, " has a bad shard level");
    if (level.pads()) {
      saved.localShape[level.dim] = level.padTo;
    } else {
      level.axes = {"level" + std::to_string(k)};
      saved.mesh.push_back({level.axes[0], parts});
      // A single block the parts do not divide was padded (see ShardMap).
      saved.localShape[level.dim] = (saved.localShape[level.dim] + parts - 1) / parts;
    }
    saved.shard.levels.push_back(level);
  }
  ShardMap map(saved.shard, saved.localShape, saved.mesh);
  for (const json::Value &shard : entry.at("shards").asArray(where + ": shards")) {
    std::vector<int> positions;
    for (const json::Value &p : shard.at("positions").asArray())
      positions.push_back(static_cast<int>(p.asInt()));
    std::string file = shard.at("file").asString(where + ": shard file");
    if (file.find('/') != std::string::npos)
      fail(where, ": shard file '", file, "' must be a plain file name");
    auto &handle = files[file];
    if (!handle)
      handle = std::make_unique<SafetensorsFile>(stepDir + "/" + file);
    const SafeTensor *t = handle->find(name);
    if (!t || t->bytes != static_cast<size_t>(map.localNumel()) * elementBytes)
      fail(stepDir, "/", file, ": missing or mis-sized tensor '", name, "'");
    saved.bytes[positions] = static_cast<const uint8_t *>(t->data);
  }
  return saved;
}

void copySaved(const json::Value &entry, const std::string &name,
               const std::vector<int64_t> &savedShape, size_t elementBytes,
               const ShardMap &target, const std::vector<int> &positions, uint8_t *out,
               const std::string &stepDir, const std::string &where,
               std::map<std::string, std::unique_ptr<SafetensorsFile>> &files) {
  SavedPieces saved =
      openSavedPieces(entry, name, savedShape, elementBytes, stepDir, where, files);
  ShardMap savedMap(saved.shard, saved.localShape, saved.mesh);
  // Whole rows move at once when neither layout splits the last dimension
  // and both have the same rows.
  int64_t run = target.lastDimWhole() && savedMap.lastDimWhole() && !savedShape.empty() &&
                        target.globalShape() == savedShape
                    ? savedShape.back()
                    : 1;
  std::vector<int> owner;
  for (int64_t i = 0; i < target.localNumel(); i += run) {
    int64_t local, g = target.toGlobal(positions, i);
    if (g < 0) { // padding; a run is a whole row, padding or data alike
      std::memset(out + i * elementBytes, 0, run * elementBytes);
      continue;
    }
    savedMap.fromGlobal(g, owner, local);
    auto it = saved.bytes.find(owner);
    if (it == saved.bytes.end())
      fail(where, ": no saved piece holds element ", i, " of the piece wanted");
    std::memcpy(out + i * elementBytes, it->second + local * elementBytes, run * elementBytes);
  }
}

/// Fills this rank's piece of `b` from the saved pieces described by `entry`
/// (of global shape `savedShape`).
static void restoreTensor(const BufferInfo &b, const json::Value &entry,
                          const std::vector<int64_t> &savedShape, const std::string &stepDir,
                          const std::string &indexPath, const Artifact &artifact,
                          const Arena &arena, int rank,
                          std::map<std::string, std::unique_ptr<SafetensorsFile>> &files) {
  ShardMap mine(b.shard, b.shape, artifact.mesh);
  copySaved(entry, b.name, savedShape, dtypeSize(b.dtype), mine, mine.positions(rank),
            arena.base() + b.offset, stepDir, indexPath + ": tensor '" + b.name + "'", files);
}

/// How a tensor is split, as the index records it: (dim, blocks, parts,
/// pad_to) per level.
std::string splitSignature(const std::vector<std::array<int64_t, 4>> &levels) {
  if (levels.empty())
    return "whole";
  std::string text;
  for (const auto &[dim, blocks, parts, padTo] : levels)
    text += (text.empty() ? "" : ", ") +
            (padTo > 0 ? "dim " + std::to_string(dim) + " padded to " + std::to_string(padTo)
                       : std::to_string(parts) + " parts of dim " + std::to_string(dim) +
                             (blocks > 1 ? " (" + std::to_string(blocks) + " blocks)" : ""));
  return text;
}

/// 8-bit AdamW keeps one absmax per block of each rank's piece of a moment,
/// so its state means the same only under the same split of the moment:
/// fails unless the checkpoint split `codes` (the moment's codes) as this
/// artifact does.
void checkSameMomentSplit(const std::string &indexPath, const json::Value &tensors,
                          const Artifact &artifact, const BufferInfo &absmax,
                          const std::string &codesName) {
  const json::Value *saved = tensors.find(codesName);
  const BufferInfo *codes = nullptr;
  for (const BufferInfo *b : persistentBuffers(artifact, "optim"))
    if (b->name == codesName)
      codes = b;
  if (!saved || !codes)
    return; // reported as a missing tensor
  std::vector<std::array<int64_t, 4>> before, now;
  for (const json::Value &level : saved->at("levels").asArray()) {
    const json::Value *padTo = level.find("pad_to");
    before.push_back({level.at("dim").asInt(), level.at("blocks").asInt(),
                      level.at("parts").asInt(), padTo ? padTo->asInt() : 0});
  }
  ShardMap map(codes->shard, codes->shape, artifact.mesh);
  for (size_t k = 0; k < codes->shard.levels.size(); ++k) {
    const ShardLevel &level = codes->shard.levels[k];
    now.push_back({level.dim, level.blocks, map.parts()[k], level.padTo});
  }
  if (before != now)
    fail(indexPath, ": 8-bit AdamW state '", absmax.name, "' holds block maxima of each piece of ",
         codesName, " as it was split when saved (", splitSignature(before),
         "); this layout splits it as ", splitSignature(now),
         "; resume under the saving layout");
}

bool isQuantizedStorage(const std::string &name) {
  for (const char *suffix : {".qweight", ".scale", ".zero_point", ".absmax_q"}) {
    size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0)
      return true;
  }
  return false;
}

bool isNf4AbsmaxLevels(const std::string &name) {
  const std::string suffix = ".absmax_q";
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

quant::AbsmaxFormat savedAbsmaxFormat(const json::Value &entry, const std::string &where) {
  const json::Value *recorded = entry.find("absmax_format");
  if (!recorded)
    return quant::AbsmaxFormat::Int8;
  quant::AbsmaxFormat format;
  const std::string text = recorded->asString(where + ": absmax_format");
  if (!quant::parseAbsmaxFormat(text, format))
    fail(where, ": unknown absmax_format '", text, "' (int8 or fp8_e4m3)");
  return format;
}

void checkAbsmaxFormat(quant::AbsmaxFormat saved, quant::AbsmaxFormat wanted,
                       const std::string &where, const std::string &name) {
  if (saved == wanted)
    return;
  auto flag = [](quant::AbsmaxFormat f) {
    return f == quant::AbsmaxFormat::Fp8E4M3 ? "fp8" : "int8";
  };
  fail(where, ": tensor '", name, "' holds ", quant::absmaxFormatName(saved),
       " absmax levels, but the model reads ", quant::absmaxFormatName(wanted),
       " ones (compile with --double-quant ", flag(saved), ", as the weights were quantized)");
}

bool storedShapeFits(const std::string &name, const std::vector<int64_t> &stored,
                     const std::vector<int64_t> &wanted) {
  auto numel = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  };
  return stored == wanted || (isQuantizedStorage(name) && numel(stored) == numel(wanted));
}

bool isAdapterTensor(const std::string &name) {
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
  };
  return endsWith(".lora_A") || endsWith(".lora_B");
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
  // Absent from checkpoints written before steps could be skipped.
  if (const json::Value *skipped = s.find("skipped_steps"))
    state.skippedSteps = skipped->asInt(stepDir + "/state.json: skipped_steps");
  if (const json::Value *scale = s.find("loss_scale")) {
    state.lossScale = scale->asDouble(stepDir + "/state.json: loss_scale");
    state.lossScaleCleanSteps =
        s.at("loss_scale_clean_steps").asInt(stepDir + "/state.json: loss_scale_clean_steps");
  }

  std::string indexPath = stepDir + "/index.json";
  json::Value index = json::parse(readText(indexPath), indexPath);
  const json::Value &tensors = index.at("tensors");
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
  for (const char *category : {"param", "optim"})
    for (const BufferInfo *b : persistentBuffers(artifact, category)) {
      const json::Value *entry = tensors.find(b->name);
      if (!entry && b->name.rfind("qat_state/", 0) == 0) {
        std::memset(arena.base() + b->offset, 0, b->bytes()); // never observed
        ++state.freshObservers;
        continue;
      }
      for (const char *moment : {"adam_m", "adam_v"}) {
        std::string prefix = std::string(moment) + "_absmax/";
        if (b->name.rfind(prefix, 0) == 0)
          checkSameMomentSplit(indexPath, tensors, artifact, *b,
                               std::string(moment) + "/" + b->name.substr(prefix.size()));
      }
      if (!entry && isAdapterTensor(b->name)) {
        ++state.freshAdapters; // as initialised
        continue;
      }
      if (!entry)
        fail(indexPath, ": checkpoint has no tensor '", b->name, "'");
      std::vector<int64_t> shape;
      for (const json::Value &d : entry->at("shape").asArray()) shape.push_back(d.asInt());
      if (entry->at("dtype").asString() != dtypeName(b->dtype) ||
          !storedShapeFits(b->name, shape, globalShapeOf(*b)))
        fail(indexPath, ": tensor '", b->name, "' is ",
             TensorView{nullptr, DType::F32, shape}.describe().substr(3), " ",
             entry->at("dtype").asString(), " but the model needs ",
             TensorView{nullptr, b->dtype, globalShapeOf(*b)}.describe());
      if (isNf4AbsmaxLevels(b->name))
        checkAbsmaxFormat(savedAbsmaxFormat(*entry, indexPath + ": tensor '" + b->name + "'"),
                          nf4AbsmaxFormat(artifact), indexPath, b->name);
      restoreTensor(*b, *entry, shape, stepDir, indexPath, artifact, arena, rank, files);
    }
  return state;
}

void dumpGradients(const std::string &path, const Artifact &artifact, const Arena &arena,
                   const BoundProgram &grad, const std::vector<SafeTensor> &batch) {
  // Parameters and their gradients without a padded vocabulary's rows: a
  // gradient is laid out as its parameter.
  std::vector<SavedPiece> params, grads;
  for (const BufferInfo *b : persistentBuffers(artifact, "param"))
    params.push_back(savedPiece(*b, arena.base() + b->offset, artifact.mesh));
  for (const BufferInfo &b : grad.info().buffers)
    if (b.category == "output" && b.name.rfind("grad/", 0) == 0) {
      BufferInfo laidOut = b;
      for (const BufferInfo *p : persistentBuffers(artifact, "param"))
        if (p->name == b.name.substr(5) && p->shape == b.shape)
          laidOut.shard = p->shard;
      grads.push_back(savedPiece(laidOut, arena.base() + b.offset, artifact.mesh));
    }
  std::vector<SafeTensor> tensors;
  for (const SavedPiece &p : params)
    tensors.push_back({p.name, p.dtype, p.shape, p.data, p.bytes});
  tensors.insert(tensors.end(), batch.begin(), batch.end());
  for (const SavedPiece &p : grads)
    tensors.push_back({p.name, p.dtype, p.shape, p.data, p.bytes});
  TensorView loss = grad.view("loss");
  std::ostringstream os;
  os.precision(17);
  os << *loss.as<float>();
  writeSafetensors(path, tensors, {{"loss", os.str()}});
}

} // namespace llmc
