//===- CommWatchdog.cpp - giving up on a wait for other ranks -------------===//

#include "runtime/comm/CommWatchdog.h"

#include "runtime/support/Error.h"

#include <sstream>

namespace llmc {

CommWatchdog::CommWatchdog(int rank, double timeoutSeconds, std::function<std::string()> check,
                           std::function<void(const std::string &)> abort,
                           std::chrono::milliseconds period)
    : rank_(rank), timeoutSeconds_(timeoutSeconds), check_(std::move(check)),
      abort_(std::move(abort)), period_(period), thread_([this] { watch(); }) {}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CommWatchdog::begin(const CommLabel &what) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = true;
  what_ = what;
  start_ = std::chrono::steady_clock::now();
}

void CommWatchdog::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = false;
  if (!reason_.empty())
    fail(reason_);
}

void CommWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period_);
    if (stopping_ || !open_ || !reason_.empty())
      continue;
    std::string reason = check_ ? check_() : "";
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (reason.empty() && waited >= timeoutSeconds_) {
      std::ostringstream os;
      os << "rank " << rank_ << ": " << what_ << " has not completed after " << timeoutSeconds_
         << " s: a peer rank died or stopped answering";
      reason = os.str();
    }
    if (reason.empty())
      continue;
    reason_ = std::move(reason);
    abort_(reason_);
  }
}

} // namespace llmc
