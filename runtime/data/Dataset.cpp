//===- Dataset.cpp - where training tokens come from ----------------------===//

#include "runtime/data/Dataset.h"

#include "runtime/data/TokenShard.h"
#include "runtime/support/Error.h"
#include "runtime/support/Strings.h"

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#ifndef LLMC_BUNDLED_CORPUS
#define LLMC_BUNDLED_CORPUS "data/tinytales.txt"
#endif

namespace llmc {
namespace {

std::vector<std::string> binFilesIn(const std::string &dir) {
  std::vector<std::string> files;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (endsWith(name, ".bin"))
        files.push_back(dir + (endsWith(dir, "/") ? "" : "/") + name);
    }
    ::closedir(d);
  } else {
    fail("cannot read data directory '", dir, "'");
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    fail("data directory '", dir, "' holds no .bin shards");
  return files;
}

std::vector<std::string> globMatches(const std::string &pattern) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    files.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  if (files.empty())
    fail("no data files match '", pattern, "'");
  std::sort(files.begin(), files.end());
  return files;
}

TokenSpan openText(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail("cannot open data file '", path, "'");
  TokenSpan span;
  span.file = std::make_shared<const MappedFile>(path);
  if (span.file->size() == 0)
    fail("data file '", path, "' is empty");
  span.name = path;
  span.base = span.file->data();
  span.width = 1;
  span.count = static_cast<int64_t>(span.file->size());
  span.vocab = 256; // the byte tokenizer's
  return span;
}

TokenSpan openShard(const std::string &path) {
  TokenShard shard = openTokenShard(path);
  TokenSpan span;
  span.name = path;
  span.base = shard.tokens;
  span.width = shard.width;
  span.count = shard.count;
  span.vocab = shard.vocab;
  span.file = std::move(shard.file);
  return span;
}

} // namespace

void TokenSpan::release() const {
  size_t headerBytes = static_cast<size_t>(base - file->data());
  file->release(headerBytes + static_cast<size_t>(begin * width),
                static_cast<size_t>(count * width));
}

int64_t Dataset::tokens() const {
  int64_t n = 0;
  for (const TokenSpan &s : shards) n += s.count;
  return n;
}

std::string bundledCorpusPath() {
  if (const char *dir = std::getenv("LLMC_DATA_DIR"))
    return std::string(dir) + "/tinytales.txt";
  return LLMC_BUNDLED_CORPUS;
}

std::vector<std::string> expandDataSpec(const std::string &spec) {
  if (spec == "bundled")
    return {bundledCorpusPath()};
  if (spec.find_first_of("*?[") != std::string::npos)
    return globMatches(spec);
  struct stat st {};
  if (::stat(spec.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return binFilesIn(spec);
  return {spec};
}

Dataset openDataset(const std::string &spec) {
  Dataset data;
  for (const std::string &path : expandDataSpec(spec))
    data.shards.push_back(endsWith(path, ".bin") ? openShard(path) : openText(path));
  return data;
}

Dataset holdOutShards(Dataset &train, int64_t n, const std::string &spec) {
  int64_t have = static_cast<int64_t>(train.shards.size());
  if (n < 1 || n >= have)
    fail("cannot hold out ", n, " validation shard", n == 1 ? "" : "s", " of '", spec,
         "': it has ", have, " shard", have == 1 ? "" : "s",
         " (need at least one left for training)");
  Dataset val;
  val.shards.assign(train.shards.end() - n, train.shards.end());
  train.shards.resize(static_cast<size_t>(have - n));
  return val;
}

Dataset holdOutTail(Dataset &train, int64_t seqLen) {
  if (train.shards.size() != 1)
    fail("holdOutTail: expected one shard, got ", train.shards.size());
  TokenSpan &span = train.shards[0];
  int64_t holdout = std::max<int64_t>(span.count / 10, seqLen + 1);
  if (span.count < holdout + seqLen + 1)
    fail("data has ", span.count, " tokens: too few to hold out a validation split for T=",
         seqLen, " (give --val-data)");
  Dataset val;
  val.shards.push_back(span);
  val.shards[0].begin = span.begin + span.count - holdout;
  val.shards[0].count = holdout;
  span.count -= holdout;
  return val;
}

void checkVocabulary(const Dataset &data, int64_t vocab) {
  // Text states the byte tokenizer's 256 only implicitly: a smaller model
  // may still train on text whose bytes all fit, so text is left to the
  // per-token check.
  for (const TokenSpan &s : data.shards)
    if (s.vocab > vocab && s.width > 1)
      fail(s.name, ": its header states a vocabulary of ", s.vocab,
           " tokens, larger than the model's ", vocab);
}

std::vector<uint32_t> readAll(const Dataset &data) {
  std::vector<uint32_t> out;
  out.reserve(static_cast<size_t>(data.tokens()));
  for (const TokenSpan &s : data.shards)
    for (int64_t i = 0; i < s.count; ++i) out.push_back(s.at(i));
  return out;
}

} // namespace llmc
