//===- TcpStoreServer.cpp - rank 0 serves the store -----------------------===//
//
// One thread, one poll loop over the listening socket and every client's
// connection. Requests that cannot be answered yet (a key not set, ranks
// still missing, no event yet, a probe waiting for its answers) wait in
// lists that are looked at again after every change and at their deadlines.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/TcpStore.h"

#include "runtime/comm/Socket.h"
#include "runtime/comm/TcpStoreProtocol.h"
#include "runtime/support/Error.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

namespace llmc {

using namespace store;
using net::now;

namespace {

/// How long a probe waits for its answers: a member that is alive answers
/// from its store thread at once, whatever its main thread does.
constexpr double kProbeSeconds = 2;

struct Connection {
  int fd = -1;
  int rank = -1; ///< set by its hello
  uint32_t helloId = 0;
  Framer in;
  std::vector<char> out; ///< not yet written
  bool closed = false;
};

struct Waiter {
  Connection *conn = nullptr;
  uint32_t id = 0;
  uint16_t op = 0;
  std::vector<std::string> keys; ///< Get, Wait
  std::vector<int> ranks;        ///< Cause
  double deadline = 0;           ///< Cause
};

struct PendingProbe {
  Connection *asker = nullptr;
  uint32_t askerId = 0;
  std::vector<ProbeAnswer> answers;
  double deadline = 0;
};

} // namespace

struct TcpStoreServer::State {
  int port = 0, worldSize = 0;
  double timeout = 0;
  int listener = -1;
  int wake[2] = {-1, -1}; ///< written to interrupt poll()
  std::atomic<bool> stop{false};
  std::atomic<double> finishBy{0}; ///< > 0: finish when the others are gone, or then

  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<Connection *> byRank;
  int arrived = 0;
  bool started = false, refused = false;
  std::string refusal;
  double startDeadline = 0;

  std::map<std::string, std::vector<char>> values;
  std::vector<RankEvent> events; ///< in the order they happened
  std::vector<bool> ended;       ///< by rank: an event is recorded
  std::vector<Waiter> waiters;
  std::map<uint32_t, PendingProbe> probes;
  uint32_t nextProbe = 1;

