//===- Strings.h - small string helpers the runtime shares -*- C++ -*-===//
#ifndef LLMC_RUNTIME_SUPPORT_STRINGS_H
#define LLMC_RUNTIME_SUPPORT_STRINGS_H

#include <string>

namespace llmc {

/// Whether `s` ends with `suffix` (C++17 has no std::string::ends_with).
inline bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace llmc

#endif
