//===- NcclCommunicator.cpp - collectives on GPU memory through NCCL ------===//

#include "runtime/comm/NcclCommunicator.h"
#include "common/Mesh.h"
#include "common/TransferChannel.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/comm/CommWatchdog.h"
#include "runtime/comm/MeshGroup.h"
#include "runtime/support/Error.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace llmc {
namespace {

void check(ncclResult_t status, const CommLabel &what, int rank) {
  if (status != ncclSuccess)
    fail("rank ", rank, ": NCCL ", what, " failed: ", ncclGetErrorString(status),
         status == ncclSystemError || status == ncclRemoteError
             ? " (a peer may have died; see its error)"
             : "");
}

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32: return ncclFloat32;
  case DType::BF16: return ncclBfloat16;
  case DType::F16: return ncclFloat16;
  case DType::I32: return ncclInt32;
  case DType::I64: return ncclInt64;
  case DType::U8: return ncclUint8;
  case DType::F64: return ncclFloat64;
  }
  return ncclUint8;
}

/// Aborts `comms` (null ones skipped) at once, a thread each. An abort
/// returns only once no CUDA graph references its communicator, and a graph
/// in flight ends only when every communicator its kernels wait on has been
/// told to stop: aborted one after another, the first could wait forever
/// for a kernel of the second.
void abortTogether(const std::vector<ncclComm_t> &comms) {
  std::vector<std::thread> aborts;
  for (ncclComm_t comm : comms)
    if (comm)
      aborts.emplace_back([comm] { ncclCommAbort(comm); });
  for (std::thread &abort : aborts) abort.join();
}

ncclRedOp_t ncclOp(Reduction op) {
  switch (op) {
  case Reduction::Sum: return ncclSum;
  case Reduction::Max: return ncclMax;
  case Reduction::Mean: return ncclAvg;
  }
  return ncclSum;
}

class NcclGroup final : public CommGroup {
public:
  NcclGroup(ncclComm_t comm, int rank, int size, std::string name, cudaStream_t stream,
            int worldRank)
      : comm_(comm), rank_(rank), size_(size), name_(std::move(name)), stream_(stream),
        worldRank_(worldRank) {}
  ~NcclGroup() override {
    if (comm_)
      ncclCommDestroy(comm_);
  }
  /// The communicator, handed over to the watchdog's abort: this group
  /// neither uses nor destroys it again.
  ncclComm_t release() {
    ncclComm_t comm = comm_;
    comm_ = nullptr;
    return comm;
  }
  ncclComm_t comm() const { return comm_; }
  const std::string &name() const { return name_; }

  int size() const override { return size_; }
  int rank() const override { return rank_; }

  void allReduce(const void *in, void *out, size_t count, DType dtype, Reduction op) override {
    check(ncclAllReduce(in, out, count, ncclType(dtype), ncclOp(op), comm_, stream_),
          {"all_reduce over ", &name_}, worldRank_);
  }
  void allGather(const void *in, void *out, size_t countPerRank, DType dtype) override {
    check(ncclAllGather(in, out, countPerRank, ncclType(dtype), comm_, stream_),
          {"all_gather over ", &name_}, worldRank_);
  }
  void reduceScatter(const void *in, void *out, size_t countPerRank, DType dtype,
                     Reduction op) override {
    check(ncclReduceScatter(in, out, countPerRank, ncclType(dtype), ncclOp(op), comm_, stream_),
          {"reduce_scatter over ", &name_}, worldRank_);
  }
  void broadcast(void *buffer, size_t count, DType dtype, int root) override {
    check(ncclBroadcast(buffer, buffer, count, ncclType(dtype), root, comm_, stream_),
          {"broadcast over ", &name_}, worldRank_);
  }
  void reduce(const void *in, void *out, size_t count, DType dtype, Reduction op,
              int root) override {
    check(ncclReduce(in, out, count, ncclType(dtype), ncclOp(op), root, comm_, stream_),
          {"reduce over ", &name_}, worldRank_);
  }
  void allToAll(const void *in, void *out, size_t countPerRank, DType dtype) override {
    // Chunk i of the input goes to member i: one grouped send/receive pair
    // per member (NCCL has no all-to-all of its own).
    size_t bytes = countPerRank * dtypeSize(dtype);
    const auto *src = static_cast<const uint8_t *>(in);
    auto *dst = static_cast<uint8_t *>(out);
    check(ncclGroupStart(), {"all_to_all over ", &name_}, worldRank_);
    for (int peer = 0; peer < size_; ++peer) {
      check(ncclSend(src + peer * bytes, countPerRank, ncclType(dtype), peer, comm_, stream_),
            {"all_to_all (a send) over ", &name_}, worldRank_);
      check(ncclRecv(dst + peer * bytes, countPerRank, ncclType(dtype), peer, comm_, stream_),
            {"all_to_all (a receive) over ", &name_}, worldRank_);
    }
    check(ncclGroupEnd(), {"all_to_all over ", &name_}, worldRank_);
  }

private:
  ncclComm_t comm_;
  int rank_, size_;
  std::string name_;
  cudaStream_t stream_;
  int worldRank_;
};

