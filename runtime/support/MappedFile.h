//===- MappedFile.h - a read-only memory-mapped file ------------*- C++ -*-===//
//
// Datasets are far larger than memory: a shard is mapped, never read whole,
// and the pages the loader has finished with are handed back (release()), so
// the process's resident memory stays bounded by what it is reading now.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_MAPPEDFILE_H
#define LLMC_RUNTIME_SUPPORT_MAPPEDFILE_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc {

class MappedFile {
public:
  /// Maps `path` read-only; throws naming the file when it cannot be opened
  /// or mapped. An empty file maps to no bytes.
  explicit MappedFile(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

  /// Drops the pages covering [offset, offset + bytes) from this process's
  /// resident set; they are read back from the page cache or the disk when
  /// touched again, so this changes memory, never contents.
  void release(size_t offset, size_t bytes) const;

private:
  std::string path_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace llmc

#endif
