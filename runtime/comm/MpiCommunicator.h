//===- MpiCommunicator.h - collectives over MPI ranks -----------*- C++ -*-===//
//
// Ranks are laid out on the artifact's mesh row-major, last axis fastest
// (rank = Σ coord[i]·stride[i]). A group over axes S is the set of ranks
// whose coordinates agree outside S; members are ordered by their
// coordinates inside S, in mesh order, which is the order all_gather
// concatenates in. One MPI communicator per distinct S, created on first use.
//
// A watchdog thread turns a collective that does not complete within the
// timeout (a peer died or stopped answering) into an error naming this rank,
// the collective and its group, and exits the process so mpirun tears the
// job down instead of hanging.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_MPICOMMUNICATOR_H
#define LLMC_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "common/Mesh.h"
#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

struct CommOptions {
  double timeoutSeconds = 300;  ///< a collective slower than this aborts the job
  int debugMaxDelayMs = 0;      ///< > 0: sleep a random 0..N ms before each collective
};

/// True when the process was started by mpirun/srun (or another PMI launcher).
bool launchedByMpi();

/// Initialises MPI if needed and returns this process's world rank / the
/// number of ranks.
int mpiWorldRank();
int mpiWorldSize();
/// Whether this MPI lets any thread call it, one at a time
/// (MPI_THREAD_SERIALIZED), as --overlap-comm programs need.
bool mpiCallableFromAnyThread();

/// "the artifact was compiled for N ranks (mesh ...) but M were launched ...";
/// `variable` names where M came from when it was not mpirun (WORLD_SIZE,
/// SLURM_NTASKS).
std::string worldSizeMismatch(const Mesh &mesh, int launched, const std::string &variable = "");

/// Initialises MPI (once) and returns the communicator for `mesh`; throws
/// when the world size differs from the mesh's rank count.
std::unique_ptr<Communicator>
makeMpiCommunicator(const std::vector<std::pair<std::string, int>> &mesh,
                    const CommOptions &options);


} // namespace llmc

#endif
