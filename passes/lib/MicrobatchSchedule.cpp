//===- MicrobatchSchedule.cpp - microbatch schedules of pipeline stages -----===//
//
// GPipe runs every forward, then every backward: m microbatches in flight.
// 1F1B (PipeDream-Flush) lets stage s run p−s−1 forwards ahead, then
// alternates one forward and one backward, so at most p−s are in flight.
// Interleaved 1F1B (Narayanan et al.) gives each stage v chunks of layers
// and walks them in groups of p microbatches, cutting the bubble by v.
// Zero bubble (ZB-H1, Qi et al.) splits each backward into the input
// gradient B, which the previous stage waits for, and the weight gradient
// W, which nobody waits for, and runs W's in the gaps — here by a greedy
// list scheduler with 1F1B's in-flight limit.
//
//===----------------------------------------------------------------------===//

#include "passes/lib/MicrobatchSchedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace llmc::pipeline {

bool parseKind(const std::string &name, Kind &kind) {
  static const std::map<std::string, Kind> kinds = {{"naive", Kind::Naive},
                                                    {"gpipe", Kind::GPipe},
                                                    {"1f1b", Kind::OneFOneB},
                                                    {"interleaved", Kind::Interleaved},
                                                    {"zero-bubble", Kind::ZeroBubble}};
  auto it = kinds.find(name);
  if (it == kinds.end())
    return false;
  kind = it->second;
  return true;
}

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::Naive: return "naive";
  case Kind::GPipe: return "gpipe";
  case Kind::OneFOneB: return "1f1b";
  case Kind::Interleaved: return "interleaved";
  case Kind::ZeroBubble: return "zero-bubble";
  }
  return "?";
}

namespace {

Action forward(int m, int c) { return {m, c, Phase::Forward}; }
Action backward(int m, int c) { return {m, c, Phase::Backward}; }

/// Interleaved 1F1B for stage s (Megatron-LM's order): the k-th forward
/// runs local chunk (k / p) mod v of microbatch (k / (p·v))·p + k mod p;
/// backwards walk the chunks in reverse.
std::vector<Action> interleavedStage(const Spec &spec, int s) {
  int p = spec.stages, v = spec.virtualStages, total = spec.microbatches * v;
  auto mbOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto fwd = [&](int k) { return forward(mbOf(k), ((k / p) % v) * p + s); };
  auto bwd = [&](int k) { return backward(mbOf(k), (v - 1 - (k / p) % v) * p + s); };
  int warmup = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
  std::vector<Action> out;
  for (int k = 0; k < warmup; ++k) out.push_back(fwd(k));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(fwd(warmup + i));
    out.push_back(bwd(i));
  }
  for (int i = total - warmup; i < total; ++i) out.push_back(bwd(i));
  return out;
}

std::vector<Action> oneFOneBStage(const Spec &spec, int s) {
  int m = spec.microbatches, warmup = std::min(spec.stages - s - 1, m);
  std::vector<Action> out;
  for (int i = 0; i < warmup; ++i) out.push_back(forward(i, s));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(forward(warmup + i, s));
    out.push_back(backward(i, s));
  }
  for (int i = m - warmup; i < m; ++i) out.push_back(backward(i, s));
  return out;
}

double cost(Phase phase, bool split) {
  if (phase == Phase::Forward)
    return 1;
  return split ? 1 : 2;
}

/// Actions whose dependencies must finish first.
std::vector<Action> dependencies(const Action &a, int chunks) {
  switch (a.phase) {
  case Phase::Forward:
    if (a.chunk > 0)
      return {forward(a.microbatch, a.chunk - 1)};
    return {};
  case Phase::Backward:
    if (a.chunk < chunks - 1)
      return {forward(a.microbatch, a.chunk), backward(a.microbatch, a.chunk + 1)};
    return {forward(a.microbatch, a.chunk)};
  case Phase::Weight: return {backward(a.microbatch, a.chunk)};
  }
  return {};
}

struct ActionKey {
  bool operator()(const Action &a, const Action &b) const {
    return std::tie(a.microbatch, a.chunk, a.phase) < std::tie(b.microbatch, b.chunk, b.phase);
  }
};

