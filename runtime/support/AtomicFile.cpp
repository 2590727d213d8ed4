//===- AtomicFile.cpp - all-or-nothing file writes ------------------------===//

#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"

#include <cerrno>
#include <cstdlib>
#include <vector>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace llmc {
namespace {

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

} // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  std::string pattern = path_ + ".tmp.XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  fd_ = ::mkstemp(buf.data());
  if (fd_ < 0)
    fail("cannot create a temporary file next to '", path_, "': ", std::strerror(errno));
  temp_ = buf.data();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write '", path_, "': ", std::strerror(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0)
    fail("cannot flush '", path_, "': ", std::strerror(errno));
  ::fchmod(fd_, 0644);
  ::close(fd_);
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(temp_.c_str());
    fail("cannot replace '", path_, "': ", std::strerror(err));
  }
  syncDirectory(directoryOf(path_));
}

void writeFileAtomic(const std::string &path, const void *data, size_t size) {
  AtomicFile file(path);
  file.write(data, size);
  file.commit();
}

void makeDirectories(const std::string &dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!partial.empty() && ::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
        fail("cannot create directory '", partial, "': ", std::strerror(errno));
    }
    if (i < dir.size()) partial += dir[i];
  }
}

} // namespace llmc
