//===- RecomputePrice.cpp - each layer's choices, priced and ordered -------===//

#include "compiler/RecomputePrice.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <tuple>

namespace llmc {

namespace {

const char *const kModeNames[] = {"none", "selective", "full"};

struct Step {
  double bytesPerSecond; ///< bytes saved per second added (infinite when free)
  size_t layer, index;   ///< which layer; its index along the layer's hull
  std::string mode;      ///< the layer's mode after the step
};

/// The steps along `layer`'s lower convex hull of (seconds, bytes kept),
/// from keeping everything: from each point, the choice that saves the
/// most bytes per second added (the nearer of equals).
std::vector<Step> hullSteps(const LayerCosts &layer, const PriceModel &model, size_t index) {
  std::vector<LayerChoice> choices = layerChoices(layer, model);
  std::vector<Step> steps;
  LayerChoice at = choices.front(); // keep
  for (;;) {
    const LayerChoice *best = nullptr;
    double bestRate = 0;
    for (const LayerChoice &c : choices) {
      if (c.deviceBytes >= at.deviceBytes)
        continue;
      double saved = at.deviceBytes - c.deviceBytes, added = c.seconds - at.seconds;
      double rate = added > 0 ? saved / added : std::numeric_limits<double>::infinity();
      if (!best || rate > bestRate ||
          (rate == bestRate &&
           std::tie(c.seconds, c.deviceBytes) < std::tie(best->seconds, best->deviceBytes))) {
        best = &c;
        bestRate = rate;
      }
    }
    if (!best)
      return steps;
    steps.push_back({bestRate, index, steps.size(), best->mode});
    at = *best;
  }
}

} // namespace

double offloadSeconds(double bytes, const PriceModel &model) {
  if (model.hostLinkBandwidth <= 0)
    return std::numeric_limits<double>::infinity();
  return 2 * bytes * static_cast<double>(model.microbatches) / model.hostLinkBandwidth;
}

std::vector<LayerChoice> layerChoices(const LayerCosts &layer, const PriceModel &model) {
  std::vector<LayerChoice> choices;
  for (int m : {kKeep, kSelective, kFull})
    choices.push_back({kModeNames[m], layer.recomputeSeconds[m], layer.keptBytes[m]});
  if (model.hostLinkBandwidth > 0)
    for (int m : {kKeep, kSelective, kFull})
      choices.push_back(
          {m == kKeep ? std::string("offload") : std::string(kModeNames[m]) + "+offload",
           layer.recomputeSeconds[m] + offloadSeconds(layer.keptBytes[m], model), 0});
  return choices;
}

LayerChoice choiceOf(const LayerCosts &layer, const PriceModel &model, const std::string &mode) {
  for (const LayerChoice &c : layerChoices(layer, model))
    if (c.mode == (mode.empty() ? "none" : mode))
      return c;
  // Offloading without a host link: not a choice this model offers.
  return {mode, std::numeric_limits<double>::infinity(), layer.keptBytes[kKeep]};
}

std::vector<std::vector<std::string>> pricedLadder(const std::vector<LayerCosts> &layers,
                                                   const PriceModel &model) {
  std::vector<Step> steps;
  for (size_t i = 0; i < layers.size(); ++i)
    for (Step &s : hullSteps(layers[i], model, i)) steps.push_back(std::move(s));
  std::stable_sort(steps.begin(), steps.end(), [](const Step &a, const Step &b) {
    return std::make_tuple(-a.bytesPerSecond, a.layer, a.index) <
           std::make_tuple(-b.bytesPerSecond, b.layer, b.index);
  });
  std::vector<std::vector<std::string>> ladder;
  std::vector<std::string> modes(layers.size(), "none");
  ladder.push_back(modes);
  for (const Step &s : steps) {
    modes[s.layer] = s.mode;
    ladder.push_back(modes);
  }
  return ladder;
}

std::string layerModes(const std::vector<LayerCosts> &layers,
                       const std::vector<std::string> &modes) {
  std::string text;
  for (size_t i = 0; i < layers.size() && i < modes.size(); ++i)
    if (!modes[i].empty() && modes[i] != "none")
      text += (text.empty() ? "" : ",") + layers[i].name + "=" + modes[i];
  return text;
}

std::vector<std::string> parseLayerModes(const std::vector<LayerCosts> &layers,
                                         const std::string &text) {
  std::vector<std::string> modes(layers.size(), "none");
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos)
      continue;
    for (size_t i = 0; i < layers.size(); ++i)
      if (layers[i].name == entry.substr(0, eq))
        modes[i] = entry.substr(eq + 1);
  }
  return modes;
}

double planSeconds(const std::vector<LayerCosts> &layers, const PriceModel &model,
                   const std::vector<std::string> &modes) {
  double seconds = 0;
  for (size_t i = 0; i < layers.size() && i < modes.size(); ++i)
    seconds += choiceOf(layers[i], model, modes[i]).seconds;
  return seconds;
}

} // namespace llmc
