//===- TcpCommunicatorTest.cpp - collectives over TCP on 127.0.0.1 --------===//
//
// Each rank is a thread with its own communicator (a process of its own
// where the test needs a rank to die). Expected results are computed
// directly from the definition: a group over axes S is the ranks that agree
// with this one outside S, in rank order (which, ranks being row-major, is
// their coordinate order inside S).
//
//===----------------------------------------------------------------------===//

#include "common/Half.h"
#include "runtime/comm/TcpCommunicator.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <thread>

using namespace llmc;

namespace {

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

LaunchEnvironment launchOf(int rank, int worldSize, int port) {
  LaunchEnvironment launch;
  launch.rank = rank;
  launch.worldSize = worldSize;
  launch.masterAddr = "127.0.0.1";
  launch.masterPort = port;
  launch.sizeVariable = "WORLD_SIZE";
  return launch;
}

int meshSize(const Mesh &mesh) {
  int n = 1;
  for (auto &axis : mesh) n *= axis.second;
  return n;
}

using RankBody = std::function<void(Communicator &, int rank)>;

/// Runs `body` on every rank of `mesh`, one thread each; returns each rank's
/// error ("" when it finished).
std::vector<std::string> runRanksCollectingErrors(const Mesh &mesh, const RankBody &body,
                                                  CommOptions options = {}) {
  if (options.timeoutSeconds == 300) options.timeoutSeconds = 30;
  int world = meshSize(mesh), port = freePort();
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<Communicator> comm =
            makeTcpCommunicator(mesh, launchOf(r, world, port), options);
        EXPECT_EQ(comm->rank(), r);
        EXPECT_EQ(comm->size(), world);
        body(*comm, r);
      } catch (const std::exception &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads) t.join();
  return errors;
}

void runRanks(const Mesh &mesh, const RankBody &body, CommOptions options = {}) {
  std::vector<std::string> errors = runRanksCollectingErrors(mesh, body, options);
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

/// The members of `rank`'s group over `axes`, in group order.
std::vector<int> membersOf(const Mesh &mesh, int rank, const std::vector<std::string> &axes) {
  std::vector<int> mine = meshCoordinates(mesh, rank), members;
  for (int r = 0; r < meshSize(mesh); ++r) {
    std::vector<int> c = meshCoordinates(mesh, r);
    bool same = true;
    for (size_t i = 0; i < mesh.size(); ++i)
      if (std::find(axes.begin(), axes.end(), mesh[i].first) == axes.end() && c[i] != mine[i])
        same = false;
    if (same) members.push_back(r);
  }
  return members;
}

/// Rank r's element i: small integers, exact in every type and every sum order.
double value(int rank, size_t i) {
  return static_cast<double>(rank * 10 + static_cast<int>(i % 7)) - 3;
}

template <typename T> std::vector<T> input(int rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(value(rank, i));
  return v;
}

/// Checks every collective of one group against its definition.
template <typename T>
void checkGroup(Communicator &comm, const Mesh &mesh, int rank,
                const std::vector<std::string> &axes, DType dtype) {
  std::vector<int> members = membersOf(mesh, rank, axes);
  int p = static_cast<int>(members.size());
  int me = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  CommGroup &g = comm.group(axes);
  ASSERT_EQ(g.size(), p);
  ASSERT_EQ(g.rank(), me);

  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1001}}) {
    std::vector<T> in = input<T>(rank, n), out(n);
    for (Reduction r : {Reduction::Sum, Reduction::Max}) {
      g.allReduce(in.data(), out.data(), n, dtype, r);
      for (size_t i = 0; i < n; ++i) {
        double want = r == Reduction::Max ? -1e300 : 0;
        for (int m : members)
          want = r == Reduction::Max ? std::max(want, value(m, i)) : want + value(m, i);
        ASSERT_EQ(out[i], static_cast<T>(want)) << "all_reduce n=" << n << " i=" << i;
      }
    }
    // In place, as the trainer calls it.
    std::vector<T> inPlace = in;
    g.allReduce(inPlace.data(), inPlace.data(), n, dtype, Reduction::Sum);
    for (size_t i = 0; i < n; ++i) {
      double want = 0;
      for (int m : members) want += value(m, i);
      ASSERT_EQ(inPlace[i], static_cast<T>(want));
    }
  }

  // all_gather concatenates in member order.
  size_t per = 5;
  std::vector<T> in = input<T>(rank, per), gathered(per * p);
  g.allGather(in.data(), gathered.data(), per, dtype);
  for (int c = 0; c < p; ++c)
    for (size_t i = 0; i < per; ++i)
      ASSERT_EQ(gathered[c * per + i], static_cast<T>(value(members[c], i)));

  // reduce_scatter hands chunk c to member c.
  std::vector<T> full = input<T>(rank, per * p), chunk(per);
  g.reduceScatter(full.data(), chunk.data(), per, dtype, Reduction::Sum);
  for (size_t i = 0; i < per; ++i) {
    double want = 0;
    for (int m : members) want += value(m, me * per + i);
    ASSERT_EQ(chunk[i], static_cast<T>(want));
  }

  // broadcast and reduce from every root.
  for (int root = 0; root < p; ++root) {
    std::vector<T> buffer = input<T>(rank, 9);
    g.broadcast(buffer.data(), 9, dtype, root);
    for (size_t i = 0; i < 9; ++i) ASSERT_EQ(buffer[i], static_cast<T>(value(members[root], i)));
    std::vector<T> src = input<T>(rank, 11), dst(11, static_cast<T>(42));
    g.reduce(src.data(), dst.data(), 11, dtype, Reduction::Sum, root);
    for (size_t i = 0; i < 11; ++i) {
      double want = 0;
      for (int m : members) want += value(m, i);
      ASSERT_EQ(dst[i], static_cast<T>(me == root ? want : 42)) << "reduce root " << root;
    }
  }

  // all_to_all: chunk c of member m lands as chunk m on member c.
  std::vector<T> send = input<T>(rank, 3 * p), recv(3 * p);
  g.allToAll(send.data(), recv.data(), 3, dtype);
  for (int c = 0; c < p; ++c)
    for (size_t i = 0; i < 3; ++i)
      ASSERT_EQ(recv[c * 3 + i], static_cast<T>(value(members[c], me * 3 + i)));
}

