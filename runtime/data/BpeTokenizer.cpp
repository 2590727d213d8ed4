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
#include "runtime/data/BpeTokenizerStep.h"
#include "runtime/data/ByteLevel.h"
#include "runtime/support/Error.h"
#include "runtime/support/Normalize.h"
#include "runtime/support/Unicode.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace llmc {

namespace {

constexpr size_t kCacheCapacity = 10000; // words, as the library's cache
constexpr size_t kCacheMaxWordBytes = 256;

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

} // namespace

BpeTokenizer::~BpeTokenizer() = default;

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
