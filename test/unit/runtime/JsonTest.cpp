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

TEST(Json, WholeFloatsStayFloats) {
  EXPECT_EQ(json::Value(8.0).dump(), "8.0");
  EXPECT_EQ(json::Value(-3.0).dump(), "-3.0");
  EXPECT_EQ(json::Value(int64_t{8}).dump(), "8");
  EXPECT_EQ(json::Value(2.5).dump(), "2.5");
  EXPECT_EQ(json::Value(1e300).dump(), "1.0000000000000001e+300");
  EXPECT_EQ(json::parse("[8.0, 8, 1e2]").dump(), "[8.0,8,100.0]");
  EXPECT_EQ(json::parse("8.0").kind(), json::Value::Kind::Double);
}

TEST(Json, ErrorsNamePosition) {
  EXPECT_RUNTIME_ERROR(json::parse("{\n  \"a\": [1, 2,, 3]\n}", "state.json"), "state.json:2:");
  EXPECT_RUNTIME_ERROR(json::parse("{\"a\": 1} x"), "trailing");
  EXPECT_RUNTIME_ERROR(json::parse("\"unterminated"), "unterminated string");
  EXPECT_RUNTIME_ERROR(json::parse("{\"a\": 1}").at("b"), "missing key 'b'");
  EXPECT_RUNTIME_ERROR(json::parse("{\"a\": \"s\"}").at("a").asInt("a"), "a must be an integer");
}

TEST(Json, UnicodeEscapesBecomeUtf8) {
  // é (2 bytes), € (3 bytes), 😀 as a surrogate pair (4 bytes), the byte-level
  // space Ġ (U+0120) of tokenizer files.
  EXPECT_EQ(json::parse(R"("\u00e9\u20AC\ud83d\ude00\u0120x")").asString(),
            "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xC4\xA0x");
  EXPECT_EQ(json::parse(R"("\u0000")").asString(), std::string(1, '\0'));
  EXPECT_RUNTIME_ERROR(json::parse(R"("\ud83d")"), "high surrogate not followed by a \\u low surrogate");
  EXPECT_RUNTIME_ERROR(json::parse(R"("\ud83d\u0041")"), "high surrogate not followed");
  EXPECT_RUNTIME_ERROR(json::parse(R"("\ude00")"), "lone low surrogate");
  EXPECT_RUNTIME_ERROR(json::parse(R"("\u12g4")"), "expected 4 hex digits");
  EXPECT_RUNTIME_ERROR(json::parse(R"("\u12)"), "expected 4 hex digits");
}

TEST(Json, LargeObjectsParseInLinearTime) {
  // A tokenizer's vocabulary: 200k members (quadratic duplicate checks would
  // take minutes).
  std::string text = "{";
  for (int i = 0; i < 200000; ++i)
    text += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  json::Value v = json::parse(text);
  ASSERT_EQ(v.members().size(), 200000u);
  EXPECT_EQ(v.members()[123456].first, "t123456");
  EXPECT_EQ(v.members()[123456].second.asInt(), 123456);
  // A repeated key keeps its first place and takes the last value.
  json::Value d = json::parse(R"({"a": 1, "b": 2, "a": 3})");
  ASSERT_EQ(d.members().size(), 2u);
  EXPECT_EQ(d.members()[0].first, "a");
  EXPECT_EQ(d.at("a").asInt(), 3);
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
