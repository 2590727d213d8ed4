//===- LossScaler.h - dynamic loss scaling for fp16 training -----*- C++ -*-===//
//
// fp16 has a 5-bit exponent: gradients below 2^-24 flush to zero. Training
// in fp16 therefore multiplies the loss (the backward's seed) by a scale S,
// so the gradients come out S times larger, and AdamW divides S out again
// (Micikevicius et al., "Mixed Precision Training", 2018). S is chosen
// dynamically: a step whose gradients overflow (inf or NaN gradient norm,
// the same on every rank) is skipped by the compiled update and S is
// multiplied by `backoff`; after `growthInterval` clean steps in a row S is
// multiplied by `growth`. S stays a power of two (with the default factors)
// so scaling and unscaling are exact.
//
// Overflow skips are expected while S searches for its level, so they do
// not count as divergence; only a skip at the minimum scale, where backing
// off cannot help any more, does (llmc-run --max-nonfinite-steps).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_TRAIN_LOSSSCALER_H
#define LLMC_RUNTIME_TRAIN_LOSSSCALER_H

#include <algorithm>
#include <cstdint>

namespace llmc {

struct LossScaleConfig {
  double initial = 65536.0;     ///< 2^16
  double growth = 2.0;          ///< after growthInterval clean steps
  double backoff = 0.5;         ///< after an overflow
  int64_t growthInterval = 2000;
  double minimum = 1.0;         ///< never backed off below this
};

class LossScaler {
public:
  explicit LossScaler(const LossScaleConfig &config = {})
      : config_(config), scale_(config.initial) {}

  /// The scale the next step's loss is multiplied by.
  double scale() const { return scale_; }
  /// Clean steps since the scale last changed.
  int64_t cleanSteps() const { return clean_; }
  /// Restores a checkpoint's state.
  void restore(double scale, int64_t cleanSteps) {
    scale_ = scale;
    clean_ = cleanSteps;
  }

  /// After a step: `overflow` when it was skipped for a non-finite norm.
  /// Returns false when the overflow happened at the minimum scale (no
  /// back-off left: a divergence, not a scaling problem).
  bool update(bool overflow) {
    if (overflow) {
      clean_ = 0;
      if (scale_ <= config_.minimum)
        return false;
      scale_ = std::max(scale_ * config_.backoff, config_.minimum);
      return true;
    }
    if (++clean_ >= config_.growthInterval) {
      scale_ *= config_.growth;
      clean_ = 0;
    }
    return true;
  }

private:
  LossScaleConfig config_;
  double scale_;
  int64_t clean_ = 0;
};

} // namespace llmc

#endif
