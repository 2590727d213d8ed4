//===- gemm_cpu.cpp - the fp32 FMA peak and OpenBLAS on GPT-2's GEMMs -----===//
//
// How close do the GEMMs of a GPT-2 124M training step come to what the
// cores can do? Two measurements, on the same threads:
//
//  - the fp32 FMA peak: a loop of independent FMA chains that never leaves
//    the registers (AVX-512 where the CPU has avx512f, and AVX2/FMA; chosen
//    at run time, so the binary needs no -march), on one thread and on N;
//  - OpenBLAS's sgemm, loaded as the CPU kernels load it (kernels/cpu/
//    blas.cpp: same library, same core type), at every distinct GEMM shape
//    of one step at B=4 and each T: per linear layer the forward x·w, the
//    input gradient dy·wᵀ and the weight gradient xᵀ·dy (w is [K, N]), and
//    the fused LM head's three products per chunk of rows, with the chunk
//    size the llmc-fuse pass picks (`--fuse-chunk-mb`, default 256 MiB of
//    logits; w is the tied [V, D] embedding).
//
// Each shape runs once to warm up, then until it has run 3 times and for
// `--min-ms`; the best and the median are printed. `--rows FILE` writes the
// shapes and rates for bench/torch_gemm.py, which times the same calls
// through PyTorch.
//
// Other programs on the machine lower both; the N-thread peak is measured
// again after each table (and alone with --peak-only), so a run that was
// disturbed shows it.
//
// Usage: llmc-bench-gemm [--threads N] [--seq T]... [--chunk-mb MB] [--min-ms MS]
//                        [--rows FILE] [--peak-only]
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Blas.h"

#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

/// "<model name> (family F, model M)" from /proc/cpuinfo: VMs often shorten
/// the name ("AMD EPYC"), the family and model still tell the core.
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown", family, model;
  auto value = [](const std::string &l) { return l.substr(l.find(':') + 2); };
  while (std::getline(in, line) && !line.empty()) { // the first processor's block
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model\t", 0) == 0) model = value(line);
  }
  return name + " (family " + family + ", model " + model + ")";
}

/// The MHz /proc/cpuinfo gives (nominal on VMs), 0 if none.
double cpuMhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str());
  return 0;
}

// ---- the FMA peak ---------------------------------------------------------
//
// Independent chains hide the FMA latency (4 cycles, up to 2 issued per
// cycle: 8 chains in flight); 16 zmm or 12 ymm accumulators leave room on
// every x86 core. Each chain is a = a·m + c with m just under 1, so values
// stay normal and the compiler cannot fold anything.

#define LLMC_CHAINS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define LLMC_CHAINS_16(X) LLMC_CHAINS_12(X) X(12) X(13) X(14) X(15)

__attribute__((target("avx512f"))) float fmaLoopAvx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
#define DECLARE(i) __m512 a##i = _mm512_set1_ps(1.0f + (i) * 1e-3f);
  LLMC_CHAINS_16(DECLARE)
#undef DECLARE
  for (int64_t it = 0; it < iters; ++it) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
    LLMC_CHAINS_16(STEP)
#undef STEP
  }
  __m512 sum = _mm512_setzero_ps();
#define SUM(i) sum = _mm512_add_ps(sum, a##i);
  LLMC_CHAINS_16(SUM)
#undef SUM
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
constexpr double kAvx512FlopsPerIter = 16 * 16 * 2;

__attribute__((target("avx2,fma"))) float fmaLoopAvx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
#define DECLARE(i) __m256 a##i = _mm256_set1_ps(1.0f + (i) * 1e-3f);
  LLMC_CHAINS_12(DECLARE)
#undef DECLARE
  for (int64_t it = 0; it < iters; ++it) {
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
    LLMC_CHAINS_12(STEP)
#undef STEP
  }
  __m256 sum = _mm256_setzero_ps();
#define SUM(i) sum = _mm256_add_ps(sum, a##i);
  LLMC_CHAINS_12(SUM)
#undef SUM
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
constexpr double kAvx2FlopsPerIter = 12 * 8 * 2;

struct FmaLoop {
  const char *name;
  float (*run)(int64_t);
  double flopsPerIter;
};

std::atomic<float> sink{0}; // keeps the loops' results alive

/// GFLOP/s of `threads` threads each running `loop` for about `ms`,
/// the best of `rounds`; the wall time is the slowest thread's.
double fmaGflops(const FmaLoop &loop, int threads, double ms, int rounds) {
  auto start = Clock::now();
  int64_t iters = 1 << 16;
  loop.run(iters); // calibrate
  while (seconds(start) < 0.02) loop.run(iters *= 2);
  const double perIter = seconds(start) / (2.0 * iters); // about: the doublings sum to 2·iters
  iters = std::max<int64_t>(1, static_cast<int64_t>(ms / 1000.0 / perIter));
  double best = 0;
  for (int r = 0; r < rounds; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> took(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) {
        }
        auto begin = Clock::now();
        sink.store(loop.run(iters));
        took[t] = seconds(begin);
      });
    while (ready.load() < threads) {
    }
    go.store(true);
    for (std::thread &th : pool) th.join();
    const double wall = *std::max_element(took.begin(), took.end());
    best = std::max(best, threads * iters * loop.flopsPerIter / wall / 1e9);
  }
  return best;
}