/// ZB-H1 by greedy list scheduling in unit time steps: a free stage runs a
/// ready B first, else a forward while fewer than p−s microbatches are
/// between forward and backward (1F1B's bound), else a pending W. W's wait
/// to fill the gaps, at most p of them, so the activations they keep stay
/// bounded by the pipeline depth, not the microbatch count. This reaches
/// the ZB-H1 bubble (p−1)/(3m+p−1) for unit F, B and W.
std::vector<std::vector<Action>> zeroBubble(const Spec &spec) {
  int p = spec.stages, m = spec.microbatches;
  std::map<Action, int, ActionKey> finish;
  std::vector<std::vector<Action>> order(p);
  std::vector<int> busyUntil(p, 0), nextForward(p, 0), nextBackward(p, 0), inFlight(p, 0);
  std::vector<std::vector<int>> pendingW(p);
  auto done = [&](const Action &a, int t) {
    auto it = finish.find(a);
    return it != finish.end() && it->second <= t;
  };
  size_t total = static_cast<size_t>(3 * m * p);
  // Every step some stage can act (the first backward is always reachable),
  // so the loop ends well within this bound.
  for (int t = 0; finish.size() < total && t < 8 * static_cast<int>(total) + 8; ++t) {
    for (int s = 0; s < p; ++s) {
      if (busyUntil[s] > t)
        continue;
      Action pick;
      bool have = false;
      if (nextBackward[s] < m) {
        Action b = backward(nextBackward[s], s);
        auto deps = dependencies(b, p);
        if (std::all_of(deps.begin(), deps.end(), [&](const Action &d) { return done(d, t); })) {
          pick = b, have = true;
          ++nextBackward[s], --inFlight[s];
          pendingW[s].push_back(b.microbatch);
        }
      }
      if (have || static_cast<int>(pendingW[s].size()) > p) {
        if (!have) {
          pick = {pendingW[s].front(), s, Phase::Weight};
          pendingW[s].erase(pendingW[s].begin());
          have = true;
        }
        order[s].push_back(pick);
        busyUntil[s] = t + 1;
        finish[pick] = t + 1;
        continue;
      }
      if (!have && nextForward[s] < m && inFlight[s] < p - s) {
        Action f = forward(nextForward[s], s);
        auto deps = dependencies(f, p);
        if (std::all_of(deps.begin(), deps.end(), [&](const Action &d) { return done(d, t); })) {
          pick = f, have = true;
          ++nextForward[s], ++inFlight[s];
        }
      }
      if (!have && !pendingW[s].empty()) {
        pick = {pendingW[s].front(), s, Phase::Weight};
        pendingW[s].erase(pendingW[s].begin());
        have = true;
      }
      if (!have)
        continue;
      order[s].push_back(pick);
      busyUntil[s] = t + 1;
      finish[pick] = t + 1;
    }
  }
  return order;
}

} // namespace

std::vector<std::vector<Action>> buildSchedule(const Spec &spec, std::string &error) {
  int p = spec.stages, m = spec.microbatches, v = spec.virtualStages;
  if (p < 1 || m < 1 || v < 1) {
    error = "pipeline stages, microbatches and virtual stages must be >= 1";
    return {};
  }
  if (v > 1 && spec.kind != Kind::Interleaved) {
    error = "virtual stages need the interleaved schedule";
    return {};
  }
  std::vector<std::vector<Action>> order(p);
  switch (spec.kind) {
  case Kind::Naive:
    for (int s = 0; s < p; ++s)
      for (int i = 0; i < m; ++i) {
        order[s].push_back(forward(i, s));
        order[s].push_back(backward(i, s));
      }
    break;
  case Kind::GPipe:
    for (int s = 0; s < p; ++s) {
      for (int i = 0; i < m; ++i) order[s].push_back(forward(i, s));
      for (int i = 0; i < m; ++i) order[s].push_back(backward(i, s));
    }
    break;
  case Kind::OneFOneB:
    for (int s = 0; s < p; ++s) order[s] = oneFOneBStage(spec, s);
    break;
  case Kind::Interleaved:
    if (m % p != 0) {
      error = "the interleaved schedule needs the microbatch count (" + std::to_string(m) +
              ") to be a multiple of the pipeline stages (" + std::to_string(p) + ")";
      return {};
    }
    for (int s = 0; s < p; ++s) order[s] = interleavedStage(spec, s);
    break;
  case Kind::ZeroBubble: order = zeroBubble(spec); break;
  }
  return order;
}

