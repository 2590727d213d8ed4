//===- OpenGroups.h - every rank creates every group, in one order -*- C++ -*-===//
//
// Creating a communication group is collective over the whole world
// (MPI_Comm_split, ncclCommSplit, the TCP rings' set-up): every rank must
// create the same groups in the same order. Ranks of different pipeline
// stages run different programs that use different groups (only the last
// stage averages the loss over the batch axes, say), so creating groups as
// each program first binds them would leave the ranks of one stage waiting
// in a split the others never enter. Before anything binds, the ranks
// exchange which groups their programs use and each creates all of them.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_OPENGROUPS_H
#define LLMC_RUNTIME_COMM_OPENGROUPS_H

#include "runtime/Artifact.h"
#include "runtime/comm/Communicator.h"

#include <cstdint>

namespace llmc {

/// The groups this rank's programs use — for collectives and transfers, and
/// for the rank offsets of kernels — as a bit set over the non-empty
/// subsets of the mesh axes (bit s − 1 for the subset whose bit i says
/// axis i is in it). The mesh must have at most 6 axes.
uint64_t groupsUsedBy(const Artifact &artifact);

/// Creates, on every rank and in the order of the subsets, the groups any
/// rank's programs use; a no-op on one rank.
void openGroupsOfEveryRank(const Artifact &artifact, Communicator &comm);

} // namespace llmc

#endif
