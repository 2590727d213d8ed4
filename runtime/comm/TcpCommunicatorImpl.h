//===- TcpCommunicatorImpl.h - the TCP communicator's classes ---*- C++ -*-===//
//
// Shared by TcpCommunicator.cpp (start-up, groups, send/recv, failures) and
// TcpCollectives.cpp (each collective through Gloo). Not an interface of the
// runtime: runtime/comm/TcpCommunicator.h is.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_TCPCOMMUNICATORIMPL_H
#define LLMC_RUNTIME_COMM_TCPCOMMUNICATORIMPL_H

#include "runtime/comm/MeshGroup.h"
#include "runtime/comm/TcpCommunicator.h"
#include "runtime/comm/TcpStore.h"

#include <gloo/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace llmc {
namespace tcp {

class TcpCommunicator;

/// The ranks of one set of mesh axes, and the Gloo context among them
/// (none for a one-member group).
class TcpGroup final : public CommGroup {
public:
  TcpGroup(TcpCommunicator &owner, MeshGroup info, std::vector<int> members,
           std::shared_ptr<gloo::Context> context)
      : owner_(owner), info_(std::move(info)), members_(std::move(members)),
        context_(std::move(context)) {}

  int size() const override { return static_cast<int>(members_.size()); }
  int rank() const override { return info_.position; }
  void allReduce(const void *in, void *out, size_t n, DType t, Reduction r) override;
  void allGather(const void *in, void *out, size_t n, DType t) override {
    allGatherAs(CommLabel{"all_gather over ", &info_.name}, in, out, n * dtypeSize(t));
  }
  void reduceScatter(const void *in, void *out, size_t n, DType t, Reduction r) override;
  void broadcast(void *buffer, size_t n, DType t, int root) override;
  void reduce(const void *in, void *out, size_t n, DType t, Reduction r, int root) override;
  void allToAll(const void *in, void *out, size_t n, DType t) override;

  /// All-gather of `bytes` per member under the name `what`.
  void allGatherAs(const CommLabel &what, const void *in, void *out, size_t bytes);
  void barrierAs(const CommLabel &what);

  const MeshGroup &info() const { return info_; }
  const std::vector<int> &members() const { return members_; }
  /// Collectives entered so far; read by the store's thread for probes.
  uint64_t entered() const { return entered_; }
  const std::shared_ptr<gloo::Context> &context() const { return context_; }
  /// Closes the group's connections.
  void drop() { context_.reset(); }

private:
  using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;
  /// Gloo's view of `bytes` at `p` (which it writes only when it receives).
  Buffer buffer(const void *p, size_t bytes) {
    return context_->createUnboundBuffer(const_cast<void *>(p), bytes);
  }
  /// Gloo's all-to-all of `bytes` (N equal chunks) from `in` to `out`,
  /// cancellable while it waits (TcpCommunicator::Watch).
  void alltoallBytes(const void *in, void *out, size_t bytes, uint32_t tag);
  /// Runs one collective through Gloo: `body(tag)`; failures become errors
  /// that name this rank and what went wrong.
  template <typename F> void run(const CommLabel &what, F &&body);
  /// Every member checks the same arguments, so all of them stop here alike.
  void checkReduction(const CommLabel &what, DType t, Reduction r) const;
  /// Checks a reduction's arguments; true when there is nothing to
  /// communicate (one member: `out` is `in`; no elements).
  bool reducesAlone(const CommLabel &what, const void *in, void *out, size_t n, DType t,
                    Reduction r) const;
  /// `work` (the reduced values, fp32 for bf16 and f16) as dtype `t` in
  /// `out`, a mean divided by the group size.
  void finish(const void *work, void *out, size_t n, DType t, Reduction r) const;
  /// n bf16 or f16 values of `in` (dtype t) as fp32 in reused scratch.
  float *widened(const void *in, size_t n, DType t);
  static void widen(const void *in, float *out, size_t n, DType t);