/// Whether the mesh has pipeline stages (the transfers' axis).
bool hasPipeline(const Mesh &mesh) {
  for (const auto &[axis, size] : mesh)
    if (axis == "pp" && size > 1)
      return true;
  return false;
}

/// NCCL's asynchronous error of `comm`, as a reason to give up ("" if none).
std::string asyncError(ncclComm_t comm, const std::string &name, int rank) {
  ncclResult_t result = ncclSuccess;
  if (!comm || ncclCommGetAsyncError(comm, &result) != ncclSuccess || result == ncclSuccess ||
      result == ncclInProgress)
    return "";
  return "rank " + std::to_string(rank) + ": NCCL reported an error on " + name + ": " +
         ncclGetErrorString(result) + " (a peer may have died; see its error)";
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Mesh mesh, Communicator &host, ExecutionDevice &device, double timeoutSeconds)
      : mesh_(std::move(mesh)), host_(host), rank_(host.rank()), size_(host.size()),
        coords_(meshCoordinates(mesh_, rank_)), device_(device),
        stream_(static_cast<cudaStream_t>(device.stream(kCollectiveStream))) {
    // Every rank joins at start, together. A single rank joins only if its
    // program communicates at all (rarely: a mesh of size 1 has no
    // collectives), so one-GPU runs skip NCCL's start-up.
    if (size_ <= 1)
      return;
    initWorld();
    // NCCL's kernels wait for their peers forever; the watchdog gives up
    // on a step that an asynchronous error or --comm-timeout ends.
    watchdog_ = std::make_unique<CommWatchdog>(
        rank_, timeoutSeconds, [this] { return asyncErrors(); },
        [this](const std::string &) { abortAll(); });
    device_.setWatchdog(watchdog_.get());
  }
  ~NcclCommunicator() override {
    device_.setWatchdog(nullptr);
    watchdog_.reset();
    // NCCL destroys no communicator whose work a live CUDA graph holds.
    device_.releaseGraphs();
    groups_.clear();
    for (ncclComm_t comm : channels_)
      if (comm)
        ncclCommDestroy(comm);
    if (world_)
      ncclCommDestroy(world_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  CommGroup &group(const std::vector<std::string> &axes) override {
    MeshGroup g = meshGroup(mesh_, coords_, axes, rank_);
    auto it = groups_.find(g.mask);
    if (it != groups_.end())
      return *it->second;
    ncclComm_t comm;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    check(ncclCommSplit(world(), g.color, g.position, &comm, &config),
          {"ncclCommSplit for ", &g.name}, rank_);
    auto group = std::make_unique<NcclGroup>(comm, g.position, g.size, g.name, stream_, rank_);
    CommGroup &ref = *group;
    groups_[g.mask] = std::move(group);
    return ref;
  }

  void send(const void *data, size_t bytes, const std::string &axis, int shift, int,
            int channel) override {
    int peer = meshNeighbour(mesh_, coords_, meshAxis(mesh_, axis, rank_), shift);
    check(ncclSend(data, bytes, ncclUint8, peer, channelComm(channel), channelStream(channel)),
          {"send to rank ", nullptr, peer}, rank_);
  }
  void recv(void *data, size_t bytes, const std::string &axis, int shift, int,
            int channel) override {
    int peer = meshNeighbour(mesh_, coords_, meshAxis(mesh_, axis, rank_), shift);
    check(ncclRecv(data, bytes, ncclUint8, peer, channelComm(channel), channelStream(channel)),
          {"receive from rank ", nullptr, peer}, rank_);
  }
  void beginTransfers() override { check(ncclGroupStart(), {"ncclGroupStart"}, rank_); }
  void endTransfers() override { check(ncclGroupEnd(), {"ncclGroupEnd"}, rank_); }
  void barrier() override { host_.barrier(); }
  std::vector<uint64_t> allGatherWorld(uint64_t value) override {
    return host_.allGatherWorld(value);
  }

private:
  ncclComm_t world() {
    if (aborted_)
      fail("rank ", rank_, ": NCCL was aborted after an earlier error");
    if (!world_)
      initWorld();
    return world_;
  }
  void initWorld() {
    // Rank 0 creates the id; every rank gets it over the host transport.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (rank_ == 0)
      check(ncclGetUniqueId(&id), {"ncclGetUniqueId"}, rank_);
    std::vector<std::string> all;
    for (auto &[axis, size] : mesh_) all.push_back(axis);
    host_.group(all).broadcast(&id, sizeof(id), DType::U8, 0);
    check(ncclCommInitRank(&world_, size_, id, rank_), {"ncclCommInitRank"}, rank_);
    if (hasPipeline(mesh_))
      initChannels();
  }
  /// One communicator per transfer channel, each a copy of the world
  /// (every rank one color, its rank the key), made by every rank at start
  /// in channel order since ncclCommSplit is collective. NCCL pairs the
  /// n-th send with the n-th receive per communicator and serializes one
  /// communicator's work, so a channel's transfers, on their own stream
  /// and communicator, never wait behind another channel's. Two stages use
  /// two channels only.
  void initChannels() {
    int stages = 1;
    for (const auto &[axis, size] : mesh_)
      if (axis == "pp")
        stages = size;
    for (int c = kSharedChannel + 1; c < kTransferChannels; ++c) {
      if (!channelUsedOn(c, stages))
        continue;
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      std::string name = std::string(channelName(c)) + " channel";
      check(ncclCommSplit(world_, 0, rank_, &channels_[static_cast<size_t>(c)], &config),
            {"ncclCommSplit for the ", &name}, rank_);
      channelStreams_[static_cast<size_t>(c)] =
          static_cast<cudaStream_t>(device_.stream(streamOfChannel(c)));
    }
  }
  ncclComm_t channelComm(int channel) {
    if (channel == kSharedChannel)
      return world();
    if (channel < 0 || channel >= kTransferChannels || !channels_[static_cast<size_t>(channel)])
      fail("rank ", rank_, ": transfer channel ", channel,
           " has no NCCL communicator (channels exist on a mesh with a pp axis, 1 and 3 "
           "only on two stages)");
    return channels_[static_cast<size_t>(channel)];
  }
  cudaStream_t channelStream(int channel) {
    return channel == kSharedChannel ? stream_ : channelStreams_[static_cast<size_t>(channel)];
  }
  /// The first asynchronous error of any of this rank's communicators.
  std::string asyncErrors() {
    std::string why = asyncError(world_, "the world", rank_);
    for (size_t c = 0; c < channels_.size() && why.empty(); ++c)
      why = asyncError(channels_[c], channelName(static_cast<int>(c)) + std::string(" channel"),
                       rank_);
    for (auto it = groups_.begin(); it != groups_.end() && why.empty(); ++it)
      why = asyncError(it->second->comm(), it->second->name(), rank_);
    return why;
  }
  /// Every communicator aborted (and forgotten, so none is destroyed
  /// twice): their kernels return, and the step's wait with them. The
  /// graphs go first (freed when the one in flight ends), since NCCL
  /// aborts no communicator a live graph holds.
  void abortAll() {
    aborted_ = true;
    device_.releaseGraphs();
    std::vector<ncclComm_t> comms;
    for (auto &[mask, group] : groups_) comms.push_back(group->release());
    for (ncclComm_t &comm : channels_) {
      comms.push_back(comm);
      comm = nullptr;
    }
    comms.push_back(world_);
    world_ = nullptr;
    abortTogether(comms);
  }

  Mesh mesh_;
  Communicator &host_;
  int rank_, size_;
  std::vector<int> coords_;
  ExecutionDevice &device_;
  cudaStream_t stream_;
  ncclComm_t world_ = nullptr;
  /// Per transfer channel > 0: its communicator and stream.
  std::array<ncclComm_t, kTransferChannels> channels_{};
  std::array<cudaStream_t, kTransferChannels> channelStreams_{};
  std::map<uint32_t, std::unique_ptr<NcclGroup>> groups_; ///< by MeshGroup::mask
  std::unique_ptr<CommWatchdog> watchdog_; ///< on several ranks
  bool aborted_ = false;                   ///< by the watchdog: nothing runs again
};

} // namespace

std::unique_ptr<Communicator> makeNcclCommunicator(const Mesh &mesh, Communicator &host,
                                                   ExecutionDevice &device, double timeoutSeconds) {
  return std::make_unique<NcclCommunicator>(mesh, host, device, timeoutSeconds);
}

} // namespace llmc
