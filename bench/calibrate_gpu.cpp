//===- calibrate_gpu.cpp - measure a GPU for llmc plan's efficiency model -===//
//
// Times, on CUDA device 0, what `llmc plan` prices kernels with
// (compiler/plan/Efficiency.h) and writes it as a calibration file that
// `llmc plan --calibration FILE` reads (compiler/plan/Calibration.h):
//
// - bf16 GEMMs through llmc's registered CUDA `matmul` (cuBLASLt): an 8192³
//   product for the large-GEMM rate, and the block GEMMs of GPT-2 124M
//   (B = 16, T = 1024) and of the 1.5B shape (B = 8) to set beside the
//   wave model's prediction;
// - a 1 GiB device-to-device `copy` (bytes read plus written per second);
// - llmc's `attention` and `attention_grad` (bf16, causal) as an artifact
//   binds them under `llmc-run --attention IMPL` (default auto: cuDNN's
//   fused flash attention where it takes the op, with the workspace
//   `llmc compile --target cuda` plans), at head dims 64 and 128 over
//   sequences 1k-8k, with FlashAttention's FLOP count (4·B·H·T²·D / 2
//   forward, 2.5× backward), and what each shape was bound to;
// - the device time of one small kernel launched back to back.
//
// The datasheet peak is not measured (it is the preset's, or --gpu-tflops):
// MFU divides by it.
//
// Usage: llmc-bench-calibrate [-o FILE] [--attention auto|cudnn|tensor-cores|cuda-cores]
//
//===----------------------------------------------------------------------===//

#include "kernels/AttentionImpl.h"
#include "kernels/Kernel.h"
#include "common/AttentionWorkspace.h"
#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/Device.h"

#include "DeviceTensor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace llmc;
using llmc::bench::DeviceTensor;

