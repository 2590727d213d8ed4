//===- shape.cpp - transpose, slice, pad, concat, copy, reduce_sum --------===//
//
// Data movement, mostly type-blind: transpose, slice, pad, concat and copy
// move elements of any dtype by size. Each is reduced at bind time to
// "copy a strided box": dims that are contiguous in both source and
// destination are merged (so [B,T,H,D] → [B,H,T,D] moves whole D rows with
// memcpy), and run() walks the box rows in parallel.
//
// reduce_sum (the backward of broadcasting) sums the leading dims down to a
// suffix shape in ColumnSums.h's order: the rows split into a fixed number
// of chunks chosen from the shape alone, each (chunk, column block) task
// summing in double, then chunks added in order — deterministic whatever
// the thread count, and parallel even when the suffix is small.
//
//===----------------------------------------------------------------------===//

#include "kernels/contracts/Shape.h"
#include "kernels/cpu/ColumnSums.h"
#include "kernels/cpu/Common.h"

namespace llmc::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Strided box copy
//===----------------------------------------------------------------------===//

/// A box of `sizes` elements read at src strides and written at dst strides,
/// in bytes, with the innermost dim contiguous on at least the dst side.
struct Box {
  std::vector<int64_t> sizes, srcStrides, dstStrides; // outer dims; element strides
  int64_t inner = 1;                                  // elements per innermost run
  int64_t innerSrcStride = 1;                         // source stride of that run
  int64_t srcBase = 0, dstBase = 0;                   // element offsets
  size_t elementSize = 4;
};

/// Builds a Box from per-dim sizes and strides (dst contiguous row-major is
/// not required), dropping unit dims and merging dims contiguous on both
/// sides.
Box makeBox(std::vector<int64_t> sizes, std::vector<int64_t> srcStrides,
            std::vector<int64_t> dstStrides, size_t elementSize) {
  Box box;
  box.elementSize = elementSize;
  std::vector<int64_t> s, ss, ds;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!s.empty() && ss.back() == sizes[i] * srcStrides[i] &&
        ds.back() == sizes[i] * dstStrides[i]) {
      s.back() *= sizes[i];
      ss.back() = srcStrides[i];
      ds.back() = dstStrides[i];
      continue;
    }
    s.push_back(sizes[i]);
    ss.push_back(srcStrides[i]);
    ds.push_back(dstStrides[i]);
  }
  if (!s.empty() && ds.back() == 1) { // the innermost dim is a dst-contiguous run
    box.inner = s.back();
    box.innerSrcStride = ss.back();
    s.pop_back(), ss.pop_back(), ds.pop_back();
  }
  box.sizes = s, box.srcStrides = ss, box.dstStrides = ds;
  return box;
}

/// Copies a Box. Element types are by size so one instantiation serves every
/// dtype of that width.
template <typename E> void copyBox(const Box &box, const void *src, void *dst) {
  const E *in = static_cast<const E *>(src) + box.srcBase;
  E *out = static_cast<E *>(dst) + box.dstBase;
  int64_t rows = product(box.sizes), inner = box.inner, stride = box.innerSrcStride;
  size_t rank = box.sizes.size();
#pragma omp parallel for schedule(static) if (rows * inner > kParallelGrain)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t srcOffset = 0, dstOffset = 0, rest = row;
    for (size_t d = rank; d-- > 0;) {
      int64_t i = rest % box.sizes[d];
      rest /= box.sizes[d];
      srcOffset += i * box.srcStrides[d];
      dstOffset += i * box.dstStrides[d];
    }
    if (stride == 1) {
      std::memcpy(out + dstOffset, in + srcOffset, inner * sizeof(E));
    } else {
      const E *s = in + srcOffset;
      E *o = out + dstOffset;
      for (int64_t j = 0; j < inner; ++j) o[j] = s[j * stride];
    }
  }
}

void copyBox(const Box &box, const void *src, void *dst) {
  switch (box.elementSize) {
  case 1:
    return copyBox<uint8_t>(box, src, dst);
  case 2:
    return copyBox<uint16_t>(box, src, dst);
  case 8:
    return copyBox<uint64_t>(box, src, dst);
  default:
    return copyBox<uint32_t>(box, src, dst);
  }
}

/// Zeroes `bytes` bytes in parallel chunks.
void zeroBytes(void *dst, size_t bytes) {
  constexpr size_t kChunk = size_t(1) << 20;
  int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t begin = c * kChunk;
    std::memset(static_cast<char *>(dst) + begin, 0, std::min(kChunk, bytes - begin));
  }
}

