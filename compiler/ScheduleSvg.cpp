//===- ScheduleSvg.cpp - a pipeline schedule as a picture -----------------===//

#include "compiler/ScheduleSvg.h"

#include "passes/lib/MicrobatchSchedule.h"

#include <cstdlib>
#include <iomanip>
#include <sstream>

namespace llmc {

bool renderScheduleSvg(const std::map<std::string, std::string> &metadata, std::ostream &os,
                       std::string &error) {
  auto get = [&](const std::string &key) {
    auto it = metadata.find("pipeline." + key);
    return it == metadata.end() ? std::string() : it->second;
  };
  if (get("schedule").empty()) {
    error = "the artifact has no pipeline (compile with a pp mesh axis)";
    return false;
  }
  using namespace pipeline;
  Spec spec;
  if (!parseKind(get("schedule"), spec.kind)) {
    error = "unknown pipeline schedule '" + get("schedule") + "'";
    return false;
  }
  auto count = [&](const std::string &key, int &value) {
    std::string text = get(key);
    char *end = nullptr;
    long n = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end || n < 1 || n > 4096) {
      error = "bad pipeline." + key + " '" + text + "' in the artifact";
      return false;
    }
    value = static_cast<int>(n);
    return true;
  };
  if (!count("stages", spec.stages) || !count("microbatches", spec.microbatches) ||
      !count("virtual_stages", spec.virtualStages))
    return false;
  std::vector<std::vector<Action>> schedule(spec.stages);
  std::stringstream stages(get("actions"));
  std::string line;
  for (int s = 0; s < spec.stages; ++s) {
    if (!std::getline(stages, line, ';') || !parseActions(line, s, schedule[s], error)) {
      if (error.empty())
        error = "the pipeline's action list has no row for stage " + std::to_string(s);
      return false;
    }
  }
  Stats stats = simulate(spec, schedule);

  const double unit = 36, row = 34, left = 90, top = 40;
  double width = left + stats.makespan * unit + 20, height = top + spec.stages * row + 50;
  os << std::fixed << std::setprecision(1);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\""
     << height << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  os << "<text x=\"" << left << "\" y=\"20\" font-size=\"13\">" << get("schedule") << ": "
     << spec.stages << " stages";
  if (spec.virtualStages > 1)
    os << " x " << spec.virtualStages << " chunks";
  os << ", " << spec.microbatches << " microbatches, expected bubble "
     << std::setprecision(1) << 100.0 * stats.bubble << "%</text>\n";
  for (int s = 0; s < spec.stages; ++s) {
    double y = top + s * row;
    os << "<text x=\"8\" y=\"" << y + row / 2 + 4 << "\">stage " << s << "</text>\n";
    os << "<rect x=\"" << left << "\" y=\"" << y + 2 << "\" width=\"" << stats.makespan * unit
       << "\" height=\"" << row - 4 << "\" fill=\"#f2f2f2\"/>\n";
    for (size_t i = 0; i < schedule[s].size(); ++i) {
      const Action &a = schedule[s][i];
      auto [start, end] = stats.times[s][i];
      const char *fill = a.phase == Phase::Forward    ? "#4e79a7"
                         : a.phase == Phase::Backward ? "#f28e2b"
                                                      : "#59a14f";
      double x = left + start * unit, w = (end - start) * unit;
      os << "<rect x=\"" << x << "\" y=\"" << y + 2 << "\" width=\"" << w << "\" height=\""
         << row - 4 << "\" fill=\"" << fill << "\" stroke=\"white\"/>\n";
      os << "<text x=\"" << x + w / 2 << "\" y=\"" << y + row / 2 + 4
         << "\" text-anchor=\"middle\" fill=\"white\">"
         << describe({a}, spec.virtualStages) << "</text>\n";
    }
  }
  double y = top + spec.stages * row + 20;
  const char *labels[] = {"forward", "backward (input gradient)", "weight gradient", "idle"};
  const char *colours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#f2f2f2"};
  for (int k = 0; k < 4; ++k) {
    double x = left + k * 170;
    os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\""
       << colours[k] << "\" stroke=\"#999\"/>\n";
    os << "<text x=\"" << x + 20 << "\" y=\"" << y + 11 << "\">" << labels[k] << "</text>\n";
  }
  os << "</svg>\n";
  return true;
}

} // namespace llmc
