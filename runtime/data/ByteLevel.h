//===- ByteLevel.h - GPT-2's byte-level pre-tokenization --------*- C++ -*-===//
//
// Byte-level BPE (GPT-2, and every Hugging Face tokenizer with a ByteLevel
// pre-tokenizer) works on bytes, spelled as printable characters so that a
// vocabulary file is text: each of the 256 bytes has a character of its own
// (bytes_to_unicode). Before BPE, text is cut into pieces by GPT-2's regular
// expression
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// which splitGpt2 matches by hand over code points (runtime/support/Unicode.h
// has the classes), so a merge never crosses from a word into a space, a
// number or punctuation.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_DATA_BYTELEVEL_H
#define LLMC_RUNTIME_DATA_BYTELEVEL_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace llmc::bytelevel {

/// The character (UTF-8) that stands for `byte`: bytes 0x21-0x7E, 0xA1-0xAC
/// and 0xAE-0xFF stand for themselves, the other 68 for U+0100 onwards in
/// byte order (the space 0x20 is U+0120 'Ġ', the newline U+010A 'Ċ').
const std::string &byteToChar(uint8_t byte);
/// The byte a character stands for, or -1 for a character of no byte.
int charToByte(uint32_t code);

/// `bytes` spelled byte by byte with byteToChar.
std::string toChars(const std::string &bytes);

/// GPT-2's pre-tokenization: [begin, end) byte offsets of consecutive pieces
/// covering `text`. A byte of invalid UTF-8 counts as one character that is
/// neither a letter, a number nor whitespace.
std::vector<std::pair<size_t, size_t>> splitGpt2(const std::string &text);

/// The same for the regex of GPT-4's cl100k_base, which Llama 3's
/// tokenizer.json gives its Split pre-tokenizer:
///
///   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
///    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
///
/// A letter run takes one leading non-letter (" the", "(foo"), numbers go
/// in threes, and line breaks stay with what they end.
std::vector<std::pair<size_t, size_t>> splitCl100k(const std::string &text);

/// The same with numbers one digit each (`\p{N}` for `\p{N}{1,3}`): Qwen2's
/// Split pre-tokenizer.
std::vector<std::pair<size_t, size_t>> splitQwen2(const std::string &text);

} // namespace llmc::bytelevel

#endif
