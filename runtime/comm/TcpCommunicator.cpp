//===- TcpCommunicator.cpp - collectives over TCP sockets -----------------===//
//
// Every pair of ranks shares one TCP stream. A message is a 24-byte header
// (magic, tag, length) and its payload. Receives match messages by
// (peer, tag) in arrival order, as MPI does: a collective's tag is its group
// and its sequence number within that group, a send/recv's tag is the
// program's. A message that arrives before it is asked for is kept (the
// "stash"), so no send ever waits on a receive that the peer has not posted
// yet and no program order can deadlock on socket buffers.
//
// While it waits, a rank reads from every peer, not only the ones the current
// collective involves: a peer that dies anywhere in the job is noticed at
// once and named. A rank that finishes normally says goodbye first, so its
// closing connection is not mistaken for a death.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MeshGroup.h"
#include "runtime/comm/TcpCommunicator.h"

#include "runtime/support/Error.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <list>
#include <map>
#include <random>
#include <sstream>
#include <thread>

namespace llmc {

//===----------------------------------------------------------------------===//
// Sockets
//===----------------------------------------------------------------------===//

namespace {

constexpr uint32_t kMagic = 0x434d4c4c; // "LLMC"
constexpr uint32_t kVersion = 1;
constexpr uint64_t kGoodbye = ~0ull;          ///< tag of "this rank finished normally"
constexpr uint64_t kFailed = ~0ull - 1;       ///< tag of "this rank failed"; payload: why
constexpr uint64_t kCollective = 1ull << 63;  ///< tag bit of collective messages

/// What precedes every payload on a data connection.
struct Header {
  uint32_t magic = kMagic;
  uint32_t reserved = 0;
  uint64_t tag = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(Header) == 24, "the header is part of the wire format");

/// A rank introducing itself (to rank 0, or to a peer it dials).
struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  int32_t rank = 0;
  int32_t worldSize = 0;
  uint32_t port = 0; ///< where this rank accepts its peers
  uint32_t reserved = 0;
};

/// Rank 0's answer: status 0 and one Address per rank, or status 1 and an
/// error text of `bytes` bytes.
struct Reply {
  uint32_t magic = kMagic;
  uint32_t status = 0;
  uint32_t bytes = 0;
  uint32_t reserved = 0;
};
struct Address {
  uint32_t ip = 0;   ///< network byte order
  uint32_t port = 0;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// "3" or "0.5": seconds as a person would write them.
std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::string ipText(uint32_t ip) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = ip;
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

void closeFd(int &fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

/// A socket closed when it goes out of scope.
struct OwnedFd {
  int fd = -1;
  ~OwnedFd() { closeFd(fd); }
};

/// Waits until `fd` is ready for `events` (or in error); false once the
/// deadline passes.
bool waitFor(int fd, short events, double deadline) {
  while (true) {
    double left = deadline - now();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min(1000.0, std::ceil(left * 1000))));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true; // let the caller's read/write report it
  }
}

/// Writes all of `data` to a non-blocking socket; "" or why it failed.
std::string writeAll(int fd, const void *data, size_t n, double deadline) {
  const char *p = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFor(fd, POLLOUT, deadline)) return "timed out";
    } else {
      return std::strerror(errno);
    }
  }
  return "";
}

/// Reads exactly `n` bytes from a non-blocking socket; "" or why it failed.
std::string readAll(int fd, void *data, size_t n, double deadline) {
  char *p = static_cast<char *>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      return "the connection was closed";
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitFor(fd, POLLIN, deadline)) return "timed out";
    } else {
      return std::strerror(errno);
    }
  }
  return "";
}

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// A listening socket on all interfaces (port 0: any free port); -1 and
/// `error` on failure.
int listenOn(int port, std::string &error) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    error = std::strerror(errno);
    closeFd(fd);
    return -1;
  }
  setNonBlocking(fd);
  return fd;
}

int boundPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  return ntohs(addr.sin_port);
}

/// The next connection on `listener` (non-blocking), or -1 at the deadline.
int acceptOne(int listener, double deadline) {
  while (waitFor(listener, POLLIN, deadline)) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
      return -1;
  }
  return -1;
}

/// Connects to host:port, retrying (the other side may not listen yet) until
/// the deadline; a non-blocking socket, or -1 with the last reason in `error`.
int dial(const std::string &host, int port, double deadline, std::string &error) {
  error = "no attempt was made";
  do {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      error = std::string("cannot resolve '") + host + "': " + ::gai_strerror(rc);
    } else {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      int status = fd < 0 ? errno : 0;
      if (!status && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
        status = errno;
        if (status == EINPROGRESS || status == EINTR) {
          // A silent host must not hold one attempt past the deadline.
          status = ETIMEDOUT;
          if (waitFor(fd, POLLOUT, std::min(deadline, now() + 10))) {
            socklen_t len = sizeof status;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &status, &len);
          }
        }
      }
      ::freeaddrinfo(found);
      if (!status) return fd;
      error = std::strerror(status);
      closeFd(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (now() < deadline);
  return -1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The type a reduction accumulates and travels in: bf16 widens to fp32, so
/// it is rounded once, after the whole sum.
DType workType(DType t) { return t == DType::BF16 ? DType::F32 : t; }

template <typename T> void combine(void *accBytes, const void *ownBytes, size_t n, Reduction r) {
  T *acc = static_cast<T *>(accBytes);
  const T *own = static_cast<const T *>(ownBytes);
  if (r == Reduction::Max)
    for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], own[i]);
  else
    for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] + own[i]);
}