const std::vector<std::vector<std::string>> kAxisSets2x2 = {{"dp"}, {"tp"}, {"dp", "tp"}, {}};

} // namespace

TEST(TcpCommunicator, EveryCollectiveOnEveryGroupOf2x2Mesh) {
  Mesh mesh = {{"dp", 2}, {"tp", 2}};
  runRanks(mesh, [&](Communicator &comm, int rank) {
    for (const auto &axes : kAxisSets2x2) {
      checkGroup<float>(comm, mesh, rank, axes, DType::F32);
      checkGroup<int64_t>(comm, mesh, rank, axes, DType::I64);
    }
  });
}

TEST(TcpCommunicator, ThreeRanksEveryDType) {
  Mesh mesh = {{"tp", 3}};
  runRanks(mesh, [&](Communicator &comm, int rank) {
    checkGroup<float>(comm, mesh, rank, {"tp"}, DType::F32);
    checkGroup<double>(comm, mesh, rank, {"tp"}, DType::F64);
    checkGroup<int32_t>(comm, mesh, rank, {"tp"}, DType::I32);
    checkGroup<int64_t>(comm, mesh, rank, {"tp"}, DType::I64);
  });
}

TEST(TcpCommunicator, GroupOrderFollowsTheMeshNotTheAxisList) {
  // A 2x3 mesh: a group over [tp, dp] is the whole mesh in rank order.
  Mesh mesh = {{"dp", 2}, {"tp", 3}};
  runRanks(mesh, [&](Communicator &comm, int rank) {
    checkGroup<float>(comm, mesh, rank, {"tp", "dp"}, DType::F32);
    checkGroup<float>(comm, mesh, rank, {"tp"}, DType::F32);
    checkGroup<float>(comm, mesh, rank, {"dp"}, DType::F32);
  });
}

