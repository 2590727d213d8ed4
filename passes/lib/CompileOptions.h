//===- CompileOptions.h - what configures a compile -------------*- C++ -*-===//
//
// The options themselves are listed once, in CompileOptions.def; this
// header turns the list into structs and declares the one function that
// checks them. Plain C++: the driver's flag parsing and the pipeline
// registration both include it.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_LIB_COMPILEOPTIONS_H
#define LLMC_PASSES_LIB_COMPILEOPTIONS_H

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace llmc {

/// Everything a compile is configured by, the training pipeline's and
/// inference's (--inference, --weight-quant): one field per
/// LLMC_PIPELINE_OPTION, plus what resolveOptions() derives from them.
struct CompileOptions {
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help) Type field = Default;
#include "passes/lib/CompileOptions.def"

  // Derived by resolveOptions(), never set by a flag.
  int64_t memoryBudgetBytes = 0;      ///< --memory-budget in bytes; 0: no limit
  int64_t deviceMemoryBytes = 0;     ///< --device-memory in bytes; 0: no limit
  int64_t gradBucketBytes = 25 << 20; ///< --grad-bucket-mb in bytes; 0: no buckets
  /// Per layer: h.0=full,h.1=selective; "+offload" (or "offload" alone, for
  /// none) also keeps what the layer saves in host memory.
  std::string recomputeLayers;
  /// What --recompute budget's choice costs, per layer
  /// ("h.0=offload:1.2e-04,h.1=none:0"), and the device it was priced on;
  /// recorded in the artifact for llmc inspect.
  std::string recomputePrice, recomputePriceBasis;
  /// Stop after this stage: graph | train | exec (set by the driver's --emit).
  std::string emit = "exec";
};

/// One `--insert-pass` entry: run `passes` (a pass pipeline text such as
/// "my-pass{opt=1},cse") before or after the pipeline's pass `anchor`.
struct PassInsertion {
  bool after = true;
  std::string anchor;
  std::string passes;
};

/// Parses "after=<pass>:<pipeline>;before=<pass>:<pipeline>"; sets `error`
/// (naming the bad entry) on malformed input.
std::vector<PassInsertion> parsePassInsertions(const std::string &spec, std::string &error);

/// Training defaults recorded in the artifact (llmc-run may override them):
/// one field per LLMC_SCHEDULE_OPTION.
struct ScheduleDefaults {
#define LLMC_PIPELINE_OPTION(Type, field, flag, Default, choices, key, help)
#define LLMC_SCHEDULE_OPTION(Type, field, flag, Default, choices, key, help) Type field = Default;
#include "passes/lib/CompileOptions.def"
};

/// Checks every option against its choices and ranges and fills the derived
/// fields (`--recompute budget=24GiB` becomes recompute "budget" with a
/// memory budget). Returns an error naming the flag, or "".
std::string resolveOptions(CompileOptions &options);
std::string resolveOptions(const ScheduleDefaults &schedule);

/// The target's defaults for the options whose 0 means "the target's":
/// --vocab-multiple (128 under --target cuda, else 1) and --fuse-chunk-mb
/// (1024 under --target cuda, else 256). resolveOptions() fills them in.
int64_t resolvedVocabMultiple(const CompileOptions &options);
double resolvedFuseChunkMb(const CompileOptions &options);

/// Whether --offload names `what` (optimizer, activations).
bool offloads(const CompileOptions &options, const std::string &what);

/// The layers whose activations live in host memory: every layer ("*") under
/// --offload activations, else those recomputeLayers marks "+offload",
/// comma-separated ("" for none).
std::string offloadedLayers(const CompileOptions &options);

/// The options' artifact metadata (keys from CompileOptions.def).
std::map<std::string, std::string> optionMetadata(const CompileOptions &options,
                                                  const ScheduleDefaults &schedule);

/// "24GiB", "512MiB", "100MB", "1e9" → bytes; -1 when malformed.
int64_t parseByteSize(const std::string &text);

} // namespace llmc

#endif