/// acc (work type) = acc op own (dtype t), element-wise.
void accumulate(void *acc, const void *own, size_t n, DType t, Reduction r) {
  switch (t) {
  case DType::F32: combine<float>(acc, own, n, r); break;
  case DType::F64: combine<double>(acc, own, n, r); break;
  case DType::I32: combine<int32_t>(acc, own, n, r); break;
  case DType::I64: combine<int64_t>(acc, own, n, r); break;
  case DType::U8: combine<uint8_t>(acc, own, n, r); break;
  case DType::BF16: {
    float *a = static_cast<float *>(acc);
    const uint16_t *o = static_cast<const uint16_t *>(own);
    for (size_t i = 0; i < n; ++i) {
      float v = bf16ToFloat(o[i]);
      a[i] = r == Reduction::Max ? std::max(a[i], v) : a[i] + v;
    }
    break;
  }
  case DType::F16: break; // rejected before any communication
  }
}

/// `n` elements of dtype t as the work type.
void widen(void *dst, const void *src, size_t n, DType t) {
  if (t != DType::BF16) {
    if (n) std::memcpy(dst, src, n * dtypeSize(t));
    return;
  }
  for (size_t i = 0; i < n; ++i)
    static_cast<float *>(dst)[i] = bf16ToFloat(static_cast<const uint16_t *>(src)[i]);
}

/// The finished reduction (work type) as dtype t; a mean divides first.
void finish(const void *work, void *dst, size_t n, DType t, Reduction r, int members) {
  if (t == DType::BF16) {
    const float *w = static_cast<const float *>(work);
    float scale = static_cast<float>(members);
    for (size_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(dst)[i] = floatToBf16(r == Reduction::Mean ? w[i] / scale : w[i]);
    return;
  }
  if (n) std::memmove(dst, work, n * dtypeSize(t));
  if (r != Reduction::Mean) return;
  if (t == DType::F32)
    for (size_t i = 0; i < n; ++i) static_cast<float *>(dst)[i] /= static_cast<float>(members);
  else
    for (size_t i = 0; i < n; ++i) static_cast<double *>(dst)[i] /= members;
}

//===----------------------------------------------------------------------===//
// The communicator
//===----------------------------------------------------------------------===//

/// One message in flight within an exchange.
struct Transfer {
  int peer = 0;
  bool send = false;
  uint64_t tag = 0;
  const uint8_t *src = nullptr; ///< send
  uint8_t *dst = nullptr;       ///< receive
  size_t bytes = 0;
  Header header;                ///< send: what goes ahead of the payload
  size_t done = 0;              ///< send: bytes written, header included
  bool bound = false;           ///< receive: its message is being read into dst
  bool complete = false;
};

/// The transfers of one exchange, in storage the caller owns (a stack
/// array or a reused buffer: a step's collectives allocate nothing).
struct Transfers {
  Transfer *first = nullptr;
  size_t count = 0;
  Transfer *begin() const { return first; }
  Transfer *end() const { return first + count; }
};

/// A message that arrived before this rank asked for it.
struct Stashed {
  uint64_t tag = 0;
  std::vector<uint8_t> data;
  bool complete = false;
};

struct Peer {
  int fd = -1;
  bool goodbye = false; ///< it finished normally; its connection may close
  bool closed = false;
  std::list<Stashed> stash;
  std::list<Stashed> spare; ///< taken stash entries, kept with their buffers for reuse

  /// A new stash entry for `bytes` of `tag`, reusing a spare's buffer.
  Stashed &stashNew(uint64_t tag, size_t bytes) {
    if (spare.empty())
      stash.emplace_back();
    else
      stash.splice(stash.end(), spare, spare.begin());
    Stashed &s = stash.back();
    s.tag = tag;
    s.data.resize(bytes);
    s.complete = false;
    return s;
  }
  std::vector<Transfer *> sends; ///< this exchange's, in order
  // The message being read: its header, then its payload into `body`.
  Header header;
  size_t headerGot = 0;
  bool inBody = false;
  uint8_t *body = nullptr;
  size_t bodyGot = 0;
  Transfer *bodyFor = nullptr;
  Stashed *bodyStash = nullptr;
};

class TcpGroup;

class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(const Mesh &mesh, const LaunchEnvironment &launch, const CommOptions &options);
  ~TcpCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CommGroup &group(const std::vector<std::string> &axes) override;
  void send(const void *data, size_t bytes, const std::string &axis, int shift, int tag) override;
  void recv(void *data, size_t bytes, const std::string &axis, int shift, int tag) override;
  void barrier() override;
  std::vector<uint64_t> allGatherWorld(uint64_t value) override;

  /// Moves every transfer to completion, reading from all peers meanwhile;
  /// throws naming `what` and the peer on a timeout or a lost peer.
  void exchange(const CommLabel &what, Transfers transfers);
  template <size_t N> void exchange(const CommLabel &what, std::array<Transfer, N> &transfers) {
    exchange(what, Transfers{transfers.data(), N});
  }
  void exchange(const CommLabel &what, std::vector<Transfer> &transfers) {
    exchange(what, Transfers{transfers.data(), transfers.size()});
  }
  /// The optional random delay before a collective (shakes out ordering bugs).
  void debugDelay();

private:
  void connectAll(const LaunchEnvironment &launch);
  void rendezvousAsRoot(const LaunchEnvironment &launch, double deadline);
  std::vector<Address> rendezvous(const LaunchEnvironment &launch, int port, double deadline);
  void connectPeers(const std::vector<Address> &table, int listener, double deadline);
  [[noreturn]] void refuse(std::vector<int> &fds, const std::string &why);
  int peerAlong(const std::string &axis, int shift) const;
  TcpGroup &world();

  void progress(const CommLabel &what, Transfers transfers);
  void post(Transfer &t);
  void matchStash(const CommLabel &what, Transfers transfers);
  void checkPeers(const CommLabel &what, Transfers transfers);
  void pumpSends(int p, const CommLabel &what);
  void pumpReceives(int p, const CommLabel &what, Transfers transfers);
  void beginBody(int p, const CommLabel &what, Transfers transfers);
  void finishBody(int p, const CommLabel &what);
  void tellPeers(const std::string &why);
  [[noreturn]] void lost(int p, const CommLabel &what, const std::string &why);
  [[noreturn]] void timedOut(const CommLabel &what, Transfers transfers);
  void sayGoodbye();

  Mesh mesh_;
  CommOptions options_;
  int rank_ = 0, size_ = 1;
  std::vector<int> coords_;
  std::vector<Peer> peers_; ///< by world rank; this rank's own entry holds sends to itself
  std::map<uint32_t, std::unique_ptr<TcpGroup>> groups_; ///< by axis mask
  std::mt19937 rng_;
  bool broken_ = false; ///< an exchange failed: streams may stop mid-message
  std::string cause_;   ///< the failure a peer reported, passed on as it came
  std::vector<pollfd> pollFds_; ///< progress()'s poll set, reused
  std::vector<int> pollOwners_;
  TcpGroup *world_ = nullptr;
};

