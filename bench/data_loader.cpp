//===- data_loader.cpp - throughput and memory of the data loader alone ---===//
//
// Opens a dataset as llmc-run does (memory-mapped shards) and fills batches
// of `rows` x T tokens, the inputs and targets a training step receives,
// until `tokens` tokens have been read (default: one epoch). Prints one JSON
// line: the open time, tokens/s and the process's peak resident memory, so
// bench/data_loader.sh can show that memory follows the shard size, not the
// dataset's. --cold first asks the kernel to drop the shards from the page
// cache, so the tokens come from the disk.
//
// Usage: llmc-bench-data <data-spec> [T] [rows] [tokens] [--cold]
//
//===----------------------------------------------------------------------===//

#include "runtime/data/DataLoader.h"
#include "runtime/data/Dataset.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace llmc;

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// This process's resident memory now (MiB): the baseline of the libraries
/// before any data is touched.
double residentMiB() {
  FILE *f = std::fopen("/proc/self/status", "r");
  char line[256];
  double kib = 0;
  while (f && std::fgets(line, sizeof(line), f))
    if (std::sscanf(line, "VmRSS: %lf", &kib) == 1) break;
  if (f) std::fclose(f);
  return kib / 1024.0;
}

void dropFromPageCache(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}
} // namespace

int main(int argc, char **argv) try {
  std::vector<std::string> args;
  bool cold = false;
  for (int i = 1; i < argc; ++i)
    std::strcmp(argv[i], "--cold") == 0 ? void(cold = true) : args.push_back(argv[i]);
  if (args.empty()) {
    std::fprintf(stderr, "usage: llmc-bench-data <data-spec> [T] [rows] [tokens] [--cold]\n");
    return 1;
  }
  int64_t T = args.size() > 1 ? std::atoll(args[1].c_str()) : 1024;
  int64_t rows = args.size() > 2 ? std::atoll(args[2].c_str()) : 64;
  if (cold)
    for (const std::string &path : expandDataSpec(args[0])) dropFromPageCache(path);

  double baseline = residentMiB();
  double t0 = now();
  Dataset data = openDataset(args[0]);
  DataLoader loader(data, T, 1337, 1 << 30);
  double opened = now() - t0;
  int64_t tokens = args.size() > 3 ? std::atoll(args[3].c_str()) : loader.windows() * T;
  int64_t batches = std::max<int64_t>(1, tokens / (rows * T));
  std::vector<int32_t> x(static_cast<size_t>(rows * T)), y(x.size());
  int64_t checksum = 0;
  double t1 = now();
  for (int64_t b = 0; b < batches; ++b) {
    loader.fill(b, rows, 0, rows, x.data(), y.data());
    checksum += x[static_cast<size_t>(b % (rows * T))];
  }
  double seconds = now() - t1;
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  std::printf("{\"dataset_tokens\": %lld, \"shards\": %zu, \"T\": %lld, \"rows\": %lld, "
              "\"cold\": %s, \"open_s\": %.4f, \"tokens_read\": %lld, \"seconds\": %.3f, "
              "\"tokens_per_s\": %.0f, \"rss_before_mib\": %.1f, \"peak_rss_mib\": %.1f, "
              "\"checksum\": %lld}\n",
              static_cast<long long>(data.tokens()), data.shards.size(),
              static_cast<long long>(T), static_cast<long long>(rows), cold ? "true" : "false",
              opened, static_cast<long long>(batches * rows * T), seconds,
              static_cast<double>(batches * rows * T) / seconds, baseline, usage.ru_maxrss / 1024.0,
              static_cast<long long>(checksum));
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "llmc-bench-data: error: %s\n", e.what());
  return 1;
}