// ---- the GEMMs of a step --------------------------------------------------

struct Gemm {
  std::string label;
  bool ta, tb;
  int m, n, k;
  int count; ///< calls per training step
  double gflop() const { return 2.0 * m * n * k / 1e9; }
};

/// One GPT-2 124M step's sgemm calls at B=4 and `seq`, one entry per
/// distinct shape, in the layouts the CPU kernels pass.
std::vector<Gemm> stepGemms(int seq, double chunkMb) {
  const int rows = 4 * seq, layers = 12, d = 768, vocab = 50257;
  struct Layer {
    const char *name;
    int k, n;
  };
  const Layer linears[] = {{"qkv", d, 3 * d}, {"attn proj", d, d}, {"fc", d, 4 * d},
                           {"fc proj", 4 * d, d}};
  std::vector<Gemm> gemms;
  for (const Layer &l : linears) {
    const std::string name = l.name;
    gemms.push_back({name + " fwd", false, false, rows, l.n, l.k, layers});
    gemms.push_back({name + " dgrad", false, true, rows, l.k, l.n, layers});
    gemms.push_back({name + " wgrad", true, false, l.k, l.n, rows, layers});
  }
  // As linear-cross-entropy's chunks (passes/fuse/LinearCrossEntropy.cpp):
  // as few chunks of whole rows of f32 logits in chunk-mb as fit, of equal
  // rows.
  const int most = static_cast<int>(std::clamp<int64_t>(
      static_cast<int64_t>(chunkMb * 1024 * 1024 / (4.0 * vocab)), 1, rows));
  const int chunks = (rows + most - 1) / most;
  const int chunk = (rows + chunks - 1) / chunks;
  const int full = rows / chunk, rest = rows % chunk;
  for (auto [n, count] : {std::pair<int, int>{chunk, full}, {rest, 1}}) {
    if (n == 0 || count == 0) continue;
    const std::string rowsOf = " (" + std::to_string(n) + " rows)";
    gemms.push_back({"head logits" + rowsOf, false, true, n, vocab, d, count});
    gemms.push_back({"head dgrad" + rowsOf, false, false, n, d, vocab, count});
    gemms.push_back({"head wgrad" + rowsOf, true, false, vocab, d, n, count});
  }
  return gemms;
}

struct Timing {
  double bestMs, medianMs;
};

Timing timeGemm(llmc::cpu::SgemmFn sgemm, const Gemm &g, const float *a, const float *b, float *c,
                double minMs) {
  auto call = [&] {
    sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m,
          g.n, g.k, 1.0f, a, g.ta ? g.m : g.k, b, g.tb ? g.k : g.n, 0.0f, c, g.n);
  };
  call();
  std::vector<double> ms;
  auto start = Clock::now();
  while (ms.size() < 3 || (seconds(start) * 1000 < minMs && ms.size() < 200)) {
    auto begin = Clock::now();
    call();
    ms.push_back(seconds(begin) * 1000);
  }
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

} // namespace

