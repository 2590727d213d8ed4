//===- Tensor.cpp - dtype names and sizes ---------------------------------===//

#include "kernels/Tensor.h"

namespace llmc {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32: return 4;
  case DType::BF16: return 2;
  case DType::F16: return 2;
  case DType::I32: return 4;
  case DType::I64: return 8;
  case DType::U8: return 1;
  case DType::F64: return 8;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "f32";
  case DType::BF16: return "bf16";
  case DType::F16: return "f16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "u8";
  case DType::F64: return "f64";
  }
  return "?";
}

bool parseDType(const std::string &name, DType *out) {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64,
                  DType::U8, DType::F64})
    if (name == dtypeName(d)) {
      *out = d;
      return true;
    }
  return false;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

std::string shapeList(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string TensorView::describe() const {
  return std::string(dtypeName(dtype)) + "[" + shapeString(shape) + "]";
}

} // namespace llmc
