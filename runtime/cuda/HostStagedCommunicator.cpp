//===- HostStagedCommunicator.cpp - GPU buffers through a host transport --===//
//
// Each operation: synchronize its stream (the collectives' stream 1, or a
// transfer channel's; its waits and the writes before them have finished),
// copy the device input into pinned memory, run the host transport's
// operation there, copy the result back on that stream. The next operation's synchronization
// covers that copy before a staging buffer is reused. Sends return at once
// and keep their buffer until completeSends(), so each send of a program
// stages into a buffer of its own.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/HostStagedCommunicator.h"
#include "common/TransferChannel.h"
#include "kernels/Tensor.h"
#include "runtime/ExecutionDevice.h"
#include "runtime/support/Error.h"

#include <cuda_runtime.h>

#include <array>
#include <map>
#include <vector>

namespace llmc {
namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fail("host-staged communication: CUDA ", what, " failed: ", cudaGetErrorString(status));
}

/// A pinned host buffer that grows to the largest request.
class Staging {
public:
  ~Staging() {
    if (data_)
      cudaFreeHost(data_);
  }
  void *get(size_t bytes) {
    if (bytes > size_) {
      if (data_)
        cudaFreeHost(data_);
      data_ = nullptr;
      check(cudaMallocHost(&data_, bytes), "cudaMallocHost");
      size_ = bytes;
    }
    return data_;
  }

private:
  void *data_ = nullptr;
  size_t size_ = 0;
};

/// The copies around one host operation on the communication stream. The
/// direction is the pointers' own (unified addressing): a buffer the
/// program keeps in pinned host memory (offloading) is copied from there.
class Stager {
public:
  explicit Stager(cudaStream_t stream) : stream_(stream) {}
  void *down(Staging &staging, const void *device, size_t bytes) {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    void *host = staging.get(bytes);
    if (bytes)
      check(cudaMemcpy(host, device, bytes, cudaMemcpyDefault), "cudaMemcpy (down)");
    return host;
  }
  void up(void *device, const void *host, size_t bytes) {
    if (bytes)
      check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyDefault, stream_),
            "cudaMemcpyAsync (up)");
  }
  void wait() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

private:
  cudaStream_t stream_;
};

class StagedGroup final : public CommGroup {
public:
  StagedGroup(CommGroup &host, Stager &stager) : host_(host), stager_(stager) {}
  int size() const override { return host_.size(); }
  int rank() const override { return host_.rank(); }

  void allReduce(const void *in, void *out, size_t n, DType t, Reduction op) override {
    size_t bytes = n * dtypeSize(t);
    void *i = stager_.down(in_, in, bytes), *o = out_.get(bytes);
    host_.allReduce(i, o, n, t, op);
    stager_.up(out, o, bytes);
  }
  void allGather(const void *in, void *out, size_t n, DType t) override {
    size_t bytes = n * dtypeSize(t);
    void *i = stager_.down(in_, in, bytes), *o = out_.get(bytes * size());
    host_.allGather(i, o, n, t);
    stager_.up(out, o, bytes * size());
  }
  void reduceScatter(const void *in, void *out, size_t n, DType t, Reduction op) override {
    size_t bytes = n * dtypeSize(t);
    void *i = stager_.down(in_, in, bytes * size()), *o = out_.get(bytes);
    host_.reduceScatter(i, o, n, t, op);
    stager_.up(out, o, bytes);
  }
  void broadcast(void *buffer, size_t n, DType t, int root) override {
    size_t bytes = n * dtypeSize(t);
    void *b = stager_.down(in_, buffer, bytes);
    host_.broadcast(b, n, t, root);
    stager_.up(buffer, b, bytes);
  }
  void reduce(const void *in, void *out, size_t n, DType t, Reduction op, int root) override {
    // Staged both ways: a rank other than the root keeps its output.
    size_t bytes = n * dtypeSize(t);
    void *i = stager_.down(in_, in, bytes);
    void *o = stager_.down(out_, out, bytes);
    host_.reduce(i, o, n, t, op, root);
    stager_.up(out, o, bytes);
  }
  void allToAll(const void *in, void *out, size_t n, DType t) override {
    size_t bytes = n * dtypeSize(t) * size();
    void *i = stager_.down(in_, in, bytes), *o = out_.get(bytes);
    host_.allToAll(i, o, n, t);
    stager_.up(out, o, bytes);
  }

private:
  CommGroup &host_;
  Stager &stager_;
  Staging in_, out_;
};

class HostStagedCommunicator final : public Communicator {
public:
  HostStagedCommunicator(Communicator &host, ExecutionDevice &device)
      : host_(host), device_(device),
        stager_(static_cast<cudaStream_t>(device.stream(kCollectiveStream))) {}

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  CommGroup &group(const std::vector<std::string> &axes) override {
    CommGroup &hostGroup = host_.group(axes);
    auto &group = groups_[&hostGroup];
    if (!group)
      group = std::make_unique<StagedGroup>(hostGroup, stager_);
    return *group;
  }
  // Matched by tag on the host; the copies on the channel's stream.
  void send(const void *data, size_t bytes, const std::string &axis, int shift, int tag,
            int channel) override {
    if (sends_ == sendStaging_.size())
      sendStaging_.push_back(std::make_unique<Staging>());
    void *staged = channelStager(channel).down(*sendStaging_[sends_++], data, bytes);
    host_.send(staged, bytes, axis, shift, tag, channel);
  }
  void recv(void *data, size_t bytes, const std::string &axis, int shift, int tag,
            int channel) override {
    Stager &stager = channelStager(channel);
    void *staged = recvStaging_.get(bytes);
    host_.recv(staged, bytes, axis, shift, tag, channel);
    stager.up(data, staged, bytes);
    stager.wait(); // the staging buffer serves the next receive
  }
  void completeSends() override {
    host_.completeSends();
    sends_ = 0;
  }
  void barrier() override { host_.barrier(); }
  std::vector<uint64_t> allGatherWorld(uint64_t value) override {
    return host_.allGatherWorld(value);
  }

private:
  Stager &channelStager(int channel) {
    if (channel == kSharedChannel)
      return stager_;
    if (channel < 0 || channel >= kTransferChannels)
      fail("host-staged communication: transfer channel ", channel, " does not exist");
    std::unique_ptr<Stager> &stager = channelStagers_[static_cast<size_t>(channel)];
    if (!stager)
      stager = std::make_unique<Stager>(
          static_cast<cudaStream_t>(device_.stream(streamOfChannel(channel))));
    return *stager;
  }

  Communicator &host_;
  ExecutionDevice &device_;
  Stager stager_;
  std::array<std::unique_ptr<Stager>, kTransferChannels> channelStagers_;
  std::map<CommGroup *, std::unique_ptr<StagedGroup>> groups_;
  std::vector<std::unique_ptr<Staging>> sendStaging_;
  size_t sends_ = 0;
  Staging recvStaging_;
};

} // namespace

std::unique_ptr<Communicator> makeHostStagedCommunicator(Communicator &host,
                                                         ExecutionDevice &device) {
  return std::make_unique<HostStagedCommunicator>(host, device);
}

} // namespace llmc