class TcpGroup final : public CommGroup {
public:
  TcpGroup(TcpCommunicator &owner, std::vector<int> members, int position, uint32_t mask,
           std::string name)
      : owner_(owner), members_(std::move(members)), pos_(position), mask_(mask),
        name_(std::move(name)), offset_(members_.size() + 1) {
    transfers_.reserve(2 * members_.size());
  }

  int size() const override { return static_cast<int>(members_.size()); }
  int rank() const override { return pos_; }

  void allReduce(const void *in, void *out, size_t n, DType t, Reduction r) override;
  void allGather(const void *in, void *out, size_t n, DType t) override {
    allGatherAs(CommLabel{"all_gather over ", &name_}, in, out, n * dtypeSize(t));
  }
  void reduceScatter(const void *in, void *out, size_t n, DType t, Reduction r) override;
  void broadcast(void *buffer, size_t n, DType t, int root) override;
  void reduce(const void *in, void *out, size_t n, DType t, Reduction r, int root) override;
  void allToAll(const void *in, void *out, size_t n, DType t) override;

  /// All-gather of `bytes` per member under the name `what`.
  void allGatherAs(const CommLabel &what, const void *in, void *out, size_t bytes);

private:
  int wrap(int i) const { return ((i % size()) + size()) % size(); }
  /// A fresh tag for the next collective: every member counts the group's
  /// collectives alike, so equal tags meet.
  uint64_t nextTag() {
    return kCollective | (static_cast<uint64_t>(mask_) << 40) | (seq_++ & ((1ull << 40) - 1));
  }
  Transfer sendTo(int position, uint64_t tag, const void *data, size_t bytes) const;
  Transfer recvFrom(int position, uint64_t tag, void *data, size_t bytes) const;
  void checkReduction(const CommLabel &what, DType t, Reduction r) const;
  /// Checks a reduction's arguments; a one-member group just copies `in`
  /// to `out` and returns true.
  bool reducesAlone(const CommLabel &what, const void *in, void *out, size_t n, DType t,
                    Reduction r) const;
  /// Chunk c of n elements split over the members: offset_[c] to
  /// offset_[c+1] (equal chunks of `per` elements with equalChunks).
  void partition(size_t n);
  void equalChunks(size_t per);
  uint8_t *ringReduceScatter(const CommLabel &what, uint64_t tag, const void *in, DType t,
                             Reduction r);
  void ringAllGather(const CommLabel &what, uint64_t tag, uint8_t *out);

  TcpCommunicator &owner_;
  std::vector<int> members_; ///< world ranks by position
  int pos_;
  uint32_t mask_;
  std::string name_;
  uint64_t seq_ = 0;
  // Reused by every collective, so that none allocates after the first few.
  std::vector<size_t> offset_;
  std::vector<uint8_t> partial_, incoming_, finished_, copy_;
  std::vector<Transfer> transfers_;
};

//===----------------------------------------------------------------------===//
// Start-up
//===----------------------------------------------------------------------===//

TcpCommunicator::TcpCommunicator(const Mesh &mesh, const LaunchEnvironment &launch,
                                 const CommOptions &options)
    : mesh_(mesh), options_(options), rank_(launch.rank), size_(launch.worldSize) {
  int expected = 1;
  for (auto &axis : mesh_) expected *= axis.second;
  if (expected != size_)
    fail(worldSizeMismatch(mesh_, size_, launch.sizeVariable));
  if (mesh_.size() > 23)
    fail("rank ", rank_, ": a mesh of ", mesh_.size(), " axes is more than the TCP transport "
         "can name (23)");
  coords_ = meshCoordinates(mesh_, rank_);
  peers_.resize(static_cast<size_t>(size_));
  rng_.seed(static_cast<unsigned>(rank_ * 7919 + 17));
  try {
    connectAll(launch);
  } catch (...) {
    for (Peer &peer : peers_) closeFd(peer.fd); // no destructor runs for us
    throw;
  }
}

TcpCommunicator::~TcpCommunicator() {
  // Leaving because of an error: no goodbye, so the peers report this rank
  // as gone instead of waiting for it.
  if (!broken_ && std::uncaught_exceptions() == 0) sayGoodbye();
  for (Peer &peer : peers_) closeFd(peer.fd);
}

