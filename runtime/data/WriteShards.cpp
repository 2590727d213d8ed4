//===- WriteShards.cpp - token shards from text or a token-id stream ------===//

#include "runtime/data/WriteShards.h"

#include "runtime/data/ByteTokenizer.h"
#include "runtime/data/ShardWriter.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>

namespace llmc {
namespace {

struct FileCloser {
  void operator()(FILE *f) const {
    if (f && f != stdin) std::fclose(f);
  }
};

void readRaw(FILE *in, size_t width, ShardWriter &out) {
  std::vector<unsigned char> chunk(1 << 20);
  size_t carry = 0;
  while (size_t n = std::fread(chunk.data() + carry, 1, chunk.size() - carry, in)) {
    n += carry;
    size_t whole = n / width * width;
    for (size_t i = 0; i < whole; i += width) {
      uint32_t token = chunk[i] | uint32_t(chunk[i + 1]) << 8;
      if (width == 4) token |= uint32_t(chunk[i + 2]) << 16 | uint32_t(chunk[i + 3]) << 24;
      out.add(token);
    }
    carry = n - whole;
    std::copy(chunk.begin() + static_cast<long>(whole), chunk.begin() + static_cast<long>(n),
              chunk.begin());
  }
  if (carry)
    fail("input ends with ", carry, " stray byte", carry == 1 ? "" : "s",
         " (not a whole uint", 8 * width, " token)");
}

void readIds(FILE *in, ShardWriter &out) {
  std::vector<unsigned char> chunk(1 << 20);
  uint64_t value = 0;
  bool inNumber = false;
  auto end = [&] {
    if (inNumber) {
      if (value > UINT32_MAX)
        fail("token id at position ", out.tokens(), " does not fit 32 bits");
      out.add(static_cast<uint32_t>(value));
    }
    value = 0;
    inNumber = false;
  };
  while (size_t n = std::fread(chunk.data(), 1, chunk.size(), in))
    for (size_t i = 0; i < n; ++i) {
      unsigned char c = chunk[i];
      if (std::isdigit(c)) {
        // Saturate: anything this large is reported by end().
        value = std::min<uint64_t>(value * 10 + (c - '0'), uint64_t(1) << 40);
        inNumber = true;
      } else if (std::isspace(c)) {
        end();
      } else {
        fail("unexpected character '", static_cast<char>(c), "' after ", out.tokens(),
             " token ids (the ids format is decimal ids separated by whitespace)");
      }
    }
  end();
}

void run(const ShardJob &job, ShardReport &report) {
  const std::string &f = job.format;
  if (f != "text" && f != "ids" && f != "u16" && f != "u32")
    fail("input format must be text, ids, u16 or u32, not '", f, "'");
  if (!job.dtype.empty() && job.dtype != "u16" && job.dtype != "u32")
    fail("token type must be u16 or u32, not '", job.dtype, "'");
  report.vocab = job.vocab ? job.vocab : f == "text" ? ByteTokenizer::kVocabSize : 0;
  report.width = !job.dtype.empty() ? (job.dtype == "u32" ? 4 : 2)
                 : (f == "u32" || report.vocab > 65536) ? 4
                                                         : 2;
  std::unique_ptr<FILE, FileCloser> in(job.input == "-" ? stdin
                                                        : std::fopen(job.input.c_str(), "rb"));
  if (!in)
    fail("cannot open '", job.input, "'");
  ShardWriter out(job.prefix, job.shardTokens, report.width, report.vocab);
  if (f == "text") {
    std::vector<unsigned char> chunk(1 << 20);
    while (size_t n = std::fread(chunk.data(), 1, chunk.size(), in.get()))
      for (size_t i = 0; i < n; ++i) out.add(chunk[i]);
  } else if (f == "ids") {
    readIds(in.get(), out);
  } else {
    readRaw(in.get(), f == "u16" ? 2 : 4, out);
  }
  if (std::ferror(in.get()))
    fail("cannot read '", job.input, "'");
  report.shards = out.finish();
  report.tokens = out.tokens();
}

} // namespace

bool writeShards(const ShardJob &job, ShardReport &report, std::string &error) {
  return catchErrors(error, [&] { run(job, report); });
}

} // namespace llmc