TEST(TcpCommunicator, MeanAndBf16SumInFp32ThenRound) {
  Mesh mesh = {{"dp", 3}};
  runRanks(mesh, [&](Communicator &comm, int rank) {
    CommGroup &g = comm.group({"dp"});
    // 1 + 2^-8 + 2^-8: each partial sum rounded to bf16 would lose both
    // small terms; summed in fp32 and rounded once, they make 1 + 2^-7.
    float mine = rank == 0 ? 1.0f : std::ldexp(1.0f, -8);
    uint16_t in = floatToBf16(mine), out = 0;
    g.allReduce(&in, &out, 1, DType::BF16, Reduction::Sum);
    EXPECT_EQ(bf16ToFloat(out), 1.0f + std::ldexp(1.0f, -7));

    std::vector<uint16_t> many(13), sum(13), mean(13), mx(13);
    for (size_t i = 0; i < many.size(); ++i)
      many[i] = floatToBf16(static_cast<float>(value(rank, i)));
    g.allReduce(many.data(), sum.data(), 13, DType::BF16, Reduction::Sum);
    g.allReduce(many.data(), mean.data(), 13, DType::BF16, Reduction::Mean);
    g.allReduce(many.data(), mx.data(), 13, DType::BF16, Reduction::Max);
    for (size_t i = 0; i < many.size(); ++i) {
      float s = 0, m = -1e30f;
      for (int r = 0; r < 3; ++r) {
        s += static_cast<float>(value(r, i));
        m = std::max(m, static_cast<float>(value(r, i)));
      }
      EXPECT_EQ(sum[i], floatToBf16(s));
      EXPECT_EQ(mean[i], floatToBf16(s / 3.0f));
      EXPECT_EQ(mx[i], floatToBf16(m));
    }

    std::vector<float> f = {1.0f + rank, 2.0f * rank, 7.0f}, fm(3);
    g.allReduce(f.data(), fm.data(), 3, DType::F32, Reduction::Mean);
    EXPECT_EQ(fm, (std::vector<float>{2.0f, 2.0f, 7.0f}));
    std::vector<float> rs(1);
    std::vector<float> full = {3.0f * rank, 1.0f, 6.0f};
    g.reduceScatter(full.data(), rs.data(), 1, DType::F32, Reduction::Mean);
    EXPECT_EQ(rs[0], rank == 0 ? 3.0f : rank == 1 ? 1.0f : 6.0f);

    uint8_t u8[2] = {static_cast<uint8_t>(rank + 1), static_cast<uint8_t>(250 + rank)}, u8sum[2];
    g.allReduce(u8, u8sum, 2, DType::U8, Reduction::Sum);
    EXPECT_EQ(u8sum[0], 6);
    EXPECT_EQ(u8sum[1], static_cast<uint8_t>(753)); // wraps, as MPI's uint8 sum does
    g.allReduce(u8, u8sum, 2, DType::U8, Reduction::Max);
    EXPECT_EQ(u8sum[1], 252);

    // f16 (fp16 training's gradients) the same way: 1 + 2^-11 + 2^-11
    // summed in fp32 and rounded once is 1 + 2^-10; a sum past f16's range
    // is inf, which is how an overflow reaches the gradient norm.
    float half1 = rank == 0 ? 1.0f : std::ldexp(1.0f, -11);
    uint16_t h = half::fromFloat(half1), hs = 0, hm = 0;
    g.allReduce(&h, &hs, 1, DType::F16, Reduction::Sum);
    EXPECT_EQ(half::toFloat(hs), 1.0f + std::ldexp(1.0f, -10));
    g.allReduce(&h, &hm, 1, DType::F16, Reduction::Mean);
    EXPECT_EQ(hm, half::fromFloat((1.0f + std::ldexp(1.0f, -10)) / 3.0f));
    uint16_t big = half::fromFloat(40000.0f), bigSum = 0;
    g.allReduce(&big, &bigSum, 1, DType::F16, Reduction::Sum);
    EXPECT_TRUE(std::isinf(half::toFloat(bigSum)));

    // Integer means are refused alike on every rank.
    int32_t i32 = 1;
    EXPECT_RUNTIME_ERROR(g.allReduce(&i32, &i32, 1, DType::I32, Reduction::Mean),
                         "mean reduction of i32 is not supported");
  });
}

TEST(TcpCommunicator, ResultsAreBitIdenticalOnEveryMember) {
  // Random floats whose sum depends on the order: every member must still
  // hold the same bits, and close to the exact sum.
  Mesh mesh = {{"dp", 4}};
  const size_t n = 1 << 18; // 1 MiB per rank: many partial socket reads and writes
  std::vector<std::vector<float>> results(4);
  runRanks(mesh, [&](Communicator &comm, int rank) {
    std::mt19937 rng(rank + 1);
    std::uniform_real_distribution<float> pick(-1, 1);
    std::vector<float> in(n), out(n);
    for (float &x : in) x = pick(rng);
    comm.group({"dp"}).allReduce(in.data(), out.data(), n, DType::F32, Reduction::Sum);
    results[rank] = out;
  });
  double worst = 0;
  std::vector<std::vector<float>> inputs(4, std::vector<float>(n));
  for (int r = 0; r < 4; ++r) {
    std::mt19937 rng(r + 1);
    std::uniform_real_distribution<float> pick(-1, 1);
    for (float &x : inputs[r]) x = pick(rng);
  }
  for (size_t i = 0; i < n; ++i) {
    double exact = 0;
    for (int r = 0; r < 4; ++r) exact += inputs[r][i];
    worst = std::max(worst, std::abs(results[0][i] - exact));
  }
  EXPECT_LT(worst, 1e-5);
  for (int r = 1; r < 4; ++r) EXPECT_TRUE(results[r] == results[0]) << "rank " << r;
}

