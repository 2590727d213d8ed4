//===- TcpCommunicator.cpp - collectives over TCP, moved by Gloo ----------===//
//
// Gloo moves the bytes: every group gets a Gloo context (a full mesh of TCP
// connections among its members) when it is first asked for, the world's
// also carries send/recv. What Gloo leaves to its user is here:
//  - Reductions Gloo has no type for: bf16 is widened to fp32, reduced and
//    rounded once; a mean divides the sum.
//  - reduce_scatter: Gloo's current API has none. all_to_all hands chunk c
//    of every member to member c, which adds the chunks up in member order
//    (each rank sends and receives what a ring reduce-scatter would).
//  - Sends return at once, so they go out from a copy (the caller may reuse
//    its buffer) and completeSends() waits for them; a send to this rank
//    itself never leaves it.
//  - Errors: a Gloo failure becomes one naming this rank, the operation and
//    the first cause rank 0's store knows of (runtime/comm/TcpStore.h); a
//    timeout names the members that had not reached the collective or did
//    not answer. The failing rank reports before it closes its connections,
//    so every rank it leaves behind names the same cause.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/TcpCommunicator.h"

#include "runtime/comm/MeshGroup.h"
#include "runtime/comm/Socket.h"
#include "runtime/comm/TcpStore.h"
#include "runtime/support/Error.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace llmc {
namespace {

/// Slots of send/recv messages in the world's context: above the prefixes
/// of Gloo's collectives (0x01-0x08), the program's tag below.
constexpr uint64_t kSendRecvSlot = uint64_t{0x10} << 56;

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

template <typename T> ReduceFn reduceFn(Reduction r) {
  return r == Reduction::Max ? static_cast<ReduceFn>(&gloo::max<T>)
                             : static_cast<ReduceFn>(&gloo::sum<T>);
}

/// Calls `f` with a value of the C++ type Gloo reduces `t` as (bf16: fp32,
/// which it is widened to first).
template <typename F> void withType(DType t, F &&f) {
  switch (t) {
  case DType::F32:
  case DType::BF16: f(float{}); break;
  case DType::F64: f(double{}); break;
  case DType::I32: f(int32_t{}); break;
  case DType::I64: f(int64_t{}); break;
  case DType::U8: f(uint8_t{}); break;
  case DType::F16: f(uint16_t{}); break; // moved, never reduced
  }
}

/// Grows `buffer` to at least `bytes` (never shrinks: reused across steps).
uint8_t *atLeast(std::vector<uint8_t> &buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

class TcpCommunicator;

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
  /// Runs one collective through Gloo: `body(tag)`; failures become errors
  /// that name this rank and what went wrong.
  template <typename F> void run(const CommLabel &what, F &&body);
  /// Every member checks the same arguments, so all of them stop here alike.
  void checkReduction(const CommLabel &what, DType t, Reduction r) const;
  /// Checks a reduction's arguments; true when there is nothing to
  /// communicate (one member: `out` is `in`; no elements).
  bool reducesAlone(const CommLabel &what, const void *in, void *out, size_t n, DType t,
                    Reduction r) const;
  /// `work` (the reduced values, fp32 for bf16) as dtype `t` in `out`, a
  /// mean divided by the group size.
  void finish(const void *work, void *out, size_t n, DType t, Reduction r) const;
  float *widened(const void *in, size_t n);

  TcpCommunicator &owner_;
  MeshGroup info_;
  std::vector<int> members_; ///< world ranks by position
  std::shared_ptr<gloo::Context> context_;
  std::atomic<uint64_t> entered_{0};
  // Reused by every collective, so that none allocates after the first few.
  std::vector<float> wide_, part_;
  std::vector<uint8_t> scratch_;
};

class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(const Mesh &mesh, const LaunchEnvironment &launch, const CommOptions &options);
  ~TcpCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommGroup &group(const std::vector<std::string> &axes) override;
  void send(const void *data, size_t bytes, const std::string &axis, int shift, int tag) override;
  void recv(void *data, size_t bytes, const std::string &axis, int shift, int tag) override;
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
  /// of a send (`sending`) or recv.
  template <typename F>
  void guard(const CommLabel &what, const TcpGroup *group, int peer, bool sending, F &&body) {
    try {
      body();
    } catch (const std::exception &e) {
      failed(what, group, peer, sending, e.what());
    }
  }

private:
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
};