Stats simulate(const Spec &spec, const std::vector<std::vector<Action>> &schedule) {
  bool split = spec.kind == Kind::ZeroBubble;
  double v = spec.virtualStages;
  // Chunk costs are 1/v of a stage's work.
  return simulate(spec, schedule, [&](int, const Action &a) { return cost(a.phase, split) / v; });
}

Stats simulate(const Spec &spec, const std::vector<std::vector<Action>> &schedule,
               const std::function<double(int stage, const Action &)> &duration) {
  int p = spec.stages, chunks = p * spec.virtualStages;
  double m = spec.microbatches, v = spec.virtualStages;
  Stats stats;
  std::map<Action, double, ActionKey> finish;
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0), busy(p, 0);
  stats.times.resize(p);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < schedule[s].size()) {
        const Action &a = schedule[s][next[s]];
        double start = free[s];
        bool ready = true;
        for (const Action &d : dependencies(a, chunks)) {
          auto it = finish.find(d);
          if (it == finish.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready)
          break;
        double c = duration(s, a);
        finish[a] = free[s] = start + c;
        stats.times[s].push_back({start, start + c});
        busy[s] += c;
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) stats.complete &= next[s] == schedule[s].size();
  for (double f : free) stats.makespan = std::max(stats.makespan, f);
  double work = 0;
  for (double b : busy) work += b;
  stats.bubble = stats.makespan > 0 ? 1.0 - work / (p * stats.makespan) : 0;
  double q = p - 1;
  switch (spec.kind) {
  case Kind::Naive: stats.analyticBubble = q / p; break;
  case Kind::GPipe:
  case Kind::OneFOneB: stats.analyticBubble = q / (m + q); break;
  case Kind::Interleaved: stats.analyticBubble = q / (m + q) / v; break;
  // B and W of 1 each: the cooldown's idle time shrinks from (p−1)(F+B+W)
  // to (p−1)(F+B−W).
  case Kind::ZeroBubble: stats.analyticBubble = q / (3 * m + q); break;
  }
  for (int s = 0; s < p; ++s) {
    int live = 0, peak = 0;
    for (const Action &a : schedule[s]) {
      if (a.phase == Phase::Forward)
        peak = std::max(peak, ++live);
      if (a.phase == Phase::Backward)
        --live;
    }
    stats.peakInFlight.push_back(peak);
  }
  return stats;
}

std::string describe(const std::vector<Action> &actions, int virtualStages) {
  std::ostringstream os;
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action &a = actions[i];
    os << (i ? " " : "")
       << (a.phase == Phase::Forward    ? 'F'
           : a.phase == Phase::Backward ? 'B'
                                        : 'W')
       << a.microbatch;
    if (virtualStages > 1)
      os << "." << a.chunk;
  }
  return os.str();
}

bool parseActions(const std::string &text, int stage, std::vector<Action> &actions,
                  std::string &error) {
  std::istringstream in(text);
  for (std::string token; in >> token;) {
    // Digits only, non-empty.
    auto number = [](const std::string &digits, int &value) {
      if (digits.empty() || digits.size() > 9 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return false;
      value = std::stoi(digits);
      return true;
    };
    Action a;
    char kind = token[0];
    a.phase = kind == 'F' ? Phase::Forward : kind == 'B' ? Phase::Backward : Phase::Weight;
    size_t dot = token.find('.');
    std::string mb = token.substr(1, dot == std::string::npos ? std::string::npos : dot - 1);
    a.chunk = stage;
    if ((kind != 'F' && kind != 'B' && kind != 'W') || !number(mb, a.microbatch) ||
        (dot != std::string::npos && !number(token.substr(dot + 1), a.chunk))) {
      error = "bad pipeline action '" + token + "'";
      return false;
    }
    actions.push_back(a);
  }
  return true;
}

} // namespace llmc::pipeline
