//===- TcpCommunicator.h - collectives over TCP sockets ---------*- C++ -*-===//
//
// The transport for ranks started without an MPI launcher: torchrun-style
// (every process gets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or by
// srun without an MPI plugin (SLURM_PROCID, SLURM_NTASKS, ...). Plain POSIX
// sockets, so a cluster with no MPI installation can still train.
//
// Start-up: rank 0 listens on MASTER_PORT; every other rank opens its own
// listening socket, connects to MASTER_ADDR:MASTER_PORT and reports its rank
// and port; rank 0 answers with everybody's address, and the ranks connect
// pairwise (the higher rank dials the lower), so every pair of ranks shares
// one TCP stream.
//
// Groups and their member order are those of the MPI communicator (see
// runtime/Mesh.h). Reductions run as a ring reduce-scatter followed by a ring
// all-gather; each element is summed in one fixed order on one member and
// copied to the others, so results are bit-identical on every member and
// from run to run. bf16 travels and accumulates as fp32 and is rounded once.
//
// No wait is unbounded: a collective or a start-up step slower than the
// timeout, or a peer whose connection closes without saying goodbye (it
// died), throws an error naming this rank, the operation and the peer.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_TCPCOMMUNICATOR_H
#define LLMC_RUNTIME_COMM_TCPCOMMUNICATOR_H

#include "runtime/Mesh.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/MpiCommunicator.h" // CommOptions

#include <memory>
#include <string>

namespace llmc {

/// How this process was started, read from torchrun- or Slurm-style
/// environment variables.
struct LaunchEnvironment {
  int rank = 0;
  int worldSize = 1;
  int localWorldSize = 0;  ///< ranks on this host; 0: not given
  std::string masterAddr;  ///< where rank 0 listens (worldSize > 1)
  int masterPort = 0;      ///< the port rank 0 listens on
  /// The variable that gave the world size ("WORLD_SIZE", "SLURM_NTASKS"),
  /// empty when neither did; errors name it.
  std::string sizeVariable;
};

/// Reads RANK / WORLD_SIZE / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT,
/// or, when WORLD_SIZE is unset and the process is a task of an srun step
/// (SLURM_STEP_ID set), SLURM_PROCID / SLURM_NTASKS / SLURM_NTASKS_PER_NODE
/// (or SLURM_TASKS_PER_NODE with SLURM_NODEID). Under Slurm a missing
/// MASTER_ADDR defaults to the first host of SLURM_STEP_NODELIST (where srun
/// places task 0) and a missing MASTER_PORT to 12000 + SLURM_JOB_ID % 20000.
/// Under torchrun, whose agent serves its own store on MASTER_PORT
/// (TORCHELASTIC_USE_AGENT_STORE=True), rank 0 listens on MASTER_PORT + 1.
/// Neither set: a one-rank launch. Throws a RuntimeError naming the variable
/// when one is missing, not a number, or out of range.
LaunchEnvironment readLaunchEnvironment();

/// The first host of a Slurm host list: "gpu[003-010,012],cpu1" -> "gpu003"
/// (exposed for tests).
std::string firstSlurmHost(const std::string &hostList);

/// Tasks on node `node` of a Slurm task count list: "4(x2),3", node 2 -> 3;
/// 0 when the list does not say (exposed for tests).
int slurmTasksOnNode(const std::string &tasksPerNode, int node);

/// Connects this rank to the others (blocking until all are reachable or the
/// timeout passes) and returns the communicator for `mesh`. Throws when the
/// launch's world size differs from the mesh's rank count.
std::unique_ptr<Communicator> makeTcpCommunicator(const Mesh &mesh,
                                                  const LaunchEnvironment &launch,
                                                  const CommOptions &options);

} // namespace llmc

#endif
