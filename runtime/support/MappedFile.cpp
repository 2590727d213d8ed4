//===- MappedFile.cpp - a read-only memory-mapped file --------------------===//

#include "runtime/support/MappedFile.h"

#include "runtime/support/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace llmc {
namespace {

int64_t modifiedNanos(const struct stat &st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

} // namespace

MappedFile::MappedFile(const std::string &path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'", path, "' is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  device_ = static_cast<uint64_t>(st.st_dev);
  inode_ = static_cast<uint64_t>(st.st_ino);
  modifiedNanos_ = modifiedNanos(st);
  if (size_ > 0) {
    void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail("cannot map '", path, "': ", std::strerror(err));
    }
    data_ = static_cast<const uint8_t *>(p);
  }
  // The mapping keeps the file alive; the descriptor is not needed.
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
}

void MappedFile::checkUnchanged() const {
  struct stat st{};
  if (::stat(path_.c_str(), &st) != 0)
    fail("'", path_, "' was removed while it was being read (", std::strerror(errno), ")");
  if (static_cast<uint64_t>(st.st_dev) != device_ || static_cast<uint64_t>(st.st_ino) != inode_)
    fail("'", path_, "' was replaced by another file while it was being read");
  if (static_cast<size_t>(st.st_size) != size_ || modifiedNanos(st) != modifiedNanos_)
    fail("'", path_, "' changed while it was being read (", size_, " bytes when opened, ",
         st.st_size, " now", modifiedNanos(st) != modifiedNanos_ ? ", modified since" : "",
         "); a file must not be rewritten while llmc reads it");
}

void MappedFile::release(size_t offset, size_t bytes) const {
  if (!data_ || offset >= size_)
    return;
  bytes = std::min(bytes, size_ - offset);
  // madvise works on whole pages: release only those entirely inside the
  // range, as a neighbouring range may still be in use.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(data_) + offset;
  uintptr_t end = begin + bytes;
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin)
    ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

} // namespace llmc
