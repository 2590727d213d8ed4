//===- ByteLevel.cpp - GPT-2's byte-level pre-tokenization ----------------===//

#include "runtime/data/ByteLevel.h"
#include "runtime/support/Unicode.h"

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
  bool isSpace20; // U+0020 itself: the optional prefix of ` ?\p{L}+` and its kin
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

} // namespace

std::vector<std::pair<size_t, size_t>> splitGpt2(const std::string &text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    unicode::Decoded d = unicode::decode(text, pos);
    chars.push_back({classify(d.code), d.code == ' ', pos});
    pos += d.length;
  }
  size_t n = chars.size();
  auto offset = [&](size_t i) { return i < n ? chars[i].begin : text.size(); };
  auto runOf = [&](size_t i, Class cls) {
    while (i < n && chars[i].cls == cls)
      ++i;
    return i;
  };
  // The contractions are ASCII: compare bytes.
  auto contraction = [&](size_t i) -> size_t {
    if (text[chars[i].begin] != '\'' || i + 1 >= n)
      return 0;
    char a = text[chars[i + 1].begin];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
      return 2;
    if (i + 2 >= n)
      return 0;
    char b = text[chars[i + 2].begin];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
      return 3;
    return 0;
  };

  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i < n;) {
    size_t end;
    if (size_t c = contraction(i)) {
      end = i + c;
    } else if (chars[i].isSpace20 && i + 1 < n && chars[i + 1].cls != Class::Space) {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the space joins the run after it.
      end = runOf(i + 1, chars[i + 1].cls);
    } else if (chars[i].cls != Class::Space) {
      end = runOf(i, chars[i].cls);
    } else {
      // `\s+(?!\S)` backtracks to leave the last whitespace character to the
      // word after the run; `\s+` takes a lone one.
      end = runOf(i, Class::Space);
      if (end < n && end - i >= 2)
        --end;
    }
    pieces.emplace_back(offset(i), offset(end));
    i = end;
  }
  return pieces;
}

} // namespace llmc::bytelevel
