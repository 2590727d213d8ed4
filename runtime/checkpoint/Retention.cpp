//===- Retention.cpp - which checkpoints a run keeps ---------------------===//

#include "runtime/checkpoint/Retention.h"
#include "runtime/support/Error.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace llmc {
namespace {

namespace fs = std::filesystem;

constexpr const char *kStepPrefix = "step_";
constexpr const char *kDeletingPrefix = ".deleting-";
/// AtomicFile's temporary for `latest`: a run killed between creating it
/// and renaming it over `latest` leaves it behind.
constexpr const char *kLatestTempPrefix = "latest.tmp.";

std::string stepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step_%08lld", static_cast<long long>(step));
  return name;
}

/// The step `latest` names, or -1 when there is none.
int64_t latestStep(const std::string &dir) {
  std::ifstream in(dir + "/latest");
  std::string name;
  if (!in || !(in >> name) || name.rfind(kStepPrefix, 0) != 0)
    return -1;
  try {
    return std::stoll(name.substr(5));
  } catch (...) {
    return -1;
  }
}

void removeTree(const fs::path &path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error)
    fail("cannot delete '", path.string(), "': ", error.message());
}

} // namespace

std::vector<int64_t> checkpointSteps(const std::string &dir) {
  std::vector<int64_t> steps;
  std::error_code error;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind(kStepPrefix, 0) != 0 || name.size() != 13 ||
        name.find_first_not_of("0123456789", 5) != std::string::npos)
      continue;
    steps.push_back(std::stoll(name.substr(5)));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<int64_t> pruneCheckpoints(const std::string &dir, const RetentionPolicy &policy) {
  std::vector<int64_t> deleted;
  int64_t latest = latestStep(dir);
  if (latest < 0)
    return deleted;
  // What an interrupted deletion, or an interrupted write of `latest`, left
  // (this run has just written `latest`: no write of it is under way).
  std::error_code error;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(kDeletingPrefix, 0) == 0 || name.rfind(kLatestTempPrefix, 0) == 0)
      removeTree(entry.path());
  }

  std::vector<int64_t> steps = checkpointSteps(dir);
  std::set<int64_t> keep{latest};
  std::vector<int64_t> published;
  for (int64_t step : steps)
    if (step <= latest)
      published.push_back(step);
  if (policy.keepLast <= 0) {
    keep.insert(published.begin(), published.end());
  } else {
    int64_t from = std::max<int64_t>(0, static_cast<int64_t>(published.size()) - policy.keepLast);
    keep.insert(published.begin() + from, published.end());
  }
  if (policy.keepEvery > 0)
    for (int64_t step : published)
      if (step % policy.keepEvery == 0)
        keep.insert(step);

  for (int64_t step : steps) {
    if (keep.count(step))
      continue;
    fs::path from = fs::path(dir) / stepName(step);
    fs::path to = fs::path(dir) / (std::string(kDeletingPrefix) + stepName(step));
    fs::rename(from, to, error); // atomic: from here on it is no checkpoint
    if (error)
      fail("cannot delete checkpoint '", from.string(), "': ", error.message());
    removeTree(to);
    deleted.push_back(step);
  }
  return deleted;
}

} // namespace llmc
