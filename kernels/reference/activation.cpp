//===- activation.cpp - gelu, silu, sigmoid, swiglu references ------------===//
//
// The pointwise nonlinearities and their derivatives times dy, in double:
// GELU in GPT-2's tanh approximation (the form the kernels use, not the erf
// one), SiLU x·σ(x), the sigmoid σ(x) itself, SwiGLU silu(gate)·up and
// GeGLU gelu(gate)·up with their two gradients, and the soft-cap
// c·tanh(x / c).
//
//===----------------------------------------------------------------------===//

#include "kernels/reference/Common.h"
#include "kernels/reference/Evaluator.h"

namespace llmc::ref {

namespace {

double sigmoidOf(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr double kGeluC = 0.79788456080286535588; // √(2/π)
constexpr double kGeluA = 0.044715;

} // namespace

RefTensor gelu(const RefTensor &x) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    out.data[i] = 0.5 * v * (1.0 + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
  return out;
}

RefTensor geluGrad(const RefTensor &x, const RefTensor &dy) {
  require(x.shape == dy.shape, "geluGrad", "x and dy shapes differ");
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.data[i];
    double th = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    double du = kGeluC * (1.0 + 3.0 * kGeluA * v * v);
    dx.data[i] = dy.data[i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * du);
  }
  return dx;
}

RefTensor silu(const RefTensor &x) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = x.data[i] * sigmoidOf(x.data[i]);
  return out;
}

RefTensor sigmoid(const RefTensor &x) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = sigmoidOf(x.data[i]);
  return out;
}

RefTensor sigmoidGrad(const RefTensor &x, const RefTensor &dy) {
  require(x.shape == dy.shape, "sigmoidGrad", "x and dy shapes differ");
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double s = sigmoidOf(x.data[i]);
    dx.data[i] = dy.data[i] * s * (1.0 - s);
  }
  return dx;
}

RefTensor siluGrad(const RefTensor &x, const RefTensor &dy) {
  require(x.shape == dy.shape, "siluGrad", "x and dy shapes differ");
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double s = sigmoidOf(x.data[i]);
    dx.data[i] = dy.data[i] * s * (1.0 + x.data[i] * (1.0 - s));
  }
  return dx;
}

RefTensor swiglu(const RefTensor &gate, const RefTensor &up) {
  require(gate.shape == up.shape, "swiglu", "gate and up shapes differ");
  RefTensor out = like(gate);
  for (int64_t i = 0; i < gate.numel(); ++i)
    out.data[i] = gate.data[i] * sigmoidOf(gate.data[i]) * up.data[i];
  return out;
}

std::vector<RefTensor> swigluGrad(const RefTensor &gate, const RefTensor &up, const RefTensor &dy) {
  require(gate.shape == up.shape && gate.shape == dy.shape, "swigluGrad", "shapes differ");
  RefTensor dgate = like(gate), dup = like(up);
  for (int64_t i = 0; i < gate.numel(); ++i) {
    double g = gate.data[i], s = sigmoidOf(g);
    dgate.data[i] = dy.data[i] * up.data[i] * s * (1.0 + g * (1.0 - s));
    dup.data[i] = dy.data[i] * g * s;
  }
  return {dgate, dup};
}

RefTensor geglu(const RefTensor &gate, const RefTensor &up) {
  require(gate.shape == up.shape, "geglu", "gate and up shapes differ");
  RefTensor out = gelu(gate);
  for (int64_t i = 0; i < gate.numel(); ++i) out.data[i] *= up.data[i];
  return out;
}

std::vector<RefTensor> gegluGrad(const RefTensor &gate, const RefTensor &up, const RefTensor &dy) {
  require(gate.shape == up.shape && gate.shape == dy.shape, "gegluGrad", "shapes differ");
  RefTensor dyUp = like(dy);
  for (int64_t i = 0; i < dy.numel(); ++i) dyUp.data[i] = dy.data[i] * up.data[i];
  RefTensor dgate = geluGrad(gate, dyUp), dup = gelu(gate);
  for (int64_t i = 0; i < dy.numel(); ++i) dup.data[i] *= dy.data[i];
  return {dgate, dup};
}

RefTensor softcap(const RefTensor &x, double cap) {
  RefTensor out = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) out.data[i] = cap * std::tanh(x.data[i] / cap);
  return out;
}

RefTensor softcapGrad(const RefTensor &x, const RefTensor &dy, double cap) {
  require(x.shape == dy.shape, "softcapGrad", "x and dy shapes differ");
  RefTensor dx = like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double t = std::tanh(x.data[i] / cap);
    dx.data[i] = dy.data[i] * (1.0 - t * t);
  }
  return dx;
}

//===----------------------------------------------------------------------===//
// Evaluators of the ops these references define (kernels/reference/Evaluator.h)
//===----------------------------------------------------------------------===//
LLMC_REGISTER_EVALUATOR("llm.gelu", [](const RefCall &c) -> Results { return {gelu(c.in(0))}; });
LLMC_REGISTER_EVALUATOR("llm.silu", [](const RefCall &c) -> Results { return {silu(c.in(0))}; });
LLMC_REGISTER_EVALUATOR("llm.sigmoid",
                        [](const RefCall &c) -> Results { return {sigmoid(c.in(0))}; });
LLMC_REGISTER_EVALUATOR("llm.sigmoid_grad", [](const RefCall &c) -> Results {
  return {sigmoidGrad(c.in(0), c.in(1))};
});
LLMC_REGISTER_EVALUATOR("llm.swiglu",
                        [](const RefCall &c) -> Results { return {swiglu(c.in(0), c.in(1))}; });
LLMC_REGISTER_EVALUATOR("llm.geglu",
                        [](const RefCall &c) -> Results { return {geglu(c.in(0), c.in(1))}; });
LLMC_REGISTER_EVALUATOR("llm.geglu_grad", [](const RefCall &c) -> Results {
  return gegluGrad(c.in(0), c.in(1), c.in(2));
});
LLMC_REGISTER_EVALUATOR("llm.softcap", [](const RefCall &c) -> Results {
  return {softcap(c.in(0), c.real("cap"))};
});
LLMC_REGISTER_EVALUATOR("llm.softcap_grad", [](const RefCall &c) -> Results {
  return {softcapGrad(c.in(0), c.in(1), c.real("cap"))};
});
LLMC_REGISTER_EVALUATOR("llm.gelu_grad",
                        [](const RefCall &c) -> Results { return {geluGrad(c.in(0), c.in(1))}; });
LLMC_REGISTER_EVALUATOR("llm.silu_grad",
                        [](const RefCall &c) -> Results { return {siluGrad(c.in(0), c.in(1))}; });
LLMC_REGISTER_EVALUATOR("llm.swiglu_grad", [](const RefCall &c) -> Results {
  return swigluGrad(c.in(0), c.in(1), c.in(2));
});

} // namespace llmc::ref
