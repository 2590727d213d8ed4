//===- decode_gemv_cpu.cpp - a decode step's products, GB/s of weights ----===//
//
// llmc-bench-decode-gemv: y = x · Wᵀ for a few rows of x over `layers`
// weights W [N, K] (more than the caches hold), bound through the registry
// as a decode step binds them: matmul in fp32 and bf16, matmul_int int8
// and fp8 (E4M3) per row and int4 in blocks of 32 (int4h: its scales fp16
// values, as `llmc quantize --scale-dtype f16` writes them, which the
// repacked copy then holds in fp16), matmul_nf4 in blocks of 32. Each
// kernel is prepared with its weights constant, as `llmc generate`
// prepares them once loaded, so the 4-bit rows time the repacked copy
// (kernels/cpu/DecodeGemvPacked.h; LLMC_CPU_NO_PACK=1 times the bodies that
// read the codes in place). Prints the best time of a pass over all the
// weights and the weight bytes read per second (codes and the scales as the
// body reads them: the copy's fp16 or fp32 scales, else the bound ones).
// The codes are zeros and the scales random (int4h's rounded to fp16
// values, NF4's all 1/3: none an fp16 value, so their copies keep fp32
// scales): the kernels' time does not depend on their values. LLMC_CPU_NO_AVX512=1
// times the AVX2 bodies; LLMC_CPU_DOT=avx512vnni|avxvnni|avx2 picks
// int8/int4's integer-dot body (kernels/cpu/DecodeGemvInt8.h).
//
// Usage: llmc-bench-decode-gemv [--n 5632] [--k 2048] [--layers 16] [--m 1] [--reps 10]
//
//===----------------------------------------------------------------------===//

#include "KernelBench.h"
#include "common/Half.h"
#include "common/QuantScheme.h"

#include <cstring>

using namespace llmc;
using namespace llmc::bench;

namespace {

struct Options {
  int64_t n = 5632, k = 2048, layers = 16, m = 1;
  int reps = 10;
};

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--n")
      o.n = v;
    else if (flag == "--k")
      o.k = v;
    else if (flag == "--layers")
      o.layers = v;
    else if (flag == "--m")
      o.m = v;
    else if (flag == "--reps")
      o.reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "llmc-bench-decode-gemv: unknown option %s\n", flag.c_str());
      std::exit(1);
    }
  }
  return o;
}

/// One format's weights (every layer's operands) and kernels.
struct Format {
  std::string name;
  std::vector<std::unique_ptr<Tensor>> operands;
  std::vector<std::unique_ptr<Kernel>> kernels;
  int64_t bytes = 0;
};

KernelAttrs weightAttrs(const Options &o,
                        std::initializer_list<std::pair<const char *, int64_t>> ints) {
  KernelAttrs a;
  for (const auto &[key, value] : ints) a.setInt(key, value);
  a.setInt("transpose_b", 1);
  a.setInts("weight_shape", {o.n, o.k});
  return a;
}

/// NF4's block scale: no fp16 value, so its repacked copy keeps fp32 scales.
constexpr float kNoHalf = 1.0f / 3.0f;

/// Weight bytes a pass of `kind`'s bodies reads per layer: the repacked
/// copy's codes and scales for the 4-bit formats (unless LLMC_CPU_NO_PACK),
/// else the bound operands'.
int64_t bytesRead(const std::string &kind, const Options &o, int64_t boundBytes) {
  const bool packed = kind == "int4" || kind == "int4h" || kind == "nf4";
  if (!packed || std::getenv("LLMC_CPU_NO_PACK"))
    return boundBytes;
  const int64_t scaleBytes = kind == "int4h" ? 2 : 4;
  return o.n * o.k / 2 + o.n * o.k / 32 * scaleBytes;
}

