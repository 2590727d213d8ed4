//===- SafetensorsTest.cpp - the safetensors format, good and corrupt -----===//

#include "TestUtil.h"
#include "runtime/checkpoint/Safetensors.h"

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace llmc;

namespace {

std::string makeFile(const test::TempDir &dir) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {floatToBf16(1.5f), floatToBf16(-2.0f)};
  std::vector<int32_t> c = {7};
  std::vector<double> d = {3.25};
  std::string path = dir.file("t.safetensors");
  writeSafetensors(path,
                   {{"a", DType::F32, {2, 3}, a.data(), a.size() * 4},
                    {"b", DType::BF16, {2}, b.data(), b.size() * 2},
                    {"c", DType::I32, {}, c.data(), 4},
                    {"d", DType::F64, {1}, d.data(), 8}},
                   {{"step", "3"}});
  return path;
}

/// Rewrites the JSON header of a valid file (keeping the data section).
std::string withHeader(const std::string &bytes, const std::string &header) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string padded = header;
  padded.append((8 - padded.size() % 8) % 8, ' ');
  uint64_t m = padded.size();
  std::string out(reinterpret_cast<const char *>(&m), 8);
  return out + padded + bytes.substr(8 + n);
}

} // namespace

TEST(Safetensors, RoundTrip) {
  test::TempDir dir;
  SafetensorsFile f(makeFile(dir));
  ASSERT_EQ(f.tensors().size(), 4u);
  const SafeTensor *a = f.find("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(static_cast<const float *>(a->data)[5], 6.0f);
  EXPECT_EQ(bf16ToFloat(static_cast<const uint16_t *>(f.find("b")->data)[0]), 1.5f);
  EXPECT_EQ(f.find("c")->shape.size(), 0u);
  EXPECT_EQ(f.metadata().at("step"), "3");
  EXPECT_EQ(f.find("missing"), nullptr);
}

TEST(Safetensors, CorruptFilesAreRejectedWithTheProblem) {
  test::TempDir dir;
  std::string good = test::readBytes(makeFile(dir));
  std::string path = dir.file("bad.safetensors");

  test::writeBytes(path, good.substr(0, 5));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "too short");

  std::string huge = good;
  uint64_t n = 1ull << 40;
  std::memcpy(huge.data(), &n, 8);
  test::writeBytes(path, huge);
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "runs past the end of the file");

  test::writeBytes(path, withHeader(good, "{\"a\": "));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "header");

  test::writeBytes(path, withHeader(good, R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 4000]}})"));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "tensor 'a': data_offsets [0, 4000) outside");

  test::writeBytes(path, withHeader(good, R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 24]}})"));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "tensor 'a': 24 bytes do not hold shape f32[2x2]");

  test::writeBytes(path, withHeader(good, R"({"a": {"dtype": "Q7", "shape": [6], "data_offsets": [0, 24]}})"));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "tensor 'a': unknown dtype 'Q7'");

  test::writeBytes(path, withHeader(good, R"({"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})"));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, "overlap");

  EXPECT_RUNTIME_ERROR(SafetensorsFile{dir.file("absent")}, "cannot open");
}

TEST(Safetensors, CorruptHeaderNamesTheFileAndOffset) {
  test::TempDir dir;
  std::string good = test::readBytes(makeFile(dir));
  std::string path = dir.file("bad.safetensors");
  // A header of 8 bytes ("{\"a\": " padded): bytes 8 to 16 of the file.
  test::writeBytes(path, withHeader(good, "{\"a\": "));
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path}, path + ": header (bytes 8 to 16):1:");

  std::string header = R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 4000]}})";
  size_t headerEnd = 8 + header.size() + (8 - header.size() % 8) % 8;
  std::string bad = withHeader(good, header);
  test::writeBytes(path, bad);
  EXPECT_RUNTIME_ERROR(SafetensorsFile{path},
                       path + ": tensor 'a': data_offsets [0, 4000) outside the " +
                           std::to_string(bad.size() - headerEnd) + "-byte data section (bytes " +
                           std::to_string(headerEnd) + " to " + std::to_string(bad.size()) +
                           " of the file)");
}

TEST(Safetensors, TensorsAreViewsIntoTheFile) {
  test::TempDir dir;
  std::string path = makeFile(dir);
  std::string bytes = test::readBytes(path);
  SafetensorsFile f(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  // Each view holds the file's bytes at 8 + header + its data offset.
  for (const SafeTensor &t : f.tensors()) {
    size_t at = bytes.find(std::string(static_cast<const char *>(t.data), t.bytes), 8 + n);
    EXPECT_NE(at, std::string::npos) << t.name;
  }
  const SafeTensor *a = f.find("a");
  EXPECT_EQ(std::memcmp(a->data, bytes.data() + 8 + n, 24), 0);
  // Handing pages back changes memory, never what a view reads.
  f.release(*a);
  EXPECT_EQ(static_cast<const float *>(a->data)[5], 6.0f);
}

TEST(Safetensors, AFileTruncatedAfterOpeningIsANamedError) {
  test::TempDir dir;
  std::string path = makeFile(dir);
  SafetensorsFile f(path);
  ASSERT_TRUE(f.find("a"));
  // Truncated in place: the same file, shorter. Reading a view past the
  // new end would fault; find() reports it first.
  ASSERT_EQ(::truncate(path.c_str(), 16), 0);
  EXPECT_RUNTIME_ERROR(f.find("a"), "'" + path + "' changed while it was being read (");
  EXPECT_RUNTIME_ERROR(f.checkUnchanged(), "bytes when opened, 16 now");
}

TEST(Safetensors, AFileReplacedOrRemovedAfterOpeningIsANamedError) {
  test::TempDir dir;
  std::string path = makeFile(dir);
  SafetensorsFile f(path);
  std::string other = dir.file("other.safetensors");
  test::writeBytes(other, test::readBytes(path));
  ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);
  EXPECT_RUNTIME_ERROR(f.find("a"), "'" + path + "' was replaced by another file");
  ASSERT_EQ(std::remove(path.c_str()), 0);
  EXPECT_RUNTIME_ERROR(f.checkUnchanged(), "'" + path + "' was removed");
}

TEST(MappedFile, MapsTheBytesAndChecksTheFile) {
  test::TempDir dir;
  std::string path = dir.file("bytes");
  test::writeBytes(path, "hello, mapped world");
  MappedFile file(path);
  ASSERT_EQ(file.size(), 19u);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(file.data()), file.size()),
            "hello, mapped world");
  file.checkUnchanged();
  // Rewritten in place with as many bytes: the modification time tells.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  EXPECT_RUNTIME_ERROR(file.checkUnchanged(), "modified since");

  test::writeBytes(dir.file("empty"), "");
  MappedFile empty(dir.file("empty"));
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_RUNTIME_ERROR(MappedFile{dir.file("absent")}, "cannot open '" + dir.file("absent"));
  EXPECT_RUNTIME_ERROR(MappedFile{dir.path()}, "is not a regular file");
}
