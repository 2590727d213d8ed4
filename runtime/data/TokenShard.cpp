//===- TokenShard.cpp - llm.c token shards --------------------------------===//

#include "runtime/data/TokenShard.h"

#include "runtime/support/AtomicFile.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cstring>
#include <sys/stat.h>

namespace llmc {

TokenShard openTokenShard(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail("cannot open token shard '", path, "': no such file");
  auto file = std::make_shared<const MappedFile>(path);
  if (file->size() < kTokenShardHeaderBytes)
    fail(path, ": ", file->size(), " bytes is shorter than the 1024-byte shard header");
  int32_t header[256];
  std::memcpy(header, file->data(), kTokenShardHeaderBytes);
  TokenShard shard;
  if (header[0] == kTokenShardMagic) {
    shard.width = 2;
    if (header[1] != kTokenShardVersion)
      fail(path, ": unsupported shard version ", header[1], " (expected ", kTokenShardVersion,
           " with magic ", kTokenShardMagic, ")");
  } else if (header[0] == kTokenShard32Magic) {
    shard.width = 4;
    if (header[1] != kTokenShard32Version)
      fail(path, ": unsupported shard version ", header[1], " (expected ", kTokenShard32Version,
           " with magic ", kTokenShard32Magic, ")");
  } else {
    fail(path, ": bad magic ", header[0], " (expected ", kTokenShardMagic, " for uint16 or ",
         kTokenShard32Magic, " for uint32 tokens): not an llm.c token shard");
  }
  if (header[2] < 0)
    fail(path, ": negative token count ", header[2]);
  if (header[3] < 0)
    fail(path, ": negative vocabulary size ", header[3]);
  shard.count = header[2];
  shard.vocab = header[3];
  size_t expected = kTokenShardHeaderBytes + static_cast<size_t>(shard.count) * shard.width;
  if (file->size() != expected)
    fail(path, ": header says ", shard.count, " tokens (", expected, " bytes) but the file has ",
         file->size(), " bytes", file->size() < expected ? " (truncated)" : "");
  shard.tokens = file->data() + kTokenShardHeaderBytes;
  shard.file = std::move(file);
  return shard;
}

void writeTokenShard(const std::string &path, const uint32_t *tokens, size_t count, int width,
                     int64_t vocab) {
  if (width != 2 && width != 4)
    fail("token shard '", path, "': width must be 2 or 4 bytes, not ", width);
  if (count > static_cast<size_t>(INT32_MAX))
    fail("token shard '", path, "': ", count, " tokens exceed the header's int32 count");
  int32_t header[256] = {};
  header[0] = width == 2 ? kTokenShardMagic : kTokenShard32Magic;
  header[1] = width == 2 ? kTokenShardVersion : kTokenShard32Version;
  header[2] = static_cast<int32_t>(count);
  header[3] = static_cast<int32_t>(vocab);
  AtomicFile file(path);
  file.write(header, sizeof(header));
  if (width == 4) {
    file.write(tokens, count * sizeof(uint32_t));
  } else {
    // Narrowed in blocks so a large shard is never duplicated in memory.
    std::vector<uint16_t> block;
    for (size_t i = 0; i < count; i += 1 << 20) {
      size_t n = std::min<size_t>(count - i, 1 << 20);
      block.resize(n);
      for (size_t k = 0; k < n; ++k) {
        if (tokens[i + k] > 0xFFFF)
          fail("token shard '", path, "': token ", tokens[i + k], " at offset ", i + k,
               " does not fit uint16 (write a uint32 shard)");
        block[k] = static_cast<uint16_t>(tokens[i + k]);
      }
      file.write(block.data(), n * sizeof(uint16_t));
    }
  }
  file.commit();
}

void writeTokenShard(const std::string &path, const std::vector<uint16_t> &tokens) {
  std::vector<uint32_t> wide(tokens.begin(), tokens.end());
  writeTokenShard(path, wide.data(), wide.size(), 2, 0);
}

} // namespace llmc
