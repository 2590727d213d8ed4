//===- AttentionChoice.cpp - which attention each op got, and why ---------===//
//
// Part of llmc: see AttentionChoice.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/AttentionChoice.h"

#include <mutex>
#include <utility>

namespace llmc::cuda {
namespace {

/// One line of the summary: an implementation and a reason, with the ops
/// that got them and how many of each.
struct Group {
  std::string impl, why;
  std::vector<std::pair<std::string, int>> ops;
};

std::mutex gMutex;
std::vector<Group> gGroups;

} // namespace

void noteAttention(const std::string &op, const std::string &impl, const std::string &why) {
  std::lock_guard<std::mutex> lock(gMutex);
  Group *group = nullptr;
  for (Group &g : gGroups)
    if (g.impl == impl && g.why == why) group = &g;
  if (!group) group = &gGroups.emplace_back(Group{impl, why, {}});
  for (auto &[name, count] : group->ops)
    if (name == op) {
      ++count;
      return;
    }
  group->ops.emplace_back(op, 1);
}

std::vector<std::string> takeAttentionNotes() {
  std::lock_guard<std::mutex> lock(gMutex);
  std::vector<std::string> lines;
  for (const Group &g : gGroups) {
    std::string line = "attention: " + g.impl + " for ";
    for (size_t i = 0; i < g.ops.size(); ++i)
      line += (i ? ", " : "") + std::to_string(g.ops[i].second) + " " + g.ops[i].first;
    if (!g.why.empty()) line += " (" + g.why + ")";
    lines.push_back(line);
  }
  gGroups.clear();
  return lines;
}

} // namespace llmc::cuda