/// `kind`'s operands after x for one layer, in the kernel's order.
std::vector<std::unique_ptr<Tensor>> weightOperands(const std::string &kind, const Options &o) {
  const int64_t numel = o.n * o.k;
  std::vector<std::unique_ptr<Tensor>> w;
  if (kind == "fp32" || kind == "bf16") {
    w.push_back(std::make_unique<Tensor>(kind == "fp32" ? DType::F32 : DType::BF16,
                                         std::vector<int64_t>{o.n, o.k}));
  } else if (kind == "int8" || kind == "fp8") {
    w.push_back(std::make_unique<Tensor>(DType::U8, std::vector<int64_t>{numel}));
    w.push_back(std::make_unique<Tensor>(DType::F32, std::vector<int64_t>{o.n}));
  } else if (kind == "int4" || kind == "int4h") {
    w.push_back(std::make_unique<Tensor>(DType::U8, std::vector<int64_t>{numel / 2}));
    w.push_back(std::make_unique<Tensor>(DType::F32, std::vector<int64_t>{numel / 32}));
    if (kind == "int4h")
      for (int64_t i = 0; i < numel / 32; ++i) {
        float &scale = w.back()->view.as<float>()[i];
        scale = half::toFloat(half::fromFloat(scale));
      }
  } else { // nf4: every block's absmax code is 0, so its scale is the mean
    w.push_back(std::make_unique<Tensor>(DType::U8, std::vector<int64_t>{numel / 2}));
    w.push_back(std::make_unique<Tensor>(DType::U8, std::vector<int64_t>{numel / 32}));
    w.push_back(std::make_unique<Tensor>(DType::F32,
                                         std::vector<int64_t>{quant::nf4ScaleCount(numel / 32)}));
    w.push_back(std::make_unique<Tensor>(DType::F32, std::vector<int64_t>{1}, 0.0f));
    w.back()->view.as<float>()[0] = kNoHalf;
  }
  return w;
}

Format bind(const std::string &kind, const Options &o, Tensor &x, Tensor &xBf16, Tensor &y,
            Tensor &yBf16) {
  Format f;
  f.name = kind;
  const bool bf16 = kind == "bf16";
  const std::string kernel = kind == "fp32" || bf16 ? "matmul"
                             : kind == "nf4"        ? "matmul_nf4"
                                                    : "matmul_int";
  const KernelAttrs attrs =
      kind == "int8"  ? weightAttrs(o, {{"bits", 8}, {"channel_axis", 0}})
      : kind == "fp8" ? weightAttrs(o, {{"bits", 8}, {"fp8", 1}, {"channel_axis", 0}})
      : kind == "int4" || kind == "int4h" ? weightAttrs(o, {{"bits", 4}, {"block", 32}})
      : kind == "nf4"                     ? weightAttrs(o, {{"block", 32}})
                                          : weightAttrs(o, {});
  for (int64_t l = 0; l < o.layers; ++l) {
    std::vector<std::unique_ptr<Tensor>> w = weightOperands(kind, o);
    std::vector<Tensor *> inputs = {bf16 ? &xBf16 : &x};
    int64_t boundBytes = 0;
    for (auto &t : w) {
      boundBytes += t->view.bytes();
      inputs.push_back(t.get());
    }
    f.bytes += bytesRead(kind, o, boundBytes);
    f.kernels.push_back(
        bindKernel("llmc-bench-decode-gemv", kernel, inputs, {bf16 ? &yBf16 : &y}, attrs));
    std::vector<bool> constant(inputs.size(), true);
    constant[0] = false; // x
    f.kernels.back()->prepare(constant);
    for (auto &t : w) f.operands.push_back(std::move(t));
  }
  return f;
}

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  Tensor x(DType::F32, {o.m, o.k}), xBf16(DType::BF16, {o.m, o.k});
  Tensor y(DType::F32, {o.m, o.n}, 0.0f), yBf16(DType::BF16, {o.m, o.n}, 0.0f);
  std::printf("# W [%lld, %lld] x %lld layers, %lld row(s) of x\n", static_cast<long long>(o.n),
              static_cast<long long>(o.k), static_cast<long long>(o.layers),
              static_cast<long long>(o.m));
  for (const char *kind : {"fp32", "bf16", "int8", "fp8", "int4", "int4h", "nf4"}) {
    Format f = bind(kind, o, x, xBf16, y, yBf16);
    std::vector<Kernel *> kernels;
    for (auto &k : f.kernels) kernels.push_back(k.get());
    const double ms = bestMs(kernels, o.reps);
    std::printf("%-5s %9.3f MB  %8.3f ms  %6.2f GB/s  %7.2f G weights/s\n", kind, f.bytes / 1e6, ms,
                f.bytes / ms / 1e6, o.n * o.k * o.layers / ms / 1e6);
  }
  return 0;
}
