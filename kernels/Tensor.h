//===- Tensor.h - dtypes and tensor views shared by runtime and kernels ---===//
//
// Plain C++ (no MLIR): the runtime and every kernel backend speak in these.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_TENSOR_H
#define LLMC_KERNELS_TENSOR_H

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llmc {

/// Element types. The numeric values are part of the artifact format.
enum class DType : uint8_t { F32 = 0, BF16 = 1, F16 = 2, I32 = 3, I64 = 4, U8 = 5, F64 = 6 };

size_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);
/// Parses "f32", "bf16", ... ; returns false for an unknown name.
bool parseDType(const std::string &name, DType *out);

/// "2x3" (empty for a scalar): a shape as dtype descriptions and file
/// records spell it.
std::string shapeString(const std::vector<int64_t> &shape);
/// "[2, 3]": a shape as error messages list it.
std::string shapeList(const std::vector<int64_t> &shape);

/// A non-owning view of a dense row-major tensor.
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
  int rank() const { return static_cast<int>(shape.size()); }
  /// Size of dimension `i`, negative counts from the back.
  int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  template <typename T> T *as() const { return static_cast<T *>(data); }
  std::string describe() const; ///< e.g. "f32[4x64x128]"
};

/// bf16 <-> fp32 (round to nearest even; NaN stays NaN).
inline float bf16ToFloat(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(f));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

} // namespace llmc

#endif
