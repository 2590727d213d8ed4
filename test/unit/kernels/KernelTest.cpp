//===- KernelTest.cpp - helpers for the kernel conformance tests ----------===//

#include "KernelTest.h"

#include "common/Half.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

namespace llmc::test {

RefTensor randomTensor(std::vector<int64_t> shape, uint64_t seed, double scale, double shift) {
  RefTensor t = RefTensor::zeros(std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (double &v : t.data) v = shift + scale * normal(rng);
  return t;
}

RefTensor randomIds(std::vector<int64_t> shape, uint64_t seed, int64_t lo, int64_t hi) {
  RefTensor t = RefTensor::zeros(std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> uniform(lo, hi - 1);
  for (double &v : t.data) v = static_cast<double>(uniform(rng));
  return t;
}

Buffer::Buffer(DType dtype, std::vector<int64_t> shape) : dtype(dtype), shape(std::move(shape)) {
  int64_t n = 1;
  for (int64_t d : this->shape) n *= d;
  storage.assign((n * dtypeSize(dtype) + 7) / 8 + 1, 0);
}

TensorView Buffer::view() const {
  TensorView v;
  v.data = const_cast<uint64_t *>(storage.data());
  v.dtype = dtype;
  v.shape = shape;
  return v;
}

namespace {

double loadElement(const TensorView &v, int64_t i) {
  switch (v.dtype) {
  case DType::F32:
    return v.as<float>()[i];
  case DType::BF16:
    return bf16ToFloat(v.as<uint16_t>()[i]);
  case DType::F16:
    return half::toFloat(v.as<uint16_t>()[i]);
  case DType::F64:
    return v.as<double>()[i];
  case DType::I32:
    return v.as<int32_t>()[i];
  case DType::I64:
    return static_cast<double>(v.as<int64_t>()[i]);
  case DType::U8:
    return v.as<uint8_t>()[i];
  default:
    ADD_FAILURE() << "unsupported dtype " << dtypeName(v.dtype);
    return 0.0;
  }
}

void storeElement(const TensorView &v, int64_t i, double x) {
  switch (v.dtype) {
  case DType::F32:
    v.as<float>()[i] = static_cast<float>(x);
    break;
  case DType::BF16:
    v.as<uint16_t>()[i] = floatToBf16(static_cast<float>(x));
    break;
  case DType::F16:
    v.as<uint16_t>()[i] = half::fromFloat(static_cast<float>(x));
    break;
  case DType::F64:
    v.as<double>()[i] = x;
    break;
  case DType::I32:
    v.as<int32_t>()[i] = static_cast<int32_t>(x);
    break;
  case DType::I64:
    v.as<int64_t>()[i] = static_cast<int64_t>(x);
    break;
  case DType::U8: // bytes 0..255; NaN (poison) stores 0xA5
    v.as<uint8_t>()[i] = x >= 0 && x <= 255 ? static_cast<uint8_t>(x) : uint8_t{0xA5};
    break;
  default:
    ADD_FAILURE() << "unsupported dtype " << dtypeName(v.dtype);
  }
}

} // namespace

Buffer Buffer::of(const RefTensor &values, DType dtype) {
  Buffer b(dtype, values.shape);
  TensorView v = b.view();
  for (int64_t i = 0; i < values.numel(); ++i) storeElement(v, i, values.data[i]);
  return b;
}

RefTensor Buffer::toRef() const {
  RefTensor t = RefTensor::zeros(shape);
  TensorView v = view();
  for (int64_t i = 0; i < t.numel(); ++i) t.data[i] = loadElement(v, i);
  return t;
}

void Buffer::poison() {
  TensorView v = view();
  double fill = (dtype == DType::I32 || dtype == DType::I64)
                    ? -12345.0
                    : std::numeric_limits<double>::quiet_NaN();
  for (int64_t i = 0; i < v.numel(); ++i) storeElement(v, i, fill);
}

RefTensor roundTo(const RefTensor &values, DType dtype) {
  return Buffer::of(values, dtype).toRef();
}

std::unique_ptr<Kernel> bindKernel(const std::string &name, const std::vector<Buffer *> &inputs,
                                   const std::vector<Buffer *> &outputs, const KernelAttrs &attrs) {
  KernelFactory factory = findKernel(Backend::CPU, name);
  if (!factory) {
    ADD_FAILURE() << "no CPU kernel named " << name;
    return nullptr;
  }
  KernelArgs args;
  for (Buffer *b : inputs) args.inputs.push_back(b->view());
  for (Buffer *b : outputs) args.outputs.push_back(b->view());
  args.attrs = attrs;
  std::string error;
  std::unique_ptr<Kernel> kernel = factory(args, error);
  if (!kernel)
    ADD_FAILURE() << "binding " << name << " failed: " << error;
  return kernel;
}

bool runKernel(const std::string &name, const std::vector<Buffer *> &inputs,
               const std::vector<Buffer *> &outputs, const KernelAttrs &attrs, int64_t step) {
  std::unique_ptr<Kernel> kernel = bindKernel(name, inputs, outputs, attrs);
  if (!kernel)
    return false;
  // The tests' inputs stay as bound: what a kernel derives from constant
  // inputs (a repacked weight) is what it runs from.
  kernel->prepare(std::vector<bool>(inputs.size(), true));
  StepContext ctx;
  ctx.step = step;
  kernel->run(ctx);
  return true;
}

std::string bindError(const std::string &name, const std::vector<TensorView> &inputs,
                      const std::vector<TensorView> &outputs, const KernelAttrs &attrs) {
  KernelFactory factory = findKernel(Backend::CPU, name);
  if (!factory) return "no kernel named " + name;
  KernelArgs args{inputs, outputs, attrs};
  std::string error;
  std::unique_ptr<Kernel> kernel = factory(args, error);
  if (kernel) return "";
  if (error.empty()) return "<factory failed without a message>";
  return error;
}

void expectBindErrorsMention(const std::string &kernel, const std::vector<BindErrorCase> &cases) {
  for (const BindErrorCase &c : cases) {
    std::string error = bindError(kernel, c.inputs, c.outputs, c.attrs);
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
    EXPECT_NE(error.find(kernel), std::string::npos) << error;
  }
}

TensorView typeOnly(DType dtype, std::vector<int64_t> shape) {
  TensorView v;
  v.dtype = dtype;
  v.shape = std::move(shape);
  return v;
}

double tolerance(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16 ? 1e-2 : 1e-5;
}

::testing::AssertionResult closeTo(const RefTensor &out, const RefTensor &ref, Metric metric,
                                   double tol) {
  if (out.shape != ref.shape) return ::testing::AssertionFailure() << "shapes differ";
  // Elements equal to the reference (infinities included) or NaN where it
  // is NaN (a kernel's defined result, e.g. an invalid id's row) agree
  // exactly and add nothing to the difference; the finite ones still count
  // in the reference's scale, so that the error is relative to the whole
  // tensor and not to the few elements that differ (a tiny reference value
  // flushed to zero would otherwise read as a relative error of 1).
  auto same = [&](int64_t i) {
    return out.data[i] == ref.data[i] || (std::isnan(out.data[i]) && std::isnan(ref.data[i]));
  };
  double maxRef = 0.0, refNorm = 0.0, diffNorm = 0.0, worstDiff = -1.0;
  int64_t differing = 0, worstDiffAt = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    if (std::isnan(out.data[i]) && !std::isnan(ref.data[i]))
      return ::testing::AssertionFailure()
             << "element " << i << " is NaN (not written?); reference " << ref.data[i];
    if (std::isfinite(ref.data[i])) {
      maxRef = std::max(maxRef, std::abs(ref.data[i]));
      refNorm += ref.data[i] * ref.data[i];
    }
    if (same(i))
      continue;
    double d = std::abs(out.data[i] - ref.data[i]);
    ++differing;
    diffNorm += d * d;
    if (!(d <= worstDiff)) worstDiff = d, worstDiffAt = i;
  }
  if (metric == Metric::Norm) {
    double err = refNorm > 0.0 ? std::sqrt(diffNorm / refNorm) : std::sqrt(diffNorm);
    if (err <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "norm-relative error " << err << " > " << tol << " over " << ref.numel()
           << " elements (" << differing << " differ; largest difference at element "
           << worstDiffAt << ": got " << out.data[worstDiffAt] << ", reference "
           << ref.data[worstDiffAt] << ")";
  }
  double floor = std::max(1e-3 * maxRef, std::numeric_limits<double>::min());
  double worst = 0.0;
  int64_t worstAt = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    if (same(i))
      continue;
    double err = std::abs(out.data[i] - ref.data[i]) / std::max(std::abs(ref.data[i]), floor);
    if (!(err <= worst)) worst = err, worstAt = i;
  }
  if (worst <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "elementwise relative error " << worst << " > " << tol << " at element " << worstAt
         << ": got " << out.data[worstAt] << ", reference " << ref.data[worstAt];
}

KernelAttrs attrs(std::initializer_list<std::pair<const char *, double>> floats,
                  std::initializer_list<std::pair<const char *, int64_t>> ints) {
  KernelAttrs a;
  for (auto &[name, value] : floats) a.setFloat(name, value);
  for (auto &[name, value] : ints) a.setInt(name, value);
  return a;
}

double dot(const RefTensor &a, const RefTensor &b) {
  double sum = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += a.data[i] * b.data[i];
  return sum;
}

} // namespace llmc::test
