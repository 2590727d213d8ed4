//===- JsonTest.cpp - JSON values, parse errors, atomic writes ------------===//

#include "TestUtil.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Json.h"

using namespace llmc;

TEST(Json, RoundTripKeepsOrderAndExactIntegers) {
  json::Value v = json::parse(R"({"b": 1, "a": [true, null, 2.5, "x\n"], "big": 9007199254740993})");
  EXPECT_EQ(v.members()[0].first, "b");
  EXPECT_EQ(v.at("big").asInt(), 9007199254740993LL);
  EXPECT_DOUBLE_EQ(v.at("a").asArray()[2].asDouble(), 2.5);
  json::Value again = json::parse(v.dump());
  EXPECT_EQ(again.dump(), v.dump());
  EXPECT_EQ(json::parse(v.dump(2)).dump(), v.dump());
}

TEST(Json, ErrorsNamePosition) {
  EXPECT_RUNTIME_ERROR(json::parse("{\n  \"a\": [1, 2,, 3]\n}", "state.json"), "state.json:2:");
  EXPECT_RUNTIME_ERROR(json::parse("{\"a\": 1} x"), "trailing");
  EXPECT_RUNTIME_ERROR(json::parse("\"unterminated"), "unterminated string");
  EXPECT_RUNTIME_ERROR(json::parse("{\"a\": 1}").at("b"), "missing key 'b'");
  EXPECT_RUNTIME_ERROR(json::parse("{\"a\": \"s\"}").at("a").asInt("a"), "a must be an integer");
}

TEST(AtomicFile, AbandonedWriteKeepsTheOldFile) {
  test::TempDir dir;
  std::string path = dir.file("f.txt");
  writeFileAtomic(path, "old", 3);
  {
    AtomicFile file(path);
    file.write("new contents", 12);
    // no commit: destruction removes the temporary
  }
  EXPECT_EQ(test::readBytes(path), "old");
  writeFileAtomic(path, "new", 3);
  EXPECT_EQ(test::readBytes(path), "new");
  EXPECT_RUNTIME_ERROR(writeFileAtomic(dir.file("missing/dir/f"), "x", 1), "cannot create a temporary file");
}