TEST(TcpCommunicator, SendRecvAlongAnAxisMatchesTags) {
  Mesh mesh = {{"dp", 2}, {"tp", 2}};
  runRanks(mesh, [&](Communicator &comm, int rank) {
    std::vector<int> c = meshCoordinates(mesh, rank);
    int next = c[0] * 2 + (c[1] + 1) % 2;
    // Two messages to the next rank along tp; the receiver asks for them in
    // the opposite order (matched by tag, as MPI does).
    std::vector<int32_t> a(1000, rank), b(3, rank * 100);
    comm.send(a.data(), a.size() * 4, "tp", 1, 1, 0);
    comm.send(b.data(), b.size() * 4, "tp", 1, 2, 0);
    std::vector<int32_t> gotB(3), gotA(1000);
    comm.recv(gotB.data(), gotB.size() * 4, "tp", -1, 2, 0);
    comm.recv(gotA.data(), gotA.size() * 4, "tp", -1, 1, 0);
    EXPECT_EQ(gotA, std::vector<int32_t>(1000, next));
    EXPECT_EQ(gotB, std::vector<int32_t>(3, next * 100));
    // Along dp with a shift of 3 (= 1 modulo 2), and to itself (shift 2).
    int64_t x = rank, y = -1;
    comm.send(&x, 8, "dp", 3, 5, 0);
    comm.recv(&y, 8, "dp", 1, 5, 0);
    EXPECT_EQ(y, (rank + 2) % 4);
    comm.send(&x, 8, "dp", 2, 6, 0);
    comm.recv(&y, 8, "dp", 0, 6, 0);
    EXPECT_EQ(y, rank);
    EXPECT_RUNTIME_ERROR(comm.send(&x, 8, "pp", 1, 0, 0), "the mesh has no axis 'pp'");
  });
}

TEST(TcpCommunicator, BarrierAndWorldGatherWithRandomDelays) {
  Mesh mesh = {{"dp", 3}};
  CommOptions options;
  options.debugMaxDelayMs = 20;
  runRanks(
      mesh,
      [&](Communicator &comm, int rank) {
        for (int round = 0; round < 5; ++round) {
          std::vector<uint64_t> all = comm.allGatherWorld(100 + rank + round);
          EXPECT_EQ(all, (std::vector<uint64_t>{100u + round, 101u + round, 102u + round}));
          comm.barrier();
        }
      },
      options);
}

TEST(TcpCommunicator, WorldSizeMustMatchTheMesh) {
  Mesh mesh = {{"dp", 2}};
  EXPECT_RUNTIME_ERROR(makeTcpCommunicator(mesh, launchOf(0, 3, freePort()), CommOptions{}),
                       "the artifact was compiled for 2 ranks (mesh dp=2) but 3 were launched "
                       "(WORLD_SIZE=3); start 2 ranks with WORLD_SIZE=2");
}

TEST(TcpCommunicator, UnreachableMasterIsAnErrorNotAHang) {
  CommOptions options;
  options.timeoutSeconds = 0.5;
  auto start = std::chrono::steady_clock::now();
  EXPECT_RUNTIME_ERROR(makeTcpCommunicator({{"dp", 2}}, launchOf(1, 2, freePort()), options),
                       "rank 1: cannot reach MASTER_ADDR:MASTER_PORT (127.0.0.1:");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // And rank 0 waiting for a rank that never comes names it.
  EXPECT_RUNTIME_ERROR(makeTcpCommunicator({{"dp", 3}}, launchOf(0, 3, freePort()), options),
                       "rank 0: only 1 of 3 ranks reached MASTER_PORT=");
}

