//===- TokenizerTest.cpp - byte-level BPE, sentencepiece BPE, loading -----===//
//
// Hand-written vocabularies small enough to know every id; the comparison
// with transformers on trained ones is test/reference/hf_tokenizer.py.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"
#include "TestUtil.h"
#include "runtime/data/BpeTokenizer.h"
#include "runtime/data/ByteLevel.h"
#include "runtime/support/Json.h"
#include "runtime/support/Unicode.h"

#include <set>

using namespace llmc;

namespace {

using Ids = std::vector<int32_t>;

// GPT-2's layout in miniature: the 256 byte characters (id = byte), then
// the merges' tokens, then <|endoftext|>.
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"h", "e"},   {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "t"},
    {"Ġt", "he"}, {"Ġ", "w"}, {"o", "r"},   {"Ġw", "or"},  {"Ġwor", "ld"},
    {"l", "d"},   {"Ã", "©"}, {"c", "af"},  {"a", "f"},    {"caf", "Ã©"},
};
// Ids of the merged tokens, in merge order from 256.
enum : int32_t {
  He = 256,
  Ll,
  Hell,
  Hello,
  SpT,
  SpThe,
  SpW,
  Or,
  SpWor,
  SpWorld,
  Ld,
  EAcute,
  Caf,
  Af,
  Cafe,
  Eot
};

json::Value miniVocab() {
  json::Value vocab = json::Value::object();
  for (int b = 0; b < 256; ++b)
    vocab.set(bytelevel::byteToChar(static_cast<uint8_t>(b)), static_cast<int64_t>(b));
  int64_t id = 256;
  for (const auto &[a, b] : kMerges)
    vocab.set(a + b, id++);
  vocab.set("<|endoftext|>", id);
  return vocab;
}

std::string miniMerges() {
  std::string text = "#version: 0.2\n";
  for (const auto &[a, b] : kMerges)
    text += a + " " + b + "\n";
  return text;
}

// The same model as a tokenizer.json, merges spelled as pairs.
json::Value miniTokenizerJson() {
  json::Value model = json::Value::object();
  model.set("type", "BPE");
  model.set("vocab", miniVocab());
  json::Value merges = json::Value::array();
  for (const auto &[a, b] : kMerges) {
    json::Value pair = json::Value::array();
    pair.push(a);
    pair.push(b);
    merges.push(pair);
  }
  model.set("merges", merges);
  json::Value byteLevel = json::Value::object();
  byteLevel.set("type", "ByteLevel");
  byteLevel.set("add_prefix_space", false);
  byteLevel.set("use_regex", true);
  json::Value added = json::Value::array();
  json::Value eot = json::Value::object();
  eot.set("id", static_cast<int64_t>(Eot));
  eot.set("content", "<|endoftext|>");
  eot.set("special", true);
  eot.set("normalized", false);
  added.push(eot);
  json::Value root = json::Value::object();
  root.set("added_tokens", added);
  root.set("normalizer", json::Value());
  root.set("pre_tokenizer", byteLevel);
  root.set("post_processor", byteLevel);
  root.set("decoder", byteLevel);
  root.set("model", model);
  return root;
}

// Llama's layout in miniature: <unk> <s> </s>, the <0xNN> bytes, then a few
// pieces; Prepend + Replace normalizer, byte fallback, the decoder that
// undoes them, <s> from the post-processor.
std::string miniLlamaJson() {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  char buf[32];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), R"(, "<0x%02X>": %d)", b, 3 + b);
    vocab += buf;
  }
  // 259 ▁, 260 h, 261 i, 262 ▁h, 263 ▁hi, 264 a
  vocab += R"(, "▁": 259, "h": 260, "i": 261, "▁h": 262, "▁hi": 263, "a": 264)";
  return R"({
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true, "normalized": false},
    {"id": 1, "content": "<s>", "special": true, "normalized": false},
    {"id": 2, "content": "</s>", "special": true, "normalized": false}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
    "vocab": {)" +
         vocab + R"(},
    "merges": ["▁ h", "▁h i"]}
})";
}

struct MiniDir {
  test::TempDir dir;
  MiniDir() {
    test::writeBytes(dir.file("vocab.json"), miniVocab().dump());
    test::writeBytes(dir.file("merges.txt"), miniMerges());
  }
};

