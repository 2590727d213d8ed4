//===- Safetensors.h - the safetensors tensor file format -------*- C++ -*-===//
//
// Format: 8-byte little-endian header size N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
//  "__metadata__": {"key": "value"}}, then the tensor bytes. Readers here
// validate every field before use; errors name the file and tensor.
//
// A file is mapped, not read (runtime/support/MappedFile.h): a tensor is a
// view (dtype, shape, pointer) into the mapping, and only the pages a
// reader touches are read from the disk or the page cache, so a rank that
// takes its shard of a tensor reads that shard's pages, and a weights file
// never becomes anonymous memory of the process. The views are read-only.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define LLMC_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include "kernels/Tensor.h"
#include "runtime/support/MappedFile.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

/// A tensor to write, or a view of one in a mapped file.
struct SafeTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
  /// One byte per element holding an OCP E4M3 number (safetensors'
  /// F8_E4M3; dtype U8): NF4's double-quantized absmax levels in QLoRA's
  /// 8-bit float form. A reader that takes U8 tensors as codes checks it.
  bool e4m3 = false;
};

/// Writes `tensors` (in order) and `metadata` to `path` atomically.
void writeSafetensors(const std::string &path, const std::vector<SafeTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});
/// The same, with tensor i's `bytes` taken from bytesOf(i), called once per
/// tensor in order as the file is written (what it returns need last only
/// until the next call): a writer holds one tensor at a time, not all.
void writeSafetensors(const std::string &path, const std::vector<SafeTensor> &tensors,
                      const std::function<const void *(size_t)> &bytesOf,
                      const std::map<std::string, std::string> &metadata = {});

/// A safetensors file mapped and its header validated; the tensors are
/// views into the mapping, valid as long as the object.
class SafetensorsFile {
public:
  /// Maps `path` and validates its header; throws naming the file and, for
  /// a bad header, the byte offset of what is wrong.
  explicit SafetensorsFile(const std::string &path);

  /// Every tensor, in the header's order. The caller reading their bytes
  /// checks the file first (checkUnchanged).
  const std::vector<SafeTensor> &tensors() const { return tensors_; }
  /// The tensor named `name`, or null. Checks that the file is still the
  /// one mapped (checkUnchanged), as its bytes are read next.
  const SafeTensor *find(const std::string &name) const;
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  const std::string &path() const { return path_; }

  /// Throws naming the file when it was truncated, rewritten or replaced
  /// since it was mapped: reading its views would then fault or give
  /// bytes the header does not describe.
  void checkUnchanged() const { file_->checkUnchanged(); }
  /// Hands `t`'s pages back (MappedFile::release): a reader done with a
  /// tensor keeps the process's resident set to what it reads now.
  void release(const SafeTensor &t) const;

private:
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// "F32", "BF16", ... (the safetensors spelling).
const char *safetensorsDType(DType dtype);
/// The safetensors spelling of `t`'s dtype ("F8_E4M3" for an E4M3 tensor).
const char *safetensorsDType(const SafeTensor &t);

} // namespace llmc

#endif