/// transpose, slice and copy: one box copy.
class BoxKernel final : public Kernel {
public:
  BoxKernel(Box box, const void *src, void *dst) : box_(std::move(box)), src_(src), dst_(dst) {}
  void run(const StepContext &) override { copyBox(box_, src_, dst_); }

private:
  Box box_;
  const void *src_;
  void *dst_;
};

/// pad: zero the output, then one box copy.
class PadKernel final : public Kernel {
public:
  PadKernel(Box box, const void *src, void *dst, size_t bytes)
      : box_(std::move(box)), src_(src), dst_(dst), bytes_(bytes) {}
  void run(const StepContext &) override {
    zeroBytes(dst_, bytes_);
    copyBox(box_, src_, dst_);
  }

private:
  Box box_;
  const void *src_;
  void *dst_;
  size_t bytes_;
};

bool sameDTypeAsX(Validator &v) {
  if (v.out(0).dtype != v.in(0).dtype)
    return v.fail("out must have x's dtype " + std::string(dtypeName(v.in(0).dtype)) + ", got " +
                  v.out(0).describe());
  return true;
}

/// transpose, slice and pad: the contract's box, merged into a Box.
Box boxOf(const contracts::BoxCopyBinding &b) {
  Box box = makeBox(b.sizes, b.srcStrides, b.dstStrides, dtypeSize(b.dtype));
  box.srcBase = b.srcBase;
  box.dstBase = b.dstBase;
  return box;
}

std::unique_ptr<Kernel> makeTranspose(const KernelArgs &args, std::string &error) {
  contracts::BoxCopyBinding b;
  if (!contracts::bindTranspose(args, error, &b)) return nullptr;
  return std::make_unique<BoxKernel>(boxOf(b), args.inputs[0].data, args.outputs[0].data);
}

std::unique_ptr<Kernel> makeSlice(const KernelArgs &args, std::string &error) {
  contracts::BoxCopyBinding b;
  if (!contracts::bindSlice(args, error, &b)) return nullptr;
  return std::make_unique<BoxKernel>(boxOf(b), args.inputs[0].data, args.outputs[0].data);
}

std::unique_ptr<Kernel> makePad(const KernelArgs &args, std::string &error) {
  contracts::BoxCopyBinding b;
  if (!contracts::bindPad(args, error, &b)) return nullptr;
  const TensorView &out = args.outputs[0];
  return std::make_unique<PadKernel>(boxOf(b), args.inputs[0].data, out.data, out.bytes());
}

/// concat: for each outer index, each input's contiguous chunk in turn.
class ConcatKernel final : public Kernel {
public:
  ConcatKernel(const KernelArgs &args, int64_t dim) : out_(args.outputs[0].data) {
    const TensorView &out = args.outputs[0];
    size_t elementSize = dtypeSize(out.dtype);
    outer_ = product(out.shape, 0, dim);
    rowBytes_ = product(out.shape, dim, out.shape.size()) * elementSize;
    for (const TensorView &x : args.inputs) {
      inputs_.push_back(x.data);
      chunkBytes_.push_back(product(x.shape, dim, x.shape.size()) * elementSize);
    }
  }

  void run(const StepContext &) override {
    if (outer_ == 1) { // joining along dim 0 (or after unit dims): whole inputs
      size_t at = 0;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        copyBytes(static_cast<char *>(out_) + at, inputs_[i], chunkBytes_[i]);
        at += chunkBytes_[i];
      }
      return;
    }
#pragma omp parallel for schedule(static) if (outer_ * rowBytes_ > 4 * kParallelGrain)
    for (int64_t o = 0; o < outer_; ++o) {
      char *dst = static_cast<char *>(out_) + o * rowBytes_;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        std::memcpy(dst, static_cast<const char *>(inputs_[i]) + o * chunkBytes_[i],
                    chunkBytes_[i]);
        dst += chunkBytes_[i];
      }
    }
  }

private:
  void *out_;
  int64_t outer_ = 1;
  size_t rowBytes_ = 0;
  std::vector<const void *> inputs_;
  std::vector<size_t> chunkBytes_;
};

std::unique_ptr<Kernel> makeConcat(const KernelArgs &args, std::string &error) {
  contracts::ConcatBinding b;
  if (!contracts::bindConcat(args, error, &b)) return nullptr;
  return std::make_unique<ConcatKernel>(args, b.dim);
}

