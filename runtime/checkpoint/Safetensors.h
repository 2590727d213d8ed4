//===- Safetensors.h - the safetensors tensor file format -------*- C++ -*-===//
//
// Format: 8-byte little-endian header size N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
//  "__metadata__": {"key": "value"}}, then the tensor bytes. Readers here
// validate every field before use; errors name the file and tensor.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define LLMC_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include "kernels/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace llmc {

struct SafeTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

/// Writes `tensors` (in order) and `metadata` to `path` atomically.
void writeSafetensors(const std::string &path, const std::vector<SafeTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// A safetensors file read into memory and validated.
class SafetensorsFile {
public:
  explicit SafetensorsFile(const std::string &path);

  const std::vector<SafeTensor> &tensors() const { return tensors_; }
  /// The tensor named `name`, or null.
  const SafeTensor *find(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// "F32", "BF16", ... (the safetensors spelling).
const char *safetensorsDType(DType dtype);

} // namespace llmc

#endif
