//===- TcpStoreClient.cpp - every rank's connection to the store ----------===//
//
// Requests go out from the caller's thread and wait for their reply; a
// thread of the client's own reads every message, hands replies to their
// requests and answers the server's probe pings itself.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/TcpStore.h"

#include "runtime/comm/Socket.h"
#include "runtime/comm/TcpStoreProtocol.h"
#include "runtime/support/Error.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace llmc {

using namespace store;
using net::now;

/// How long an answer to a quick request may take: rank 0's store thread
/// answers at once unless rank 0 has stopped, and a rank that is failing
/// must not wait long on a stopped rank 0.
constexpr double kReplySeconds = 5;

TcpStoreClient::TcpStoreClient(const std::string &host, int port, int rank, int worldSize,
                               double timeoutSeconds, std::function<uint64_t(uint32_t)> entered,
                               std::function<void(const RankEvent &)> noticed)
    : rank_(rank), timeout_(timeoutSeconds), where_(host + ":" + std::to_string(port)),
      entered_(std::move(entered)), noticed_(std::move(noticed)) {
  double deadline = now() + timeoutSeconds;
  std::string error;
  fd_ = net::dial(host, port, deadline, error);
  if (fd_ < 0)
    fail("rank ", rank, ": cannot reach MASTER_ADDR:MASTER_PORT (", where_, ") after ",
         net::seconds(timeoutSeconds), " s: ", error, " (is rank 0 running?)");
  {
    net::SignalsBlocked quiet;
    reader_ = std::thread([this] { readLoop(); });
  }
  // Rank 0's own server answers at its deadline at the latest, with the
  // reason; give it time to.
  if (rank == 0) deadline += 10;
  Reply reply =
      request(Hello, Writer().u32(kVersion).i32(rank).i32(worldSize).data(), deadline);
  Reader in(reply.payload);
  std::string text = in.str();
  if (reply.ok && reply.op == Ready) {
    address_ = text;
    return;
  }
  // The destructor does not run for a constructor that throws.
  ::shutdown(fd_, SHUT_RDWR);
  reader_.join();
  net::closeFd(fd_);
  if (reply.ok && reply.op == Refused)
    fail("rank ", rank, ": ", rank == 0 ? "" : "rank 0 refused the start-up: ", text);
  if (lost())
    fail("rank ", rank, ": start-up with rank 0 (", where_,
         ") failed: the connection was closed (is rank 0 running the same llmc-run?)");
  fail("rank ", rank, ": rank 0 (", where_, ") did not complete the start-up within ",
       net::seconds(timeoutSeconds), " s (are all ", worldSize, " ranks running?)");
}

TcpStoreClient::~TcpStoreClient() {
  ::shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  net::closeFd(fd_);
}

bool TcpStoreClient::send(uint16_t op, uint32_t id, const std::vector<char> &payload) {
  std::vector<char> bytes = frame(op, id, payload);
  std::lock_guard<std::mutex> lock(writeMutex_);
  return net::writeAll(fd_, bytes.data(), bytes.size(), now() + kReplySeconds).empty();
}

TcpStoreClient::Reply TcpStoreClient::request(uint16_t op, const std::vector<char> &payload,
                                              double deadline) {
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_) return {};
    id = nextId_++;
  }
  if (!send(op, id, payload)) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  auto until = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(std::max(0.0, deadline - now())));
  replied_.wait_until(lock, until, [&] { return lost_ || replies_.count(id) > 0; });
  auto found = replies_.find(id);
  if (found == replies_.end()) {
    abandoned_.insert(id); // its reply, should it come, is dropped
    return {};
  }
  Reply reply = std::move(found->second);
  replies_.erase(found);
  return reply;
}