std::unique_ptr<Kernel> makeCopy(const KernelArgs &args, std::string &error) {
  Validator v("copy", args, error);
  if (!v.arity(1, 1) || !sameDTypeAsX(v)) return nullptr;
  const TensorView &x = v.in(0), &out = v.out(0);
  if (out.numel() != x.numel())
    return v.reject("out " + out.describe() + " must have as many elements as x " + x.describe());
  class CopyKernel final : public Kernel {
  public:
    CopyKernel(const void *src, void *dst, size_t bytes) : src_(src), dst_(dst), bytes_(bytes) {}
    void run(const StepContext &) override {
      if (src_ != dst_) copyBytes(dst_, src_, bytes_);
    }

  private:
    const void *src_;
    void *dst_;
    size_t bytes_;
  };
  return std::make_unique<CopyKernel>(x.data, out.data, x.bytes());
}

/// copy_to_host / copy_to_device (ZeRO-Offload): the same bytes, from one
/// memory to the other. The CPU backend's two memories are both the host's
/// (the first part of its arena stands for the device's), so a byte copy.
std::unique_ptr<Kernel> makeSpaceCopy(const char *name, const KernelArgs &args,
                                      std::string &error) {
  Validator v(name, args, error);
  if (!v.arity(1, 1) || !sameDTypeAsX(v)) return nullptr;
  const TensorView &x = v.in(0), &out = v.out(0);
  if (out.shape != x.shape)
    return v.reject("out " + out.describe() + " must have x's shape " + x.describe());
  if (x.data && x.data == out.data)
    return v.reject("x and out are the same bytes; a copy between memories needs two");
  class SpaceCopyKernel final : public Kernel {
  public:
    SpaceCopyKernel(const void *src, void *dst, size_t bytes) : src_(src), dst_(dst), bytes_(bytes) {}
    void run(const StepContext &) override { copyBytes(dst_, src_, bytes_); }

  private:
    const void *src_;
    void *dst_;
    size_t bytes_;
  };
  return std::make_unique<SpaceCopyKernel>(x.data, out.data, x.bytes());
}
std::unique_ptr<Kernel> makeCopyToHost(const KernelArgs &args, std::string &error) {
  return makeSpaceCopy("copy_to_host", args, error);
}
std::unique_ptr<Kernel> makeCopyToDevice(const KernelArgs &args, std::string &error) {
  return makeSpaceCopy("copy_to_device", args, error);
}

//===----------------------------------------------------------------------===//
// reduce_sum
//===----------------------------------------------------------------------===//

template <typename T> class ReduceSumKernel final : public Kernel {
public:
  explicit ReduceSumKernel(const KernelArgs &args)
      : x_(args.inputs[0].as<T>()), out_(args.outputs[0].as<T>()), inner_(args.outputs[0].numel()),
        sums_(inner_ ? args.inputs[0].numel() / inner_ : 0, inner_) {}

  void run(const StepContext &) override {
    const T *x = x_;
    const int64_t inner = inner_;
    sums_.run(
        [x, inner](int64_t r, int64_t j0, int64_t cols, double *acc) {
          const T *row = x + r * inner + j0;
#pragma omp simd
          for (int64_t j = 0; j < cols; ++j) acc[j] += load(row, j);
        },
        out_);
  }

private:
  const T *x_;
  T *out_;
  int64_t inner_;
  ColumnSums sums_;
};

std::unique_ptr<Kernel> makeReduceSum(const KernelArgs &args, std::string &error) {
  contracts::ReduceSumBinding b;
  if (!contracts::bindReduceSum(args, error, &b)) return nullptr;
  return makeFloatKernel<ReduceSumKernel>(b.dtype, args);
}

} // namespace

LLMC_REGISTER_KERNEL(CPU, "transpose", makeTranspose);
LLMC_REGISTER_KERNEL(CPU, "slice", makeSlice);
LLMC_REGISTER_KERNEL(CPU, "pad", makePad);
LLMC_REGISTER_KERNEL(CPU, "concat", makeConcat);
LLMC_REGISTER_KERNEL(CPU, "copy", makeCopy);
LLMC_REGISTER_KERNEL(CPU, "copy_to_host", makeCopyToHost);
LLMC_REGISTER_KERNEL(CPU, "copy_to_device", makeCopyToDevice);
LLMC_REGISTER_KERNEL(CPU, "reduce_sum", makeReduceSum);

} // namespace llmc::cpu
