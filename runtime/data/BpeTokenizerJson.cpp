//===- BpeTokenizerJson.cpp - a BPE tokenizer from its files -------------===//
//
// tokenizer.json (the `tokenizers` crate's format: model, added tokens,
// normalizer, pre-tokenizer, decoder, post-processor), or vocab.json and
// merges.txt, into a BpeTokenizer; every setting the encoder would not
// honour is refused by name.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BpeTokenizer.h"
#include "runtime/data/BpeTokenizerStep.h"
#include "runtime/data/ByteLevel.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"
#include "runtime/support/Unicode.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace llmc {
namespace {

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

std::string byteTokenName(int byte) {
  static const char *hex = "0123456789ABCDEF";
  return std::string("<0x") + hex[byte >> 4] + hex[byte & 15] + ">";
}

} // namespace

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
  for (const auto &[token, id] : vocab_) maxId = std::max(maxId, id);
  tokens_.assign(static_cast<size_t>(maxId + 1), std::string());
  for (const auto &[token, id] : vocab_) tokens_[id] = token;
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
      for (auto &[id, t] : byId) tok->insertAddedToken(t);
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

} // namespace llmc
