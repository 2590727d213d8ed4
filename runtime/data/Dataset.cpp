//===- Dataset.cpp - where training tokens come from ----------------------===//

#include "runtime/data/Dataset.h"

#include "runtime/data/ByteTokenizer.h"
#include "runtime/data/TokenShard.h"
#include "runtime/support/Error.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

#ifndef LLMC_BUNDLED_CORPUS
#define LLMC_BUNDLED_CORPUS "data/tinytales.txt"
#endif

namespace llmc {

std::string bundledCorpusPath() {
  if (const char *dir = std::getenv("LLMC_DATA_DIR"))
    return std::string(dir) + "/tinytales.txt";
  return LLMC_BUNDLED_CORPUS;
}

std::vector<uint16_t> loadTokens(const std::string &spec) {
  std::string path = spec == "bundled" ? bundledCorpusPath() : spec;
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0)
    return readTokenShard(path);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot open data file '", path, "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty())
    fail("data file '", path, "' is empty");
  return ByteTokenizer::encode(text);
}

void validateTokens(const std::vector<uint16_t> &tokens, int64_t vocab,
                    const std::string &source) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= vocab)
      fail(source, ": token ", tokens[i], " at position ", i,
           " is outside the model's vocabulary of ", vocab);
}

} // namespace llmc
