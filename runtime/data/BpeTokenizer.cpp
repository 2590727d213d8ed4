//===- BpeTokenizer.cpp - Hugging Face's BPE tokenizers -------------------===//
//
// Each stage follows the `tokenizers` crate (0.19) closely enough to give its
// ids: the added-token split (added_vocabulary.rs), the normalizers, the
// pre-tokenizers, BPE's merge loop (models/bpe/word.rs: a min-heap on (rank,
// position) over a linked list of symbols), the decoders. Where the library
// would replace bytes that are not UTF-8 with U+FFFD when decoding, llmc
// passes the bytes through, so decoding a prefix of a sequence never loses
// the start of a character.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BpeTokenizer.h"
#include "runtime/data/ByteLevel.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"
#include "runtime/support/Normalize.h"
#include "runtime/support/Unicode.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>
#include <sys/stat.h>

namespace llmc {

// One normalizer, pre-tokenizer or decoder of the pipeline.
struct BpeTokenizer::Step {
  enum class Kind {
    Prepend,      // normalizer: `text` before non-empty text
    Nfc,          // normalizer: Unicode normalization form C
    Replace,      // normalizer, decoder: every `text` by `content`
    ByteLevel,    // pre-tokenizer, decoder
    Split,        // pre-tokenizer: `split`'s pieces, no byte mapping
    Metaspace,    // pre-tokenizer, decoder: `text` is the replacement of ' '
    ByteFallback, // decoder: <0xNN> tokens to bytes
    Fuse,         // decoder: all tokens into one
    Strip,        // decoder: `start`/`stop` leading/trailing `text`s off each token
  };
  enum class PrependScheme { Always, First, Never };
  Kind kind;
  std::string text, content;
  bool addPrefixSpace = false, split = true;
  PrependScheme prependScheme = PrependScheme::Always;
  size_t start = 0, stop = 0;
  std::vector<std::pair<size_t, size_t>> (*splitter)(const std::string &) = nullptr;
};

namespace {

constexpr size_t kCacheCapacity = 10000; // words, as the library's cache
constexpr size_t kCacheMaxWordBytes = 256;

bool exists(const std::string &path) {
  struct stat s;
  return stat(path.c_str(), &s) == 0 && S_ISREG(s.st_mode);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read '", path, "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A member that must be there, with the file and the path to it in the error.
const json::Value &member(const json::Value &v, const std::string &key, const std::string &where) {
  if (v.kind() != json::Value::Kind::Object)
    fail(where, " must be an object");
  const json::Value *m = v.find(key);
  if (!m)
    fail(where, " has no '", key, "'");
  return *m;
}

bool flag(const json::Value &v, const std::string &key, bool fallback, const std::string &where) {
  const json::Value *m = v.find(key);
  return m && !m->isNull() ? m->asBool(where + "." + key) : fallback;
}

std::string optionalString(const json::Value &v, const std::string &key, const std::string &where) {
  const json::Value *m = v.find(key);
  return m && !m->isNull() ? m->asString(where + "." + key) : "";
}

std::string typeOf(const json::Value &v, const std::string &where) {
  return member(v, "type", where).asString(where + ".type");
}

[[noreturn]] void unsupported(const std::string &source, const std::string &what) {
  fail(source, ": not supported: ", what, " (llmc reads BPE tokenizers: docs/huggingface.md)");
}

// A Replace's pattern: {"String": "..."}; a regular expression is refused.
std::string stringPattern(const json::Value &step, const std::string &where,
                          const std::string &source) {
  const json::Value &pattern = member(step, "pattern", where);
  if (const json::Value *s = pattern.find("String")) {
    const std::string &text = s->asString(where + ".pattern.String");
    if (text.empty())
      unsupported(source, "Replace with an empty pattern");
    return text;
  }
  unsupported(source, "Replace with pattern " + pattern.dump() + " (strings only)");
}

void replaceAll(std::string &text, const std::string &from, const std::string &to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = text.find(from, pos)) != std::string::npos; pos = hit + from.size())
    out.append(text, pos, hit - pos).append(to);
  out.append(text, pos, std::string::npos);
  text = std::move(out);
}

std::vector<std::string> splitCodePoints(const std::string &word) {
  std::vector<std::string> chars;
  for (size_t pos = 0; pos < word.size();) {
    size_t n = unicode::decode(word, pos).length;
    chars.push_back(word.substr(pos, n));
    pos += n;
  }
  return chars;
}

// A character of a word for single_word added tokens (Rust's
// char::is_alphanumeric or '_'; letters and numbers here, which leave out
// Other_Alphabetic: combining vowel signs, circled letters).
bool isWordChar(uint32_t code) {
  return code == '_' ||
         (code != unicode::kInvalid && (unicode::isLetter(code) || unicode::isNumber(code)));
}

// The character that ends at `end` (> 0); an invalid byte alone.
unicode::Decoded lastChar(const std::string &text, size_t end) {
  size_t pos = end - 1;
  for (int n = 0; pos > 0 && n < 3 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80; ++n)
    --pos;
  unicode::Decoded d = unicode::decode(text, pos);
  return pos + d.length == end ? d : unicode::Decoded{unicode::kInvalid, 1};
}

// "<0x41>" → 0x41, or -1 (ByteFallback's spelling of a byte).
int byteToken(const std::string &token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    char h = token[i];
    int digit = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
    if (digit < 0)
      return -1;
    value = value * 16 + digit;
  }
  return value;
}

