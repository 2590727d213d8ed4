//===- RecomputePrice.h - what each layer's choice costs a step -*- C++ -*-===//
//
// `--recompute budget=<bytes>` chooses, layer by layer, what becomes of the
// values a layer's forward saves for its backward: kept in the arena,
// recomputed (selectively or in full) before the backward, or kept in host
// memory (alone or after recomputation: "offload", "selective+offload",
// "full+offload"). Each choice has a time price per step and leaves some
// bytes in the arena. This file holds the prices and the order in which
// the budget search tries the choices; RecomputeBudget.cpp measures the
// inputs from compiled plans and checks which order's prefix fits.
//
// Prices (docs/memory.md, "Which choice is cheapest"):
//   keep                 0
//   recompute mode m     the priced kernels the mode adds to the step
//                        (KernelCost.h), shared equally by the layers
//   offload              2 · kept bytes · microbatches / host link: each
//                        saved byte goes down once and up once per
//                        microbatch; the copies run in the compute
//                        stream's order (CUDA) or as a memcpy (CPU), so
//                        nothing hides them.
//
// Plain C++, no MLIR: the unit tests price by hand.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_RECOMPUTEPRICE_H
#define LLMC_COMPILER_RECOMPUTEPRICE_H

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

/// The recomputation modes a layer's saved values can go through, in the
/// order of the arrays below.
enum RecomputeMode { kKeep = 0, kSelective = 1, kFull = 2 };

/// One layer's inputs to the price, measured on the compiled plans that
/// recompute nothing, every layer selectively, and every layer in full.
struct LayerCosts {
  std::string name;
  /// Bytes the layer keeps for its backward per microbatch (the plan's
  /// saved_per_layer) under each mode.
  std::array<double, 3> keptBytes{0, 0, 0};
  /// Seconds per step that mode's recomputation adds.
  std::array<double, 3> recomputeSeconds{0, 0, 0};
};

struct PriceModel {
  /// Bytes/s one device copies to or from host memory, each way; 0: the
  /// host is not offered (pipeline stages, or --offload activations
  /// already moves every layer).
  double hostLinkBandwidth = 0;
  int64_t microbatches = 1;
};

/// One way of treating a layer's saved values.
struct LayerChoice {
  std::string mode;       ///< none, selective, full, offload, selective+offload, full+offload
  double seconds = 0;     ///< added to the step
  double deviceBytes = 0; ///< kept in the arena per microbatch (offloaded: 0, as modeled)
};

/// Seconds a step spends copying `bytes` per microbatch down and back up.
double offloadSeconds(double bytes, const PriceModel &model);

/// Every choice of `layer`: the three recomputation modes and, with a host
/// link, each of them offloaded too.
std::vector<LayerChoice> layerChoices(const LayerCosts &layer, const PriceModel &model);

/// The choice named `mode` ("" or "none" is kept) of `layer`.
LayerChoice choiceOf(const LayerCosts &layer, const PriceModel &model, const std::string &mode);

/// The order the budget search tries plans in: level 0 keeps every layer;
/// each next level moves one layer one step further along its lower convex
/// hull of (seconds, bytes kept), the step that saves the most bytes per
/// second added among all layers' next steps (the greedy that is optimal for
/// the relaxed problem of a multiple-choice knapsack). Ties go to the
/// earlier layer, as the first layers hold their activations longest. Each
/// level is returned as one mode per layer.
std::vector<std::vector<std::string>> pricedLadder(const std::vector<LayerCosts> &layers,
                                                   const PriceModel &model);

/// Layer modes as `recompute` takes them ("h.0=full,h.1=offload"; kept
/// layers left out).
std::string layerModes(const std::vector<LayerCosts> &layers,
                       const std::vector<std::string> &modes);

/// The modes of "h.0=full,h.1=offload" for `layers` (unnamed: none).
std::vector<std::string> parseLayerModes(const std::vector<LayerCosts> &layers,
                                         const std::string &text);

/// Seconds `modes` add to a step.
double planSeconds(const std::vector<LayerCosts> &layers, const PriceModel &model,
                   const std::vector<std::string> &modes);

} // namespace llmc

#endif // LLMC_COMPILER_RECOMPUTEPRICE_H