TEST(TcpCommunicator, RanksThatDisagreeOnTheWorldSizeAreRefused) {
  int port = freePort();
  CommOptions options;
  options.timeoutSeconds = 5;
  std::string error0, error1;
  std::thread r0([&] {
    try {
      makeTcpCommunicator({{"dp", 2}}, launchOf(0, 2, port), options);
    } catch (const std::exception &e) {
      error0 = e.what();
    }
  });
  std::thread r1([&] {
    try {
      makeTcpCommunicator({{"dp", 4}}, launchOf(1, 4, port), options);
    } catch (const std::exception &e) {
      error1 = e.what();
    }
  });
  r0.join();
  r1.join();
  EXPECT_NE(error0.find("rank 0: rank 1 was started with world size 4 but rank 0 with 2"),
            std::string::npos)
      << error0;
  EXPECT_NE(
      error1.find("rank 1: rank 0 refused the start-up: rank 1 was started with world size 4"),
      std::string::npos)
      << error1;
}

TEST(TcpCommunicator, SilentPeerTimesOutNamingRankOperationAndPeer) {
  CommOptions options;
  options.timeoutSeconds = 0.5;
  std::vector<std::string> errors = runRanksCollectingErrors(
      {{"dp", 2}},
      [&](Communicator &comm, int rank) {
        float x = 1;
        if (rank == 1) {
          // Alive and connected, but late: rank 0 must give up on its own.
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return;
        }
        comm.group({"dp"}).allReduce(&x, &x, 1, DType::F32, Reduction::Sum);
      },
      options);
  EXPECT_NE(errors[0].find("rank 0: all_reduce over [dp] has not completed after 0.5 s: a peer "
                           "rank died or stopped answering (still waiting for data from rank 1)"),
            std::string::npos)
      << errors[0];
}

TEST(TcpCommunicator, FinishedPeerIsNotMistakenForADeadOne) {
  // Rank 1 leaves right after the last collective; rank 0 is still busy with
  // it (slow) and must complete normally, then fail only when it asks rank 1
  // for more.
  std::vector<std::string> errors = runRanksCollectingErrors(
      {{"dp", 2}}, [&](Communicator &comm, int rank) {
        std::vector<float> v(1 << 16, 1.0f);
        if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        comm.group({"dp"}).allReduce(v.data(), v.data(), v.size(), DType::F32, Reduction::Sum);
        EXPECT_EQ(v[12345], 2.0f);
        if (rank == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          comm.barrier();
        }
      });
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[0].find("rank 0: barrier: rank 1 has already finished"), std::string::npos)
      << errors[0];
}

TEST(TcpCommunicator, DeadPeerIsNamedWithoutWaitingForTheTimeout) {
  // Three processes; rank 2 dies (no goodbye, the kernel closes its sockets)
  // while ranks 0 and 1 are in an all-reduce with it.
  test::TempDir dir;
  int port = freePort();
  std::vector<pid_t> pids;
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string result = "finished";
      try {
        CommOptions options;
        options.timeoutSeconds = 60;
        auto comm = makeTcpCommunicator({{"dp", 3}}, launchOf(r, 3, port), options);
        float x = 1;
        comm->group({"dp"}).allReduce(&x, &x, 1, DType::F32, Reduction::Sum);
        if (r == 2) ::_exit(0);
        comm->group({"dp"}).allReduce(&x, &x, 1, DType::F32, Reduction::Sum);
      } catch (const std::exception &e) {
        result = e.what();
      }
      test::writeBytes(dir.file("rank" + std::to_string(r)), result);
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    // Bounded wait: a hang fails the test instead of stalling it.
    for (int i = 0; i < 300 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (::waitpid(pid, &status, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "a rank hung";
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  for (int r = 0; r < 2; ++r) {
    std::string result = test::readBytes(dir.file("rank" + std::to_string(r)));
    // Directly, or passed on by the other survivor ("rank 1 failed: ...").
    EXPECT_EQ(result.rfind("rank " + std::to_string(r) + ": all_reduce over [dp]: ", 0), 0u)
        << result;
    EXPECT_NE(result.find("lost the connection to rank 2 (it exited or died)"), std::string::npos)
        << result;
  }
}

namespace {

/// Sets environment variables for one test and restores them after.
class Environment {
public:
  Environment() {
    for (const char *name :
         {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID",
          "SLURM_NTASKS", "SLURM_STEP_ID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
          "SLURM_NODEID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
          "SLURM_JOB_ID", "TORCHELASTIC_USE_AGENT_STORE"}) {
      const char *v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~Environment() {
    for (auto &[name, v] : saved_)
      v ? ::setenv(name.c_str(), v->c_str(), 1) : ::unsetenv(name.c_str());
  }
  void set(const char *name, const char *value) { ::setenv(name, value, 1); }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

} // namespace

TEST(LaunchEnvironment, NothingSetIsOneRank) {
  Environment env;
  LaunchEnvironment launch = readLaunchEnvironment();
  EXPECT_EQ(launch.worldSize, 1);
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.sizeVariable, "");
}

TEST(LaunchEnvironment, TorchrunStyle) {
  Environment env;
  env.set("RANK", "3");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_WORLD_SIZE", "4");
  env.set("MASTER_ADDR", "10.0.0.1");
  env.set("MASTER_PORT", "29500");
  LaunchEnvironment launch = readLaunchEnvironment();
  EXPECT_EQ(launch.rank, 3);
  EXPECT_EQ(launch.worldSize, 8);
  EXPECT_EQ(launch.localWorldSize, 4);
  EXPECT_EQ(launch.masterAddr, "10.0.0.1");
  EXPECT_EQ(launch.masterPort, 29500);
  EXPECT_EQ(launch.sizeVariable, "WORLD_SIZE");
  // torchrun's agent holds MASTER_PORT for its own store.
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  EXPECT_EQ(readLaunchEnvironment().masterPort, 29501);
}

TEST(LaunchEnvironment, BadVariablesAreNamed) {
  Environment env;
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  env.set("WORLD_SIZE", "4");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "WORLD_SIZE=4 is set but RANK is not");
  env.set("RANK", "4");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "RANK=4 but WORLD_SIZE=4: ranks are 0..3");
  env.set("RANK", "two");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "RANK='two' is not a number");
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "0");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "WORLD_SIZE=0 is out of range");
  env.set("WORLD_SIZE", "4");
  env.set("MASTER_PORT", "70000");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "MASTER_PORT=70000 is out of range");
  ::unsetenv("MASTER_PORT");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "MASTER_PORT is not set");
  ::unsetenv("MASTER_ADDR");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "MASTER_ADDR is not set: a WORLD_SIZE=4 launch");
  // One rank needs no rendezvous.
  env.set("WORLD_SIZE", "1");
  env.set("RANK", "0");
  EXPECT_EQ(readLaunchEnvironment().worldSize, 1);
}