  TcpCommunicator &owner_;
  MeshGroup info_;
  std::vector<int> members_; ///< world ranks by position
  std::shared_ptr<gloo::Context> context_;
  std::atomic<uint64_t> entered_{0};
  // Reused by every collective, so that none allocates after the first few.
  std::vector<float> wide_, part_;
  std::vector<uint8_t> scratch_;
};

/// One rank's communicator: Gloo for the bytes, rank 0's store for the
/// start-up and for what happened to the other ranks.
class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(const Mesh &mesh, const LaunchEnvironment &launch, const CommOptions &options);
  ~TcpCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommGroup &group(const std::vector<std::string> &axes) override;
  void send(const void *data, size_t bytes, const std::string &axis, int shift, int tag,
            int channel) override;
  void recv(void *data, size_t bytes, const std::string &axis, int shift, int tag,
            int channel) override;
  void barrier() override { world().barrierAs(CommLabel{"barrier"}); }
  void completeSends() override;
  std::vector<uint64_t> allGatherWorld(uint64_t value) override;

  /// Throws when an earlier failure closed this rank's connections.
  void usable(const CommLabel &what) const;
  /// The optional random delay before a communication (shakes out ordering
  /// bugs).
  void debugDelay();
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(
        std::max<int64_t>(1, std::llround(options_.timeoutSeconds * 1000)));
  }
  /// Runs `body`; a failure becomes an error naming this rank, `what` and
  /// the cause. `group`: the collective's group; else `peer`, the other end
  /// of a send (`sending`) or recv. Once a rank has died or failed, every
  /// communication fails at once (the job cannot go on), and one in progress
  /// fails when it returns.
  template <typename F>
  void guard(const CommLabel &what, const TcpGroup *group, int peer, bool sending, F &&body) {
    if (hasNotice_) failed(what, group, peer, sending, "");
    try {
      body();
    } catch (const std::exception &e) {
      failed(what, group, peer, sending, e.what());
    }
    if (hasNotice_) failed(what, group, peer, sending, "");
  }

  /// The Gloo buffers of the communication in progress, while it lives. A
  /// notice that a rank died or failed aborts their waits: Gloo wakes the
  /// waits on a connection that closed, but not a send it had queued on it,
  /// which would otherwise wait for the whole timeout.
  class Watch {
  public:
    Watch(TcpCommunicator &owner, std::vector<gloo::transport::UnboundBuffer *> buffers);
    ~Watch();

  private:
    TcpCommunicator &owner_;
    std::vector<gloo::transport::UnboundBuffer *> buffers_;
  };

private:
  /// From the store's thread: rank 0 says a rank died or failed.
  void noticed(const RankEvent &event);
  [[noreturn]] void failed(const CommLabel &what, const TcpGroup *group, int peer, bool sending,
                           const std::string &error);
  /// Tells rank 0's store why this rank stops and closes its connections,
  /// so that the ranks waiting for it notice at once.
  void breakDown(const std::string &why);
  std::shared_ptr<gloo::Context> connect(const MeshGroup &g, const std::vector<int> &members);
  uint64_t entered(uint32_t mask);
  TcpGroup &world();
  int peerAlong(const std::string &axis, int shift) const;

  Mesh mesh_;
  CommOptions options_;
  int rank_ = 0, size_ = 1;
  std::vector<int> coords_;
  std::mutex groupsMutex_; ///< the store's thread reads groups_ for probes
  std::map<uint32_t, std::unique_ptr<TcpGroup>> groups_; ///< by axis mask
  TcpGroup *world_ = nullptr;
  std::unique_ptr<TcpStoreServer> server_; ///< rank 0
  std::unique_ptr<TcpStoreClient> store_;
  std::shared_ptr<gloo::transport::Device> device_;
  struct PendingSend {
    int peer = 0;
    std::vector<uint8_t> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  std::vector<std::unique_ptr<PendingSend>> sends_;
  std::map<int, std::deque<std::vector<uint8_t>>> toSelf_; ///< by tag
  std::mt19937 rng_;
  bool broken_ = false;
  std::mutex watchMutex_; ///< guards what follows (the store's thread aborts)
  std::vector<gloo::transport::UnboundBuffer *> watched_;
  RankEvent notice_; ///< the first rank rank 0 said died or failed
  std::atomic<bool> hasNotice_{false};
};

} // namespace tcp
} // namespace llmc

#endif
