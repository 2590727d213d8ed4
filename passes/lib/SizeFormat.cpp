//===- SizeFormat.cpp - sizes and memory categories in reports ------------===//
//
// Part of llmc: see SizeFormat.h.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/SizeFormat.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace llmc;

std::string llmc::formatSize(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  double value = static_cast<double>(bytes);
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.1f ", value) << units[unit];
  return text;
}
