//===- Init.h - deterministic parameter initialisation ----------*- C++ -*-===//
//
// Element i of parameter p gets a value that depends only on (seed, p's name,
// i): any layout that shards p initialises its shard to exactly the values
// one rank would have, which the parity tests rely on.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_INIT_H
#define LLMC_RUNTIME_INIT_H

#include "runtime/Artifact.h"
#include "runtime/Arena.h"

#include <cstdint>
#include <functional>
#include <string>

namespace llmc {

/// Initialises every parameter of `artifact` in `arena` and zeroes all
/// optimizer state. A sharded parameter gets the elements of its chunk of
/// the global tensor (`rank` places it on the mesh).
void initializeParameters(const Artifact &artifact, const Arena &arena, uint64_t seed,
                          int rank = 0);
/// The same for the parameters (and their master copies) whose name
/// `wanted` accepts; the others are left zero, for a caller that sets them
/// next (from a weights file: drawing a billion values it then overwrites
/// would cost more than reading them).
void initializeParameters(const Artifact &artifact, const Arena &arena, uint64_t seed, int rank,
                          const std::function<bool(const std::string &)> &wanted);

/// The value of element `index` of a `normal(0, 1)` stream keyed by
/// (seed, name) — exposed for tests and for reference implementations.
double initNormal(uint64_t seed, const std::string &name, uint64_t index);
/// Uniform in [-1, 1), same keying.
double initUniform(uint64_t seed, const std::string &name, uint64_t index);

} // namespace llmc

#endif
