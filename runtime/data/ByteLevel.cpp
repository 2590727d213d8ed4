//===- ByteLevel.cpp - GPT-2's byte-level pre-tokenization ----------------===//

#include "runtime/data/ByteLevel.h"
#include "runtime/support/Unicode.h"

#include <algorithm>
#include <array>

namespace llmc::bytelevel {

namespace {

bool isPrintable(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct ByteMap {
  std::array<std::string, 256> chars;
  std::array<uint32_t, 256> codes;
  ByteMap() {
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      codes[b] = isPrintable(b) ? static_cast<uint32_t>(b) : next++;
      unicode::append(chars[b], codes[b]);
    }
  }
};

const ByteMap &byteMap() {
  static const ByteMap map;
  return map;
}

} // namespace

const std::string &byteToChar(uint8_t byte) { return byteMap().chars[byte]; }

int charToByte(uint32_t code) {
  if (code < 0x100)
    return isPrintable(static_cast<int>(code)) ? static_cast<int>(code) : -1;
  // U+0100 onwards stand for the non-printable bytes in order.
  static const std::array<int, 68> fromOffset = [] {
    std::array<int, 68> bytes{};
    int n = 0;
    for (int b = 0; b < 256; ++b)
      if (!isPrintable(b))
        bytes[n++] = b;
    return bytes;
  }();
  return code - 0x100 < fromOffset.size() ? fromOffset[code - 0x100] : -1;
}

std::string toChars(const std::string &bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes)
    out += byteToChar(b);
  return out;
}

namespace {

enum class Class { Letter, Number, Space, Other };

struct Char {
  Class cls;
  uint32_t code;
  size_t begin;
};

Class classify(uint32_t code) {
  if (code == unicode::kInvalid)
    return Class::Other;
  if (unicode::isLetter(code))
    return Class::Letter;
  if (unicode::isNumber(code))
    return Class::Number;
  if (unicode::isWhitespace(code))
    return Class::Space;
  return Class::Other;
}

// The characters of `text` and what the two regexes match over them.
class Scanner {
public:
  explicit Scanner(const std::string &text) : text(text) {
    chars.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      unicode::Decoded d = unicode::decode(text, pos);
      chars.push_back({classify(d.code), d.code, pos});
      pos += d.length;
    }
    n = chars.size();
  }

  size_t offset(size_t i) const { return i < n ? chars[i].begin : text.size(); }
  Class cls(size_t i) const { return chars[i].cls; }
  bool is(size_t i, uint32_t code) const { return i < n && chars[i].code == code; }
  bool isCrLf(size_t i) const { return is(i, '\r') || is(i, '\n'); }
  size_t runOf(size_t i, Class c) const {
    while (i < n && chars[i].cls == c)
      ++i;
    return i;
  }
  // 's 't 're 've 'm 'll 'd: the length matched at i, or 0. Case-insensitive
  // (cl100k's (?i:...)), 's then also matches U+017F ſ, which folds to s.
  size_t contraction(size_t i, bool anyCase) const {
    if (!is(i, '\'') || i + 1 >= n)
      return 0;
    auto at = [&](size_t j, char lower) {
      uint32_t c = j < n ? chars[j].code : 0;
      return c == static_cast<uint32_t>(lower) ||
             (anyCase &&
              (c == static_cast<uint32_t>(lower - 'a' + 'A') || (lower == 's' && c == 0x17F)));
    };
    if (at(i + 1, 's') || at(i + 1, 't') || at(i + 1, 'm') || at(i + 1, 'd'))
      return 2;
    if ((at(i + 1, 'r') && at(i + 2, 'e')) || (at(i + 1, 'v') && at(i + 2, 'e')) ||
        (at(i + 1, 'l') && at(i + 2, 'l')))
      return 3;
    return 0;
  }
  // `\s+(?!\S)|\s+` at whitespace i: the run, less its last character when
  // a non-space follows and the run has another (left to the word after it).
  size_t spaceRun(size_t i) const {
    size_t end = runOf(i, Class::Space);
    return end < n && end - i >= 2 ? end - 1 : end;
  }

  const std::string &text;
  std::vector<Char> chars;
  size_t n;
};

std::vector<std::pair<size_t, size_t>> pieces(const Scanner &s,
                                              size_t (*next)(const Scanner &, size_t)) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.n;) {
    size_t end = next(s, i);
    out.emplace_back(s.offset(i), s.offset(end));
    i = end;
  }
  return out;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t nextGpt2(const Scanner &s, size_t i) {
  if (size_t c = s.contraction(i, false))
    return i + c;
  // The optional space joins the run of letters, numbers or others after it.
  if (s.is(i, ' ') && i + 1 < s.n && s.cls(i + 1) != Class::Space)
    return s.runOf(i + 1, s.cls(i + 1));
  if (s.cls(i) != Class::Space)
    return s.runOf(i, s.cls(i));
  return s.spaceRun(i);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,Digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
template <size_t Digits> size_t nextCl100k(const Scanner &s, size_t i) {
  if (size_t c = s.contraction(i, true))
    return i + c;
  if (s.cls(i) == Class::Letter)
    return s.runOf(i, Class::Letter);
  // One character that is no letter, number, CR or LF may lead the letters.
  if (s.cls(i) != Class::Number && !s.isCrLf(i) && i + 1 < s.n && s.cls(i + 1) == Class::Letter)
    return s.runOf(i + 1, Class::Letter);
  if (s.cls(i) == Class::Number)
    return std::min(s.runOf(i, Class::Number), i + Digits);
  size_t others = s.cls(i) == Class::Other                                      ? i
                  : s.is(i, ' ') && i + 1 < s.n && s.cls(i + 1) == Class::Other ? i + 1
                                                                                : s.n;
  if (others < s.n) {
    size_t end = s.runOf(others, Class::Other);
    while (s.isCrLf(end))
      ++end;
    return end;
  }
  // Whitespace: up to its last CR or LF, if it has one.
  size_t end = s.runOf(i, Class::Space);
  for (size_t j = end; j > i; --j)
    if (s.isCrLf(j - 1))
      return j;
  return s.spaceRun(i);
}

} // namespace

std::vector<std::pair<size_t, size_t>> splitGpt2(const std::string &text) {
  return pieces(Scanner(text), nextGpt2);
}

std::vector<std::pair<size_t, size_t>> splitCl100k(const std::string &text) {
  return pieces(Scanner(text), nextCl100k<3>);
}

std::vector<std::pair<size_t, size_t>> splitQwen2(const std::string &text) {
  return pieces(Scanner(text), nextCl100k<1>);
}

} // namespace llmc::bytelevel
