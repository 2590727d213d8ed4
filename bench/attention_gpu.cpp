//===- attention_gpu.cpp - the CUDA attention kernels' throughput ---------===//
//
// Times the registered CUDA `attention` and `attention_grad` kernels (bf16,
// causal) as each `llmc-run --attention` choice binds them — llmc's CUDA
// cores, its tensor cores and cuDNN's fused flash attention (with the
// workspace `llmc compile --target cuda` plans) — at sequence lengths 1k–8k
// with B·T = 16k tokens, and prints TFLOP/s as JSON lines for
// bench/attention_gpu.sh, which runs PyTorch's scaled_dot_product_attention
// on the same shapes in the same run. A choice whose kernels fall back
// (cuDNN not loaded, a shape refused) is reported as null with the reason.
// FLOPs follow FlashAttention's convention: forward 4·B·H·T²·D / 2
// (causal), backward 2.5× the forward.
//
// Usage: llmc-bench-attention [head_dim] [heads] [iterations]
//
//===----------------------------------------------------------------------===//

#include "kernels/Kernel.h"
#include "common/AttentionWorkspace.h"
#include "kernels/cuda/AttentionChoice.h"
#include "kernels/cuda/Device.h"

#include "DeviceTensor.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace llmc;
using llmc::bench::DeviceTensor;

namespace {

std::unique_ptr<Kernel> bind(const char *name, std::vector<TensorView> in,
                             std::vector<TensorView> out, double scale) {
  KernelArgs args{std::move(in), std::move(out), {}};
  args.attrs.setFloat("scale", scale);
  args.attrs.setInt("causal", 1);
  std::string error;
  KernelFactory factory = findKernel(Backend::CUDA, name);
  std::unique_ptr<Kernel> kernel = factory ? factory(args, error) : nullptr;
  if (!kernel) {
    std::fprintf(stderr, "cannot bind %s: %s\n", name, error.c_str());
    std::exit(1);
  }
  return kernel;
}

/// Milliseconds per run of `kernel`, after two warm-up runs.
double time(Kernel &kernel, int iterations) {
  StepContext ctx;
  kernel.run(ctx);
  kernel.run(ctx);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < iterations; ++i) kernel.run(ctx);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

/// The implementations compared, as `llmc-run --attention` names them, and
/// the prefix of their JSON keys.
struct Variant {
  AttentionImpl impl;
  const char *name, *prefix;
};
constexpr Variant kVariants[] = {{AttentionImpl::CudaCores, "cuda-cores", ""},
                                 {AttentionImpl::TensorCores, "tensor-cores", "tc_"},
                                 {AttentionImpl::Cudnn, "cudnn", "cudnn_"}};

/// The workspace `llmc compile --target cuda` plans for cuDNN (bytes).
int64_t plannedWorkspace(int64_t B, int64_t T, int64_t H, int64_t D, bool backward) {
  contracts::CudnnAttentionShape s;
  s.halfPrecision = true, s.elementBytes = 2;
  s.b = B, s.t = s.s = T, s.h = s.kv = H, s.d = D, s.backward = backward;
  return contracts::cudnnAttentionWorkspaceBytes(s);
}

/// "" when every kernel bound since the last call runs `impl`, else the notes.
std::string fallbackNotes(const char *impl) {
  std::string notes;
  for (const std::string &line : cuda::takeAttentionNotes())
    if (line.rfind(std::string("attention: ") + impl + " for ", 0) != 0 || line.back() == ')')
      notes += (notes.empty() ? "" : "; ") + line;
  return notes;
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

} // namespace

int main(int argc, char **argv) {
  int64_t D = argc > 1 ? std::atoll(argv[1]) : 128;
  int64_t H = argc > 2 ? std::atoll(argv[2]) : 16;
  int iterations = argc > 3 ? std::atoi(argv[3]) : 10;
  std::string why;
  if (cuda::deviceCount(&why) == 0) {
    std::fprintf(stderr, "no usable CUDA device (%s)\n", why.c_str());
    return 1;
  }
  for (int64_t T : {1024, 2048, 4096, 8192}) {
    int64_t B = std::max<int64_t>(1, 16384 / T);
    DeviceTensor q(DType::BF16, {B, T, H, D}), k(DType::BF16, {B, T, H, D}),
        v(DType::BF16, {B, T, H, D}), out(DType::BF16, {B, T, H, D}),
        lse(DType::F32, {B, H, T}), dout(DType::BF16, {B, T, H, D}),
        dq(DType::BF16, {B, T, H, D}), dk(DType::BF16, {B, T, H, D}),
        dv(DType::BF16, {B, T, H, D});
    q.randomize(1), k.randomize(2), v.randomize(3), dout.randomize(4);
    double scale = 1.0 / std::sqrt(static_cast<double>(D));
    double fwdFlops = 4.0 * B * H * T * T * D / 2.0, bwdFlops = 2.5 * fwdFlops;
    std::printf("{\"seq\": %lld, \"batch\": %lld, \"heads\": %lld, \"head_dim\": %lld",
                static_cast<long long>(T), static_cast<long long>(B),
                static_cast<long long>(H), static_cast<long long>(D));
    DeviceTensor forwardWorkspace(DType::U8, {plannedWorkspace(B, T, H, D, false)}),
        backwardWorkspace(DType::U8, {plannedWorkspace(B, T, H, D, true)});
    for (const Variant &variant : kVariants) {
      cuda::setAttentionImpl(variant.impl);
      cuda::takeAttentionNotes();
      auto forward = bind("attention", {q.view, k.view, v.view},
                          {out.view, lse.view, forwardWorkspace.view}, scale);
      auto backward = bind("attention_grad",
                           {q.view, k.view, v.view, out.view, lse.view, dout.view},
                           {dq.view, dk.view, dv.view, backwardWorkspace.view}, scale);
      const char *prefix = variant.prefix;
      if (std::string notes = fallbackNotes(variant.name); !notes.empty()) {
        std::printf(", \"%sfwd_bwd_tflops\": null, \"%snote\": \"%s\"", prefix, prefix,
                    jsonText(notes).c_str());
        continue;
      }
      double fwdMs = time(*forward, iterations), bwdMs = time(*backward, iterations);
      cuda::synchronize();
      std::printf(", \"%sfwd_tflops\": %.1f, \"%sbwd_tflops\": %.1f, \"%sfwd_bwd_tflops\": %.1f",
                  prefix, fwdFlops / fwdMs / 1e9, prefix, bwdFlops / bwdMs / 1e9, prefix,
                  (fwdFlops + bwdFlops) / (fwdMs + bwdMs) / 1e9);
    }
    std::printf("}\n");
  }
  return 0;
}
