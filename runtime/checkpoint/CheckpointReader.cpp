//===- CheckpointReader.cpp - whole tensors of a saved checkpoint ---------===//
//
// The index describes each tensor's saved layout as levels (dimension,
// blocks, parts); rebuilt as a one-axis-per-level mesh, it maps every
// global element to the saved piece and offset that hold it, as
// checkpoint restore does.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/CheckpointReader.h"
#include "common/Half.h"

#include "runtime/checkpoint/Checkpoint.h"

#include "common/Mesh.h"
#include "runtime/Sharding.h"
#include "runtime/support/Error.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace llmc {
namespace {

std::string readText(const std::string &path, const std::string &missing) {
  std::ifstream in(path);
  if (!in)
    fail(missing);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

} // namespace

CheckpointReader::CheckpointReader(const std::string &dir) {
  std::string latest = readText(dir + "/latest", dir + ": not a checkpoint directory (no '" +
                                                     dir + "/latest')");
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' '))
    latest.pop_back();
  if (latest.empty() || latest.find('/') != std::string::npos)
    fail(dir, "/latest: does not name a checkpoint");
  stepDir_ = dir + "/" + latest;
  std::string statePath = stepDir_ + "/state.json";
  json::Value state = json::parse(readText(statePath, "cannot read '" + statePath + "'"), statePath);
  step_ = state.at("step").asInt(statePath + ": step");
  indexPath_ = stepDir_ + "/index.json";
  index_ = json::parse(readText(indexPath_, "cannot read '" + indexPath_ + "'"), indexPath_);
}

bool CheckpointReader::has(const std::string &name) const {
  return index_.at("tensors").find(name) != nullptr;
}

std::vector<float> floatValues(const GlobalTensor &t, const std::string &name) {
  size_t n = t.bytes.size() / dtypeSize(t.dtype);
  std::vector<float> out(n);
  switch (t.dtype) {
  case DType::F32: std::memcpy(out.data(), t.bytes.data(), t.bytes.size()); break;
  case DType::BF16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, t.bytes.data() + 2 * i, 2);
      out[i] = bf16ToFloat(v);
    }
    break;
  case DType::F16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, t.bytes.data() + 2 * i, 2);
      out[i] = half::toFloat(v);
    }
    break;
  default: fail("checkpoint tensor '", name, "' is ", dtypeName(t.dtype), ", not a float tensor");
  }
  return out;
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const auto &[name, entry] : index_.at("tensors").members())
    out.push_back(name);
  return out;
}

GlobalTensor CheckpointReader::readParameter(const std::string &name) {
  return read(parameterSource(name));
}

std::string CheckpointReader::parameterSource(const std::string &name) const {
  return has("master/" + name) ? "master/" + name : name;
}

std::vector<std::string> CheckpointReader::parameterNames() const {
  std::vector<std::string> out;
  for (const std::string &name : names())
    if (name.find('/') == std::string::npos)
      out.push_back(name);
  return out;
}

void CheckpointReader::describe(const std::string &name, DType &dtype,
                                std::vector<int64_t> &shape) const {
  const json::Value *entry = index_.at("tensors").find(name);
  if (!entry)
    fail(indexPath_, ": checkpoint has no tensor '", name, "'");
  std::string where = indexPath_ + ": tensor '" + name + "'";
  if (!parseDType(entry->at("dtype").asString(where + " dtype"), &dtype))
    fail(where, ": unknown dtype '", entry->at("dtype").asString(), "'");
  shape.clear();
  for (const json::Value &d : entry->at("shape").asArray(where + " shape"))
    shape.push_back(d.asInt(where + " shape"));
}

quant::AbsmaxFormat CheckpointReader::absmaxFormat(const std::string &name) const {
  const json::Value *entry = index_.at("tensors").find(name);
  if (!entry)
    fail(indexPath_, ": checkpoint has no tensor '", name, "'");
  return savedAbsmaxFormat(*entry, indexPath_ + ": tensor '" + name + "'");
}

std::vector<uint8_t> CheckpointReader::readPiece(const std::string &name,
                                                 const std::vector<int64_t> &savedShape,
                                                 const ShardMap &target,
                                                 const std::vector<int> &positions) {
  DType dtype;
  std::vector<int64_t> shape;
  describe(name, dtype, shape);
  const size_t element = dtypeSize(dtype);
  std::vector<uint8_t> out(static_cast<size_t>(target.localNumel()) * element);
  copySaved(*index_.at("tensors").find(name), name, savedShape, element, target, positions,
            out.data(), stepDir_, indexPath_ + ": tensor '" + name + "'", files_);
  return out;
}

GlobalTensor CheckpointReader::read(const std::string &name) {
  GlobalTensor out;
  describe(name, out.dtype, out.shape);
  // The whole tensor: a one-piece layout of it.
  ShardMap whole(ShardInfo{}, out.shape, Mesh{});
  out.bytes = readPiece(name, out.shape, whole, whole.positions(0));
  return out;
}

} // namespace llmc
