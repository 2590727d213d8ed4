//===- Communicator.h - collectives over mesh-axis groups -------*- C++ -*-===//
//
// One interface for every transport (single rank, MPI, TCP, NCCL). Programs
// name groups by mesh axes; the communicator turns a set of axes into a
// CommGroup once at bind time, so a step only calls into ready groups.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_COMMUNICATOR_H
#define LLMC_RUNTIME_COMM_COMMUNICATOR_H

#include "kernels/Tensor.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace llmc {

enum class Reduction { Sum, Max, Mean };
/// Parses "sum" | "max" | "mean"; throws RuntimeError otherwise.
Reduction parseReduction(const std::string &name);

/// What a communication call does, for its error and timeout messages
/// ("all_reduce over [dp]", "send to rank 3"): kept as parts and formatted
/// only when something goes wrong, so a step's collectives build no strings.
struct CommLabel {
  const char *text = "";
  const std::string *group = nullptr; ///< appended when set
  int rank = -1;                      ///< appended when >= 0

  std::string str() const {
    return text + (group ? *group : std::string()) + (rank >= 0 ? std::to_string(rank) : "");
  }
};
inline std::ostream &operator<<(std::ostream &os, const CommLabel &label) {
  return os << label.str();
}

/// The ranks that differ only in some mesh axes.
class CommGroup {
public:
  virtual ~CommGroup() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0; ///< this rank's index inside the group
  virtual void allReduce(const void *in, void *out, size_t count, DType dtype, Reduction op) = 0;
  virtual void allGather(const void *in, void *out, size_t countPerRank, DType dtype) = 0;
  virtual void reduceScatter(const void *in, void *out, size_t countPerRank, DType dtype,
                             Reduction op) = 0;
  virtual void broadcast(void *buffer, size_t count, DType dtype, int root) = 0;
  virtual void reduce(const void *in, void *out, size_t count, DType dtype, Reduction op,
                      int root) = 0;
  virtual void allToAll(const void *in, void *out, size_t countPerRank, DType dtype) = 0;
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The group spanning `axes` that contains this rank (owned by the
  /// communicator).
  virtual CommGroup &group(const std::vector<std::string> &axes) = 0;
  /// Point to point with the rank `shift` positions along `axis`, on
  /// transfer channel `channel` (common/TransferChannel.h). Transports
  /// that pair transfers in order (NCCL) keep a communicator and stream per
  /// channel; host transports match by tag and need no channels.
  virtual void send(const void *data, size_t bytes, const std::string &axis, int shift, int tag,
                    int channel) = 0;
  virtual void recv(void *data, size_t bytes, const std::string &axis, int shift, int tag,
                    int channel) = 0;
  /// Bracket a run of consecutive sends and receives on one stream that
  /// must progress together: NCCL's sends block their stream until the
  /// peer's receive is posted, so two stages sending to each other first
  /// would hang unless grouped (ncclGroupStart/End). Host transports, whose
  /// sends return at once, need nothing.
  virtual void beginTransfers() {}
  virtual void endTransfers() {}
  /// Waits until every rank got here.
  virtual void barrier() = 0;
  /// Sends return at once (a pipeline stage must not wait for its peer to
  /// be ready to receive); this waits until every send this rank started
  /// has been delivered, after which its buffers may change.
  virtual void completeSends() {}
  /// Every rank's `value`, in rank order.
  virtual std::vector<uint64_t> allGatherWorld(uint64_t value) = 0;
};

/// The communicator of a one-rank run: every group has size 1.
std::unique_ptr<Communicator> makeSingleRankCommunicator();

} // namespace llmc

#endif
