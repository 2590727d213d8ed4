//===- CollectiveCheck.h - ranks agree on their collectives -----*- C++ -*-===//
//
// Before the first step every rank hashes the sequence of collectives its
// programs issue on each group (kind, mesh axes, dtype, element count, root,
// reduction) and the ranks compare: two members of one group whose
// sequences differ would hang or corrupt each other at run time (different
// artifact files on different hosts, say), so the run stops with an error
// naming both ranks and the group.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_COLLECTIVECHECK_H
#define LLMC_RUNTIME_COMM_COLLECTIVECHECK_H

#include "runtime/Artifact.h"
#include "runtime/comm/Communicator.h"

namespace llmc {

/// Throws RuntimeError when ranks of a group disagree.
void checkCollectiveSequences(const Artifact &artifact, int rank, Communicator &comm);

/// The hash of this rank's collectives over the group `axes` (exposed for
/// tests).
uint64_t collectiveSequenceHash(const Artifact &artifact, const std::vector<std::string> &axes);

} // namespace llmc

#endif