//===----------------------------------------------------------------------===//
// Start-up and shut-down
//===----------------------------------------------------------------------===//

TcpCommunicator::TcpCommunicator(const Mesh &mesh, const LaunchEnvironment &launch,
                                 const CommOptions &options)
    : mesh_(mesh), options_(options), rank_(launch.rank), size_(launch.worldSize) {
  int expected = 1;
  for (auto &axis : mesh_) expected *= axis.second;
  if (expected != size_)
    fail(worldSizeMismatch(mesh_, size_, launch.sizeVariable));
  coords_ = meshCoordinates(mesh_, rank_);
  rng_.seed(static_cast<unsigned>(rank_ * 7919 + 17));
  // Gloo writes to its sockets with writev(), which raises SIGPIPE when a
  // peer has gone; the error it returns as well is what is reported.
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
  if (rank_ == 0)
    server_ = std::make_unique<TcpStoreServer>(launch.masterPort, size_, options_.timeoutSeconds);
  // Rank 0 reaches its own store on this host, whatever MASTER_ADDR says.
  store_ = std::make_unique<TcpStoreClient>(
      rank_ == 0 ? "127.0.0.1" : launch.masterAddr, launch.masterPort, rank_, size_,
      options_.timeoutSeconds, [this](uint32_t mask) { return entered(mask); });
  gloo::transport::tcp::attr attr;
  attr.ai_family = AF_INET;
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
    attr.iface = iface;
  else
    attr.hostname = store_->address();
  try {
    net::SignalsBlocked quiet; // Gloo's thread leaves signals to the main thread
    device_ = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception &e) {
    fail("rank ", rank_, ": cannot open a Gloo TCP device on ",
         attr.iface.empty() ? attr.hostname : "GLOO_SOCKET_IFNAME=" + attr.iface, ": ",
         e.what());
  }
  world();
}

TcpCommunicator::~TcpCommunicator() {
  bool clean = !broken_ && std::uncaught_exceptions() == 0;
  if (clean) {
    try {
      completeSends();
    } catch (const std::exception &) {
      clean = false; // reported already
    }
  }
  // Say how this rank ends before any connection closes: a rank that
  // notices the closing connections learns why from the store.
  if (!broken_)
    store_->report(clean ? RankEvent::Finished : RankEvent::Failed,
                   clean ? "" : "rank " + std::to_string(rank_) + " stopped with an error");
  sends_.clear();
  for (auto &[mask, group] : groups_) group->drop();
  device_.reset();
  // Rank 0 keeps serving the store until the others have left (they may
  // still ask it why a rank stopped).
  if (server_)
    server_->finish(clean ? options_.timeoutSeconds : std::min(options_.timeoutSeconds, 5.0));
  store_.reset();
  server_.reset();
}

/// The store's keys under one group's name, and errors that name the ranks
/// that did not join.
class GroupStore final : public gloo::rendezvous::Store {
public:
  GroupStore(TcpStoreClient &store, std::string prefix, const std::vector<int> &members,
             std::string what, int rank, double timeout)
      : store_(store), prefix_(std::move(prefix)), members_(members), what_(std::move(what)),
        rank_(rank), timeout_(timeout) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    store_.set(prefix_ + key, data);
  }
  std::vector<char> get(const std::string &key) override {
    wait({key});
    return store_.get(prefix_ + key);
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, std::chrono::milliseconds(std::llround(timeout_ * 1000)));
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    std::vector<std::string> full;
    for (const std::string &k : keys) full.push_back(prefix_ + k);
    try {
      store_.wait(full, timeout);
    } catch (const RuntimeError &) {
      // Gloo's keys are the members' positions in the group.
      std::vector<int> late;
      for (const std::string &k : store_.missing(full)) {
        int position = std::atoi(k.c_str() + prefix_.size());
        if (position >= 0 && position < static_cast<int>(members_.size()))
          late.push_back(members_[position]);
      }
      if (late.empty()) throw;
      fail("rank ", rank_, ": ", what_, ": ", rankList(late), " did not join within ",
           net::seconds(timeout.count() / 1000.0), " s (are all ranks running the same artifact?)");
    }
  }

