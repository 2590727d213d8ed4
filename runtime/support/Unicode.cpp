//===- Unicode.cpp - UTF-8, character classes of tokenizers ---------------===//

#include "runtime/support/Unicode.h"

#include <algorithm>
#include <iterator>

namespace llmc::unicode {

namespace {

struct CodePointRange {
  uint32_t lo, hi;
};

#include "runtime/support/UnicodeTables.inc"

template <size_t N> bool inRanges(const CodePointRange (&ranges)[N], uint32_t code) {
  auto it = std::upper_bound(std::begin(ranges), std::end(ranges), code,
                             [](uint32_t c, const CodePointRange &r) { return c < r.lo; });
  return it != std::begin(ranges) && code <= std::prev(it)->hi;
}

} // namespace

Decoded decode(const std::string &text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char b = byte(pos);
  if (b < 0x80)
    return {b, 1};
  size_t length;
  uint32_t code, min;
  if (b >= 0xC2 && b <= 0xDF) {
    length = 2, code = b & 0x1F, min = 0x80;
  } else if (b >= 0xE0 && b <= 0xEF) {
    length = 3, code = b & 0x0F, min = 0x800;
  } else if (b >= 0xF0 && b <= 0xF4) {
    length = 4, code = b & 0x07, min = 0x10000;
  } else {
    return {kInvalid, 1};
  }
  if (pos + length > text.size())
    return {kInvalid, 1};
  for (size_t i = 1; i < length; ++i) {
    unsigned char c = byte(pos + i);
    if ((c & 0xC0) != 0x80)
      return {kInvalid, 1};
    code = (code << 6) | (c & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
    return {kInvalid, 1};
  return {code, length};
}

void append(std::string &out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

bool isLetter(uint32_t code) {
  if (code < 0x80)
    return (code | 0x20) >= 'a' && (code | 0x20) <= 'z';
  return inRanges(kLetterRanges, code);
}

bool isNumber(uint32_t code) {
  if (code < 0x80)
    return code >= '0' && code <= '9';
  return inRanges(kNumberRanges, code);
}

bool isWhitespace(uint32_t code) {
  switch (code) {
  case 0x09:
  case 0x0A:
  case 0x0B:
  case 0x0C:
  case 0x0D:
  case 0x20:
  case 0x85:
  case 0xA0:
  case 0x1680:
  case 0x2028:
  case 0x2029:
  case 0x202F:
  case 0x205F:
  case 0x3000:
    return true;
  default:
    return code >= 0x2000 && code <= 0x200A;
  }
}

} // namespace llmc::unicode
