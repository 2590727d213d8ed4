//===- Data.cpp - `llmc data`: write token shards -------------------------===//

#include "tools/llmc/Data.h"

#include "runtime/data/WriteShards.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace llmc {

cl::SubCommand dataCommand("data", "Write llm.c token shards from text (byte tokenizer) or a "
                                   "token-id stream (docs/data.md)");

cl::OptionCategory &dataCategory() {
  static cl::OptionCategory category("llmc data options");
  return category;
}

namespace {

#define DATA_OPT cl::sub(dataCommand), cl::cat(dataCategory())
cl::opt<std::string> input(cl::Positional, cl::desc("<input file, or - for stdin>"), cl::Required,
                           DATA_OPT);
cl::opt<std::string> prefix("o", cl::desc("Shard prefix: writes <prefix>_000000.bin, ..."),
                            cl::Required, DATA_OPT);
cl::opt<std::string> from("from",
                          cl::desc("Input: text (byte tokenizer) | ids (decimal token ids "
                                   "separated by whitespace) | u16 | u32 (raw little-endian)"),
                          cl::init("text"), DATA_OPT);
cl::opt<int64_t> shardTokens("shard-tokens", cl::desc("Tokens per shard (default 100M, llm.c's)"),
                             cl::init(100000000), DATA_OPT);
cl::opt<int64_t> vocab("vocab",
                       cl::desc("Vocabulary size, stated in the headers; every token must be "
                                "below it (default: 256 for text, else not stated)"),
                       cl::init(0), DATA_OPT);
cl::opt<std::string> dtype("dtype",
                           cl::desc("Token type: u16 | u32 (default: u32 for --from u32 or a "
                                    "vocabulary over 65,536, else u16)"),
                           cl::init(""), DATA_OPT);
#undef DATA_OPT

} // namespace

int runData() {
  ShardJob job;
  job.input = input;
  job.format = from;
  job.prefix = prefix;
  job.shardTokens = shardTokens;
  job.vocab = vocab;
  job.dtype = dtype;
  ShardReport report;
  std::string error;
  if (!writeShards(job, report, error)) {
    WithColor::error(errs(), "llmc data") << error << "\n";
    return 1;
  }
  outs() << "wrote " << report.tokens << " tokens ("
         << (report.width == 2 ? "uint16" : "uint32")
         << (report.vocab ? ", vocabulary " + std::to_string(report.vocab) : std::string())
         << ") to " << report.shards.size() << " shard" << (report.shards.size() == 1 ? "" : "s")
         << ": " << report.shards.front()
         << (report.shards.size() > 1 ? " .. " + report.shards.back() : std::string()) << "\n";
  return 0;
}

} // namespace llmc