private:
  TcpStoreClient &store_;
  std::string prefix_;
  const std::vector<int> &members_;
  std::string what_;
  int rank_;
  double timeout_;
};

std::shared_ptr<gloo::Context> TcpCommunicator::connect(const MeshGroup &g,
                                                        const std::vector<int> &members) {
  auto context = std::make_shared<gloo::rendezvous::Context>(g.position, g.size);
  context->setTimeout(timeout());
  std::string what = "connecting group " + g.name;
  GroupStore store(*store_, "group/" + std::to_string(g.mask) + "/" + std::to_string(g.color) + "/",
                   members, what, rank_, options_.timeoutSeconds);
  try {
    context->connectFullMesh(store, device_);
  } catch (const RuntimeError &) {
    throw;
  } catch (const std::exception &e) {
    fail("rank ", rank_, ": ", what, ": ", e.what());
  }
  return context;
}

//===----------------------------------------------------------------------===//
// Failures
//===----------------------------------------------------------------------===//

void TcpCommunicator::usable(const CommLabel &what) const {
  if (broken_)
    fail("rank ", rank_, ": ", what, ": an earlier communication error left the connections to "
         "the other ranks unusable");
}

void TcpCommunicator::debugDelay() {
  if (options_.debugMaxDelayMs <= 0) return;
  std::uniform_int_distribution<int> pick(0, options_.debugMaxDelayMs);
  std::this_thread::sleep_for(std::chrono::milliseconds(pick(rng_)));
}

void TcpCommunicator::failed(const CommLabel &what, const TcpGroup *group, int peer,
                             bool sending, const std::string &error) {
  std::vector<int> others;
  if (group) {
    for (int m : group->members())
      if (m != rank_) others.push_back(m);
  } else {
    others.push_back(peer);
  }
  std::string prefix = "rank " + std::to_string(rank_) + ": " + what.str();
  std::string message, cause;
  if (error.find("Timed out") != std::string::npos) {
    // Gloo's own timeout. Who is missing: the members that have not entered
    // this collective yet, or do not answer at all.
    std::vector<int> late;
    if (group)
      for (const ProbeAnswer &a : store_->probe(group->info().mask, others))
        if (!a.answered || a.entered < group->entered()) late.push_back(a.rank);
    if (late.empty()) late = others;
    message = prefix + " has not completed after " + net::seconds(options_.timeoutSeconds) +
              " s: a peer rank died or stopped answering (" +
              (sending ? rankList(late) + " is not taking data"
                       : "still waiting for data from " + rankList(late)) +
              ")";
  } else {
    // A connection broke: the store knows why (a rank that died, failed or
    // already finished); it hears of a death as soon as the kernel closes
    // the dead rank's connection.
    RankEvent e = store_->firstEvent(others, std::min(options_.timeoutSeconds, 5.0));
    std::string who = "rank " + std::to_string(e.rank);
    switch (e.kind) {
    case RankEvent::Died:
      message = prefix + ": lost the connection to " + who + " (it exited or died)";
      break;
    case RankEvent::Failed:
      message = prefix + ": " + who + " failed: " + e.text;
      cause = e.text;
      break;
    case RankEvent::Finished:
      message = prefix + ": " + who + " has already finished, but this rank still exchanges data "
                "with it (did the ranks run different numbers of steps?)";
      break;
    case RankEvent::None:
      message = prefix + ": " + error;
      break;
    }
  }
  breakDown(cause.empty() ? message : cause);
  throw RuntimeError(message);
}

void TcpCommunicator::breakDown(const std::string &why) {
  broken_ = true;
  store_->report(RankEvent::Failed, why);
  sends_.clear();
  for (auto &[mask, group] : groups_) group->drop();
}

//===----------------------------------------------------------------------===//
// Groups and point to point
//===----------------------------------------------------------------------===//