void TcpStoreClient::readLoop() {
  Framer framer;
  char chunk[1 << 16];
  while (true) {
    ssize_t r = ::recv(fd_, chunk, sizeof chunk, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    if (r <= 0) break;
    framer.feed(chunk, static_cast<size_t>(r));
    Header h;
    std::vector<char> payload;
    std::string error;
    while (framer.next(h, payload, error)) {
      if (h.op == Ping) {
        Reader in(payload);
        uint32_t probe = in.u32(), mask = in.u32();
        send(Pong, 0, Writer().u32(probe).u64(entered_ ? entered_(mask) : 0).data());
        continue;
      }
      if (h.op == Notice) {
        Reader in(payload);
        RankEvent event;
        event.rank = in.i32();
        event.kind = static_cast<RankEvent::Kind>(in.u32());
        event.text = in.str();
        if (noticed_) noticed_(event);
        continue;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (abandoned_.erase(h.id)) continue;
      replies_[h.id] = Reply{true, h.op, std::move(payload)};
      replied_.notify_all();
    }
    if (!error.empty()) break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  lost_ = true;
  replied_.notify_all();
}

bool TcpStoreClient::lost() {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

void TcpStoreClient::lostStore(const std::string &what) {
  fail("rank ", rank_, ": ", what, ": lost the connection to rank 0's store (", where_,
       "): rank 0 exited or died");
}

void TcpStoreClient::set(const std::string &key, const std::vector<char> &data) {
  if (!send(Set, 0, Writer().str(key).bytes(data.data(), data.size()).data()))
    lostStore("setting '" + key + "'");
}

std::vector<char> TcpStoreClient::get(const std::string &key) {
  Reply reply = request(Get, Writer().str(key).data(), now() + timeout_);
  if (!reply.ok) {
    if (lost()) lostStore("reading '" + key + "'");
    fail("rank ", rank_, ": no rank set '", key, "' within ", net::seconds(timeout_), " s");
  }
  return Reader(reply.payload).bytes();
}

void TcpStoreClient::wait(const std::vector<std::string> &keys) {
  wait(keys, std::chrono::milliseconds(static_cast<int64_t>(timeout_ * 1000)));
}

void TcpStoreClient::wait(const std::vector<std::string> &keys,
                          const std::chrono::milliseconds &timeout) {
  Writer out;
  out.u32(static_cast<uint32_t>(keys.size()));
  for (const std::string &k : keys) out.str(k);
  Reply reply = request(Wait, out.data(), now() + timeout.count() / 1000.0);
  if (reply.ok) return;
  if (lost()) lostStore("waiting for the other ranks");
  std::string names;
  for (const std::string &k : missing(keys)) names += (names.empty() ? "'" : ", '") + k + "'";
  fail("rank ", rank_, ": no rank set ", names, " within ", timeout.count() / 1000.0, " s");
}

std::vector<std::string> TcpStoreClient::missing(const std::vector<std::string> &keys) {
  Writer out;
  out.u32(static_cast<uint32_t>(keys.size()));
  for (const std::string &k : keys) out.str(k);
  Reply reply = request(Missing, out.data(), now() + kReplySeconds);
  std::vector<std::string> absent;
  Reader in(reply.payload);
  for (uint32_t n = reply.ok ? in.u32() : 0; n > 0 && in.ok(); --n) absent.push_back(in.str());
  return absent;
}

void TcpStoreClient::report(RankEvent::Kind kind, const std::string &text) {
  request(Report, Writer().u32(kind).str(text).data(), now() + kReplySeconds);
}

RankEvent TcpStoreClient::firstEvent(const std::vector<int> &ranks, double waitSeconds) {
  Writer out;
  out.u32(static_cast<uint32_t>(waitSeconds * 1000)).u32(static_cast<uint32_t>(ranks.size()));
  for (int r : ranks) out.i32(r);
  Reply reply = request(Cause, out.data(), now() + waitSeconds + kReplySeconds);
  RankEvent event;
  if (!reply.ok) {
    // No store: rank 0, which serves it, is gone.
    if (lost()) event.rank = 0, event.kind = RankEvent::Died;
    return event;
  }
  Reader in(reply.payload);
  event.rank = in.i32();
  event.kind = static_cast<RankEvent::Kind>(in.u32());
  event.text = in.str();
  return event;
}

std::vector<ProbeAnswer> TcpStoreClient::probe(uint32_t mask, const std::vector<int> &members) {
  Writer out;
  out.u32(mask).u32(static_cast<uint32_t>(members.size()));
  for (int r : members) out.i32(r);
  Reply reply = request(Probe, out.data(), now() + kReplySeconds);
  std::vector<ProbeAnswer> answers;
  Reader in(reply.payload);
  for (uint32_t n = reply.ok ? in.u32() : 0; n > 0 && in.ok(); --n) {
    ProbeAnswer a;
    a.rank = in.i32();
    a.answered = in.u32() != 0;
    a.entered = in.u64();
    answers.push_back(a);
  }
  return answers;
}

} // namespace llmc
