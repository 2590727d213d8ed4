//===- FakeQuant.h - binding contract of the qat kernels --------*- C++ -*-===//
//
// The checks and derived numbers of qat_observe, qat_fake_quant,
// qat_fake_quant_grad and qat_ema, shared by the CPU factories
// (kernels/cpu/fake_quant.cpp) and the CUDA ones (kernels/cuda/fake_quant.cu),
// so both backends accept the same inputs with the same messages. The
// scheme's groups are derived here too, as the [outer, groups, inner] view of
// x that both backends' kernels walk.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_KERNELS_CONTRACTS_FAKEQUANT_H
#define LLMC_KERNELS_CONTRACTS_FAKEQUANT_H

#include "common/QuantScheme.h"
#include "kernels/Kernel.h"

#include <cstdint>
#include <string>

namespace llmc::contracts {

/// A scheme's groups as the [outer, groups, inner] view of x: element i is
/// in group (i / inner) % groups.
struct QuantGroupLayout {
  int64_t outer = 1, groups = 1, inner = 1, numel = 0;
};

/// qat_observe(x[, columns]) -> range.
struct QatObserveBinding {
  DType dtype = DType::F32; ///< x's
  quant::Scheme scheme;
  QuantGroupLayout layout;
};
bool bindQatObserve(const KernelArgs &args, std::string &error, QatObserveBinding *out);

/// qat_fake_quant(x, range[, columns]) -> y and
/// qat_fake_quant_grad(x, range, dy[, columns]) -> dx.
struct QatFakeQuantBinding {
  DType dtype = DType::F32; ///< x's
  quant::Scheme scheme;
  QuantGroupLayout layout;
};
bool bindQatFakeQuant(const KernelArgs &args, std::string &error, QatFakeQuantBinding *out);
bool bindQatFakeQuantGrad(const KernelArgs &args, std::string &error, QatFakeQuantBinding *out);

/// qat_ema(state, observed) -> new_state.
struct QatEmaBinding {
  double momentum = 0;
  int64_t groups = 0;
};
bool bindQatEma(const KernelArgs &args, std::string &error, QatEmaBinding *out);

} // namespace llmc::contracts

#endif
