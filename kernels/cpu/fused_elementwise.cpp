//===- fused_elementwise.cpp - the generated elementwise loop -------------===//
//
// Interprets a common/ElementwiseProgram.h program over chunks of kChunk
// elements: each instruction is one tight loop over the chunk (so the
// dispatch on its opcode is paid once per kChunk elements and the loop
// vectorises), registers are per-thread fp32 arrays sized at bind time
// (an f32 input is read where it lies, not copied), and OpenMP splits the
// chunks. Only the inputs are read and only the
// results written, once each: what the fusion saves is the unfused ops'
// intermediate tensors and kernel launches.
//
// Each opcode calls the scalar function the unfused kernel calls
// (Common.h) and rounds to its dtype as storing that kernel's result
// would, so in every dtype the results are the unfused ops' bit for bit.
//
//===----------------------------------------------------------------------===//

#include "kernels/DropoutHash.h"
#include "common/ElementwiseProgram.h"
#include "kernels/contracts/FusedElementwise.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

/// Elements per register: large enough to amortise the per-instruction
/// dispatch, small enough that a program's registers stay in L1/L2.
constexpr int64_t kChunk = 512;

/// `value` as stored in `dtype` and read back (what an unfused op's result
/// is when the next op loads it).
inline float roundTo(int64_t dtype, float value) {
  if (dtype == 1) return bf16ToFloat(floatToBf16(value));
  if (dtype == 2) return half::toFloat(half::fromFloat(value));
  return value;
}

/// Reads `len` elements from flat index `start` of an input holding
/// `inner` elements repeated (inner == n: the whole tensor).
template <typename T>
void loadChunk(const T *p, int64_t inner, int64_t start, int64_t len, float *r) {
  if (inner == 1) {
    float v = load(p, 0);
    for (int64_t j = 0; j < len; ++j) r[j] = v;
    return;
  }
  int64_t k = start % inner;
  if (k + len <= inner) {
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) r[j] = load(p, k + j);
    return;
  }
  for (int64_t j = 0; j < len; ++j) {
    r[j] = load(p, k);
    if (++k == inner) k = 0;
  }
}

template <typename T> void storeChunk(T *p, int64_t start, int64_t len, const float *r) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) store(p + start, j, r[j]);
}

class FusedElementwiseKernel final : public Kernel {
public:
  FusedElementwiseKernel(const KernelArgs &args, contracts::FusedElementwiseBinding b)
      : b_(std::move(b)), inputs_(args.inputs), outputs_(args.outputs),
        count_(static_cast<int64_t>(b_.program.size()) / ew::kFields),
        width_(outputs_[0].rank() ? std::max<int64_t>(outputs_[0].dim(-1), 1) : 1),
        threads_(bindThreads()),
        scratch_(threads_, static_cast<size_t>(count_ * kChunk)) {
    copyLoad_.assign(static_cast<size_t>(count_), false);
    for (int64_t y : b_.yields) copyLoad_[static_cast<size_t>(y)] = true;
    for (int64_t i = 0; i < count_; ++i) {
      ew::Instruction in = ew::instructionAt(b_.program.data(), i);
      if (in.op == ew::Opcode::Dropout) {
        double rate = ew::doubleOf(in.c);
        thresholds_.push_back(dropoutThreshold(rate));
        keepScales_.push_back(static_cast<float>(1.0 / (1.0 - rate)));
      } else {
        thresholds_.push_back(0);
        keepScales_.push_back(0.0f);
      }
    }
  }

