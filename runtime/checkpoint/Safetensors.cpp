//===- Safetensors.cpp - the safetensors tensor file format ---------------===//

#include "runtime/checkpoint/Safetensors.h"

#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <algorithm>

namespace llmc {

const char *safetensorsDType(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::BF16: return "BF16";
  case DType::F16: return "F16";
  case DType::I32: return "I32";
  case DType::I64: return "I64";
  case DType::U8: return "U8";
  case DType::F64: return "F64";
  }
  return "?";
}

const char *safetensorsDType(const SafeTensor &t) {
  return t.e4m3 ? "F8_E4M3" : safetensorsDType(t.dtype);
}

namespace {
bool parseSafetensorsDType(const std::string &name, DType *out, bool *e4m3) {
  *e4m3 = name == "F8_E4M3";
  if (*e4m3) {
    *out = DType::U8; // bytes, which the readers of NF4 storage take as E4M3
    return true;
  }
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64, DType::U8,
                  DType::F64})
    if (name == safetensorsDType(d)) {
      *out = d;
      return true;
    }
  return false;
}
} // namespace

void writeSafetensors(const std::string &path, const std::vector<SafeTensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  writeSafetensors(path, tensors, [&](size_t i) { return tensors[i].data; }, metadata);
}

void writeSafetensors(const std::string &path, const std::vector<SafeTensor> &tensors,
                      const std::function<const void *(size_t)> &bytesOf,
                      const std::map<std::string, std::string> &metadata) {
  json::Value header = json::Value::object();
  if (!metadata.empty()) {
    json::Value meta = json::Value::object();
    for (auto &[k, v] : metadata) meta.set(k, json::Value(v));
    header.set("__metadata__", meta);
  }
  uint64_t offset = 0;
  for (const SafeTensor &t : tensors) {
    json::Value entry = json::Value::object();
    entry.set("dtype", json::Value(safetensorsDType(t)));
    json::Value shape = json::Value::array();
    for (int64_t d : t.shape) shape.push(json::Value(d));
    entry.set("shape", shape);
    json::Value offsets = json::Value::array();
    offsets.push(json::Value(offset));
    offsets.push(json::Value(offset + t.bytes));
    entry.set("data_offsets", offsets);
    header.set(t.name, entry);
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  uint8_t size[8];
  for (int i = 0; i < 8; ++i) size[i] = static_cast<uint8_t>(n >> (8 * i));
  AtomicFile file(path);
  file.write(size, 8);
  file.write(text.data(), text.size());
  for (size_t i = 0; i < tensors.size(); ++i) file.write(bytesOf(i), tensors[i].bytes);
  file.commit();
}

SafetensorsFile::SafetensorsFile(const std::string &path)
    : path_(path), file_(std::make_unique<MappedFile>(path)) {
  const uint8_t *bytes = file_->data();
  const uint64_t size = file_->size();
  if (size < 8)
    fail(path, ": too short for a safetensors file (", size, " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (n > size - 8)
    fail(path, ": header length ", n, " (at byte 0) runs past the end of the file (", size,
         " bytes)");
  // Offsets in messages are the file's: the header is bytes [8, 8 + n),
  // the data section starts at 8 + n.
  const std::string headerAt = path + ": header (bytes 8 to " + std::to_string(8 + n) + ")";
  std::string text(reinterpret_cast<const char *>(bytes) + 8, n);
  json::Value header = json::parse(text, headerAt);
  if (header.kind() != json::Value::Kind::Object)
    fail(headerAt, " must be a JSON object");
  uint64_t dataSize = size - 8 - n;
  const uint8_t *data = bytes + 8 + n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto &[name, entry] : header.members()) {
    if (name == "__metadata__") {
      for (const auto &[k, v] : entry.members())
        metadata_[k] = v.asString(path + ": metadata '" + k + "'");
      continue;
    }
    std::string where = path + ": tensor '" + name + "'";
    SafeTensor t;
    t.name = name;
    const std::string &dtype = entry.at("dtype").asString(where + " dtype");
    if (!parseSafetensorsDType(dtype, &t.dtype, &t.e4m3))
      fail(where, ": unknown dtype '", dtype, "'");
    size_t count = 1;
    for (const json::Value &d : entry.at("shape").asArray(where + " shape")) {
      int64_t dim = d.asInt(where + " shape");
      if (dim < 0) fail(where, ": negative dimension ", dim);
      t.shape.push_back(dim);
      count *= static_cast<size_t>(dim);
    }
    const auto &offsets = entry.at("data_offsets").asArray(where + " data_offsets");
    if (offsets.size() != 2)
      fail(where, ": data_offsets must have two entries");
    int64_t begin = offsets[0].asInt(where + " data_offsets"),
            end = offsets[1].asInt(where + " data_offsets");
    if (begin < 0 || end < begin || static_cast<uint64_t>(end) > dataSize)
      fail(where, ": data_offsets [", begin, ", ", end, ") outside the ", dataSize,
           "-byte data section (bytes ", 8 + n, " to ", size, " of the file)");
    t.bytes = static_cast<size_t>(end - begin);
    if (t.bytes != count * dtypeSize(t.dtype))
      fail(where, ": ", t.bytes, " bytes do not hold shape ", TensorView{nullptr, t.dtype, t.shape}.describe(),
           " (", count * dtypeSize(t.dtype), " bytes)");
    t.data = data + begin;
    ranges.push_back({static_cast<uint64_t>(begin), static_cast<uint64_t>(end)});
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      fail(path, ": tensor data ranges overlap (at byte ", 8 + n + ranges[i].first, ")");
}

void SafetensorsFile::release(const SafeTensor &t) const {
  if (t.bytes)
    file_->release(static_cast<const uint8_t *>(t.data) - file_->data(), t.bytes);
}

const SafeTensor *SafetensorsFile::find(const std::string &name) const {
  checkUnchanged();
  for (const SafeTensor &t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

} // namespace llmc
