//===- head_gpu.cpp - the fused LM head's time on the GPU ----------------===//
//
// Times the registered CUDA `linear_cross_entropy_train` kernel (the LM
// head, its loss and its backward, fused) at GPT-2 124M's shape — h
// [rows, 768] bf16, w [V, 768] tied (transpose_b), rows = B·T = 16384 —
// with the vocabulary as it is (50257) and padded to a multiple of 128
// (50304, num_classes 50257, as `llmc compile --target cuda` pads it), in
// the chunks llmc-fuse would choose for a chunk budget (common/HeadScratch.h).
// Beside the whole kernel it times its parts, on the same shapes: the
// chunk's three GEMMs (`matmul`: logits, dh, dw) and its row pass
// (`cross_entropy_grad` on a chunk of logits, the kernel's loss and
// gradient code), so the split is measured, not guessed. Prints one JSON
// line per vocabulary: milliseconds, the GEMMs' TFLOP/s (6·rows·V·D, V
// the real classes) and the row pass's GB/s (a chunk read twice and written
// once, in the type), for bench/head_gpu.sh.
//
// Usage: llmc-bench-head [rows] [width] [vocab] [chunk_mb] [iterations]
//
//===----------------------------------------------------------------------===//

#include "common/HeadScratch.h"
#include "kernels/Kernel.h"
#include "kernels/cuda/Device.h"

#include "DeviceTensor.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
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
    std::fprintf(stderr, "cannot bind %s: %s\n", name, error.c_str());
    std::exit(1);
  }
  return kernel;
}

/// Milliseconds per call of `run`, after two warm-up calls.
double time(const std::function<void()> &run, int iterations) {
  run();
  run();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < iterations; ++i) run();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

struct Shape {
  int64_t rows, width, classes, vocab; ///< vocab: w's rows (classes, padded or not)
  double chunkBytes;
  int iterations;
};

/// One JSON line: the fused kernel and its parts at `s`.
void measure(const Shape &s) {
  const int64_t chunk = headChunkRows(s.rows, s.vocab, 2, s.chunkBytes);
  const int64_t chunks = (s.rows + chunk - 1) / chunk;
  DeviceTensor h(DType::BF16, {s.rows, s.width}), w(DType::BF16, {s.vocab, s.width}),
      targets(DType::I32, {s.rows}), dloss(DType::F32, {}), loss(DType::F32, {}),
      dh(DType::BF16, {s.rows, s.width}), dw(DType::BF16, {s.vocab, s.width}),
      scratch(DType::F32, {chunk + headAccumulatorRows(s.rows, s.width, chunk, true, true),
                           s.vocab});
  h.randomize(1, 1.0f);
  w.randomize(2, 0.02f, s.classes * s.width); // the padding's rows are zeros
  targets.ids(3, s.classes);
  dloss.scalar(1.0f);
  StepContext ctx;

  KernelAttrs head;
  head.setInt("chunk_rows", chunk);
  head.setInt("transpose_b", 1);
  if (s.classes < s.vocab) head.setInt("num_classes", s.classes);
  auto fused = bind("linear_cross_entropy_train", {h.view, w.view, targets.view, dloss.view},
                    {loss.view, dh.view, dw.view, scratch.view}, head);
  const double fusedMs = time([&] { fused->run(ctx); }, s.iterations);

  // One chunk's parts: its logits, its row pass and the backward's two
  // products, on views into the same buffers.
  TensorView hc = h.view, logits = scratch.view, dhc = dh.view, targetsc = targets.view;
  hc.shape = {chunk, s.width};
  dhc.shape = {chunk, s.width};
  logits.dtype = DType::BF16;
  logits.shape = {chunk, s.vocab};
  targetsc.shape = {chunk};
  DeviceTensor grad(DType::BF16, {chunk, s.vocab});
  KernelAttrs tb, none, ta, classes;
  tb.setInt("transpose_b", 1);
  ta.setInt("transpose_a", 1);
  if (s.classes < s.vocab) classes.setInt("num_classes", s.classes);
  auto logitsGemm = bind("matmul", {hc, w.view}, {logits}, tb);
  auto rowPass = bind("cross_entropy_grad", {logits, targetsc, dloss.view}, {grad.view}, classes);
  auto dhGemm = bind("matmul", {grad.view, w.view}, {dhc}, none);
  auto dwGemm = bind("matmul", {grad.view, hc}, {dw.view}, ta);
  const double gemmMs = time([&] {
    logitsGemm->run(ctx);
    dhGemm->run(ctx);
    dwGemm->run(ctx);
  }, s.iterations);
  const double rowMs = time([&] { rowPass->run(ctx); }, s.iterations);
  cuda::synchronize();

  const double flops = 6.0 * static_cast<double>(s.rows) * s.classes * s.width;
  const double chunkFlops = flops * static_cast<double>(chunk) / s.rows;
  const double rowBytes = 3.0 * 2.0 * static_cast<double>(chunk) * s.vocab;
  std::printf("{\"rows\": %lld, \"width\": %lld, \"classes\": %lld, \"vocab\": %lld, "
              "\"chunk_rows\": %lld, \"chunks\": %lld, \"fused_ms\": %.3f, "
              "\"fused_tflops\": %.1f, \"chunk_gemms_ms\": %.3f, \"gemm_tflops\": %.1f, "
              "\"chunk_rows_ms\": %.3f, \"rows_gbps\": %.0f}\n",
              static_cast<long long>(s.rows), static_cast<long long>(s.width),
              static_cast<long long>(s.classes), static_cast<long long>(s.vocab),
              static_cast<long long>(chunk), static_cast<long long>(chunks), fusedMs,
              flops / fusedMs / 1e9, gemmMs, chunkFlops / gemmMs / 1e9, rowMs,
              rowBytes / rowMs / 1e6);
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 16384;
  const int64_t width = argc > 2 ? std::atoll(argv[2]) : 768;
  const int64_t classes = argc > 3 ? std::atoll(argv[3]) : 50257;
  const double chunkMb = argc > 4 ? std::atof(argv[4]) : 1024.0;
  const int iterations = argc > 5 ? std::atoi(argv[5]) : 10;
  std::string why;
  if (cuda::deviceCount(&why) == 0) {
    std::fprintf(stderr, "no usable CUDA device (%s)\n", why.c_str());
    return 1;
  }
  const int64_t padded = (classes + 127) / 128 * 128;
  for (int64_t vocab : {classes, padded})
    measure({rows, width, classes, vocab, chunkMb * 1024 * 1024, iterations});
  return 0;
}
