//===- Inspect.h - human-readable artifact summary --------------*- C++ -*-===//
#ifndef LLMC_RUNTIME_INSPECT_H
#define LLMC_RUNTIME_INSPECT_H

#include <map>
#include <ostream>
#include <string>

namespace llmc {

/// Loads and verifies `path` and writes its summary (model, training
/// settings, parameters, memory plan, programs). Never throws: on failure
/// returns false with `error` set.
bool inspectArtifact(const std::string &path, std::ostream &os, std::string &error);

/// The metadata of `path` (loaded and verified). Never throws.
bool artifactMetadata(const std::string &path, std::map<std::string, std::string> &metadata,
                      std::string &error);

/// `1.50 MiB`-style sizes.
std::string formatBytes(uint64_t bytes);

} // namespace llmc

#endif