CommGroup &TcpCommunicator::group(const std::vector<std::string> &axes) {
  MeshGroup g = meshGroup(mesh_, coords_, axes, rank_);
  {
    std::lock_guard<std::mutex> lock(groupsMutex_);
    auto found = groups_.find(g.mask);
    if (found != groups_.end()) return *found->second;
  }
  usable(CommLabel{"group ", &g.name});
  // Members: the ranks whose coordinates agree with ours outside the group,
  // placed by their coordinates inside it (mesh order).
  std::vector<int> members(static_cast<size_t>(g.size), -1);
  for (int r = 0; r < size_; ++r) {
    std::vector<int> c = meshCoordinates(mesh_, r);
    bool same = true;
    for (size_t i = 0; i < mesh_.size(); ++i)
      if (!(g.mask >> i & 1) && c[i] != coords_[i]) same = false;
    if (same) members[groupPosition(mesh_, r, g.axes).first] = r;
  }
  std::shared_ptr<gloo::Context> context = g.size > 1 ? connect(g, members) : nullptr;
  auto group = std::make_unique<TcpGroup>(*this, g, std::move(members), std::move(context));
  std::lock_guard<std::mutex> lock(groupsMutex_);
  return *(groups_[g.mask] = std::move(group));
}

uint64_t TcpCommunicator::entered(uint32_t mask) {
  std::lock_guard<std::mutex> lock(groupsMutex_);
  auto found = groups_.find(mask);
  return found == groups_.end() ? 0 : found->second->entered();
}

TcpGroup &TcpCommunicator::world() {
  if (!world_) {
    std::vector<std::string> all;
    for (auto &axis : mesh_) all.push_back(axis.first);
    world_ = &static_cast<TcpGroup &>(group(all));
  }
  return *world_;
}

int TcpCommunicator::peerAlong(const std::string &axis, int shift) const {
  return meshNeighbour(mesh_, coords_, meshAxis(mesh_, axis, rank_), shift);
}

void TcpCommunicator::send(const void *data, size_t bytes, const std::string &axis, int shift,
                           int tag) {
  int dest = peerAlong(axis, shift);
  CommLabel what{"send to rank ", nullptr, dest};
  usable(what);
  debugDelay();
  const uint8_t *begin = static_cast<const uint8_t *>(data);
  if (dest == rank_) {
    toSelf_[tag].emplace_back(begin, begin + bytes);
    return;
  }
  auto s = std::make_unique<PendingSend>();
  s->peer = dest;
  s->data.assign(begin, begin + bytes);
  s->data.reserve(1); // a buffer even for an empty message
  guard(what, nullptr, dest, true, [&] {
    // The world's context numbers its members by world rank.
    s->buffer = world().context()->createUnboundBuffer(s->data.data(), bytes);
    s->buffer->send(dest, kSendRecvSlot | static_cast<uint32_t>(tag), 0, bytes);
  });
  sends_.push_back(std::move(s));
}

void TcpCommunicator::recv(void *data, size_t bytes, const std::string &axis, int shift,
                           int tag) {
  int src = peerAlong(axis, shift);
  CommLabel what{"recv from rank ", nullptr, src};
  usable(what);
  debugDelay();
  if (src == rank_) {
    auto &queue = toSelf_[tag];
    if (queue.empty())
      fail("rank ", rank_, ": ", what, ": waits for a message from itself that was never sent");
    if (queue.front().size() != bytes)
      fail("rank ", rank_, ": ", what, ": rank ", rank_, " sent ", queue.front().size(),
           " bytes where ", bytes, " were expected: the ranks disagree on a send");
    if (bytes) std::memcpy(data, queue.front().data(), bytes);
    queue.pop_front();
    return;
  }
  guard(what, nullptr, src, false, [&] {
    uint8_t none = 0;
    auto buffer = world().context()->createUnboundBuffer(bytes ? data : &none, bytes);
    buffer->recv(src, kSendRecvSlot | static_cast<uint32_t>(tag), 0, bytes);
    buffer->waitRecv(timeout());
  });
}

void TcpCommunicator::completeSends() {
  for (auto &s : sends_)
    guard(CommLabel{"send to rank ", nullptr, s->peer}, nullptr, s->peer, true,
          [&] { s->buffer->waitSend(timeout()); });
  sends_.clear();
}

