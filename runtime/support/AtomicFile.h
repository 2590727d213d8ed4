//===- AtomicFile.h - all-or-nothing file writes ----------------*- C++ -*-===//
//
// Writes go to a temporary file in the target's directory, which is
// fsync'ed and renamed over the target (then the directory is fsync'ed): a
// crash or error at any point leaves the previous file intact.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_ATOMICFILE_H
#define LLMC_RUNTIME_SUPPORT_ATOMICFILE_H

#include <cstddef>
#include <string>

namespace llmc {

/// A file being written; commit() publishes it, destruction without commit
/// removes the temporary.
class AtomicFile {
public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  void write(const void *data, size_t size);
  void commit();

private:
  std::string path_, temp_;
  int fd_ = -1;
};

/// Writes `size` bytes to `path` atomically.
void writeFileAtomic(const std::string &path, const void *data, size_t size);

/// Creates `dir` and its parents if missing.
void makeDirectories(const std::string &dir);

} // namespace llmc

#endif