std::string byteTokenName(int byte) {
  static const char *hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[byte >> 4] + hex[byte & 15] + ">";
}

} // namespace

BpeTokenizer::~BpeTokenizer() = default;

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

void BpeTokenizer::parseModel(const json::Value &model, const std::string &source) {
  std::string where = source + ": model";
  const json::Value *type = model.find("type");
  std::string kind = type ? type->asString(where + ".type") : model.find("merges") ? "BPE" : "";
  if (kind != "BPE")
    unsupported(source,
                "model type " + (kind.empty() ? std::string("(none)") : kind) + " (only BPE)");
  setVocab(member(model, "vocab", where), where + ".vocab");
  continuingSubwordPrefix_ = optionalString(model, "continuing_subword_prefix", where);
  endOfWordSuffix_ = optionalString(model, "end_of_word_suffix", where);
  unkToken_ = optionalString(model, "unk_token", where);
  fuseUnk_ = flag(model, "fuse_unk", false, where);
  byteFallback_ = flag(model, "byte_fallback", false, where);
  ignoreMerges_ = flag(model, "ignore_merges", false, where);
  const json::Value &merges = member(model, "merges", where);
  const auto &list = merges.asArray(where + ".merges");
  merges_.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = where + ".merges[" + std::to_string(i) + "]";
    if (list[i].kind() == json::Value::Kind::Array) {
      const auto &pair = list[i].asArray(at);
      if (pair.size() != 2)
        fail(at, ": a merge is two tokens");
      addMerge(pair[0].asString(at), pair[1].asString(at), at);
    } else {
      const std::string &line = list[i].asString(at + " (a string \"a b\" or a pair)");
      size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        fail(at, ": \"", line, "\" is not two tokens separated by one space");
      addMerge(line.substr(0, space), line.substr(space + 1), at);
    }
  }
}

void BpeTokenizer::setVocab(const json::Value &vocab, const std::string &where) {
  if (vocab.kind() != json::Value::Kind::Object)
    fail(where, " must be an object of token: id");
  vocab_.reserve(vocab.members().size());
  for (const auto &[token, id] : vocab.members()) {
    int64_t value = id.asInt(where + "[\"" + token + "\"]");
    if (value < 0 || value > INT32_MAX)
      fail(where, "[\"", token, "\"]: id ", value, " out of range");
    vocab_[token] = static_cast<int32_t>(value);
  }
}