const std::vector<std::string> kRoundTrip = {
    "",
    "hello the world",
    "Hello, World! It's 2024: x = f(a, b) + 3.14;",
    "don't we're I've they'll he'd",
    "a    b\t\tc \n\n\n  \r\n end   ",
    "café naïve Größe ÿ Ærø",
    "日本語 中文 한국어 αβγ Привет",
    "😀 👍🏽 👩‍💻 🇫🇷",
    "nbsp\u00a0em\u2003ideo\u3000 x",
    std::string("nul \0 del \x7f", 11),
    "<|endoftext|>hello<|endoftext|>",
};

} // namespace

TEST(Unicode, ClassesAndDecoding) {
  for (uint32_t c : {0x61u, 0x5Au, 0xE9u, 0xDFu, 0x3A9u, 0x4E2Du, 0xAAu, 0x1C5u, 0x2B0u, 0x20000u})
    EXPECT_TRUE(unicode::isLetter(c)) << std::hex << c;
  for (uint32_t c : {0x30u, 0x39u, 0x663u, 0xBDu, 0xB2u, 0x216Bu, 0x2460u})
    EXPECT_TRUE(unicode::isNumber(c)) << std::hex << c;
  for (uint32_t c : {0x20u, 0x5Fu, 0x27u, 0x300u, 0x94Du, 0x1F600u, 0xE000u})
    EXPECT_FALSE(unicode::isLetter(c) || unicode::isNumber(c)) << std::hex << c;
  // White_Space: not the information separators 0x1C-0x1F that Python's
  // isspace() takes, not the zero-width space.
  for (uint32_t c : {0x9u, 0xDu, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x3000u})
    EXPECT_TRUE(unicode::isWhitespace(c)) << std::hex << c;
  for (uint32_t c : {0x1Cu, 0x1Fu, 0x200Bu, 0x180Eu, 0xFEFFu})
    EXPECT_FALSE(unicode::isWhitespace(c)) << std::hex << c;

  auto decoded = [](const std::string &s) {
    unicode::Decoded d = unicode::decode(s, 0);
    return std::make_pair(d.code, d.length);
  };
  EXPECT_EQ(decoded("\xF0\x9F\x98\x80"), std::make_pair(0x1F600u, size_t(4)));
  EXPECT_EQ(decoded("\xC3\xA9"), std::make_pair(0xE9u, size_t(2)));
  for (const char *bad :
       {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80", "\xFF"})
    EXPECT_EQ(decoded(bad), std::make_pair(unicode::kInvalid, size_t(1))) << bad;
}

TEST(ByteLevel, EveryByteHasItsOwnCharacter) {
  std::set<std::string> chars;
  for (int b = 0; b < 256; ++b) {
    const std::string &c = bytelevel::byteToChar(static_cast<uint8_t>(b));
    chars.insert(c);
    EXPECT_EQ(bytelevel::charToByte(unicode::decode(c, 0).code), b);
  }
  EXPECT_EQ(chars.size(), 256u);
  EXPECT_EQ(bytelevel::byteToChar(' '), "Ġ");
  EXPECT_EQ(bytelevel::byteToChar('\n'), "Ċ");
  EXPECT_EQ(bytelevel::byteToChar('A'), "A");
  EXPECT_EQ(bytelevel::byteToChar(0xE9), "é");
  EXPECT_EQ(bytelevel::byteToChar(0xAD), "Ń"); // the soft hyphen is not printable
  EXPECT_EQ(bytelevel::charToByte(' '), -1);
  EXPECT_EQ(bytelevel::charToByte(0x144), -1);
  EXPECT_EQ(bytelevel::toChars("a b\xC3\xA9"), "aĠbÃ©");
}

TEST(ByteLevel, SplitsLikeGpt2sRegex) {
  auto pieces = [](const std::string &text) {
    std::vector<std::string> out;
    for (auto [b, e] : bytelevel::splitGpt2(text))
      out.push_back(text.substr(b, e - b));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world's 42 times!!"),
            (V{"Hello", " world", "'s", " 42", " times", "!!"}));
  EXPECT_EQ(pieces("I'm we're IT'S 'll"),
            (V{"I", "'m", " we", "'re", " IT", "'", "S", " '", "ll"}));
  // A whitespace run leaves its last space to the word after it; at the end
  // it is one piece; a lone tab stands alone.
  EXPECT_EQ(pieces("a   b \n\n c  "), (V{"a", "  ", " b", " \n\n", " c", "  "}));
  EXPECT_EQ(pieces("x\ty\t 1"), (V{"x", "\t", "y", "\t", " 1"}));
  EXPECT_EQ(pieces("abc123 ½ é中"), (V{"abc", "123", " ½", " é中"}));
  EXPECT_EQ(pieces(" ?! (x)"), (V{" ?!", " (", "x", ")"}));
  EXPECT_EQ(pieces(""), V{});
  // Invalid UTF-8: each byte is a character of its own, neither letter nor
  // number nor space.
  EXPECT_EQ(pieces("ab\xFF\xFE cd"), (V{"ab", "\xFF\xFE", " cd"}));
}

TEST(ByteLevel, SplitsLikeCl100ksRegex) {
  auto pieces = [](const std::string &text) {
    std::vector<std::string> out;
    for (auto [b, e] : bytelevel::splitCl100k(text))
      out.push_back(text.substr(b, e - b));
    return out;
  };
  using V = std::vector<std::string>;
  // Contractions in any case (ſ folds to s); one non-letter leads a word.
  EXPECT_EQ(pieces("it'S x'\u017F y'RE"), (V{"it", "'S", " x", "'\u017F", " y", "'RE"}));
  EXPECT_EQ(pieces("(foo 12345 \tbar"), (V{"(foo", " ", "123", "45", " ", "\tbar"}));
  // Line breaks stay with the punctuation or whitespace they end.
  EXPECT_EQ(pieces("!!\n\n\nx"), (V{"!!\n\n\n", "x"}));
  EXPECT_EQ(pieces("  \n  foo"), (V{"  \n", " ", " foo"}));
  EXPECT_EQ(pieces("a \r\n\r\n b"), (V{"a", " \r\n\r\n", " b"}));
  EXPECT_EQ(pieces("x  "), (V{"x", "  "}));
  EXPECT_EQ(pieces(""), V{});
}

TEST(BpeTokenizer, MergesByRankFromVocabAndMerges) {
  MiniDir mini;
  std::unique_ptr<Tokenizer> tok = loadTokenizer(mini.dir.path());
  EXPECT_EQ(tok->vocabSize(), Eot + 1);
  EXPECT_EQ(tok->eosId, Eot);
  EXPECT_FALSE(tok->bosId);
  EXPECT_EQ(tok->encode("hello the world"), (Ids{Hello, SpThe, SpWorld}));
  EXPECT_EQ(tok->encode(""), Ids{});
  // "hhe": (h, h) has no merge; (h, e) does.
  EXPECT_EQ(tok->encode("hhe"), (Ids{'h', He}));
  // "world" without its space: (o, r) ranks before (l, d).
  EXPECT_EQ(tok->encode("world"), (Ids{'w', Or, Ld}));
  // é is two bytes, two characters, merged; the rest of "café" too.
  EXPECT_EQ(tok->encode("café"), (Ids{Cafe}));
  EXPECT_EQ(tok->encode(" the"), (Ids{SpThe}));
  EXPECT_EQ(tok->encode("  the"), (Ids{' ', SpThe}));
  EXPECT_EQ(tok->encode("x\n"), (Ids{'x', '\n'}));
}

TEST(BpeTokenizer, AddedTokensAreMatchedBeforeSplitting) {
  MiniDir mini;
  std::unique_ptr<Tokenizer> tok = loadTokenizer(mini.dir.path());
  EXPECT_EQ(tok->encode("<|endoftext|>"), (Ids{Eot}));
  EXPECT_EQ(tok->encode("hello<|endoftext|> the"), (Ids{Hello, Eot, SpThe}));
  EXPECT_EQ(tok->encode("<|endoftext|><|endoftext|>"), (Ids{Eot, Eot}));
  EXPECT_EQ(tok->encode("<|endoftext|"),
            (Ids{'<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|'}));
  EXPECT_EQ(tok->decode({Hello, Eot, SpThe}), "hello<|endoftext|> the");

  // Flags: rstrip takes the spaces after, single_word needs non-word
  // characters around it, and the longest token wins.
  auto bpe = BpeTokenizer::fromVocabAndMerges(miniVocab().dump(), "vocab.json", miniMerges(),
                                              "merges.txt");
  BpeTokenizer::AddedToken user;
  user.content = "<u>";
  user.rstrip = true;
  bpe->addToken(user);
  BpeTokenizer::AddedToken userLong;
  userLong.content = "<u>>";
  bpe->addToken(userLong);
  BpeTokenizer::AddedToken word;
  word.content = "zz";
  word.singleWord = true;
  bpe->addToken(word);
  int32_t u = bpe->idOf("<u>"), uu = bpe->idOf("<u>>"), zz = bpe->idOf("zz");
  EXPECT_EQ(u, Eot + 1);
  EXPECT_EQ(uu, Eot + 2);
  EXPECT_EQ(zz, Eot + 3);
  EXPECT_EQ(bpe->encode("<u>   the"), (Ids{u, 't', He}));
  EXPECT_EQ(bpe->encode("<u>>the"), (Ids{uu, 't', He}));
  EXPECT_EQ(bpe->encode("a zz b"), (Ids{'a', ' ', zz, ' ', 'b'}));
  EXPECT_EQ(bpe->encode("azz"), (Ids{'a', 'z', 'z'}));
  EXPECT_EQ(bpe->words("a zz, <u> x"),
            (std::vector<std::string>{"a", "Ġ", "zz", ",", "Ġ", "<u>", "x"}));
}

TEST(BpeTokenizer, DecodeInvertsEncode) {
  MiniDir mini;
  std::unique_ptr<Tokenizer> tok = loadTokenizer(mini.dir.path());
  for (const std::string &text : kRoundTrip)
    EXPECT_EQ(tok->decode(tok->encode(text)), text) << text;
  // Token by token, the bytes add up, even inside a character.
  std::string emoji = "a😀b";
  Ids ids = tok->encode(emoji);
  ASSERT_EQ(ids.size(), 6u);
  std::string streamed;
  for (int32_t id : ids)
    streamed += tok->decode({id});
  EXPECT_EQ(streamed, emoji);
  EXPECT_EQ(tok->decode({ids[1]}), "\xF0");
  EXPECT_RUNTIME_ERROR(tok->decode({Hello, Eot + 1}),
                       "token 272 at position 1 is not in the vocabulary (272 tokens)");
  EXPECT_RUNTIME_ERROR(tok->decode({-1}), "token -1 at position 0");
}

TEST(BpeTokenizer, TokenizerJsonMatchesVocabAndMerges) {
  MiniDir mini;
  test::TempDir json;
  test::writeBytes(json.file("tokenizer.json"), miniTokenizerJson().dump(2));
  std::unique_ptr<Tokenizer> files = loadTokenizer(mini.dir.path());
  std::unique_ptr<Tokenizer> tok = loadTokenizer(json.path());
  EXPECT_EQ(tok->vocabSize(), files->vocabSize());
  EXPECT_EQ(tok->eosId, Eot);
  for (const std::string &text : kRoundTrip) {
    EXPECT_EQ(tok->encode(text), files->encode(text)) << text;
    EXPECT_EQ(tok->decode(tok->encode(text)), text) << text;
  }
  // tokenizer_config.json names the end-of-text token.
  test::writeBytes(json.file("tokenizer_config.json"), R"({"eos_token": {"content": "hello"}})");
  EXPECT_EQ(loadTokenizer(json.path())->eosId, Hello);
}

TEST(BpeTokenizer, SentencepieceStyleWithByteFallback) {
  test::TempDir dir;
  test::writeBytes(dir.file("tokenizer.json"), miniLlamaJson());
  std::unique_ptr<Tokenizer> tok = loadTokenizer(dir.path());
  EXPECT_EQ(tok->bosId, 1);
  EXPECT_EQ(tok->eosId, 2);
  EXPECT_EQ(tok->vocabSize(), 265);
  // "▁hi▁hi" (Prepend, Replace), no pre-tokenizer: one word.
  EXPECT_EQ(tok->encode("hi hi"), (Ids{263, 263}));
  // Characters outside the vocabulary fall back to their bytes.
  EXPECT_EQ(tok->encode("hé"), (Ids{262, 3 + 0xC3, 3 + 0xA9}));
  // Special tokens split first; each piece after is normalized on its own.
  EXPECT_EQ(tok->encode("<s>hi</s>"), (Ids{1, 263, 2}));
  EXPECT_EQ(tok->encode(""), Ids{});
  EXPECT_EQ(tok->decode({263, 262, 3 + 0xC3, 3 + 0xA9}), "hi hé");
  EXPECT_EQ(tok->decode({259, 263}), " hi"); // one leading space is the Prepend's
  for (const std::string &text : {std::string("hi"), std::string(" a  hi "), std::string("😀 é\n")})
    EXPECT_EQ(tok->decode(tok->encode(text)), text) << text;
}

TEST(BpeTokenizer, ErrorsNameTheFile) {
  test::TempDir dir;
  EXPECT_RUNTIME_ERROR(loadTokenizer(dir.path()),
                       "has no tokenizer: expected tokenizer.json, or vocab.json and merges.txt");
  std::string error;
  EXPECT_EQ(loadTokenizer(dir.path(), error), nullptr);
  EXPECT_NE(error.find("has no tokenizer"), std::string::npos) << error;

  test::writeBytes(dir.file("tokenizer.model"), "sentencepiece");
  EXPECT_RUNTIME_ERROR(
      loadTokenizer(dir.path()),
      "tokenizer.model: not supported: a sentencepiece model without tokenizer.json");

  test::writeBytes(dir.file("tokenizer.json"), "{\"model\": [1,,]}");
  EXPECT_RUNTIME_ERROR(loadTokenizer(dir.path()), dir.file("tokenizer.json") + ":1:");

  auto withChange = [&](const std::string &path, json::Value v) {
    json::Value root = miniTokenizerJson();
    if (path == "model.type") {
      json::Value model = root.at("model");
      model.set("type", v);
      root.set("model", model);
    } else {
      root.set(path, v);
    }
    test::writeBytes(dir.file("tokenizer.json"), root.dump());
    return dir.path();
  };
  EXPECT_RUNTIME_ERROR(loadTokenizer(withChange("model.type", "WordPiece")),
                       "tokenizer.json: not supported: model type WordPiece (only BPE)");
  json::Value whitespace = json::Value::object();
  whitespace.set("type", "Whitespace");
  EXPECT_RUNTIME_ERROR(loadTokenizer(withChange("pre_tokenizer", whitespace)),
                       "tokenizer.json: not supported: pre_tokenizer Whitespace");
  json::Value nfkc = json::Value::object();
  nfkc.set("type", "NFKC");
  EXPECT_RUNTIME_ERROR(loadTokenizer(withChange("normalizer", nfkc)),
                       "not supported: normalizer NFKC");
  json::Value split = json::Value::object();
  split.set("type", "Split");
  json::Value pattern = json::Value::object();
  pattern.set("Regex", "\\p{N}{1,3}");
  split.set("pattern", pattern);
  split.set("behavior", "Isolated");
  EXPECT_RUNTIME_ERROR(
      loadTokenizer(withChange("pre_tokenizer", split)),
      "not supported: pre_tokenizer Split with pattern {\"Regex\":\"\\\\p{N}{1,3}\"}");
  json::Value ctc = json::Value::object();
  ctc.set("type", "CTC");
  EXPECT_RUNTIME_ERROR(loadTokenizer(withChange("decoder", ctc)), "not supported: decoder CTC");
  EXPECT_RUNTIME_ERROR(loadTokenizer(withChange("model", json::Value::object())),
                       "not supported: model type (none)");

  test::TempDir files;
  test::writeBytes(files.file("vocab.json"), miniVocab().dump());
  test::writeBytes(files.file("merges.txt"), "#version: 0.2\nh e\nx \xE4\xB8\xAD\n");
  EXPECT_RUNTIME_ERROR(loadTokenizer(files.path()),
                       files.file("merges.txt") +
                           ":3: merge token \"中\" is not in the vocabulary");
  test::writeBytes(files.file("merges.txt"), "h e\nh e l\n");
  EXPECT_RUNTIME_ERROR(loadTokenizer(files.path()),
                       "merges.txt:2: \"h e l\" is not two tokens separated by one space");
  test::writeBytes(files.file("merges.txt"), "");
  test::writeBytes(files.file("vocab.json"), "[\"a\"]");
  EXPECT_RUNTIME_ERROR(loadTokenizer(files.path()),
                       files.file("vocab.json") + " must be an object of token: id");
}

TEST(Tokenizer, ByteTokenizerBehindTheInterface) {
  std::unique_ptr<Tokenizer> tok = makeByteTokenizer();
  EXPECT_EQ(tok->vocabSize(), 256);
  EXPECT_EQ(tok->encode("Hi\xFF"), (Ids{'H', 'i', 255}));
  for (const std::string &text : kRoundTrip)
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_RUNTIME_ERROR(tok->decode({65, 256}), "token 256 at position 1 is not a byte");
  EXPECT_FALSE(tok->bosId);
  EXPECT_FALSE(tok->eosId);
}
