//===- LaunchEnvironment.cpp - how this process was started ---------------===//

#include "runtime/comm/LaunchEnvironment.h"

#include "runtime/support/Error.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>

namespace llmc {

namespace {

const char *variable(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

/// A decimal integer in [min, max], or an error naming the variable.
int integerVariable(const char *name, const char *value, long min, long max) {
  errno = 0;
  char *end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (end == value || *end || errno)
    fail(name, "='", value, "' is not a number");
  if (v < min || v > max)
    fail(name, "=", value, " is out of range (expected ", min, "..", max, ")");
  return static_cast<int>(v);
}

/// The rank variable must name one of the world's ranks.
int rankVariable(const char *name, const char *value, const char *sizeName, int worldSize) {
  int rank = integerVariable(name, value, 0, INT_MAX);
  if (rank >= worldSize)
    fail(name, "=", rank, " but ", sizeName, "=", worldSize, ": ranks are 0..", worldSize - 1);
  return rank;
}

/// Torchrun-style: RANK and WORLD_SIZE (LOCAL_WORLD_SIZE optional).
void readTorchrun(LaunchEnvironment &launch) {
  const char *size = variable("WORLD_SIZE"), *rank = variable("RANK");
  if (!size)
    fail("RANK=", rank, " is set but WORLD_SIZE is not: set both for a launch without mpirun");
  if (!rank)
    fail("WORLD_SIZE=", size, " is set but RANK is not: every process needs its RANK (0..",
         "WORLD_SIZE-1)");
  launch.sizeVariable = "WORLD_SIZE";
  launch.worldSize = integerVariable("WORLD_SIZE", size, 1, INT_MAX);
  launch.rank = rankVariable("RANK", rank, "WORLD_SIZE", launch.worldSize);
  if (const char *local = variable("LOCAL_WORLD_SIZE"))
    launch.localWorldSize = integerVariable("LOCAL_WORLD_SIZE", local, 1, launch.worldSize);
}

/// Slurm-style: a task of an srun step.
void readSlurm(LaunchEnvironment &launch) {
  const char *size = variable("SLURM_NTASKS"), *rank = variable("SLURM_PROCID");
  if (!rank)
    fail("SLURM_NTASKS=", size, " is set but SLURM_PROCID is not: start the ranks with srun");
  launch.sizeVariable = "SLURM_NTASKS";
  launch.worldSize = integerVariable("SLURM_NTASKS", size, 1, INT_MAX);
  launch.rank = rankVariable("SLURM_PROCID", rank, "SLURM_NTASKS", launch.worldSize);
  if (const char *perNode = variable("SLURM_NTASKS_PER_NODE")) {
    launch.localWorldSize = integerVariable("SLURM_NTASKS_PER_NODE", perNode, 1, INT_MAX);
  } else if (const char *list = variable("SLURM_TASKS_PER_NODE")) {
    const char *node = variable("SLURM_NODEID");
    launch.localWorldSize =
        slurmTasksOnNode(list, node ? integerVariable("SLURM_NODEID", node, 0, INT_MAX) : 0);
  }
}

/// Where rank 0 listens. Slurm gives no such variables, so there the first
/// host of the step (srun's block distribution puts task 0 on it) and a port
/// derived from the job id (two jobs sharing a node differ) stand in.
void readMaster(LaunchEnvironment &launch, bool slurm) {
  std::string launchText = launch.sizeVariable + "=" + std::to_string(launch.worldSize);
  const char *addr = variable("MASTER_ADDR");
  if (addr) {
    launch.masterAddr = addr;
  } else if (slurm) {
    for (const char *list : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
      if (const char *hosts = variable(list)) {
        launch.masterAddr = firstSlurmHost(hosts);
        break;
      }
  }
  if (launch.masterAddr.empty())
    fail("MASTER_ADDR is not set: a ", launchText,
         " launch without mpirun needs the host of rank 0 in MASTER_ADDR (and a port in "
         "MASTER_PORT)");
  if (const char *port = variable("MASTER_PORT")) {
    launch.masterPort = integerVariable("MASTER_PORT", port, 1, 65535);
    // torchrun itself serves its own store on MASTER_PORT and says so; rank 0
    // then listens on the next port.
    const char *agentStore = variable("TORCHELASTIC_USE_AGENT_STORE");
    if (agentStore && (std::string(agentStore) == "True" || std::string(agentStore) == "1")) {
      if (launch.masterPort == 65535)
        fail("MASTER_PORT=65535 is taken by torchrun's store and has no next port for rank 0");
      ++launch.masterPort;
    }
  } else if (const char *job = slurm ? variable("SLURM_JOB_ID") : nullptr) {
    launch.masterPort = 12000 + integerVariable("SLURM_JOB_ID", job, 0, INT_MAX) % 20000;
  } else {
    fail("MASTER_PORT is not set: a ", launchText,
         " launch without mpirun needs the port rank 0 listens on in MASTER_PORT");
  }
}

} // namespace

std::string firstSlurmHost(const std::string &hostList) {
  // "prefix[first-last,...]suffix,other": the prefix, the first number as
  // written (zero padding is part of the name), then the suffix.
  std::string host;
  size_t i = 0;
  while (i < hostList.size() && hostList[i] != ',' && hostList[i] != '[') host += hostList[i++];
  if (i < hostList.size() && hostList[i] == '[') {
    ++i;
    while (i < hostList.size() && std::isdigit(static_cast<unsigned char>(hostList[i])))
      host += hostList[i++];
    i = hostList.find(']', i);
    if (i != std::string::npos)
      for (++i; i < hostList.size() && hostList[i] != ','; ++i) host += hostList[i];
  }
  return host;
}

int slurmTasksOnNode(const std::string &tasksPerNode, int node) {
  // Entries "N" or "N(xM)": N tasks on each of the next M nodes.
  std::istringstream in(tasksPerNode);
  std::string entry;
  int first = 0;
  while (std::getline(in, entry, ',')) {
    char *end = nullptr;
    long tasks = std::strtol(entry.c_str(), &end, 10);
    long repeat = 1;
    if (*end == '(' && end[1] == 'x') repeat = std::strtol(end + 2, &end, 10), ++end;
    if (end == entry.c_str() || tasks < 1 || repeat < 1)
      return 0;
    if (node < first + repeat)
      return static_cast<int>(tasks);
    first += static_cast<int>(repeat);
  }
  return 0;
}

LaunchEnvironment readLaunchEnvironment() {
  LaunchEnvironment launch;
  bool slurm = false;
  if (variable("WORLD_SIZE") || variable("RANK")) {
    readTorchrun(launch);
  } else if (variable("SLURM_NTASKS") && variable("SLURM_STEP_ID")) {
    // Only a task of an srun step: a batch script runs with SLURM_NTASKS of
    // its allocation but is one process.
    readSlurm(launch);
    slurm = true;
  }
  if (launch.worldSize > 1)
    readMaster(launch, slurm);
  return launch;
}

} // namespace llmc