  void run(const StepContext &ctx) override {
    int64_t n = b_.numel, chunks = (n + kChunk - 1) / kChunk;
    uint64_t step = static_cast<uint64_t>(ctx.step);
#pragma omp parallel for schedule(static) num_threads(threads_) if (n > kParallelGrain)
    for (int64_t c = 0; c < chunks; ++c) {
      float *regs = scratch_.at(omp_get_thread_num());
      const float *values[ew::kMaxInstructions];
      int64_t start = c * kChunk, len = std::min(kChunk, n - start);
      for (int64_t i = 0; i < count_; ++i) values[i] = evaluate(i, regs, values, start, len, step);
      for (size_t r = 0; r < outputs_.size(); ++r) {
        const float *value = values[b_.yields[r]];
        const TensorView &o = outputs_[r];
        if (o.dtype == DType::BF16)
          storeChunk(o.as<bf16>(), start, len, value);
        else if (o.dtype == DType::F16)
          storeChunk(o.as<f16>(), start, len, value);
        else
          storeChunk(o.as<float>(), start, len, value);
      }
    }
  }

private:
  /// Instruction `i` over the chunk's `len` elements from flat index
  /// `start`; returns where its values are: register i's scratch, or for
  /// an f32 load of a contiguous run the input itself (no copy). `values`
  /// holds the earlier instructions'.
  const float *evaluate(int64_t i, float *regs, const float *const *values, int64_t start,
                        int64_t len, uint64_t step) const {
    ew::Instruction in = ew::instructionAt(b_.program.data(), i);
    float *r = regs + i * kChunk;
    // Operand words that are not registers (a load's input index, a
    // constant's or dropout's bits) may hold any value: only an earlier
    // register is looked up.
    auto reg = [&](int64_t k) { return k >= 0 && k < i ? values[k] : nullptr; };
    const float *a = reg(in.a), *b = reg(in.b), *c = reg(in.c);
    switch (in.op) {
    case ew::Opcode::Load: return load(i, in.a, start, len, r);
    case ew::Opcode::Const: {
      float v = static_cast<float>(ew::doubleOf(in.a));
      for (int64_t j = 0; j < len; ++j) r[j] = v;
      break;
    }
    case ew::Opcode::Cast:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = a[j];
      break;
    case ew::Opcode::Add:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = a[j] + b[j];
      break;
    case ew::Opcode::Sub:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = a[j] - b[j];
      break;
    case ew::Opcode::Mul:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = a[j] * b[j];
      break;
    case ew::Opcode::Div:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = a[j] / b[j];
      break;
    case ew::Opcode::Neg:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = -a[j];
      break;
    case ew::Opcode::Exp:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = expFast(a[j]);
      break;
    case ew::Opcode::Tanh:
      for (int64_t j = 0; j < len; ++j) r[j] = std::tanh(a[j]);
      break;
    case ew::Opcode::Sigmoid:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = sigmoidFast(a[j]);
      break;
    case ew::Opcode::Gelu:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = geluTanh(a[j]);
      break;
    case ew::Opcode::GeluGrad:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = geluTanhGrad(a[j], b[j]);
      break;
    case ew::Opcode::Silu:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = siluOf(a[j]);
      break;
    case ew::Opcode::SiluGrad:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = siluGradOf(a[j], b[j]);
      break;
    case ew::Opcode::Swiglu:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = swigluOf(a[j], b[j]);
      break;
    case ew::Opcode::SwigluGradGate:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = swigluGradGate(a[j], b[j], c[j]);
      break;
    case ew::Opcode::SwigluGradUp:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = swigluGradUp(a[j], b[j]);
      break;
    case ew::Opcode::Dropout:
      dropout(i, static_cast<uint64_t>(in.b), a, start, len, step, r);
      break;
    case ew::Opcode::Select:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = a[j] != 0.0f ? b[j] : c[j];
      break;
    case ew::Opcode::Sqrt:
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) r[j] = std::sqrt(a[j]);
      break;
    }
    if (in.dtype != 0)
      for (int64_t j = 0; j < len; ++j) r[j] = roundTo(in.dtype, r[j]);
    return r;
  }

  /// A load of input `input` (instruction i) into r, or for an f32 load of
  /// a contiguous run the input itself (no copy). Loaded values are exact
  /// in their dtype.
  const float *load(int64_t i, int64_t input, int64_t start, int64_t len, float *r) const {
    const TensorView &t = inputs_[static_cast<size_t>(input)];
    int64_t inner = b_.inputNumel[static_cast<size_t>(input)];
    if (t.dtype == DType::F32 && !copyLoad_[i] && start % inner + len <= inner)
      return t.as<const float>() + start % inner;
    if (t.dtype == DType::BF16)
      loadChunk(t.as<const bf16>(), inner, start, len, r);
    else if (t.dtype == DType::F16)
      loadChunk(t.as<const f16>(), inner, start, len, r);
    else
      loadChunk(t.as<const float>(), inner, start, len, r);
    return r;
  }

  /// Dropout (instruction i, `seed`) of a into r: dropout.cpp's formula.
  /// The element index is the result's flat index, or, for a piece of a
  /// larger tensor, its global index: each output row is a contiguous run
  /// of global indices from its start.
  void dropout(int64_t i, uint64_t seed, const float *a, int64_t start, int64_t len, uint64_t step,
               float *r) const {
    uint64_t threshold = thresholds_[i];
    float keepScale = keepScales_[i];
    if (b_.rowStarts.empty()) {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) {
        bool keep = dropoutHash(seed, step, static_cast<uint64_t>(start + j)) >= threshold;
        r[j] = keep ? a[j] * keepScale : 0.0f;
      }
      return;
    }
    for (int64_t j = 0; j < len;) {
      int64_t row = (start + j) / width_, col = (start + j) % width_;
      int64_t run = std::min(len - j, width_ - col);
      uint64_t first = b_.rowStarts[static_cast<size_t>(row)] + static_cast<uint64_t>(col);
      const float *ar = a + j;
      float *rr = r + j;
#pragma omp simd
      for (int64_t k = 0; k < run; ++k) {
        bool keep = dropoutHash(seed, step, first + static_cast<uint64_t>(k)) >= threshold;
        rr[k] = keep ? ar[k] * keepScale : 0.0f;
      }
      j += run;
    }
  }

  contracts::FusedElementwiseBinding b_;
  std::vector<TensorView> inputs_, outputs_;
  int64_t count_;
  int64_t width_; ///< elements per output row (dropout's rowStarts index rows)
  int threads_;
  ThreadScratch scratch_;
  /// Per instruction: a load whose values are yielded is copied, since an
  /// output written in place over its input would overwrite them first.
  std::vector<bool> copyLoad_;
  std::vector<uint64_t> thresholds_; ///< per instruction (dropout's)
  std::vector<float> keepScales_;
};

std::unique_ptr<Kernel> makeFusedElementwise(const KernelArgs &args, std::string &error) {
  contracts::FusedElementwiseBinding b;
  if (!contracts::bindFusedElementwise(args, error, &b)) return nullptr;
  return std::make_unique<FusedElementwiseKernel>(args, std::move(b));
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "fused_elementwise", makeFusedElementwise);

} // namespace llmc::cpu