void TcpCommunicator::connectAll(const LaunchEnvironment &launch) {
  double deadline = now() + options_.timeoutSeconds;
  if (rank_ == 0) {
    rendezvousAsRoot(launch, deadline);
  } else {
    // Listen before announcing the port, so a peer that dials at once finds
    // the socket (the kernel queues the connection until we accept it).
    std::string error;
    OwnedFd listener{listenOn(0, error)};
    if (listener.fd < 0)
      fail("rank ", rank_, ": cannot open a listening socket for the other ranks: ", error);
    std::vector<Address> table = rendezvous(launch, boundPort(listener.fd), deadline);
    connectPeers(table, listener.fd, deadline);
  }
  int one = 1;
  for (Peer &peer : peers_)
    if (peer.fd >= 0) ::setsockopt(peer.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Rank 0: collects every rank's hello on MASTER_PORT, checks that the ranks
/// agree, and sends each the table of addresses.
void TcpCommunicator::rendezvousAsRoot(const LaunchEnvironment &launch, double deadline) {
  std::string error;
  OwnedFd listener{listenOn(launch.masterPort, error)};
  if (listener.fd < 0)
    fail("rank 0: cannot listen on MASTER_PORT=", launch.masterPort, ": ", error);
  std::vector<int> fds(static_cast<size_t>(size_), -1);
  std::vector<Address> table(static_cast<size_t>(size_));
  for (int arrived = 1; arrived < size_;) {
    int fd = acceptOne(listener.fd, deadline);
    if (fd < 0) {
      std::string missing;
      for (int r = 1; r < size_; ++r)
        if (fds[r] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      refuse(fds, "only " + std::to_string(arrived) + " of " + std::to_string(size_) +
                      " ranks reached MASTER_PORT=" + std::to_string(launch.masterPort) +
                      " within " + seconds(options_.timeoutSeconds) + " s (missing: rank " +
                      missing + ")");
    }
    Hello hello;
    if (!readAll(fd, &hello, sizeof hello, std::min(deadline, now() + 10)).empty() ||
        hello.magic != kMagic) {
      closeFd(fd); // not an llmc rank (a port scan, a stale client): ignore it
      continue;
    }
    std::string who = "rank " + std::to_string(hello.rank);
    std::string why;
    if (hello.version != kVersion)
      why = who + " runs a different llmc-run (protocol " + std::to_string(hello.version) + ")";
    else if (hello.worldSize != size_)
      why = who + " was started with world size " + std::to_string(hello.worldSize) +
            " but rank 0 with " + std::to_string(size_);
    else if (hello.rank <= 0 || hello.rank >= size_ || fds[hello.rank] >= 0)
      why = "two processes were started as " + who;
    if (!why.empty()) {
      fds.push_back(fd); // it hears the reason too
      refuse(fds, why);
    }
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    table[hello.rank] = {addr.sin_addr.s_addr, hello.port};
    fds[hello.rank] = fd;
    ++arrived;
  }
  closeFd(listener.fd); // the port is free for the next job
  Reply reply;
  reply.bytes = static_cast<uint32_t>(table.size() * sizeof(Address));
  for (int r = 1; r < size_; ++r) {
    std::string why = writeAll(fds[r], &reply, sizeof reply, deadline);
    if (why.empty()) why = writeAll(fds[r], table.data(), reply.bytes, deadline);
    if (!why.empty())
      refuse(fds, "rank " + std::to_string(r) + " left during start-up (" + why + ")");
  }
  for (int r = 1; r < size_; ++r) peers_[r].fd = fds[r];
}

/// Rank 0 failed the start-up: tell every rank that reached it why, then
/// fail here too.
void TcpCommunicator::refuse(std::vector<int> &fds, const std::string &why) {
  Reply reply;
  reply.status = 1;
  reply.bytes = static_cast<uint32_t>(why.size());
  for (int &fd : fds)
    if (fd >= 0) {
      writeAll(fd, &reply, sizeof reply, now() + 2);
      writeAll(fd, why.data(), why.size(), now() + 2);
      closeFd(fd);
    }
  fail("rank 0: ", why);
}

/// Ranks > 0: says hello to rank 0 and gets the table of addresses.
std::vector<Address> TcpCommunicator::rendezvous(const LaunchEnvironment &launch, int port,
                                                 double deadline) {
  std::string where = launch.masterAddr + ":" + std::to_string(launch.masterPort);
  std::string error;
  int fd = dial(launch.masterAddr, launch.masterPort, deadline, error);
  if (fd < 0)
    fail("rank ", rank_, ": cannot reach MASTER_ADDR:MASTER_PORT (", where, ") after ",
         seconds(options_.timeoutSeconds), " s: ", error, " (is rank 0 running?)");
  peers_[0].fd = fd;
  Hello hello;
  hello.rank = rank_;
  hello.worldSize = size_;
  hello.port = static_cast<uint32_t>(port);
  Reply reply;
  error = writeAll(fd, &hello, sizeof hello, deadline);
  if (error.empty()) error = readAll(fd, &reply, sizeof reply, deadline);
  if (error.empty() && (reply.magic != kMagic || reply.bytes > (64u << 20)))
    error = "it does not speak llmc's protocol";
  std::vector<uint8_t> payload(error.empty() ? reply.bytes : 0);
  if (error.empty()) error = readAll(fd, payload.data(), payload.size(), deadline);
  if (error == "timed out")
    fail("rank ", rank_, ": rank 0 (", where, ") did not complete the start-up within ",
         seconds(options_.timeoutSeconds), " s (are all ", size_, " ranks running?)");
  if (!error.empty())
    fail("rank ", rank_, ": start-up with rank 0 (", where, ") failed: ", error);
  if (reply.status != 0)
    fail("rank ", rank_, ": rank 0 refused the start-up: ",
         std::string(payload.begin(), payload.end()));
  if (payload.size() != static_cast<size_t>(size_) * sizeof(Address))
    fail("rank ", rank_, ": rank 0 sent an address table of the wrong size");
  std::vector<Address> table(static_cast<size_t>(size_));
  std::memcpy(table.data(), payload.data(), payload.size());
  return table;
}

/// Ranks > 0: dial every lower rank but 0, accept every higher one.
void TcpCommunicator::connectPeers(const std::vector<Address> &table, int listener,
                                   double deadline) {
  Hello hello;
  hello.rank = rank_;
  hello.worldSize = size_;
  for (int r = 1; r < rank_; ++r) {
    std::string where = ipText(table[r].ip) + ":" + std::to_string(table[r].port);
    std::string error;
    int fd = dial(ipText(table[r].ip), static_cast<int>(table[r].port), deadline, error);
    if (fd >= 0) {
      peers_[r].fd = fd;
      error = writeAll(fd, &hello, sizeof hello, deadline);
    }
    if (!error.empty())
      fail("rank ", rank_, ": cannot reach rank ", r, " at ", where, ": ", error);
  }
  for (int pending = size_ - 1 - rank_; pending > 0;) {
    int fd = acceptOne(listener, deadline);
    if (fd < 0) {
      std::string missing;
      for (int r = rank_ + 1; r < size_; ++r)
        if (peers_[r].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail("rank ", rank_, ": rank ", missing, " did not connect within ",
           seconds(options_.timeoutSeconds), " s");
    }
    Hello peer;
    if (!readAll(fd, &peer, sizeof peer, std::min(deadline, now() + 10)).empty() ||
        peer.magic != kMagic || peer.rank <= rank_ || peer.rank >= size_ ||
        peers_[peer.rank].fd >= 0) {
      closeFd(fd); // not one of our peers
      continue;
    }
    peers_[peer.rank].fd = fd;
    --pending;
  }
}

void TcpCommunicator::sayGoodbye() {
  Header bye;
  bye.tag = kGoodbye;
  double deadline = now() + std::min(5.0, options_.timeoutSeconds);
  for (Peer &peer : peers_)
    if (peer.fd >= 0 && !peer.closed) writeAll(peer.fd, &bye, sizeof bye, deadline);
}

//===----------------------------------------------------------------------===//
// Moving bytes
//===----------------------------------------------------------------------===//

void TcpCommunicator::debugDelay() {
  if (options_.debugMaxDelayMs <= 0) return;
  std::uniform_int_distribution<int> pick(0, options_.debugMaxDelayMs);
  std::this_thread::sleep_for(std::chrono::milliseconds(pick(rng_)));
}

void TcpCommunicator::post(Transfer &t) {
  Peer &peer = peers_[t.peer];
  if (t.send && t.peer == rank_) {
    // To itself: straight into its own stash.
    Stashed &stashed = peer.stashNew(t.tag, t.bytes);
    if (t.bytes) std::memcpy(stashed.data.data(), t.src, t.bytes);
    stashed.complete = true;
    t.complete = true;
  } else if (t.send) {
    t.header.tag = t.tag;
    t.header.bytes = t.bytes;
    peer.sends.push_back(&t);
  }
}

/// Completes receives whose message already arrived whole. Messages of one
/// (peer, tag) are taken in arrival order.
void TcpCommunicator::matchStash(const CommLabel &what, Transfers transfers) {
  for (Transfer &t : transfers) {
    if (t.send || t.complete || t.bound) continue;
    auto &stash = peers_[t.peer].stash;
    auto it = std::find_if(stash.begin(), stash.end(),
                           [&](const Stashed &s) { return s.tag == t.tag; });
    if (it == stash.end() || !it->complete) continue;
    if (it->data.size() != t.bytes)
      fail("rank ", rank_, ": ", what, ": rank ", t.peer, " sent ", it->data.size(),
           " bytes where ", t.bytes, " were expected: the ranks disagree on a collective or send");
    if (t.bytes) std::memcpy(t.dst, it->data.data(), t.bytes);
    peers_[t.peer].spare.splice(peers_[t.peer].spare.end(), stash, it);
    t.complete = true;
  }
}

/// A transfer whose peer can no longer take part is an error now, not a
/// timeout later.
void TcpCommunicator::checkPeers(const CommLabel &what, Transfers transfers) {
  for (const Transfer &t : transfers) {
    if (t.complete) continue;
    if (t.peer == rank_)
      fail("rank ", rank_, ": ", what, ": waits for a message from itself that was never sent");
    const Peer &peer = peers_[t.peer];
    if (peer.goodbye && !t.bound)
      fail("rank ", rank_, ": ", what, ": rank ", t.peer,
           " has already finished, but this rank still ", t.send ? "sends to" : "expects data from",
           " it (did the ranks run different numbers of steps?)");
  }
}

void TcpCommunicator::exchange(const CommLabel &what, Transfers transfers) {
  if (broken_)
    fail("rank ", rank_, ": ", what, ": an earlier communication error left the connections to "
         "the other ranks unusable");
  try {
    progress(what, transfers);
  } catch (const std::exception &e) {
    broken_ = true;
    tellPeers(cause_.empty() ? e.what() : cause_);
    for (Peer &peer : peers_) peer.sends.clear();
    throw;
  }
}

/// Passes the reason this rank stops on to every peer, so that the whole job
/// reports the first cause (say, the rank that died) rather than the chain of
/// ranks that noticed it. Best effort and brief: a peer that does not read
/// (stopped) must not hold this rank back.
void TcpCommunicator::tellPeers(const std::string &why) {
  Header header;
  header.tag = kFailed;
  header.bytes = why.size();
  double deadline = now() + 1;
  for (int p = 0; p < size_; ++p) {
    Peer &peer = peers_[p];
    bool midMessage = std::any_of(peer.sends.begin(), peer.sends.end(),
                                  [](const Transfer *t) { return t->done > 0; });
    if (peer.fd < 0 || peer.closed || midMessage) continue;
    if (writeAll(peer.fd, &header, sizeof header, deadline).empty())
      writeAll(peer.fd, why.data(), why.size(), deadline);
  }
}

void TcpCommunicator::progress(const CommLabel &what, Transfers transfers) {
  for (Transfer &t : transfers) post(t);
  double deadline = now() + options_.timeoutSeconds;
  std::vector<pollfd> &fds = pollFds_;
  std::vector<int> &owners = pollOwners_;
  while (true) {
    matchStash(what, transfers);
    if (std::all_of(transfers.begin(), transfers.end(), [](auto &t) { return t.complete; }))
      break;
    checkPeers(what, transfers);
    fds.clear();
    owners.clear();
    for (int p = 0; p < size_; ++p) {
      Peer &peer = peers_[p];
      if (peer.fd < 0 || peer.closed) continue;
      fds.push_back({peer.fd, static_cast<short>(POLLIN | (peer.sends.empty() ? 0 : POLLOUT)), 0});
      owners.push_back(p);
    }
    double left = deadline - now();
    if (left <= 0) timedOut(what, transfers);
    int rc =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::min(1000.0, std::ceil(left * 1000))));
    if (rc < 0 && errno != EINTR)
      fail("rank ", rank_, ": ", what, ": poll failed: ", std::strerror(errno));
    for (size_t i = 0; rc > 0 && i < fds.size(); ++i) {
      if (fds[i].revents & POLLOUT) pumpSends(owners[i], what);
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) pumpReceives(owners[i], what, transfers);
    }
  }
  for (Peer &peer : peers_) peer.sends.clear();
}

void TcpCommunicator::pumpSends(int p, const CommLabel &what) {
  Peer &peer = peers_[p];
  while (!peer.sends.empty()) {
    Transfer &t = *peer.sends.front();
    iovec iov[2];
    int count = 0;
    if (t.done < sizeof(Header))
      iov[count++] = {reinterpret_cast<char *>(&t.header) + t.done, sizeof(Header) - t.done};
    size_t sent = t.done > sizeof(Header) ? t.done - sizeof(Header) : 0;
    if (sent < t.bytes)
      iov[count++] = {const_cast<uint8_t *>(t.src) + sent, t.bytes - sent};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t w = ::sendmsg(peer.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      lost(p, what, std::strerror(errno));
    }
    t.done += static_cast<size_t>(w);
    if (t.done == sizeof(Header) + t.bytes) {
      t.complete = true;
      peer.sends.erase(peer.sends.begin());
    }
  }
}

void TcpCommunicator::pumpReceives(int p, const CommLabel &what,
                                   Transfers transfers) {
  Peer &peer = peers_[p];
  while (!peer.closed) {
    uint8_t *into = peer.inBody ? peer.body + peer.bodyGot
                                : reinterpret_cast<uint8_t *>(&peer.header) + peer.headerGot;
    size_t want = peer.inBody ? peer.header.bytes - peer.bodyGot : sizeof(Header) - peer.headerGot;
    ssize_t r = ::recv(peer.fd, into, want, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {
      // Closed: expected after a goodbye (and then nothing is owed), a
      // death otherwise.
      if (!peer.goodbye || peer.inBody || peer.headerGot)
        lost(p, what, r == 0 ? "" : std::strerror(errno));
      peer.closed = true;
      closeFd(peer.fd);
      return;
    }
    if (peer.inBody) {
      peer.bodyGot += static_cast<size_t>(r);
      if (peer.bodyGot == peer.header.bytes) finishBody(p, what);
      continue;
    }
    peer.headerGot += static_cast<size_t>(r);
    if (peer.headerGot < sizeof(Header)) continue;
    peer.headerGot = 0;
    if (peer.header.magic != kMagic)
      fail("rank ", rank_, ": ", what, ": the stream from rank ", p,
           " is corrupt (a message without llmc's header)");
    if (peer.header.tag == kGoodbye)
      peer.goodbye = true;
    else
      beginBody(p, what, transfers);
  }
}

/// A header arrived: its payload goes straight into a posted receive when one
/// waits for it (and no earlier message of that tag is kept), else into the
/// stash.
void TcpCommunicator::beginBody(int p, const CommLabel &what,
                                Transfers transfers) {
  Peer &peer = peers_[p];
  uint64_t tag = peer.header.tag;
  Transfer *target = nullptr;
  bool earlier = std::any_of(peer.stash.begin(), peer.stash.end(),
                             [&](const Stashed &s) { return s.tag == tag; });
  for (Transfer &t : transfers)
    if (!earlier && !t.send && !t.complete && !t.bound && t.peer == p && t.tag == tag) {
      target = &t;
      break;
    }
  peer.inBody = true;
  peer.bodyGot = 0;
  peer.bodyFor = target;
  peer.bodyStash = nullptr;
  if (target) {
    if (target->bytes != peer.header.bytes)
      fail("rank ", rank_, ": ", what, ": rank ", p, " sent ", peer.header.bytes,
           " bytes where ", target->bytes,
           " were expected: the ranks disagree on a collective or send");
    target->bound = true;
    peer.body = target->dst;
  } else {
    if (peer.header.bytes > (1ull << 40) || (tag == kFailed && peer.header.bytes > (1u << 16)))
      fail("rank ", rank_, ": ", what, ": the stream from rank ", p,
           " is corrupt (a message of ", peer.header.bytes, " bytes)");
    peer.bodyStash = &peer.stashNew(tag, peer.header.bytes);
    peer.body = peer.bodyStash->data.data();
  }
  if (peer.header.bytes == 0) finishBody(p, what);
}

void TcpCommunicator::finishBody(int p, const CommLabel &what) {
  Peer &peer = peers_[p];
  if (peer.bodyFor) peer.bodyFor->complete = true;
  if (peer.bodyStash) peer.bodyStash->complete = true;
  peer.inBody = false;
  peer.bodyFor = nullptr;
  peer.bodyStash = nullptr;
  if (peer.header.tag == kFailed) {
    cause_.assign(peer.stash.back().data.begin(), peer.stash.back().data.end());
    fail("rank ", rank_, ": ", what, ": rank ", p, " failed: ", cause_);
  }
}

void TcpCommunicator::lost(int p, const CommLabel &what, const std::string &why) {
  if (peers_[p].goodbye)
    fail("rank ", rank_, ": ", what, ": rank ", p, " has already finished, but this rank still "
         "exchanges data with it (did the ranks run different numbers of steps?)");
  fail("rank ", rank_, ": ", what, ": lost the connection to rank ", p, " (it exited or died)",
       why.empty() ? "" : ": ", why);
}

void TcpCommunicator::timedOut(const CommLabel &what, Transfers transfers) {
  // Name the peer: the first receive still waiting, else the first send.
  int peer = -1;
  for (const Transfer &t : transfers)
    if (!t.complete && !t.send) {
      peer = t.peer;
      break;
    }
  bool sending = peer < 0;
  for (const Transfer &t : transfers)
    if (sending && !t.complete) {
      peer = t.peer;
      break;
    }
  fail("rank ", rank_, ": ", what, " has not completed after ", seconds(options_.timeoutSeconds),
       " s: a peer rank died or stopped answering (",
       sending ? "rank " + std::to_string(peer) + " is not taking data"
               : "still waiting for data from rank " + std::to_string(peer),
       ")");
}

//===----------------------------------------------------------------------===//
// Groups and point to point
//===----------------------------------------------------------------------===//

CommGroup &TcpCommunicator::group(const std::vector<std::string> &axes) {
  MeshGroup g = meshGroup(mesh_, coords_, axes, rank_);
  auto found = groups_.find(g.mask);
  if (found != groups_.end()) return *found->second;
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
  auto group = std::make_unique<TcpGroup>(*this, std::move(members), g.position, g.mask, g.name);
  CommGroup &ref = *group;
  groups_[g.mask] = std::move(group);
  return ref;
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
  debugDelay();
  std::array<Transfer, 1> t;
  t[0].peer = dest;
  t[0].send = true;
  t[0].tag = static_cast<uint32_t>(tag);
  t[0].src = static_cast<const uint8_t *>(data);
  t[0].bytes = bytes;
  exchange(CommLabel{"send to rank ", nullptr, dest}, t);
}

void TcpCommunicator::recv(void *data, size_t bytes, const std::string &axis, int shift, int tag) {
  int src = peerAlong(axis, shift);
  debugDelay();
  std::array<Transfer, 1> t;
  t[0].peer = src;
  t[0].tag = static_cast<uint32_t>(tag);
  t[0].dst = static_cast<uint8_t *>(data);
  t[0].bytes = bytes;
  exchange(CommLabel{"recv from rank ", nullptr, src}, t);
}

void TcpCommunicator::barrier() {
  // An all-gather of nothing: a member finishes the ring only after hearing
  // (through its neighbours) from every other member.
  world().allGatherAs(CommLabel{"barrier"}, nullptr, nullptr, 0);
}

std::vector<uint64_t> TcpCommunicator::allGatherWorld(uint64_t value) {
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  world().allGatherAs(CommLabel{"start-up exchange"}, &value, all.data(), sizeof value);
  return all;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

Transfer TcpGroup::sendTo(int position, uint64_t tag, const void *data, size_t bytes) const {
  Transfer t;
  t.peer = members_[position];
  t.send = true;
  t.tag = tag;
  t.src = static_cast<const uint8_t *>(data);
  t.bytes = bytes;
  return t;
}

Transfer TcpGroup::recvFrom(int position, uint64_t tag, void *data, size_t bytes) const {
  Transfer t;
  t.peer = members_[position];
  t.tag = tag;
  t.dst = static_cast<uint8_t *>(data);
  t.bytes = bytes;
  return t;
}

void TcpGroup::checkReduction(const CommLabel &what, DType t, Reduction r) const {
  // Every member checks the same arguments, so all of them stop here alike.
  if (t == DType::F16)
    fail("rank ", owner_.rank(), ": ", what, ": f16 reductions are not supported");
  if (r == Reduction::Mean && t != DType::F32 && t != DType::F64 && t != DType::BF16)
    fail("rank ", owner_.rank(), ": ", what, ": mean reduction of ", dtypeName(t),
         " is not supported");
}

bool TcpGroup::reducesAlone(const CommLabel &what, const void *in, void *out, size_t n,
                            DType t, Reduction r) const {
  checkReduction(what, t, r);
  if (size() != 1) return false;
  if (in != out && n) std::memmove(out, in, n * dtypeSize(t));
  return true;
}

void TcpGroup::partition(size_t n) {
  size_t p = static_cast<size_t>(size());
  for (size_t c = 0; c <= p; ++c) offset_[c] = n * c / p;
}

void TcpGroup::equalChunks(size_t per) {
  for (size_t c = 0; c < offset_.size(); ++c) offset_[c] = per * c;
}

/// Grows `buffer` to at least `bytes` (never shrinks: reused across steps).
static uint8_t *atLeast(std::vector<uint8_t> &buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

/// Ring reduce-scatter over the chunks of offset_: at step s member i
/// passes its partial sum of chunk i-s-1 to member i+1, which adds its own
/// elements. Chunk c is summed in the fixed order c+1, c+2, ..., c and ends
/// on member c. Returns this member's finished chunk, in the work type.
uint8_t *TcpGroup::ringReduceScatter(const CommLabel &what, uint64_t tag, const void *in, DType t,
                                     Reduction r) {
  int p = size();
  size_t es = dtypeSize(t), ws = dtypeSize(workType(t));
  auto len = [&](int c) { return offset_[c + 1] - offset_[c]; };
  auto own = [&](int c) { return static_cast<const uint8_t *>(in) + offset_[c] * es; };
  size_t longest = 0;
  for (int c = 0; c < p; ++c) longest = std::max(longest, len(c));
  atLeast(partial_, longest * ws);
  atLeast(incoming_, longest * ws);
  int first = wrap(pos_ - 1);
  widen(partial_.data(), own(first), len(first), t);
  size_t partialLen = len(first);
  for (int s = 0; s + 1 < p; ++s) {
    int c = wrap(pos_ - s - 2);
    std::array<Transfer, 2> step = {
        sendTo(wrap(pos_ + 1), tag, partial_.data(), partialLen * ws),
        recvFrom(wrap(pos_ - 1), tag, incoming_.data(), len(c) * ws)};
    owner_.exchange(what, step);
    accumulate(incoming_.data(), own(c), len(c), t, r);
    std::swap(partial_, incoming_);
    partialLen = len(c);
  }
  return partial_.data();
}

/// Ring all-gather over the byte chunks offset_ marks in `out`: member i
/// starts with chunk i and at step s passes chunk i-s on to member i+1.
void TcpGroup::ringAllGather(const CommLabel &what, uint64_t tag, uint8_t *out) {
  for (int s = 0; s + 1 < size(); ++s) {
    int give = wrap(pos_ - s), take = wrap(pos_ - s - 1);
    std::array<Transfer, 2> step = {
        sendTo(wrap(pos_ + 1), tag, out + offset_[give], offset_[give + 1] - offset_[give]),
        recvFrom(wrap(pos_ - 1), tag, out + offset_[take], offset_[take + 1] - offset_[take])};
    owner_.exchange(what, step);
  }
}

void TcpGroup::allReduce(const void *in, void *out, size_t n, DType t, Reduction r) {
  CommLabel what{"all_reduce over ", &name_};
  if (reducesAlone(what, in, out, n, t, r)) return;
  owner_.debugDelay();
  uint64_t tag = nextTag();
  partition(n);
  // The result is written only after the last read of `in`: in place works.
  uint8_t *mine = ringReduceScatter(what, tag, in, t, r);
  size_t es = dtypeSize(t);
  uint8_t *bytes = static_cast<uint8_t *>(out);
  finish(mine, bytes + offset_[pos_] * es, offset_[pos_ + 1] - offset_[pos_], t, r, size());
  for (size_t &o : offset_) o *= es;
  ringAllGather(what, tag, bytes);
}

void TcpGroup::allGatherAs(const CommLabel &what, const void *in, void *out, size_t bytes) {
  if (bytes && out != in)
    std::memmove(static_cast<uint8_t *>(out) + bytes * static_cast<size_t>(pos_), in, bytes);
  if (size() == 1) return;
  owner_.debugDelay();
  equalChunks(bytes);
  ringAllGather(what, nextTag(), static_cast<uint8_t *>(out));
}

void TcpGroup::reduceScatter(const void *in, void *out, size_t n, DType t, Reduction r) {
  CommLabel what{"reduce_scatter over ", &name_};
  if (reducesAlone(what, in, out, n, t, r)) return;
  owner_.debugDelay();
  equalChunks(n);
  uint8_t *mine = ringReduceScatter(what, nextTag(), in, t, r);
  finish(mine, out, n, t, r, size());
}

void TcpGroup::reduce(const void *in, void *out, size_t n, DType t, Reduction r, int root) {
  CommLabel what{"reduce over ", &name_};
  if (reducesAlone(what, in, out, n, t, r)) return;
  owner_.debugDelay();
  // Reduce-scatter, then the root gathers the chunks: the root's result is
  // bit-identical to an all-reduce of the same data.
  uint64_t tag = nextTag();
  partition(n);
  uint8_t *mine = ringReduceScatter(what, tag, in, t, r);
  size_t es = dtypeSize(t), myLen = offset_[pos_ + 1] - offset_[pos_];
  transfers_.clear();
  if (pos_ == root) {
    uint8_t *bytes = static_cast<uint8_t *>(out);
    finish(mine, bytes + offset_[pos_] * es, myLen, t, r, size());
    for (int c = 0; c < size(); ++c)
      if (c != pos_)
        transfers_.push_back(
            recvFrom(c, tag, bytes + offset_[c] * es, (offset_[c + 1] - offset_[c]) * es));
  } else {
    uint8_t *finished = atLeast(finished_, myLen * es);
    finish(mine, finished, myLen, t, r, size());
    transfers_.push_back(sendTo(root, tag, finished, myLen * es));
  }
  owner_.exchange(what, transfers_);
}

void TcpGroup::broadcast(void *buffer, size_t n, DType t, int root) {
  if (size() == 1) return;
  CommLabel what{"broadcast over ", &name_};
  owner_.debugDelay();
  // Binomial tree rooted at `root`: log2(size) rounds.
  uint64_t tag = nextTag();
  int p = size(), v = wrap(pos_ - root);
  size_t bytes = n * dtypeSize(t);
  int mask = 1;
  for (; mask < p; mask <<= 1)
    if (v & mask) {
      std::array<Transfer, 1> parent = {recvFrom(wrap(v - mask + root), tag, buffer, bytes)};
      owner_.exchange(what, parent);
      break;
    }
  transfers_.clear();
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) transfers_.push_back(sendTo(wrap(v + mask + root), tag, buffer, bytes));
  owner_.exchange(what, transfers_);
}

void TcpGroup::allToAll(const void *in, void *out, size_t n, DType t) {
  size_t bytes = n * dtypeSize(t);
  if (in == out) { // the sends must read what the receives overwrite
    size_t all = bytes * static_cast<size_t>(size());
    if (all) std::memcpy(atLeast(copy_, all), in, all);
    in = copy_.data();
  }
  const uint8_t *src = static_cast<const uint8_t *>(in);
  uint8_t *dst = static_cast<uint8_t *>(out);
  if (bytes) std::memmove(dst + bytes * pos_, src + bytes * pos_, bytes);
  if (size() == 1) return;
  owner_.debugDelay();
  uint64_t tag = nextTag();
  transfers_.clear();
  for (int c = 0; c < size(); ++c)
    if (c != pos_) {
      transfers_.push_back(sendTo(c, tag, src + bytes * c, bytes));
      transfers_.push_back(recvFrom(c, tag, dst + bytes * c, bytes));
    }
  owner_.exchange(CommLabel{"all_to_all over ", &name_}, transfers_);
}

} // namespace

std::unique_ptr<Communicator> makeTcpCommunicator(const Mesh &mesh,
                                                  const LaunchEnvironment &launch,
                                                  const CommOptions &options) {
  return std::make_unique<TcpCommunicator>(mesh, launch, options);
}

} // namespace llmc
