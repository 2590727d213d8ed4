//===- SafetensorsTest.cpp - the safetensors format, good and corrupt -----===//

#include "TestUtil.h"
#include "runtime/checkpoint/Safetensors.h"

#include <cstring>

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
