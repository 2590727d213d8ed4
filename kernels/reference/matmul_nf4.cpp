//===- matmul_nf4.cpp - NF4 weight expansion and product reference --------===//
//
// The weight NF4 storage holds, element by element with kernels/
// QuantScheme.h's fp32 arithmetic (so it is exactly the stored value), and
// x · W through the double matmul reference: what kernels/cpu/matmul_nf4.cpp
// and kernels/cuda/matmul_nf4.cu compute without ever storing all of W.
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

RefTensor dequantizeNf4(const RefTensor &codes, const RefTensor &absmaxQ,
                        const RefTensor &absmaxScale, double absmaxMean,
                        const std::vector<int64_t> &shape, int64_t block,
                        quant::AbsmaxFormat absmaxFormat) {
  RefTensor w = RefTensor::zeros(shape);
  int64_t n = w.numel();
  require(block >= 1 && !shape.empty() && shape.back() % block == 0, "dequantizeNf4",
          "the block must divide the last dimension");
  require(codes.numel() == (n + 1) / 2 && absmaxQ.numel() == n / block &&
              absmaxScale.numel() == quant::nf4ScaleCount(n / block),
          "dequantizeNf4", "storage sizes do not match the shape");
  auto byte = [](double v) { return static_cast<uint8_t>(static_cast<int64_t>(v) & 0xFF); };
  const float mean = static_cast<float>(absmaxMean);
  for (int64_t i = 0; i < n; ++i) {
    int64_t g = i / block;
    float absmax = quant::nf4Absmax(
        byte(absmaxQ.data[g]), absmaxFormat,
        static_cast<float>(absmaxScale.data[g / quant::kNf4DoubleQuantBlock]), mean);
    uint8_t c = byte(codes.data[i / 2]);
    w.data[i] = quant::nf4Value(i % 2 == 0 ? (c & 0x0F) : (c >> 4), absmax);
  }
  return w;
}

RefTensor matmulNf4(const RefTensor &x, const RefTensor &codes, const RefTensor &absmaxQ,
                    const RefTensor &absmaxScale, double absmaxMean,
                    const std::vector<int64_t> &weightShape, int64_t block, bool transposeB,
                    quant::AbsmaxFormat absmaxFormat) {
  require(!x.shape.empty() && weightShape.size() == 2, "matmulNf4",
          "x must have rank >= 1 and the weight rank 2");
  RefTensor w =
      dequantizeNf4(codes, absmaxQ, absmaxScale, absmaxMean, weightShape, block, absmaxFormat);
  return productWithWeight(x, w, transposeB);
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.matmul_nf4", [](const RefCall &c) -> Results {
  return {matmulNf4(c.in(0), c.in(1), c.in(2), c.in(3), c.scalar(4), c.array("weight_shape"),
                    c.integer("block"), c.flag("transpose_b"),
                    static_cast<quant::AbsmaxFormat>(c.integer("absmax_format", 0)))};
});

} // namespace llmc::ref
