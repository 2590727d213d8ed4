//===- StepWatchdog.cpp - giving up on a wait that cannot end -------------===//

#include "runtime/support/StepWatchdog.h"

#include "runtime/support/Error.h"

#include <sstream>

namespace llmc {

StepWatchdog::StepWatchdog(std::string who, double timeoutSeconds,
                           std::function<std::string()> check, std::function<void()> abort,
                           std::chrono::milliseconds period)
    : who_(std::move(who)), timeoutSeconds_(timeoutSeconds), check_(std::move(check)),
      abort_(std::move(abort)), period_(period), thread_([this] { watch(); }) {}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StepWatchdog::begin(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = true;
  what_ = std::move(what);
  start_ = std::chrono::steady_clock::now();
}

void StepWatchdog::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = false;
  if (!reason_.empty())
    fail(reason_);
}

void StepWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period_);
    if (stopping_ || !open_ || !reason_.empty())
      continue;
    std::string reason = check_();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (reason.empty() && waited >= timeoutSeconds_) {
      std::ostringstream os;
      os << who_ << ": " << what_ << " has not completed after " << timeoutSeconds_
         << " s (--comm-timeout): a peer rank may have died or stopped";
      reason = os.str();
    }
    if (reason.empty())
      continue;
    reason_ = std::move(reason);
    abort_();
  }
}

} // namespace llmc
