//===- TestUtil.h - helpers for runtime tests -------------------*- C++ -*-===//
#ifndef LLMC_TEST_UNIT_RUNTIME_TESTUTIL_H
#define LLMC_TEST_UNIT_RUNTIME_TESTUTIL_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

namespace llmc::test {

/// A fresh directory under $TMPDIR, removed at the end of the test.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/llmc-test-XXXXXX";
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Runs `body`, expecting a RuntimeError whose message contains `needle`.
#define EXPECT_RUNTIME_ERROR(body, needle)                                         \
  do {                                                                             \
    try {                                                                          \
      body;                                                                        \
      ADD_FAILURE() << "expected an error containing '" << (needle) << "'";        \
    } catch (const std::exception &e) {                                            \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); \
    }                                                                              \
  } while (0)

} // namespace llmc::test

#endif