namespace {

std::unique_ptr<Kernel> bind(const char *name, std::vector<TensorView> in,
                             std::vector<TensorView> out, const KernelAttrs &attrs) {
  KernelArgs args{std::move(in), std::move(out), attrs};
  std::string error;
  KernelFactory factory = findKernel(Backend::CUDA, name);
  std::unique_ptr<Kernel> kernel = factory ? factory(args, error) : nullptr;
  if (!kernel) {
    std::fprintf(stderr, "llmc-bench-calibrate: cannot bind %s: %s\n", name,
                 factory ? error.c_str() : "no CUDA kernel of that name");
    std::exit(1);
  }
  return kernel;
}

/// Milliseconds per run of `kernels` in order: two warm-up rounds, then
/// as many rounds as fill about 200 ms (at least 3).
double timeMs(const std::vector<Kernel *> &kernels) {
  StepContext ctx;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto rounds = [&](int n) {
    cudaEventRecord(start);
    for (int i = 0; i < n; ++i)
      for (Kernel *k : kernels) k->run(ctx);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return static_cast<double>(ms) / n;
  };
  double once = rounds(2);
  int n = std::max(3, static_cast<int>(200.0 / std::max(once, 1e-3)));
  double ms = rounds(std::min(n, 10000));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cuda::synchronize();
  return ms;
}

struct Gemm {
  const char *what;
  int64_t m, n, k;
};

/// TFLOP/s of c[m, n] = a[m, k]·b[k, n] in bf16 through llmc's matmul.
double gemmTflops(const Gemm &g) {
  DeviceTensor a(DType::BF16, {g.m, g.k}), b(DType::BF16, {g.k, g.n}), c(DType::BF16, {g.m, g.n});
  a.randomize(1, 0.5f), b.randomize(2, 0.5f);
  auto matmul = bind("matmul", {a.view, b.view}, {c.view}, KernelAttrs());
  return 2.0 * g.m * g.n * g.k / timeMs({matmul.get()}) / 1e9;
}

/// Bytes read plus written per second by a 1 GiB device-to-device copy.
double copyGBs() {
  const int64_t n = (1ll << 30) / 2;
  DeviceTensor x(DType::BF16, {n}), y(DType::BF16, {n});
  cuda::deviceFill(x.view.data, 0, x.view.bytes());
  auto copy = bind("copy", {x.view}, {y.view}, KernelAttrs());
  return 2.0 * x.view.bytes() / timeMs({copy.get()}) / 1e6;
}

/// Microseconds per launch of a one-element fill, back to back.
double kernelOverheadUs() {
  DeviceTensor x(DType::F32, {1});
  KernelAttrs attrs;
  attrs.setFloat("value", 1.0);
  auto fill = bind("fill", {}, {x.view}, attrs);
  std::vector<Kernel *> many(1000, fill.get());
  return timeMs(many) * 1e3 / many.size();
}

struct Attention {
  int64_t headDim, heads, seq, batch;
};

/// The workspace `llmc compile --target cuda` plans for cuDNN (bytes; 0
/// where cuDNN would refuse the op).
int64_t plannedWorkspace(const Attention &a, bool backward) {
  contracts::CudnnAttentionShape s;
  s.halfPrecision = true, s.elementBytes = 2;
  s.b = a.batch, s.t = s.s = a.seq, s.h = s.kv = a.heads, s.d = a.headDim, s.backward = backward;
  return contracts::cudnnAttentionWorkspaceBytes(s);
}

/// TFLOP/s of causal attention forward and backward together, and in
/// `bound` what the kernels were bound to (the runtime's attention lines).
double attentionTflops(const Attention &s, std::string &bound) {
  int64_t B = s.batch, T = s.seq, H = s.heads, D = s.headDim;
  DeviceTensor q(DType::BF16, {B, T, H, D}), k(DType::BF16, {B, T, H, D}),
      v(DType::BF16, {B, T, H, D}), out(DType::BF16, {B, T, H, D}), lse(DType::F32, {B, H, T}),
      dout(DType::BF16, {B, T, H, D}), dq(DType::BF16, {B, T, H, D}),
      dk(DType::BF16, {B, T, H, D}), dv(DType::BF16, {B, T, H, D}),
      forwardWorkspace(DType::U8, {std::max<int64_t>(1, plannedWorkspace(s, false))}),
      backwardWorkspace(DType::U8, {std::max<int64_t>(1, plannedWorkspace(s, true))});
  q.randomize(1, 0.5f), k.randomize(2, 0.5f), v.randomize(3, 0.5f), dout.randomize(4, 0.5f);
  KernelAttrs attrs;
  attrs.setFloat("scale", 1.0 / std::sqrt(static_cast<double>(D)));
  attrs.setInt("causal", 1);
  std::vector<TensorView> forwardOut = {out.view, lse.view}, backwardOut = {dq.view, dk.view, dv.view};
  if (plannedWorkspace(s, false) > 0) forwardOut.push_back(forwardWorkspace.view);
  if (plannedWorkspace(s, true) > 0) backwardOut.push_back(backwardWorkspace.view);
  cuda::takeAttentionNotes();
  auto forward = bind("attention", {q.view, k.view, v.view}, forwardOut, attrs);
  auto backward = bind("attention_grad",
                       {q.view, k.view, v.view, out.view, lse.view, dout.view}, backwardOut, attrs);
  bound.clear();
  for (const std::string &line : cuda::takeAttentionNotes())
    bound += (bound.empty() ? "" : "; ") + line;
  double flops = 3.5 * 4.0 * B * H * T * T * D / 2;
  return flops / timeMs({forward.get(), backward.get()}) / 1e9;
}

/// JSON string contents: quotes and backslashes escaped.
std::string jsonText(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string today() {
  char buffer[16];
  std::time_t now = std::time(nullptr);
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d", std::gmtime(&now));
  return buffer;
}

} // namespace

int main(int argc, char **argv) {
  const char *outPath = nullptr;
  AttentionImpl impl = AttentionImpl::Auto;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc) {
      outPath = argv[++i];
    } else if (arg == "--attention" && i + 1 < argc && parseAttentionImpl(argv[i + 1], &impl)) {
      ++i;
    } else {
      std::fprintf(stderr, "usage: llmc-bench-calibrate [-o FILE] [--attention IMPL], IMPL: %s\n",
                   attentionImplChoices());
      return 2;
    }
  }
  std::string why;
  if (cuda::deviceCount(&why) == 0) {
    std::fprintf(stderr, "llmc-bench-calibrate: no usable CUDA device (%s)\n", why.c_str());
    return 1;
  }
  cuda::setAttentionImpl(impl);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int clockKHz = 0;
  cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, 0);

  const Gemm large{"8192³", 8192, 8192, 8192};
  const std::vector<Gemm> gemms = {
      {"124M qkv", 16384, 2304, 768},   {"124M proj", 16384, 768, 768},
      {"124M fc", 16384, 3072, 768},    {"124M fc proj", 16384, 768, 3072},
      {"1.5B qkv", 8192, 4800, 1600},   {"1.5B proj", 8192, 1600, 1600},
      {"1.5B fc", 8192, 6400, 1600},    {"1.5B fc proj", 8192, 1600, 6400},
      {"one partial wave", 2048, 2304, 2304}, {"4096³", 4096, 4096, 4096}};
  const std::vector<Attention> attentions = {
      {64, 12, 1024, 16}, {64, 16, 2048, 8},  {64, 16, 4096, 4},
      {128, 16, 1024, 16}, {128, 16, 2048, 8}, {128, 16, 4096, 4}, {128, 16, 8192, 2}};

  double largeTflops = gemmTflops(large);
  std::fprintf(stderr, "GEMM %s: %.1f TFLOP/s\n", large.what, largeTflops);
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line),
                "{\n \"kind\": \"llmc-gpu-calibration\",\n \"schema\": 1,\n"
                " \"device\": \"%s\",\n \"date\": \"%s\",\n \"compute_capability\": \"%d.%d\",\n"
                " \"sms\": %d,\n \"clock_mhz\": %d,\n \"memory_bytes\": %zu,\n",
                prop.name, today().c_str(), prop.major, prop.minor, prop.multiProcessorCount,
                clockKHz / 1000, static_cast<size_t>(prop.totalGlobalMem));
  out += line;
  double bandwidth = copyGBs(), overhead = kernelOverheadUs();
  std::fprintf(stderr, "copy: %.1f GB/s; one small kernel: %.2f us\n", bandwidth, overhead);
  std::snprintf(line, sizeof(line),
                " \"bandwidth_gbs\": %.1f,\n \"kernel_overhead_us\": %.2f,\n"
                " \"gemm\": {\"dtype\": \"bf16\", \"large_tflops\": %.1f, "
                "\"large_shape\": [%lld, %lld, %lld], \"shapes\": [",
                bandwidth, overhead, largeTflops, static_cast<long long>(large.m),
                static_cast<long long>(large.n), static_cast<long long>(large.k));
  out += line;
  for (size_t i = 0; i < gemms.size(); ++i) {
    const Gemm &g = gemms[i];
    double tflops = gemmTflops(g);
    std::fprintf(stderr, "GEMM %s %lld×%lld×%lld: %.1f TFLOP/s\n", g.what,
                 static_cast<long long>(g.m), static_cast<long long>(g.n),
                 static_cast<long long>(g.k), tflops);
    std::snprintf(line, sizeof(line),
                  "%s\n  {\"what\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"tflops\": %.1f}",
                  i ? "," : "", g.what, static_cast<long long>(g.m), static_cast<long long>(g.n),
                  static_cast<long long>(g.k), tflops);
    out += line;
  }
  std::snprintf(line, sizeof(line), "]},\n \"attention_impl\": \"%s\",\n \"attention\": [",
                attentionImplName(impl));
  out += line;
  for (size_t i = 0; i < attentions.size(); ++i) {
    const Attention &a = attentions[i];
    std::string bound;
    double tflops = attentionTflops(a, bound);
    std::fprintf(stderr, "attention D=%lld H=%lld T=%lld B=%lld: %.1f TFLOP/s (%s)\n",
                 static_cast<long long>(a.headDim), static_cast<long long>(a.heads),
                 static_cast<long long>(a.seq), static_cast<long long>(a.batch), tflops,
                 bound.c_str());
    std::snprintf(line, sizeof(line),
                  "%s\n  {\"head_dim\": %lld, \"heads\": %lld, \"seq\": %lld, \"batch\": %lld, "
                  "\"tflops\": %.1f, \"bound\": \"",
                  i ? "," : "", static_cast<long long>(a.headDim), static_cast<long long>(a.heads),
                  static_cast<long long>(a.seq), static_cast<long long>(a.batch), tflops);
    out += line + jsonText(bound) + "\"}";
  }
  out += "]\n}\n";
  if (!outPath) {
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  FILE *file = std::fopen(outPath, "w");
  if (!file || std::fputs(out.c_str(), file) < 0 || std::fclose(file) != 0) {
    std::fprintf(stderr, "llmc-bench-calibrate: cannot write %s\n", outPath);
    return 1;
  }
  return 0;
}
