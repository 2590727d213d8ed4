//===- allreduce_tcp.cpp - all-reduce bandwidth of the TCP transport ------===//
//
// One rank of an fp32 sum all-reduce benchmark over the TCP communicator
// (the one llmc-run uses when started without mpirun). Started like
// llmc-run, with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; rank 0 prints
// one JSON line per message size for bench/allreduce_tcp.sh. Each size runs a
// few warm-up all-reduces, then times each of `iterations` separately
// (barrier first, so every rank starts together); the median is reported
// with the algorithm bandwidth (bytes / time) and the bus bandwidth
// (algorithm bandwidth x 2(p-1)/p, NCCL's convention: what each link
// carries in a ring).
//
// Usage: llmc-bench-allreduce [min_bytes] [max_bytes]
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/TcpCommunicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

using namespace llmc;

int main(int argc, char **argv) {
  size_t minBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4096;
  size_t maxBytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64u << 20;
  try {
    LaunchEnvironment launch = readLaunchEnvironment();
    Mesh mesh = {{"dp", launch.worldSize}};
    std::unique_ptr<Communicator> comm = makeTcpCommunicator(mesh, launch, CommOptions{});
    CommGroup &group = comm->group({"dp"});
    int p = group.size();
    std::vector<float> data(maxBytes / sizeof(float));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i + launch.rank) % 13);
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
      size_t n = bytes / sizeof(float);
      // About 1 GiB through each size, within [5, 200] timed calls.
      int iterations = static_cast<int>(std::clamp<size_t>((1u << 30) / bytes, 5, 200));
      for (int i = 0; i < 3; ++i)
        group.allReduce(data.data(), data.data(), n, DType::F32, Reduction::Sum);
      std::vector<double> seconds;
      for (int i = 0; i < iterations; ++i) {
        comm->barrier();
        auto start = std::chrono::steady_clock::now();
        group.allReduce(data.data(), data.data(), n, DType::F32, Reduction::Sum);
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        // Keep the values small: repeated sums would overflow to inf.
        if (i % 8 == 7)
          std::fill(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(n), 1.0f);
      }
      std::sort(seconds.begin(), seconds.end());
      double median = seconds[seconds.size() / 2];
      double algbw = static_cast<double>(bytes) / median / 1e9;
      if (launch.rank == 0)
        std::printf("{\"ranks\": %d, \"bytes\": %zu, \"iterations\": %d, \"us\": %.1f, "
                    "\"algbw_gbs\": %.3f, \"busbw_gbs\": %.3f}\n",
                    p, bytes, iterations, median * 1e6, algbw, algbw * 2.0 * (p - 1) / p);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "llmc-bench-allreduce: error: %s\n", e.what());
    return 1;
  }
}
