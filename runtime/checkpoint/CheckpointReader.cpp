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
  return read(has("master/" + name) ? "master/" + name : name);
}

std::vector<std::string> CheckpointReader::parameterNames() const {
  std::vector<std::string> out;
  for (const std::string &name : names())
    if (name.find('/') == std::string::npos)
      out.push_back(name);
  return out;
}

GlobalTensor CheckpointReader::read(const std::string &name) {
  const json::Value *entry = index_.at("tensors").find(name);
  if (!entry)
    fail(indexPath_, ": checkpoint has no tensor '", name, "'");
  std::string where = indexPath_ + ": tensor '" + name + "'";
  GlobalTensor out;
  if (!parseDType(entry->at("dtype").asString(where + " dtype"), &out.dtype))
    fail(where, ": unknown dtype '", entry->at("dtype").asString(), "'");
  for (const json::Value &d : entry->at("shape").asArray(where + " shape"))
    out.shape.push_back(d.asInt(where + " shape"));

  size_t element = dtypeSize(out.dtype);
  // The whole tensor: a one-piece layout of it.
  ShardMap whole(ShardInfo{}, out.shape, Mesh{});
  out.bytes.resize(static_cast<size_t>(whole.localNumel()) * element);
  copySaved(*entry, name, out.shape, element, whole, whole.positions(0), out.bytes.data(),
            stepDir_, where, files_);
  return out;
}

} // namespace llmc
