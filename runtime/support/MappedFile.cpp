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
