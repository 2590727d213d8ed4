//===- MappedFile.h - a read-only memory-mapped file ------------*- C++ -*-===//
//
// Datasets and weights are far larger than memory: a file is mapped, never
// read whole, and the pages a reader has finished with are handed back
// (release()), so the process's resident memory stays bounded by what it
// is reading now. The mapping is private and read-only: its pages are the
// page cache's, shared with every other process mapping the file, and
// never count as this process's anonymous memory.
//
// A mapped file that is truncated while mapped would turn a read past its
// new end into SIGBUS. The file's identity (device, inode), size and
// modification time are recorded when it is mapped; checkUnchanged()
// compares them with the file now, so a reader that checks before it reads
// a piece reports a file rewritten under it by name instead of crashing.
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

  /// Throws naming the file when it is no longer the file that was mapped:
  /// removed, replaced, or rewritten (another size or modification time).
  void checkUnchanged() const;

  /// Drops the pages covering [offset, offset + bytes) from this process's
  /// resident set; they are read back from the page cache or the disk when
  /// touched again, so this changes memory, never contents.
  void release(size_t offset, size_t bytes) const;

private:
  std::string path_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  /// What the file was when mapped (checkUnchanged).
  uint64_t device_ = 0, inode_ = 0;
  int64_t modifiedNanos_ = 0;
};

} // namespace llmc

#endif
