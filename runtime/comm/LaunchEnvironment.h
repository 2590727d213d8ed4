//===- LaunchEnvironment.h - how this process was started -------*- C++ -*-===//
//
// A launch without mpirun names the ranks in environment variables:
// torchrun's (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_WORLD_SIZE)
// or those srun gives every task (SLURM_PROCID, SLURM_NTASKS, ...). This
// reads them, with errors that name the variable; the TCP communicator
// (runtime/comm/TcpCommunicator.h) then meets the other ranks where they say.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_LAUNCHENVIRONMENT_H
#define LLMC_RUNTIME_COMM_LAUNCHENVIRONMENT_H

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

} // namespace llmc

#endif
