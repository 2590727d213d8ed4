//===- TokenShard.cpp - llm.c token shards --------------------------------===//

#include "runtime/data/TokenShard.h"

#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace llmc {

std::vector<uint16_t> readTokenShard(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot open token shard '", path, "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t headerBytes = 256 * sizeof(int32_t);
  if (bytes.size() < headerBytes)
    fail(path, ": ", bytes.size(), " bytes is shorter than the 1024-byte shard header");
  int32_t header[256];
  std::memcpy(header, bytes.data(), headerBytes);
  if (header[0] != kTokenShardMagic)
    fail(path, ": bad magic ", header[0], " (expected ", kTokenShardMagic,
         "): not an llm.c token shard");
  if (header[1] != kTokenShardVersion)
    fail(path, ": unsupported shard version ", header[1], " (expected ", kTokenShardVersion, ")");
  if (header[2] < 0)
    fail(path, ": negative token count ", header[2]);
  size_t count = static_cast<size_t>(header[2]);
  size_t expected = headerBytes + count * sizeof(uint16_t);
  if (bytes.size() != expected)
    fail(path, ": header says ", count, " tokens (", expected, " bytes) but the file has ",
         bytes.size(), " bytes");
  std::vector<uint16_t> tokens(count);
  std::memcpy(tokens.data(), bytes.data() + headerBytes, count * sizeof(uint16_t));
  return tokens;
}

void writeTokenShard(const std::string &path, const std::vector<uint16_t> &tokens) {
  int32_t header[256] = {};
  header[0] = kTokenShardMagic;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  AtomicFile file(path);
  file.write(header, sizeof(header));
  file.write(tokens.data(), tokens.size() * sizeof(uint16_t));
  file.commit();
}

} // namespace llmc