  void run();
  void handle(Connection &c, const Header &h, const std::vector<char> &payload);
  void hello(Connection &c, uint32_t id, Reader &in);
  void refuse(const std::string &why);
  void record(int rank, RankEvent::Kind kind, const std::string &text);
  void answerWaiters(bool expire);
  void closed(Connection &c);
  void send(Connection &c, uint16_t op, uint32_t id, const std::vector<char> &payload);
  void flush(Connection &c);
  bool othersGone() const;
};

void TcpStoreServer::State::send(Connection &c, uint16_t op, uint32_t id,
                                 const std::vector<char> &payload) {
  if (c.closed) return;
  std::vector<char> bytes = frame(op, id, payload);
  c.out.insert(c.out.end(), bytes.begin(), bytes.end());
  flush(c);
}

void TcpStoreServer::State::flush(Connection &c) {
  while (!c.out.empty() && !c.closed) {
    ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c.out.erase(c.out.begin(), c.out.begin() + w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return; // poll() says when it can take more
    } else {
      closed(c);
    }
  }
}

void TcpStoreServer::State::refuse(const std::string &why) {
  if (refused) return;
  refused = true;
  refusal = why;
  for (auto &c : conns)
    if (c->rank >= 0) send(*c, Refused, c->helloId, Writer().str(why).data());
}

void TcpStoreServer::State::hello(Connection &c, uint32_t id, Reader &in) {
  uint32_t version = in.u32();
  int rank = in.i32(), size = in.i32();
  if (!in.ok()) {
    closed(c);
    return;
  }
  std::string who = "rank " + std::to_string(rank), why;
  if (version != kVersion)
    why = who + " runs a different llmc-run (protocol " + std::to_string(version) + ")";
  else if (size != worldSize)
    why = who + " was started with world size " + std::to_string(size) + " but rank 0 with " +
          std::to_string(worldSize);
  else if (rank < 0 || rank >= worldSize || byRank[rank])
    why = "two processes were started as " + who;
  if (started) { // the job runs: turn the newcomer away, nobody else
    send(c, Refused, id, Writer().str(who + " arrived after the start-up").data());
    return;
  }
  if (!why.empty()) refuse(why);
  if (refused) { // it hears the reason too
    send(c, Refused, id, Writer().str(refusal).data());
    return;
  }
  c.helloId = id;
  c.rank = rank;
  byRank[rank] = &c;
  if (++arrived < worldSize) return;
  started = true;
  // Where the others reach each rank: the address rank 0 saw it at; rank 0
  // itself at the address rank 1 dialed.
  for (int r = 0; r < worldSize; ++r) {
    Connection &member = *byRank[r];
    std::string address = r == 0 ? net::localAddress(byRank[1]->fd) : net::peerAddress(member.fd);
    send(member, Ready, member.helloId, Writer().str(address).data());
  }
}

void TcpStoreServer::State::record(int rank, RankEvent::Kind kind, const std::string &text) {
  if (rank < 0 || rank >= worldSize || ended[rank]) return;
  ended[rank] = true;
  events.push_back(RankEvent{rank, kind, text});
  if (kind == RankEvent::Finished) return;
  // The job cannot go on: nobody should wait for this rank any longer.
  std::vector<char> notice = Writer().i32(rank).u32(kind).str(text).data();
  for (int r = 0; r < worldSize; ++r)
    if (r != rank && byRank[r]) send(*byRank[r], Notice, 0, notice);
}

void TcpStoreServer::State::handle(Connection &c, const Header &h,
                                   const std::vector<char> &payload) {
  Reader in(payload);
  if (h.op == Hello) {
    hello(c, h.id, in);
    return;
  }
  if (c.rank < 0) { // everything else comes after a hello
    closed(c);
    return;
  }
  switch (h.op) {
  case Set: {
    std::string key = in.str();
    values[key] = in.bytes();
    break;
  }
  case Get:
    waiters.push_back(Waiter{&c, h.id, Get, {in.str()}, {}, 0});
    break;
  case Wait:
  case Missing: {
    Waiter w{&c, h.id, h.op, {}, {}, 0};
    for (uint32_t n = in.u32(); n > 0 && in.ok(); --n) w.keys.push_back(in.str());
    if (h.op == Missing) {
      Writer out;
      std::vector<std::string> absent;
      for (const std::string &k : w.keys)
        if (!values.count(k)) absent.push_back(k);
      out.u32(static_cast<uint32_t>(absent.size()));
      for (const std::string &k : absent) out.str(k);
      send(c, Value, h.id, out.data());
      return;
    }
    waiters.push_back(std::move(w));
    break;
  }
  case Report: {
    auto kind = static_cast<RankEvent::Kind>(in.u32());
    record(c.rank, kind, in.str());
    send(c, Done, h.id, {});
    break;
  }
  case Cause: {
    Waiter w{&c, h.id, Cause, {}, {}, 0};
    w.deadline = now() + in.u32() / 1000.0;
    for (uint32_t n = in.u32(); n > 0 && in.ok(); --n) w.ranks.push_back(in.i32());
    waiters.push_back(std::move(w));
    break;
  }
  case Probe: {
    uint32_t mask = in.u32(), probe = nextProbe++;
    PendingProbe &p = probes[probe];
    p.asker = &c;
    p.askerId = h.id;
    p.deadline = now() + kProbeSeconds;
    for (uint32_t n = in.u32(); n > 0 && in.ok(); --n) {
      ProbeAnswer a;
      a.rank = in.i32();
      p.answers.push_back(a);
      Connection *member = a.rank >= 0 && a.rank < worldSize ? byRank[a.rank] : nullptr;
      if (member) send(*member, Ping, 0, Writer().u32(probe).u32(mask).data());
    }
    break;
  }
  case Pong: {
    auto found = probes.find(in.u32());
    uint64_t entered = in.u64();
    if (found != probes.end())
      for (ProbeAnswer &a : found->second.answers)
        if (a.rank == c.rank) a.answered = true, a.entered = entered;
    break;
  }
  default:
    closed(c);
    return;
  }
  answerWaiters(false);
}

/// Answers what can be answered; with `expire`, also what is due.
void TcpStoreServer::State::answerWaiters(bool expire) {
  double t = now();
  for (size_t i = 0; i < waiters.size();) {
    Waiter &w = waiters[i];
    bool done = w.conn->closed;
    if (!done && w.op == Get && values.count(w.keys[0])) {
      const std::vector<char> &value = values[w.keys[0]];
      send(*w.conn, Value, w.id, Writer().bytes(value.data(), value.size()).data());
      done = true;
    } else if (!done && w.op == Wait &&
               std::all_of(w.keys.begin(), w.keys.end(),
                           [&](const std::string &k) { return values.count(k) > 0; })) {
      send(*w.conn, Done, w.id, {});
      done = true;
    } else if (!done && w.op == Cause) {
      auto e = std::find_if(events.begin(), events.end(), [&](const RankEvent &e) {
        return std::find(w.ranks.begin(), w.ranks.end(), e.rank) != w.ranks.end();
      });
      if (e != events.end()) {
        send(*w.conn, Event, w.id, Writer().i32(e->rank).u32(e->kind).str(e->text).data());
        done = true;
      } else if (expire && t >= w.deadline) {
        send(*w.conn, Event, w.id, Writer().i32(-1).u32(RankEvent::None).str("").data());
        done = true;
      }
    }
    if (done)
      waiters.erase(waiters.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  for (auto it = probes.begin(); it != probes.end();) {
    PendingProbe &p = it->second;
    bool all = std::all_of(p.answers.begin(), p.answers.end(), [&](const ProbeAnswer &a) {
      return a.answered || a.rank < 0 || a.rank >= worldSize || !byRank[a.rank];
    });
    if (p.asker->closed || all || (expire && t >= p.deadline)) {
      Writer out;
      out.u32(static_cast<uint32_t>(p.answers.size()));
      for (const ProbeAnswer &a : p.answers) out.i32(a.rank).u32(a.answered).u64(a.entered);
      send(*p.asker, Probed, p.askerId, out.data());
      it = probes.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpStoreServer::State::closed(Connection &c) {
  if (c.closed) return;
  c.closed = true;
  net::closeFd(c.fd);
  if (c.rank < 0 || c.rank >= worldSize || byRank[c.rank] != &c) return;
  byRank[c.rank] = nullptr;
  if (!started)
    refuse("rank " + std::to_string(c.rank) + " left during start-up");
  else
    record(c.rank, RankEvent::Died, "");
}

bool TcpStoreServer::State::othersGone() const {
  for (int r = 1; r < worldSize; ++r)
    if (byRank[r]) return false;
  return true;
}

void TcpStoreServer::State::run() {
  std::vector<pollfd> fds;
  char chunk[1 << 16];
  while (!stop) {
    double t = now(), next = t + 1;
    if (!started && !refused) next = std::min(next, startDeadline);
    for (const Waiter &w : waiters)
      if (w.op == Cause) next = std::min(next, w.deadline);
    for (auto &p : probes) next = std::min(next, p.second.deadline);
    double finish = finishBy;
    if (finish > 0) {
      if (othersGone() || t >= finish) break;
      next = std::min(next, finish);
    }
    fds.clear();
    fds.push_back({wake[0], POLLIN, 0});
    fds.push_back({listener, POLLIN, 0});
    for (auto &c : conns)
      fds.push_back({c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    int ms = static_cast<int>(std::max(0.0, std::ceil((next - t) * 1000)));
    int rc = ::poll(fds.data(), fds.size(), ms);
    if (rc < 0 && errno != EINTR) break;
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      char drain[64];
      while (::read(wake[0], drain, sizeof drain) > 0) {
      }
    }
    if (rc > 0 && (fds[1].revents & POLLIN)) {
      int fd;
      while ((fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        auto c = std::make_unique<Connection>();
        c->fd = fd;
        conns.push_back(std::move(c));
      }
    }
    size_t polled = fds.size() - 2;
    for (size_t i = 0; rc > 0 && i < polled; ++i) {
      Connection &c = *conns[i];
      short ev = fds[i + 2].revents;
      if (c.closed) continue;
      if (ev & POLLOUT) flush(c);
      if (!(ev & (POLLIN | POLLHUP | POLLERR))) continue;
      while (!c.closed) {
        ssize_t r = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r <= 0) {
          closed(c);
          break;
        }
        c.in.feed(chunk, static_cast<size_t>(r));
        Header h;
        std::vector<char> payload;
        std::string error;
        while (!c.closed && c.in.next(h, payload, error)) handle(c, h, payload);
        if (!error.empty()) closed(c); // not an llmc rank (a port scan, a stale client)
      }
    }
    if (!started && !refused && now() >= startDeadline) {
      std::string missing;
      for (int r = 0; r < worldSize; ++r)
        if (!byRank[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      refuse("only " + std::to_string(arrived) + " of " + std::to_string(worldSize) +
             " ranks reached MASTER_PORT=" + std::to_string(port) + " within " +
             net::seconds(timeout) + " s (missing: rank " + missing + ")");
    }
    answerWaiters(true);
    // Nothing may point at a connection once it is gone.
    waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                                 [](const Waiter &w) { return w.conn->closed; }),
                  waiters.end());
    for (auto it = probes.begin(); it != probes.end();)
      it = it->second.asker->closed ? probes.erase(it) : std::next(it);
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const std::unique_ptr<Connection> &c) { return c->closed; }),
                conns.end());
  }
  for (auto &c : conns) {
    // What is still queued (a last reply) goes out if it can.
    if (!c->out.empty() && !c->closed)
      net::writeAll(c->fd, c->out.data(), c->out.size(), now() + 1);
    net::closeFd(c->fd);
  }
}

TcpStoreServer::TcpStoreServer(int port, int worldSize, double timeoutSeconds)
    : state_(std::make_unique<State>()) {
  State &s = *state_;
  s.port = port;
  s.worldSize = worldSize;
  s.timeout = timeoutSeconds;
  s.byRank.assign(static_cast<size_t>(worldSize), nullptr);
  s.ended.assign(static_cast<size_t>(worldSize), false);
  std::string error;
  s.listener = net::listenOn(port, error);
  if (s.listener < 0) fail("rank 0: cannot listen on MASTER_PORT=", port, ": ", error);
  if (::pipe2(s.wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    net::closeFd(s.listener);
    fail("rank 0: cannot create a pipe: ", std::strerror(errno));
  }
  s.startDeadline = now() + timeoutSeconds;
  net::SignalsBlocked quiet;
  thread_ = std::thread([&s] { s.run(); });
}

void TcpStoreServer::finish(double seconds) {
  if (!thread_.joinable()) return;
  state_->finishBy = now() + seconds;
  (void)!::write(state_->wake[1], "f", 1);
  thread_.join();
}

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    state_->stop = true;
    (void)!::write(state_->wake[1], "s", 1);
    thread_.join();
  }
  net::closeFd(state_->listener);
  net::closeFd(state_->wake[0]);
  net::closeFd(state_->wake[1]);
}

} // namespace llmc
