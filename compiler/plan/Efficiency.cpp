//===- Efficiency.cpp - wave-quantized GEMMs and measured attention -------===//

#include "compiler/plan/Efficiency.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmc::plan {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

double gemmRate(const Efficiency &efficiency, double peak) {
  return efficiency.gemmFlops > 0 ? std::min(efficiency.gemmFlops, peak) : peak;
}

} // namespace

std::vector<GemmTile> largeGemmTiles() { return {{128, 256}, {256, 128}, {128, 128}}; }

WaveFit bestWaveFit(const Efficiency &efficiency, const GemmShape &shape) {
  WaveFit best;
  if (efficiency.sms <= 0 || shape.m <= 0 || shape.n <= 0 || shape.batch <= 0)
    return best;
  best.efficiency = -1;
  for (const GemmTile &tile : efficiency.tiles) {
    WaveFit fit;
    fit.tile = tile;
    fit.tiles = shape.batch * ceilDiv(shape.m, tile.rows) * ceilDiv(shape.n, tile.cols);
    fit.waves = ceilDiv(fit.tiles, efficiency.sms);
    // A wave is every SM computing one tile, so the waves hold
    // waves·sms·rows·cols output elements of which batch·m·n are wanted.
    double capacity = static_cast<double>(fit.waves) * efficiency.sms * tile.rows * tile.cols;
    fit.efficiency = static_cast<double>(shape.batch) * shape.m * shape.n / capacity;
    if (fit.efficiency > best.efficiency)
      best = fit;
  }
  if (best.efficiency < 0)
    best = WaveFit();
  return best;
}

double gemmSeconds(const Efficiency &efficiency, double peak, const GemmShape &shape,
                   double rateScale) {
  double flops = 2.0 * shape.batch * shape.m * shape.n * shape.k;
  if (flops <= 0)
    return 0;
  return flops / (gemmRate(efficiency, peak) * rateScale * bestWaveFit(efficiency, shape).efficiency);
}

double attentionRate(const Efficiency &efficiency, double peak, int64_t headDim, int64_t seq) {
  if (efficiency.attention.empty())
    return peak;
  // The measured head dimension nearest to the model's.
  double nearest = std::numeric_limits<double>::infinity();
  int64_t dim = 0;
  for (const AttentionRate &r : efficiency.attention) {
    double distance = std::fabs(std::log2(static_cast<double>(r.headDim) / std::max<int64_t>(1, headDim)));
    if (distance < nearest)
      nearest = distance, dim = r.headDim;
  }
  std::vector<AttentionRate> points;
  for (const AttentionRate &r : efficiency.attention)
    if (r.headDim == dim)
      points.push_back(r);
  std::sort(points.begin(), points.end(),
            [](const AttentionRate &a, const AttentionRate &b) { return a.seq < b.seq; });
  double rate = points.front().flopsPerSecond;
  if (seq >= points.back().seq) {
    rate = points.back().flopsPerSecond;
  } else if (seq > points.front().seq) {
    for (size_t i = 1; i < points.size(); ++i) {
      if (seq > points[i].seq)
        continue;
      double x0 = std::log2(static_cast<double>(points[i - 1].seq));
      double x1 = std::log2(static_cast<double>(points[i].seq));
      double t = x1 > x0 ? (std::log2(static_cast<double>(seq)) - x0) / (x1 - x0) : 1;
      rate = points[i - 1].flopsPerSecond + t * (points[i].flopsPerSecond - points[i - 1].flopsPerSecond);
      break;
    }
  }
  return std::min(rate, peak);
}

double achievableFraction(const Efficiency &efficiency, double peak) {
  double fastest = gemmRate(efficiency, peak);
  if (efficiency.attention.empty())
    fastest = peak;
  for (const AttentionRate &r : efficiency.attention)
    fastest = std::max(fastest, std::min(r.flopsPerSecond, peak));
  return fastest / peak;
}

std::string validate(const Efficiency &e) {
  if (e.sms < 0)
    return "the SM count cannot be negative";
  if (e.sms > 0 && e.tiles.empty())
    return "a device with SMs needs its GEMM tiles";
  for (const GemmTile &t : e.tiles)
    if (t.rows <= 0 || t.cols <= 0)
      return "a GEMM tile of " + std::to_string(t.rows) + "×" + std::to_string(t.cols) +
             " is not positive";
  if (e.gemmFlops < 0)
    return "the large-GEMM rate cannot be negative";
  for (const AttentionRate &r : e.attention)
    if (r.headDim <= 0 || r.seq <= 0 || !(r.flopsPerSecond > 0))
      return "an attention rate needs a positive head dimension, sequence and rate";
  return "";
}

} // namespace llmc::plan
