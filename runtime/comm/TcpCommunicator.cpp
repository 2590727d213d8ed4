//===- TcpCommunicator.cpp - collectives over TCP, moved by Gloo ----------===//
//
// Gloo moves the bytes: every group gets a Gloo context (a full mesh of TCP
// connections among its members) when it is first asked for, the world's
// also carries send/recv; the collectives are in TcpCollectives.cpp. What
// Gloo leaves to its user is here:
//  - Start-up through rank 0's store (runtime/comm/TcpStore.h), which Gloo's
//    rendezvous uses too, under one key prefix per group.
//  - Sends return at once, so they go out from a copy (the caller may reuse
//    its buffer) and completeSends() waits for them; a send to this rank
//    itself never leaves it.
//  - Errors: a Gloo failure becomes one naming this rank, the operation and
//    the first cause the store knows of; a timeout names the members that
//    had not reached the collective or did not answer. The failing rank
//    reports before it closes its connections, so every rank it leaves
//    behind names the same cause.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/TcpCommunicatorImpl.h"

#include "runtime/comm/Socket.h"
#include "runtime/support/Error.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace llmc {
namespace tcp {
namespace {

/// Slots of send/recv messages in the world's context: above the prefixes
/// of Gloo's collectives (0x01-0x08), the program's tag below.
constexpr uint64_t kSendRecvSlot = uint64_t{0x10} << 56;

std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

} // namespace

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
      options_.timeoutSeconds, [this](uint32_t mask) { return entered(mask); },
      [this](const RankEvent &event) { noticed(event); });
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

namespace {

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

} // namespace

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
  RankEvent notice;
  if (hasNotice_) {
    std::lock_guard<std::mutex> lock(watchMutex_);
    notice = notice_;
  }
  if (notice.kind != RankEvent::None) {
    // The first rank rank 0 said died or failed: the cause of whatever went
    // wrong here since.
    std::string who = "rank " + std::to_string(notice.rank);
    if (notice.kind == RankEvent::Died) {
      message = prefix + ": lost the connection to " + who + " (it exited or died)";
    } else {
      message = prefix + ": " + who + " failed: " + notice.text;
      cause = notice.text;
    }
  } else if (error.find("Timed out") != std::string::npos) {
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

void TcpCommunicator::noticed(const RankEvent &event) {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (hasNotice_) return;
  notice_ = event;
  hasNotice_ = true;
  for (gloo::transport::UnboundBuffer *b : watched_) {
    b->abortWaitSend();
    b->abortWaitRecv();
  }
}

TcpCommunicator::Watch::Watch(TcpCommunicator &owner,
                              std::vector<gloo::transport::UnboundBuffer *> buffers)
    : owner_(owner), buffers_(std::move(buffers)) {
  std::lock_guard<std::mutex> lock(owner_.watchMutex_);
  owner_.watched_.insert(owner_.watched_.end(), buffers_.begin(), buffers_.end());
  if (owner_.hasNotice_) // it came just before
    for (gloo::transport::UnboundBuffer *b : buffers_) {
      b->abortWaitSend();
      b->abortWaitRecv();
    }
}

TcpCommunicator::Watch::~Watch() {
  std::lock_guard<std::mutex> lock(owner_.watchMutex_);
  auto &w = owner_.watched_;
  for (gloo::transport::UnboundBuffer *b : buffers_) {
    auto found = std::find(w.begin(), w.end(), b);
    if (found != w.end()) w.erase(found); // breakDown() may have let go of it
  }
}

void TcpCommunicator::breakDown(const std::string &why) {
  broken_ = true;
  store_->report(RankEvent::Failed, why);
  {
    std::lock_guard<std::mutex> lock(watchMutex_); // the buffers go now
    watched_.clear();
  }
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
  CommLabel what{"connecting group ", &g.name};
  usable(what);
  if (hasNotice_) failed(what, nullptr, -1, false, ""); // a rank is gone: it would never join
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

// Matched by tag: the channel (an NCCL communicator) changes nothing here.
void TcpCommunicator::send(const void *data, size_t bytes, const std::string &axis, int shift,
                           int tag, int) {
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

void TcpCommunicator::recv(void *data, size_t bytes, const std::string &axis, int shift, int tag,
                           int) {
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
    Watch watch(*this, {buffer.get()});
    buffer->recv(src, kSendRecvSlot | static_cast<uint32_t>(tag), 0, bytes);
    buffer->waitRecv(timeout());
  });
}

void TcpCommunicator::completeSends() {
  std::vector<gloo::transport::UnboundBuffer *> buffers;
  for (auto &s : sends_) buffers.push_back(s->buffer.get());
  Watch watch(*this, buffers);
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

} // namespace tcp

std::unique_ptr<Communicator> makeTcpCommunicator(const Mesh &mesh,
                                                  const LaunchEnvironment &launch,
                                                  const CommOptions &options) {
  return std::make_unique<tcp::TcpCommunicator>(mesh, launch, options);
}

} // namespace llmc