void BpeTokenizer::addMerge(const std::string &a, const std::string &b, const std::string &where) {
  auto idOfToken = [&](const std::string &token) {
    auto it = vocab_.find(token);
    if (it == vocab_.end())
      fail(where, ": merge token \"", token, "\" is not in the vocabulary");
    return it->second;
  };
  int32_t left = idOfToken(a), right = idOfToken(b);
  std::string merged = a + b.substr(std::min(continuingSubwordPrefix_.size(), b.size()));
  int32_t id = idOfToken(merged);
  uint64_t key = (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
  merges_[key] = Merge{mergeCount_++, id};
}

void BpeTokenizer::finishModel(const std::string &source) {
  int32_t maxId = -1;
  for (const auto &[token, id] : vocab_)
    maxId = std::max(maxId, id);
  tokens_.assign(static_cast<size_t>(maxId + 1), std::string());
  for (const auto &[token, id] : vocab_)
    tokens_[id] = token;
  if (!unkToken_.empty()) {
    auto it = vocab_.find(unkToken_);
    if (it == vocab_.end())
      fail(source, ": model.unk_token \"", unkToken_, "\" is not in the vocabulary");
    unkId_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(byteTokenName(b));
    byteIds_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

void BpeTokenizer::addToken(AddedToken token) {
  insertAddedToken(std::move(token));
  refreshAddedPatterns();
}

void BpeTokenizer::insertAddedToken(AddedToken token) {
  if (token.content.empty())
    return;
  // The library's AddedVocabulary::add_tokens: a token of the model's
  // vocabulary keeps its id, a new one comes after everything there is.
  int32_t id = idOf(token.content);
  if (id < 0) {
    int32_t modelSize = static_cast<int32_t>(vocab_.size());
    id = maxAddedId_ >= modelSize || modelSize == 0 ? maxAddedId_ + 1 : modelSize;
  }
  token.id = id;
  maxAddedId_ = std::max(maxAddedId_, id);
  auto known = addedByContent_.find(token.content);
  if (known != addedByContent_.end()) {
    addedById_.erase(added_[known->second].id);
    added_[known->second] = token;
    addedById_[id] = known->second;
    return;
  }
  addedByContent_[token.content] = added_.size();
  addedById_[id] = added_.size();
  added_.push_back(token);
  if (static_cast<size_t>(id) >= tokens_.size())
    tokens_.resize(static_cast<size_t>(id) + 1);
  if (tokens_[id].empty())
    tokens_[id] = token.content;
}

void BpeTokenizer::refreshAddedPatterns() {
  // A normalized token is matched in its normalized spelling, in the text
  // after normalization.
  rawPatterns_.assign(256, {});
  normalizedPatterns_.assign(256, {});
  bool anyRaw = false, anyNormalized = false;
  for (size_t i = 0; i < added_.size(); ++i) {
    std::string pattern = added_[i].normalized ? normalize(added_[i].content) : added_[i].content;
    if (pattern.empty())
      continue;
    auto &table = added_[i].normalized ? normalizedPatterns_ : rawPatterns_;
    table[static_cast<unsigned char>(pattern[0])].emplace_back(pattern, i);
    (added_[i].normalized ? anyNormalized : anyRaw) = true;
  }
  if (!anyRaw)
    rawPatterns_.clear();
  if (!anyNormalized)
    normalizedPatterns_.clear();
}

int32_t BpeTokenizer::idOf(const std::string &token) const {
  auto added = addedByContent_.find(token);
  if (added != addedByContent_.end())
    return added_[added->second].id;
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string &BpeTokenizer::tokenOf(int32_t id) const {
  static const std::string none;
  auto added = addedById_.find(id);
  if (added != addedById_.end())
    return added_[added->second].content;
  return id >= 0 && static_cast<size_t>(id) < tokens_.size() ? tokens_[id] : none;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::fromTokenizerJson(const std::string &text,
                                                              const std::string &source) {
  json::Value root = json::parse(text, source);
  if (root.kind() != json::Value::Kind::Object)
    fail(source, ": expected a JSON object");
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer());
  tok->parseModel(member(root, "model", source), source);
  tok->finishModel(source);
  if (const json::Value *v = root.find("normalizer"))
    tok->parseNormalizer(*v, source + ": normalizer", source);
  if (const json::Value *v = root.find("pre_tokenizer"))
    tok->parsePreTokenizer(*v, source + ": pre_tokenizer", source);
  if (const json::Value *v = root.find("decoder"))
    tok->parseDecoder(*v, source + ": decoder", source);
  if (const json::Value *list = root.find("added_tokens"); list && !list->isNull())
    tok->parseAddedTokens(*list, source);
  if (const json::Value *v = root.find("post_processor"))
    tok->parsePostProcessor(*v, source + ": post_processor", source);
  tok->refreshAddedPatterns();
  return tok;
}

void BpeTokenizer::parseNormalizer(const json::Value &v, const std::string &where,
                                   const std::string &source) {
  if (v.isNull())
    return;
  std::string type = typeOf(v, where);
  if (type == "Sequence") {
    const auto &list = member(v, "normalizers", where).asArray(where + ".normalizers");
    for (size_t i = 0; i < list.size(); ++i)
      parseNormalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]", source);
  } else if (type == "Prepend") {
    Step s{Step::Kind::Prepend};
    s.text = member(v, "prepend", where).asString(where + ".prepend");
    normalizers_.push_back(s);
  } else if (type == "Replace") {
    normalizers_.push_back(replaceStep(v, where, source));
  } else if (type == "NFC") {
    normalizers_.push_back(Step{Step::Kind::Nfc});
  } else {
    unsupported(source, "normalizer " + type);
  }
}

BpeTokenizer::Step BpeTokenizer::replaceStep(const json::Value &v, const std::string &where,
                                             const std::string &source) {
  Step s{Step::Kind::Replace};
  s.text = stringPattern(v, where, source);
  s.content = member(v, "content", where).asString(where + ".content");
  return s;
}

BpeTokenizer::Step BpeTokenizer::metaspaceStep(const json::Value &v, const std::string &where,
                                               const std::string &source) {
  Step s{Step::Kind::Metaspace};
  s.text = v.find("replacement") ? member(v, "replacement", where).asString(where + ".replacement")
                                 : "\u2581";
  if (unicode::decode(s.text, 0).length != s.text.size())
    unsupported(source, "Metaspace with replacement \"" + s.text + "\" (one character only)");
  s.split = flag(v, "split", true, where);
  if (const json::Value *scheme = v.find("prepend_scheme")) {
    std::string name = scheme->asString(where + ".prepend_scheme");
    if (name == "always")
      s.prependScheme = Step::PrependScheme::Always;
    else if (name == "first")
      s.prependScheme = Step::PrependScheme::First;
    else if (name == "never")
      s.prependScheme = Step::PrependScheme::Never;
    else
      fail(where, ".prepend_scheme: unknown scheme \"", name, "\"");
  } else {
    s.prependScheme = flag(v, "add_prefix_space", true, where) ? Step::PrependScheme::Always
                                                               : Step::PrependScheme::Never;
  }
  return s;
}

void BpeTokenizer::parsePreTokenizer(const json::Value &v, const std::string &where,
                                     const std::string &source) {
  if (v.isNull())
    return;
  std::string type = typeOf(v, where);
  if (type == "Sequence") {
    const auto &list = member(v, "pretokenizers", where).asArray(where + ".pretokenizers");
    for (size_t i = 0; i < list.size(); ++i)
      parsePreTokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]", source);
  } else if (type == "ByteLevel") {
    Step s{Step::Kind::ByteLevel};
    s.addPrefixSpace = flag(v, "add_prefix_space", true, where);
    if (flag(v, "use_regex", true, where))
      s.splitter = bytelevel::splitGpt2;
    preTokenizers_.push_back(s);
  } else if (type == "Metaspace") {
    preTokenizers_.push_back(metaspaceStep(v, where, source));
  } else if (type == "Split") {
    preTokenizers_.push_back(splitStep(v, where, source));
  } else {
    unsupported(source, "pre_tokenizer " + type);
  }
}

BpeTokenizer::Step BpeTokenizer::splitStep(const json::Value &v, const std::string &where,
                                           const std::string &source) {
  // The regexes the byte-level splitters implement; Qwen2's is cl100k's
  // with numbers one digit each.
  static const std::string kQwen2Pattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
      R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string kGpt2Pattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  static const std::string kCl100kPattern =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
      R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const json::Value &pattern = member(v, "pattern", where);
  const json::Value *regex = pattern.find("Regex");
  std::string behavior = optionalString(v, "behavior", where);
  std::string text = regex ? regex->asString(where + ".pattern.Regex") : "";
  Step s{Step::Kind::Split};
  s.splitter = text == kGpt2Pattern     ? bytelevel::splitGpt2
               : text == kCl100kPattern ? bytelevel::splitCl100k
               : text == kQwen2Pattern  ? bytelevel::splitQwen2
                                        : nullptr;
  if (!s.splitter || behavior != "Isolated" || flag(v, "invert", false, where))
    unsupported(source, "pre_tokenizer Split with pattern " + pattern.dump() + ", behavior " +
                            behavior + " (only GPT-2's, cl100k's or Qwen2's regex, Isolated)");
  return s;
}

void BpeTokenizer::parseDecoder(const json::Value &v, const std::string &where,
                                const std::string &source) {
  if (v.isNull())
    return;
  hasDecoder_ = true;
  std::string type = typeOf(v, where);
  if (type == "Sequence") {
    const auto &list = member(v, "decoders", where).asArray(where + ".decoders");
    for (size_t i = 0; i < list.size(); ++i)
      parseDecoder(list[i], where + ".decoders[" + std::to_string(i) + "]", source);
  } else if (type == "ByteLevel") {
    decoders_.push_back(Step{Step::Kind::ByteLevel});
  } else if (type == "Metaspace") {
    decoders_.push_back(metaspaceStep(v, where, source));
  } else if (type == "Replace") {
    decoders_.push_back(replaceStep(v, where, source));
  } else if (type == "ByteFallback") {
    decoders_.push_back(Step{Step::Kind::ByteFallback});
  } else if (type == "Fuse") {
    decoders_.push_back(Step{Step::Kind::Fuse});
  } else if (type == "Strip") {
    Step s{Step::Kind::Strip};
    s.text = member(v, "content", where).asString(where + ".content");
    if (unicode::decode(s.text, 0).length != s.text.size())
      fail(where, ".content must be one character");
    s.start = static_cast<size_t>(member(v, "start", where).asInt(where + ".start"));
    s.stop = static_cast<size_t>(member(v, "stop", where).asInt(where + ".stop"));
    decoders_.push_back(s);
  } else {
    unsupported(source, "decoder " + type);
  }
}

void BpeTokenizer::parseAddedTokens(const json::Value &list, const std::string &source) {
  // In order: later ones may take ids after earlier ones.
  const auto &items = list.asArray(source + ": added_tokens");
  for (size_t i = 0; i < items.size(); ++i) {
    std::string where = source + ": added_tokens[" + std::to_string(i) + "]";
    AddedToken t;
    t.content = member(items[i], "content", where).asString(where + ".content");
    t.special = flag(items[i], "special", false, where);
    t.singleWord = flag(items[i], "single_word", false, where);
    t.lstrip = flag(items[i], "lstrip", false, where);
    t.rstrip = flag(items[i], "rstrip", false, where);
    t.normalized = flag(items[i], "normalized", !t.special, where);
    insertAddedToken(t);
  }
}

void BpeTokenizer::parsePostProcessor(const json::Value &v, const std::string &where,
                                      const std::string &source) {
  // Only the token a sequence starts with matters here.
  if (v.isNull())
    return;
  std::string type = typeOf(v, where);
  if (type == "Sequence") {
    const auto &list = member(v, "processors", where).asArray(where + ".processors");
    for (size_t i = 0; i < list.size(); ++i)
      parsePostProcessor(list[i], where + ".processors[" + std::to_string(i) + "]", source);
  } else if (type == "ByteLevel") {
    // Offsets only.
  } else if (type == "TemplateProcessing") {
    std::vector<int32_t> leading = templateLeadingIds(v, where);
    if (leading.size() > 1)
      unsupported(source, "post_processor TemplateProcessing starting a sequence with " +
                              std::to_string(leading.size()) + " tokens (one at most)");
    if (leading.size() == 1)
      bosId = leading[0];
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    const auto &cls = member(v, "cls", where).asArray(where + ".cls");
    if (cls.size() != 2)
      fail(where, ".cls must be [token, id]");
    bosId = static_cast<int32_t>(cls[1].asInt(where + ".cls"));
  } else {
    unsupported(source, "post_processor " + type);
  }
}

std::vector<int32_t> BpeTokenizer::templateLeadingIds(const json::Value &v,
                                                      const std::string &where) {
  // The special tokens before the template's first `Sequence`.
  std::vector<int32_t> leading;
  for (const json::Value &item : member(v, "single", where).asArray(where + ".single")) {
    if (item.find("Sequence"))
      break;
    const json::Value &special = member(item, "SpecialToken", where + ".single[]");
    std::string name = member(special, "id", where + ".single[]").asString(where + ".single[].id");
    const json::Value &entry =
        member(member(v, "special_tokens", where), name, where + ".special_tokens");
    for (const json::Value &id : member(entry, "ids", where + ".special_tokens").asArray(where))
      leading.push_back(
          static_cast<int32_t>(id.asInt(where + ".special_tokens[\"" + name + "\"].ids")));
  }
  return leading;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::fromVocabAndMerges(const std::string &vocabJson,
                                                               const std::string &vocabSource,
                                                               const std::string &merges,
                                                               const std::string &mergesSource) {
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer());
  tok->setVocab(json::parse(vocabJson, vocabSource), vocabSource);
  std::istringstream lines(merges);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0)
      continue;
    std::string where = mergesSource + ":" + std::to_string(n);
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      fail(where, ": \"", line, "\" is not two tokens separated by one space");
    tok->addMerge(line.substr(0, space), line.substr(space + 1), where);
  }
  tok->finishModel(vocabSource);
  tok->preTokenizers_.push_back(Step{Step::Kind::ByteLevel});
  tok->preTokenizers_.back().splitter = bytelevel::splitGpt2;
  tok->decoders_.push_back(Step{Step::Kind::ByteLevel});
  tok->hasDecoder_ = true;
  return tok;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::load(const std::string &dir) {
  std::string tokenizerJson = dir + "/tokenizer.json";
  std::string vocabJson = dir + "/vocab.json", mergesTxt = dir + "/merges.txt";
  std::string configPath = dir + "/tokenizer_config.json";
  json::Value config =
      exists(configPath) ? json::parse(readFile(configPath), configPath) : json::Value::object();
  auto tokenName = [&](const char *key) -> std::string {
    // "eos_token": "</s>" or {"content": "</s>", ...} (an AddedToken).
    const json::Value *v = config.find(key);
    if (!v || v->isNull())
      return "";
    if (v->kind() == json::Value::Kind::String)
      return v->asString();
    return member(*v, "content", configPath + ": " + key)
        .asString(configPath + ": " + key + ".content");
  };

  std::unique_ptr<BpeTokenizer> tok;
  if (exists(tokenizerJson)) {
    tok = fromTokenizerJson(readFile(tokenizerJson), tokenizerJson);
  } else if (exists(vocabJson) && exists(mergesTxt)) {
    tok = fromVocabAndMerges(readFile(vocabJson), vocabJson, readFile(mergesTxt), mergesTxt);
    // What transformers' GPT-2 conversion adds: the configured added tokens,
    // or else the special tokens the config names, or else <|endoftext|>.
    tok->preTokenizers_.back().addPrefixSpace = flag(config, "add_prefix_space", false, configPath);
    if (const json::Value *decoder = config.find("added_tokens_decoder")) {
      std::vector<std::pair<int64_t, AddedToken>> byId;
      for (const auto &[idText, v] : decoder->members()) {
        std::string where = configPath + ": added_tokens_decoder[\"" + idText + "\"]";
        AddedToken t;
        t.content = member(v, "content", where).asString(where + ".content");
        t.special = flag(v, "special", false, where);
        t.singleWord = flag(v, "single_word", false, where);
        t.lstrip = flag(v, "lstrip", false, where);
        t.rstrip = flag(v, "rstrip", false, where);
        t.normalized = flag(v, "normalized", !t.special, where);
        byId.emplace_back(std::atoll(idText.c_str()), t);
      }
      std::stable_sort(byId.begin(), byId.end(),
                       [](auto &a, auto &b) { return a.first < b.first; });
      for (auto &[id, t] : byId)
        tok->insertAddedToken(t);
    } else {
      for (const char *key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
        AddedToken t;
        t.content = tokenName(key);
        t.special = true;
        if (!t.content.empty() && tok->vocab_.count(t.content))
          tok->insertAddedToken(t);
      }
      if (tok->added_.empty() && tok->vocab_.count("<|endoftext|>")) {
        AddedToken t;
        t.content = "<|endoftext|>";
        t.special = true;
        tok->insertAddedToken(t);
      }
    }
    if (flag(config, "add_bos_token", false, configPath) && !tokenName("bos_token").empty())
      if (int32_t id = tok->idOf(tokenName("bos_token")); id >= 0)
        tok->bosId = id;
  } else if (exists(dir + "/tokenizer.model")) {
    unsupported(dir + "/tokenizer.model",
                "a sentencepiece model without tokenizer.json (convert it "
                "with transformers: AutoTokenizer.from_pretrained(dir)"
                ".save_pretrained(dir))");
  } else {
    fail("'", dir, "' has no tokenizer: expected tokenizer.json, or vocab.json and merges.txt");
  }

  tok->refreshAddedPatterns();
  if (std::string eos = tokenName("eos_token"); !eos.empty()) {
    int32_t id = tok->idOf(eos);
    if (id < 0)
      fail(configPath, ": eos_token \"", eos, "\" is not a token");
    tok->eosId = id;
  }
  if (!tok->eosId)
    for (const char *eos : {"<|endoftext|>", "</s>"})
      if (int32_t id = tok->idOf(eos); id >= 0) {
        tok->eosId = id;
        break;
      }
  return tok;
}

//===----------------------------------------------------------------------===//
// Encoding
//===----------------------------------------------------------------------===//

std::vector<BpeTokenizer::Piece> BpeTokenizer::splitAddedTokens(const std::string &text,
                                                                bool normalized) const {
  const auto &byFirstByte = normalized ? normalizedPatterns_ : rawPatterns_;
  std::vector<Piece> pieces;
  size_t done = 0; // the end of the last piece
  for (size_t pos = 0; pos < text.size() && !byFirstByte.empty();) {
    // Leftmost-longest: the longest pattern at the first position with one.
    const AddedToken *best = nullptr;
    size_t bestLength = 0;
    for (const auto &[pattern, index] : byFirstByte[static_cast<unsigned char>(text[pos])])
      if (pattern.size() > bestLength && text.compare(pos, pattern.size(), pattern) == 0)
        best = &added_[index], bestLength = pattern.size();
    if (!best) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + bestLength;
    pos = stop;
    if (best->singleWord) {
      bool spaceBefore = start == 0 || !isWordChar(lastChar(text, start).code);
      bool spaceAfter = stop == text.size() || !isWordChar(unicode::decode(text, stop).code);
      if (!spaceBefore || !spaceAfter)
        continue;
    }
    if (best->lstrip) {
      size_t s = start;
      while (s > done) {
        unicode::Decoded c = lastChar(text, s);
        if (c.code == unicode::kInvalid || !unicode::isWhitespace(c.code))
          break;
        s -= c.length;
      }
      start = std::max(s, done);
    }
    if (best->rstrip) {
      while (stop < text.size()) {
        unicode::Decoded d = unicode::decode(text, stop);
        if (d.code == unicode::kInvalid || !unicode::isWhitespace(d.code))
          break;
        stop += d.length;
      }
      pos = stop;
    }
    if (done < start)
      pieces.push_back({done, start, -1});
    pieces.push_back({start, stop, best->id});
    done = stop;
  }
  if (done < text.size())
    pieces.push_back({done, text.size(), -1});
  return pieces;
}

std::string BpeTokenizer::normalize(std::string text) const {
  for (const Step &s : normalizers_) {
    if (s.kind == Step::Kind::Prepend) {
      if (!text.empty())
        text = s.text + text;
    } else if (s.kind == Step::Kind::Nfc) {
      text = unicode::toNfc(text);
    } else {
      replaceAll(text, s.text, s.content);
    }
  }
  return text;
}

std::vector<std::string> BpeTokenizer::preTokenize(const std::string &text, bool atStart) const {
  if (text.empty())
    return {};
  std::vector<std::string> pieces{text};
  for (const Step &s : preTokenizers_) {
    std::vector<std::string> next;
    for (size_t p = 0; p < pieces.size(); ++p) {
      std::string piece = pieces[p];
      switch (s.kind) {
      case Step::Kind::ByteLevel:
      case Step::Kind::Split: {
        if (s.kind == Step::Kind::ByteLevel && s.addPrefixSpace && piece[0] != ' ')
          piece = " " + piece;
        std::vector<std::pair<size_t, size_t>> ranges =
            s.splitter ? s.splitter(piece)
                       : std::vector<std::pair<size_t, size_t>>{{0, piece.size()}};
        for (auto [b, e] : ranges) {
          std::string part = piece.substr(b, e - b);
          next.push_back(s.kind == Step::Kind::ByteLevel ? bytelevel::toChars(part) : part);
        }
        break;
      }
      case Step::Kind::Metaspace: {
        replaceAll(piece, " ", s.text);
        bool prepend = s.prependScheme == Step::PrependScheme::Always ||
                       (s.prependScheme == Step::PrependScheme::First && atStart && p == 0);
        if (prepend && piece.compare(0, s.text.size(), s.text) != 0)
          piece = s.text + piece;
        if (!s.split) {
          next.push_back(piece);
          break;
        }
        // Each replacement character starts a piece (MergedWithNext).
        size_t begin = 0;
        for (size_t hit = piece.find(s.text, 1); hit != std::string::npos;
             hit = piece.find(s.text, hit + 1)) {
          if (hit > begin)
            next.push_back(piece.substr(begin, hit - begin));
          begin = hit;
        }
        next.push_back(piece.substr(begin));
        break;
      }
      default:
        break;
      }
    }
    pieces.clear();
    for (std::string &piece : next)
      if (!piece.empty())
        pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::vector<int32_t> BpeTokenizer::mergeWord(const std::string &word) const {
  // The initial symbols: one per character, with the affixes the model
  // spells its first and last characters with; a character outside the
  // vocabulary becomes its <0xNN> bytes (byte_fallback) or the unknown token.
  struct Symbol {
    int32_t id;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  std::vector<std::string> chars = splitCodePoints(word);
  int32_t pendingUnk = -1;
  auto add = [&](int32_t id) {
    symbols.push_back(
        {id, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1});
  };
  for (size_t i = 0; i < chars.size(); ++i) {
    std::string s = chars[i];
    if (i > 0)
      s = continuingSubwordPrefix_ + s;
    if (i + 1 == chars.size())
      s += endOfWordSuffix_;
    auto it = vocab_.find(s);
    if (it != vocab_.end()) {
      if (pendingUnk >= 0)
        add(pendingUnk), pendingUnk = -1;
      add(it->second);
      continue;
    }
    if (byteFallback_) {
      bool all = true;
      for (unsigned char b : s)
        all = all && byteIds_[b] >= 0;
      if (all) {
        // (The library adds these without flushing a pending unknown token.)
        for (unsigned char b : s)
          add(byteIds_[b]);
        continue;
      }
    }
    if (unkId_ >= 0) {
      if (pendingUnk >= 0 && !fuseUnk_)
        add(pendingUnk);
      pendingUnk = unkId_;
    }
  }
  if (pendingUnk >= 0)
    add(pendingUnk);
  if (!symbols.empty())
    symbols.back().next = -1;

  struct Candidate {
    int32_t rank;
    int pos;
    int32_t id;
    bool operator>(const Candidate &o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto mergeOf = [&](int32_t a, int32_t b) -> const Merge * {
    auto it = merges_.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const Merge *m = mergeOf(symbols[i].id, symbols[i + 1].id))
      queue.push({m->rank, static_cast<int>(i), m->id});
  std::vector<bool> removed(symbols.size(), false);
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol &left = symbols[top.pos];
    if (removed[top.pos] || left.next < 0)
      continue;
    // A stale candidate: either side has changed since it was queued.
    const Merge *m = mergeOf(left.id, symbols[left.next].id);
    if (!m || m->id != top.id)
      continue;
    int right = left.next;
    left.id = top.id;
    left.next = symbols[right].next;
    removed[right] = true;
    if (left.next >= 0)
      symbols[left.next].prev = top.pos;
    if (left.prev >= 0)
      if (const Merge *p = mergeOf(symbols[left.prev].id, left.id))
        queue.push({p->rank, left.prev, p->id});
    if (left.next >= 0)
      if (const Merge *n = mergeOf(left.id, symbols[left.next].id))
        queue.push({n->rank, top.pos, n->id});
  }
  std::vector<int32_t> ids;
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next)
    ids.push_back(symbols[i].id);
  return ids;
}

void BpeTokenizer::encodeWord(const std::string &word, std::vector<int32_t> &ids) const {
  if (word.empty())
    return;
  if (ignoreMerges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> merged = mergeWord(word);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (word.size() < kCacheMaxWordBytes) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    if (cache_.size() < kCacheCapacity)
      cache_.emplace(word, std::move(merged));
  }
}

void BpeTokenizer::forEachWord(
    const std::string &text, const std::function<void(const std::string &, int32_t)> &visit) const {
  for (const Piece &raw : splitAddedTokens(text, false)) {
    if (raw.id >= 0) {
      visit(tokenOf(raw.id), raw.id);
      continue;
    }
    std::string normalized = normalize(text.substr(raw.begin, raw.end - raw.begin));
    for (const Piece &part : splitAddedTokens(normalized, true)) {
      if (part.id >= 0) {
        visit(tokenOf(part.id), part.id);
        continue;
      }
      std::string piece = normalized.substr(part.begin, part.end - part.begin);
      for (const std::string &word : preTokenize(piece, raw.begin == 0 && part.begin == 0))
        visit(word, -1);
    }
  }
}

std::vector<int32_t> BpeTokenizer::encode(const std::string &text) const {
  std::vector<int32_t> ids;
  forEachWord(text, [&](const std::string &word, int32_t id) {
    if (id >= 0)
      ids.push_back(id);
    else
      encodeWord(word, ids);
  });
  return ids;
}

std::vector<std::string> BpeTokenizer::words(const std::string &text) const {
  std::vector<std::string> out;
  forEachWord(text, [&](const std::string &word, int32_t) { out.push_back(word); });
  return out;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

std::string BpeTokenizer::decode(const std::vector<int32_t> &ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string &token = tokenOf(ids[i]);
    if (token.empty())
      fail("tokenizer: token ", ids[i], " at position ", i, " is not in the vocabulary (",
           vocabSize(), " tokens)");
    tokens.push_back(token);
  }
  if (!hasDecoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i)
      out += (i ? " " : "") + tokens[i];
    return out;
  }
  for (const Step &s : decoders_) {
    std::vector<std::string> next;
    switch (s.kind) {
    case Step::Kind::ByteLevel: {
      // Every character back to its byte; a token with a character of no
      // byte (an added token such as "<|中|>") stays as it is spelled.
      std::string bytes;
      for (const std::string &token : tokens) {
        std::string mapped;
        bool ok = true;
        for (size_t pos = 0; pos < token.size() && ok;) {
          unicode::Decoded d = unicode::decode(token, pos);
          int b = d.code == unicode::kInvalid ? -1 : bytelevel::charToByte(d.code);
          ok = b >= 0;
          mapped += static_cast<char>(b);
          pos += d.length;
        }
        bytes += ok ? mapped : token;
      }
      next.push_back(std::move(bytes));
      break;
    }
    case Step::Kind::Replace:
      for (std::string &token : tokens) {
        replaceAll(token, s.text, s.content);
        next.push_back(std::move(token));
      }
      break;
    case Step::Kind::ByteFallback: {
      std::string bytes;
      for (std::string &token : tokens) {
        int b = byteToken(token);
        if (b >= 0) {
          bytes += static_cast<char>(b);
          continue;
        }
        if (!bytes.empty())
          next.push_back(std::move(bytes)), bytes.clear();
        next.push_back(std::move(token));
      }
      if (!bytes.empty())
        next.push_back(std::move(bytes));
      break;
    }
    case Step::Kind::Fuse: {
      std::string all;
      for (const std::string &token : tokens)
        all += token;
      next.push_back(std::move(all));
      break;
    }
    case Step::Kind::Strip:
      for (std::string &token : tokens) {
        size_t begin = 0, end = token.size();
        for (size_t n = 0; n < s.start && token.compare(begin, s.text.size(), s.text) == 0; ++n)
          begin += s.text.size();
        for (size_t n = 0; n < s.stop && end >= begin + s.text.size() &&
                           token.compare(end - s.text.size(), s.text.size(), s.text) == 0;
             ++n)
          end -= s.text.size();
        next.push_back(token.substr(begin, end - begin));
      }
      break;
    case Step::Kind::Metaspace:
      // The replacement is a space again, except in the first token, where
      // the pre-tokenizer may have put it (then it is dropped).
      for (size_t i = 0; i < tokens.size(); ++i) {
        bool drop = i == 0 && s.prependScheme != Step::PrependScheme::Never;
        replaceAll(tokens[i], s.text, drop ? "" : " ");
        next.push_back(std::move(tokens[i]));
      }
      break;
    default:
      break;
    }
    tokens = std::move(next);
  }
  std::string out;
  for (const std::string &token : tokens)
    out += token;
  return out;
}

} // namespace llmc