std::vector<uint64_t> TcpCommunicator::allGatherWorld(uint64_t value) {
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  world().allGatherAs(CommLabel{"start-up exchange"}, &value, all.data(), sizeof value);
  return all;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

template <typename F> void TcpGroup::run(const CommLabel &what, F &&body) {
  owner_.usable(what);
  owner_.debugDelay();
  // Gloo's tag: the collective's number in this group, alike on every
  // member, so that messages of consecutive collectives never mix.
  uint32_t tag = static_cast<uint32_t>(++entered_);
  owner_.guard(what, this, -1, false, [&] { body(tag); });
}

void TcpGroup::checkReduction(const CommLabel &what, DType t, Reduction r) const {
  if (t == DType::F16)
    fail("rank ", owner_.rank(), ": ", what, ": f16 reductions are not supported");
  if (r == Reduction::Mean && t != DType::F32 && t != DType::F64 && t != DType::BF16)
    fail("rank ", owner_.rank(), ": ", what, ": mean reduction of ", dtypeName(t),
         " is not supported");
}

bool TcpGroup::reducesAlone(const CommLabel &what, const void *in, void *out, size_t n, DType t,
                            Reduction r) const {
  checkReduction(what, t, r);
  if (size() != 1 && n != 0) return false;
  if (in != out && n) std::memmove(out, in, n * dtypeSize(t));
  return true;
}

float *TcpGroup::widened(const void *in, size_t n) {
  if (wide_.size() < n) wide_.resize(n);
  const uint16_t *src = static_cast<const uint16_t *>(in);
  for (size_t i = 0; i < n; ++i) wide_[i] = bf16ToFloat(src[i]);
  return wide_.data();
}

void TcpGroup::finish(const void *work, void *out, size_t n, DType t, Reduction r) const {
  bool mean = r == Reduction::Mean;
  if (t == DType::BF16) {
    const float *w = static_cast<const float *>(work);
    float scale = static_cast<float>(size());
    for (size_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(out)[i] = floatToBf16(mean ? w[i] / scale : w[i]);
    return;
  }
  if (work != out && n) std::memmove(out, work, n * dtypeSize(t));
  if (!mean) return;
  if (t == DType::F32)
    for (size_t i = 0; i < n; ++i) static_cast<float *>(out)[i] /= static_cast<float>(size());
  else
    for (size_t i = 0; i < n; ++i) static_cast<double *>(out)[i] /= size();
}

void TcpGroup::allReduce(const void *in, void *out, size_t n, DType t, Reduction r) {
  CommLabel what{"all_reduce over ", &info_.name};
  if (reducesAlone(what, in, out, n, t, r)) return;
  run(what, [&](uint32_t tag) {
    // In place on `out` (or on fp32 copies of bf16), which Gloo reads as
    // the input too.
    void *work = t == DType::BF16 ? widened(in, n) : out;
    if (work == out && in != out) std::memmove(out, in, n * dtypeSize(t));
    withType(t, [&](auto type) {
      using T = decltype(type);
      gloo::AllreduceOptions o(context_);
      o.setOutput(static_cast<T *>(work), n);
      o.setReduceFunction(reduceFn<T>(r));
      o.setTag(tag);
      o.setTimeout(owner_.timeout());
      gloo::allreduce(o);
    });
    finish(work, out, n, t, r);
  });
}

void TcpGroup::reduceScatter(const void *in, void *out, size_t n, DType t, Reduction r) {
  CommLabel what{"reduce_scatter over ", &info_.name};
  if (reducesAlone(what, in, out, n, t, r)) return;
  run(what, [&](uint32_t tag) {
    size_t p = static_cast<size_t>(size()), bytes = n * dtypeSize(t);
    uint8_t *chunks = atLeast(scratch_, p * bytes);
    gloo::AlltoallOptions o(context_);
    o.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), p * bytes);
    o.setOutput(chunks, p * bytes);
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::alltoall(o);
    // Chunk m came from member m: the sum runs in member order.
    if (t == DType::BF16) {
      float *acc = widened(chunks, n);
      if (part_.size() < n) part_.resize(n);
      for (size_t m = 1; m < p; ++m) {
        const uint16_t *chunk = reinterpret_cast<const uint16_t *>(chunks + m * bytes);
        for (size_t i = 0; i < n; ++i) part_[i] = bf16ToFloat(chunk[i]);
        reduceFn<float>(r)(acc, acc, part_.data(), n);
      }
      finish(acc, out, n, t, r);
      return;
    }
    withType(t, [&](auto type) {
      using T = decltype(type);
      for (size_t m = 1; m < p; ++m) reduceFn<T>(r)(chunks, chunks, chunks + m * bytes, n);
    });
    finish(chunks, out, n, t, r);
  });
}

