//===- TcpStore.h - rank 0's key-value store, which keeps the job together ===//
//
// Gloo connects ranks through a key-value store (gloo::rendezvous::Store)
// but ships none that reaches across hosts by itself: its stores are a
// directory (which would have to be shared), a Redis server, or in-process.
// This is ours: rank 0 serves it on MASTER_PORT from a thread, and every
// rank (rank 0 included) is a client over one TCP connection kept for the
// whole job.
//
// Besides keys and values, the store is where the job learns what happened
// to its ranks:
//  - Start-up: every rank says hello (its rank and world size); rank 0
//    answers once all have, or refuses them all with the reason (ranks
//    missing after the timeout, two processes claiming one rank, different
//    world sizes). The answer tells each rank the address rank 0 saw it at,
//    which is where the others can reach it.
//  - How each rank ended: a rank reports that it finished, or that it failed
//    and why, before it closes any connection; a connection that closes
//    without a report is a rank that died. A rank whose collective breaks
//    asks what happened to the members of its group, so that every rank
//    names the first cause rather than the neighbour that passed it on.
//  - Notices: when a rank dies or fails, rank 0 tells every other rank at
//    once, so that none keeps waiting for a rank that is gone.
//  - Probes: a rank whose collective timed out asks how many collectives of
//    the group each member has entered. Each client answers from a thread of
//    its own, so a member that is busy elsewhere still answers; one that
//    does not answer has stopped.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_TCPSTORE_H
#define LLMC_RUNTIME_COMM_TCPSTORE_H

#include <gloo/rendezvous/store.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace llmc {

/// How a rank ended, as rank 0's store heard of it.
struct RankEvent {
  enum Kind : uint32_t { None = 0, Finished = 1, Failed = 2, Died = 3 };
  int rank = -1;
  Kind kind = None;
  std::string text; ///< Failed: the failure, as the rank reported it
};

/// What a probe learned about one member of a group.
struct ProbeAnswer {
  int rank = -1;
  bool answered = false;
  uint64_t entered = 0; ///< collectives of the group it has entered
};

/// Rank 0's side: serves the store from a thread of its own.
class TcpStoreServer {
public:
  /// Listens on `port` (all interfaces); throws naming the port when it
  /// cannot. Ranks that have not all said hello `timeoutSeconds` from now
  /// are refused.
  TcpStoreServer(int port, int worldSize, double timeoutSeconds);
  /// Stops at once.
  ~TcpStoreServer();
  /// Keeps serving until every other rank's connection has closed, or for
  /// at most `seconds`, then stops.
  void finish(double seconds);

  struct State;

private:
  std::unique_ptr<State> state_;
  std::thread thread_;
};

/// Every rank's side: one connection to rank 0's store. Its Store methods
/// are what Gloo's rendezvous calls.
class TcpStoreClient final : public gloo::rendezvous::Store {
public:
  /// Connects to host:port and says hello, retrying the connection until
  /// the timeout; returns once every rank has said hello. From the client's
  /// own thread, `entered(mask)` answers probes and `noticed(event)` hears
  /// of a rank that died or failed. Errors name `rank` and MASTER_ADDR:
  /// MASTER_PORT.
  TcpStoreClient(const std::string &host, int port, int rank, int worldSize,
                 double timeoutSeconds, std::function<uint64_t(uint32_t)> entered,
                 std::function<void(const RankEvent &)> noticed);
  ~TcpStoreClient() override;

  /// The address rank 0 saw this rank at (for rank 0: the address the other
  /// ranks reached it at).
  const std::string &address() const { return address_; }

  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;
  /// The keys of `keys` the store does not hold yet (after a wait timed out).
  std::vector<std::string> missing(const std::vector<std::string> &keys);

  /// Tells rank 0 how this rank ends; returns once rank 0 has recorded it
  /// (or could not be reached).
  void report(RankEvent::Kind kind, const std::string &text);
  /// The first thing that happened to one of `ranks` (finished, failed,
  /// died), waiting up to `waitSeconds` for one; kind None if nothing did.
  /// A lost store counts as rank 0 having died.
  RankEvent firstEvent(const std::vector<int> &ranks, double waitSeconds);
  /// How many collectives of the group `mask` each of `members` has entered,
  /// asked of each member; those that do not answer within a few seconds
  /// come back unanswered.
  std::vector<ProbeAnswer> probe(uint32_t mask, const std::vector<int> &members);

private:
  struct Reply {
    bool ok = false;
    uint16_t op = 0;
    std::vector<char> payload;
  };
  Reply request(uint16_t op, const std::vector<char> &payload, double deadline);
  bool send(uint16_t op, uint32_t id, const std::vector<char> &payload);
  void readLoop();
  bool lost();
  [[noreturn]] void lostStore(const std::string &what);

  int rank_ = 0;
  double timeout_ = 0;
  int fd_ = -1;
  std::string where_; ///< "host:port"
  std::string address_;
  std::function<uint64_t(uint32_t)> entered_;
  std::function<void(const RankEvent &)> noticed_;
  std::mutex writeMutex_;
  std::mutex mutex_; ///< guards what follows
  std::condition_variable replied_;
  std::map<uint32_t, Reply> replies_;
  std::set<uint32_t> abandoned_; ///< requests that stopped waiting
  uint32_t nextId_ = 1;
  bool lost_ = false;
  std::thread reader_;
};

} // namespace llmc

#endif