int main(int argc, char **argv) {
  int threads = 0;
  double chunkMb = 256, minMs = 300;
  std::vector<int> seqs;
  const char *rowsPath = nullptr;
  bool peakOnly = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "llmc-bench-gemm: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--seq")) seqs.push_back(std::atoi(next()));
    else if (!std::strcmp(argv[i], "--chunk-mb")) chunkMb = std::atof(next());
    else if (!std::strcmp(argv[i], "--min-ms")) minMs = std::atof(next());
    else if (!std::strcmp(argv[i], "--rows")) rowsPath = next();
    else if (!std::strcmp(argv[i], "--peak-only")) peakOnly = true;
    else {
      std::fprintf(stderr, "usage: llmc-bench-gemm [--threads N] [--seq T]... [--chunk-mb MB] "
                           "[--min-ms MS] [--rows FILE] [--peak-only]\n");
      return 2;
    }
  }
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (seqs.empty()) seqs = {64, 1024};
  if (chunkMb <= 0) {
    std::fprintf(stderr, "llmc-bench-gemm: --chunk-mb must be positive\n");
    return 2;
  }
  // OpenBLAS reads its thread count once, when it is loaded (first sgemm).
  setenv("OPENBLAS_NUM_THREADS", std::to_string(threads).c_str(), 1);

  std::printf("CPU: %s, %u cores online, %.0f MHz in /proc/cpuinfo\n", cpuModel().c_str(),
              std::thread::hardware_concurrency(), cpuMhz());
  __builtin_cpu_init();
  std::vector<FmaLoop> loops;
  if (__builtin_cpu_supports("avx512f")) loops.push_back({"AVX-512", fmaLoopAvx512, kAvx512FlopsPerIter});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    loops.push_back({"AVX2/FMA", fmaLoopAvx2, kAvx2FlopsPerIter});
  if (loops.empty()) {
    std::fprintf(stderr, "llmc-bench-gemm: the CPU has neither avx512f nor avx2+fma\n");
    return 1;
  }
  double peak1 = 0, peakN = 0;
  for (const FmaLoop &loop : loops) {
    const double one = fmaGflops(loop, 1, 150, 10), all = fmaGflops(loop, threads, 150, 10);
    std::printf("fp32 FMA peak, %-8s: %7.1f GFLOP/s on 1 thread, %7.1f on %d threads\n", loop.name,
                one, all, threads);
    peak1 = std::max(peak1, one);
    peakN = std::max(peakN, all);
  }
  std::printf("peak: %.1f GFLOP/s per core, %.1f GFLOP/s on %d threads\n", peak1, peakN, threads);
  if (peakOnly) return 0;

  std::string error;
  llmc::cpu::SgemmFn sgemm = llmc::cpu::blasSgemm(error);
  if (!sgemm) {
    std::fprintf(stderr, "llmc-bench-gemm: %s\n", error.c_str());
    return 1;
  }
  int blasThreads = -1;
  std::string blasConfig = "?";
  if (void *blas = dlopen(LLMC_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_NOLOAD)) {
    if (auto get = reinterpret_cast<int (*)()>(dlsym(blas, "openblas_get_num_threads")))
      blasThreads = get();
    if (auto config = reinterpret_cast<char *(*)()>(dlsym(blas, "openblas_get_config")))
      blasConfig = config();
  }
  std::printf("OpenBLAS: %s, core %s, %d threads\n", blasConfig.c_str(),
              llmc::cpu::blasCoreName().c_str(), blasThreads);

  std::FILE *rows = rowsPath ? std::fopen(rowsPath, "w") : nullptr;
  if (rowsPath && !rows) {
    std::fprintf(stderr, "llmc-bench-gemm: cannot write %s\n", rowsPath);
    return 1;
  }
  if (rows) std::fprintf(rows, "peak %d %.3f\n", threads, peakN);
  for (int seq : seqs) {
    std::vector<Gemm> gemms = stepGemms(seq, chunkMb);
    size_t aSize = 0, bSize = 0, cSize = 0;
    for (const Gemm &g : gemms) {
      aSize = std::max<size_t>(aSize, size_t(g.m) * g.k);
      bSize = std::max<size_t>(bSize, size_t(g.k) * g.n);
      cSize = std::max<size_t>(cSize, size_t(g.m) * g.n);
    }
    // Small normal values; any pattern runs at the same speed.
    std::vector<float> a(aSize), b(bSize), c(cSize);
    for (size_t i = 0; i < aSize; ++i) a[i] = 0.01f * float(int(i * 7919 % 97) - 48);
    for (size_t i = 0; i < bSize; ++i) b[i] = 0.01f * float(int(i * 104729 % 89) - 44);

    std::printf("\nGPT-2 124M, B=4, T=%d: OpenBLAS sgemm, %d threads (row-major; count = calls "
                "per step)\n",
                seq, threads);
    std::printf("  %-26s %-2s %5s %6s %6s %5s %8s %9s %9s %8s %7s\n", "gemm", "op", "m", "n", "k",
                "count", "GFLOP", "best ms", "median ms", "GFLOP/s", "% peak");
    double stepGflop = 0, stepBestMs = 0, stepMedianMs = 0;
    for (const Gemm &g : gemms) {
      Timing t = timeGemm(sgemm, g, a.data(), b.data(), c.data(), minMs);
      const double rate = g.gflop() / t.bestMs * 1e3;
      std::printf("  %-26s %c%c %5d %6d %6d %5d %8.2f %9.2f %9.2f %8.1f %6.1f%%\n", g.label.c_str(),
                  g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, g.count, g.gflop(), t.bestMs,
                  t.medianMs, rate, 100 * rate / peakN);
      stepGflop += g.count * g.gflop();
      stepBestMs += g.count * t.bestMs;
      stepMedianMs += g.count * t.medianMs;
      if (rows)
        std::fprintf(rows, "gemm %d %d %d %d %d %d %d %.4f %.4f %s\n", seq, g.ta, g.tb, g.m, g.n,
                     g.k, g.count, t.bestMs, t.medianMs, g.label.c_str());
    }
    std::printf("  step: %.1f GFLOP of GEMMs; %.3f s at the best times (%.1f GFLOP/s), %.3f s at "
                "the medians; %.3f s at the %.1f GFLOP/s peak\n",
                stepGflop, stepBestMs / 1e3, stepGflop / stepBestMs * 1e3, stepMedianMs / 1e3,
                stepGflop / peakN, peakN);
    double again = 0;
    for (const FmaLoop &loop : loops) again = std::max(again, fmaGflops(loop, threads, 100, 5));
    std::printf("  fp32 FMA peak measured again after this table: %.1f GFLOP/s on %d threads\n",
                again, threads);
  }
  if (rows) std::fclose(rows);
  return 0;
}