void TcpGroup::reduce(const void *in, void *out, size_t n, DType t, Reduction r, int root) {
  CommLabel what{"reduce over ", &info_.name};
  if (reducesAlone(what, in, out, n, t, r)) return;
  run(what, [&](uint32_t tag) {
    bool isRoot = info_.position == root;
    // Off the root, Gloo uses the output as scratch: never the caller's.
    const void *src = t == DType::BF16 ? widened(in, n) : in;
    size_t workBytes = n * dtypeSize(t == DType::BF16 ? DType::F32 : t);
    void *work = isRoot && t != DType::BF16 ? out : atLeast(scratch_, workBytes);
    withType(t, [&](auto type) {
      using T = decltype(type);
      gloo::ReduceOptions o(context_);
      o.setInput(static_cast<T *>(const_cast<void *>(src)), n);
      o.setOutput(static_cast<T *>(work), n);
      o.setRoot(root);
      o.setReduceFunction(reduceFn<T>(r));
      o.setTag(tag);
      o.setTimeout(owner_.timeout());
      gloo::reduce(o);
    });
    if (isRoot) finish(work, out, n, t, r);
  });
}

void TcpGroup::broadcast(void *buffer, size_t n, DType t, int root) {
  if (size() == 1 || n == 0) return;
  run(CommLabel{"broadcast over ", &info_.name}, [&](uint32_t tag) {
    gloo::BroadcastOptions o(context_);
    o.setOutput(static_cast<uint8_t *>(buffer), n * dtypeSize(t));
    o.setRoot(root);
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::broadcast(o);
  });
}

void TcpGroup::allGatherAs(const CommLabel &what, const void *in, void *out, size_t bytes) {
  uint8_t *mine = static_cast<uint8_t *>(out) + bytes * static_cast<size_t>(info_.position);
  if (bytes && mine != in) std::memmove(mine, in, bytes);
  if (size() == 1 || bytes == 0) return;
  run(what, [&](uint32_t tag) {
    gloo::AllgatherOptions o(context_);
    o.setOutput(static_cast<uint8_t *>(out), bytes * members_.size()); // in place
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::allgather(o);
  });
}

void TcpGroup::allToAll(const void *in, void *out, size_t n, DType t) {
  size_t bytes = n * dtypeSize(t), all = bytes * members_.size();
  if (size() == 1 || bytes == 0) {
    if (bytes && in != out) std::memmove(out, in, bytes);
    return;
  }
  if (in == out) { // Gloo reads the input while it writes the output
    std::memcpy(atLeast(scratch_, all), in, all);
    in = scratch_.data();
  }
  run(CommLabel{"all_to_all over ", &info_.name}, [&](uint32_t tag) {
    gloo::AlltoallOptions o(context_);
    o.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), all);
    o.setOutput(static_cast<uint8_t *>(out), all);
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::alltoall(o);
  });
}

void TcpGroup::barrierAs(const CommLabel &what) {
  if (size() == 1) return;
  run(what, [&](uint32_t tag) {
    gloo::BarrierOptions o(context_);
    o.setTag(tag);
    o.setTimeout(owner_.timeout());
    gloo::barrier(o);
  });
}

} // namespace

std::unique_ptr<Communicator> makeTcpCommunicator(const Mesh &mesh,
                                                  const LaunchEnvironment &launch,
                                                  const CommOptions &options) {
  return std::make_unique<TcpCommunicator>(mesh, launch, options);
}

} // namespace llmc
