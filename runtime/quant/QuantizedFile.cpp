//===- QuantizedFile.cpp - quantized tensors in a safetensors file --------===//

#include "runtime/quant/QuantizedFile.h"
#include "common/Half.h"

#include "runtime/support/Error.h"

#include <cstring>
#include <sstream>

namespace llmc {
namespace {

/// The record's field for a double quantization (not None), e.g.
/// "double_quant=fp8_e4m3:block256".
std::string doubleQuantField(quant::DoubleQuant d) {
  return std::string("double_quant=") + quant::absmaxFormatName(quant::absmaxFormatOf(d)) +
         ":block" + std::to_string(quant::kNf4DoubleQuantBlock);
}

/// A tensor's bytes copied out (file data need not be aligned for T), of
/// `dtype` (`e4m3`: U8 typed F8_E4M3).
template <typename T>
std::vector<T> arrayOf(const SafetensorsFile &file, const std::string &name, DType dtype,
                       bool required, const std::string &weight, bool e4m3 = false) {
  const SafeTensor *t = file.find(name);
  if (!t) {
    if (required)
      fail(file.path(), ": quantized tensor '", weight, "' has no '", name, "'");
    return {};
  }
  SafeTensor expected;
  expected.dtype = dtype;
  expected.e4m3 = e4m3;
  if (t->dtype != dtype || t->e4m3 != e4m3)
    fail(file.path(), ": tensor '", name, "' is ", safetensorsDType(*t), ", expected ",
         safetensorsDType(expected));
  std::vector<T> out(t->bytes / sizeof(T));
  if (t->bytes) std::memcpy(out.data(), t->data, t->bytes);
  return out;
}

/// W.scale, F32 or F16 (widened exactly; the tensor then says F16).
void readScales(const SafetensorsFile &file, const std::string &weight, bool required,
                quant::QuantizedTensor &q) {
  const SafeTensor *t = file.find(weight + ".scale");
  if (t && t->dtype != DType::F32 && t->dtype != DType::F16)
    fail(file.path(), ": tensor '", weight, ".scale' is ", safetensorsDType(*t),
         ", expected F32 or F16");
  if (!t || t->dtype != DType::F16) {
    q.scales = arrayOf<float>(file, weight + ".scale", DType::F32, required, weight);
    return;
  }
  q.scaleFormat = quant::ScaleFormat::F16;
  q.halfScales = arrayOf<uint16_t>(file, weight + ".scale", DType::F16, true, weight);
  for (uint16_t bits : q.halfScales) q.scales.push_back(half::toFloat(bits));
}

/// Parses "<scheme> shape=AxB [double_quant=<int8|fp8_e4m3>:block256]".
void parseRecord(const std::string &record, const std::string &where, quant::QuantizedTensor &q) {
  std::istringstream in(record);
  std::string schemeText, field, error;
  in >> schemeText;
  if (!quant::parseSchemeString(schemeText, q.scheme, error))
    fail(where, ": ", error);
  bool haveShape = false;
  while (in >> field) {
    if (field.rfind("double_quant=", 0) == 0) {
      for (quant::DoubleQuant d : {quant::DoubleQuant::Int8, quant::DoubleQuant::Fp8E4M3})
        if (field == doubleQuantField(d))
          q.doubleQuant = d;
      if (!q.doubleQuantized())
        fail(where, ": unknown double quantization '", field, "' in record '", record,
             "' (expected ", doubleQuantField(quant::DoubleQuant::Int8), " or ",
             doubleQuantField(quant::DoubleQuant::Fp8E4M3), ")");
    } else if (field.rfind("shape=", 0) == 0) {
      std::string dims = field.substr(6);
      size_t start = 0;
      for (;;) {
        size_t x = dims.find('x', start);
        std::string dim = dims.substr(start, x == std::string::npos ? std::string::npos : x - start);
        if (dim.empty() || dim.size() > 12 || dim.find_first_not_of("0123456789") != std::string::npos)
          fail(where, ": bad shape '", dims, "' in record '", record, "'");
        q.shape.push_back(std::stoll(dim));
        if (x == std::string::npos) break;
        start = x + 1;
      }
      haveShape = true;
    } else {
      fail(where, ": unknown field '", field, "' in record '", record, "'");
    }
  }
  if (!haveShape)
    fail(where, ": record '", record, "' has no shape=");
}

} // namespace

std::string quantizedRecord(const quant::QuantizedTensor &q) {
  return quant::schemeString(q.scheme) + " shape=" + shapeString(q.shape) +
         (q.doubleQuantized() ? " " + doubleQuantField(q.doubleQuant) : std::string());
}

void appendQuantized(const std::string &name, const quant::QuantizedTensor &q,
                     std::vector<SafeTensor> &tensors,
                     std::map<std::string, std::string> &metadata) {
  auto add = [&](const char *suffix, DType dtype, std::vector<int64_t> shape, const void *data,
                 size_t bytes, bool e4m3 = false) {
    tensors.push_back({name + suffix, dtype, std::move(shape), data, bytes, e4m3});
  };
  add(".qweight", DType::U8, {static_cast<int64_t>(q.codes.size())}, q.codes.data(), q.codes.size());
  if (q.scaleFormat == quant::ScaleFormat::F16)
    add(".scale", DType::F16, {static_cast<int64_t>(q.halfScales.size())}, q.halfScales.data(),
        q.halfScales.size() * 2);
  else if (!q.scales.empty())
    add(".scale", DType::F32, {static_cast<int64_t>(q.scales.size())}, q.scales.data(),
        q.scales.size() * 4);
  if (!q.zeroPoints.empty())
    add(".zero_point", DType::I32, {static_cast<int64_t>(q.zeroPoints.size())},
        q.zeroPoints.data(), q.zeroPoints.size() * 4);
  if (q.doubleQuantized()) {
    // The dtype says which levels the bytes are: U8 int8, F8_E4M3 E4M3.
    add(".absmax_q", DType::U8, {static_cast<int64_t>(q.absmaxCodes.size())}, q.absmaxCodes.data(),
        q.absmaxCodes.size(), q.doubleQuant == quant::DoubleQuant::Fp8E4M3);
    add(".absmax_scale", DType::F32, {static_cast<int64_t>(q.absmaxScales.size())},
        q.absmaxScales.data(), q.absmaxScales.size() * 4);
    add(".absmax_mean", DType::F32, {}, &q.absmaxMean, 4);
  }
  metadata[name] = quantizedRecord(q);
}

bool readFloatTensor(const SafetensorsFile &file, const std::string &name, FloatTensor &out) {
  std::string where = file.path() + ": tensor '" + name + "'";
  if (file.find(name + ".qweight")) {
    if (file.find(name))
      fail(where, " is stored both plain and quantized");
    auto record = file.metadata().find(name);
    if (record == file.metadata().end())
      fail(where, ": quantized, but the metadata has no record of its scheme and shape");
    quant::QuantizedTensor q;
    parseRecord(record->second, where, q);
    q.codes = arrayOf<uint8_t>(file, name + ".qweight", DType::U8, true, name);
    readScales(file, name, !q.doubleQuantized(), q);
    q.zeroPoints = arrayOf<int32_t>(file, name + ".zero_point", DType::I32, !q.scheme.symmetric, name);
    if (q.doubleQuantized()) {
      q.absmaxCodes = arrayOf<uint8_t>(file, name + ".absmax_q", DType::U8, true, name,
                                       q.doubleQuant == quant::DoubleQuant::Fp8E4M3);
      q.absmaxScales = arrayOf<float>(file, name + ".absmax_scale", DType::F32, true, name);
      std::vector<float> mean = arrayOf<float>(file, name + ".absmax_mean", DType::F32, true, name);
      if (mean.size() != 1)
        fail(where, ": absmax_mean must hold one value, has ", mean.size());
      q.absmaxMean = mean[0];
    }
    if (std::string why = quant::validate(q); !why.empty())
      fail(where, ": ", why);
    out.shape = q.shape;
    out.data = quant::dequantize(q);
    out.scheme = record->second;
    return true;
  }
  const SafeTensor *t = file.find(name);
  if (!t)
    return false;
  if (t->e4m3)
    fail(where, " is F8_E4M3, which llmc reads only as NF4's absmax levels ('<weight>.absmax_q' "
                "of a quantized weight)");
  size_t n = t->bytes / dtypeSize(t->dtype);
  out.shape = t->shape;
  out.scheme.clear();
  out.data.resize(n);
  const auto *bytes = static_cast<const uint8_t *>(t->data);
  switch (t->dtype) {
  case DType::F32: std::memcpy(out.data.data(), bytes, n * 4); break;
  case DType::BF16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);
      out.data[i] = bf16ToFloat(v);
    }
    break;
  case DType::F16: // Hugging Face models are often stored in fp16
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);
      out.data[i] = half::toFloat(v);
    }
    break;
  case DType::F64:
    for (size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, bytes + 8 * i, 8);
      out.data[i] = static_cast<float>(v);
    }
    break;
  case DType::U8: // storage loaded as is (quantized codes): exact in fp32
    for (size_t i = 0; i < n; ++i) out.data[i] = bytes[i];
    break;
  case DType::I32: // zero points of quantized storage: exact in fp32 below 2^24
    for (size_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, bytes + 4 * i, 4);
      out.data[i] = static_cast<float>(v);
    }
    break;
  default:
    fail(where, " is ", safetensorsDType(t->dtype), "; parameters load from F32, BF16, F16, F64, U8 or I32");
  }
  return true;
}

} // namespace llmc
