//===- Data.h - `llmc data`: write token shards -----------------*- C++ -*-===//
//
//   llmc data <input|-> -o <prefix> [--from text|ids|u16|u32]
//       [--shard-tokens N] [--vocab N] [--dtype u16|u32]
//
// Reads a text file through the byte tokenizer (--from text, the default),
// whitespace-separated decimal token ids (--from ids: any tokenizer's
// output) or raw little-endian uint16/uint32 ids, streaming, and writes
// <prefix>_000000.bin, ... (runtime/data/TokenShard.h) for `llmc-run --data`.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TOOLS_LLMC_DATA_H
#define LLMC_TOOLS_LLMC_DATA_H

#include "llvm/Support/CommandLine.h"

namespace llmc {

/// The subcommand; its options are registered with it.
extern llvm::cl::SubCommand dataCommand;
/// The category of its options (for --help).
llvm::cl::OptionCategory &dataCategory();
/// Runs the subcommand; returns the exit status.
int runData();

} // namespace llmc

#endif