TEST(LaunchEnvironment, SlurmStyleWithFallbacks) {
  Environment env;
  env.set("SLURM_NTASKS", "6");
  env.set("SLURM_PROCID", "4");
  // A batch script (no step) is one process, whatever its allocation.
  EXPECT_EQ(readLaunchEnvironment().worldSize, 1);
  env.set("SLURM_STEP_ID", "0");
  env.set("SLURM_TASKS_PER_NODE", "4,2");
  env.set("SLURM_NODEID", "1");
  env.set("SLURM_STEP_NODELIST", "gpu[007-009,012]");
  env.set("SLURM_JOB_ID", "123456");
  LaunchEnvironment launch = readLaunchEnvironment();
  EXPECT_EQ(launch.rank, 4);
  EXPECT_EQ(launch.worldSize, 6);
  EXPECT_EQ(launch.localWorldSize, 2);
  EXPECT_EQ(launch.masterAddr, "gpu007");
  EXPECT_EQ(launch.masterPort, 12000 + 123456 % 20000);
  EXPECT_EQ(launch.sizeVariable, "SLURM_NTASKS");
  env.set("SLURM_NTASKS_PER_NODE", "3");
  env.set("MASTER_ADDR", "head");
  env.set("MASTER_PORT", "4000");
  launch = readLaunchEnvironment();
  EXPECT_EQ(launch.localWorldSize, 3);
  EXPECT_EQ(launch.masterAddr, "head");
  EXPECT_EQ(launch.masterPort, 4000);
  env.set("SLURM_PROCID", "6");
  EXPECT_RUNTIME_ERROR(readLaunchEnvironment(), "SLURM_PROCID=6 but SLURM_NTASKS=6");
}

TEST(LaunchEnvironment, SlurmLists) {
  EXPECT_EQ(firstSlurmHost("gpu[003-010,012],cpu1"), "gpu003");
  EXPECT_EQ(firstSlurmHost("node7,node8"), "node7");
  EXPECT_EQ(firstSlurmHost("rack[2-3]-ib"), "rack2-ib");
  EXPECT_EQ(slurmTasksOnNode("4(x2),3", 0), 4);
  EXPECT_EQ(slurmTasksOnNode("4(x2),3", 1), 4);
  EXPECT_EQ(slurmTasksOnNode("4(x2),3", 2), 3);
  EXPECT_EQ(slurmTasksOnNode("4(x2),3", 3), 0);
  EXPECT_EQ(slurmTasksOnNode("junk", 0), 0);
}
