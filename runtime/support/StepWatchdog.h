//===- StepWatchdog.h - giving up on a wait that cannot end -----*- C++ -*-===//
//
// A device wait that depends on other ranks (NCCL's kernels spin until
// their peers arrive) never returns when a peer has died or stopped. A
// watchdog thread looks at an open wait every `period`: when `check` names
// a reason to give up (a communicator's asynchronous error) or the wait
// has lasted `timeout` seconds, it calls `abort` once — which must make
// the waiting call return, as ncclCommAbort does for NCCL's kernels — and
// the waiter's end() throws the reason. This is PyTorch's NCCL watchdog in
// one class; the CUDA device wraps each program's wait in begin()/end().
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_SUPPORT_STEPWATCHDOG_H
#define LLMC_RUNTIME_SUPPORT_STEPWATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace llmc {

class StepWatchdog {
public:
  /// `who` starts the timeout's reason ("rank 3"); `check` returns "" while
  /// all is well; both callbacks run on the watchdog's thread.
  StepWatchdog(std::string who, double timeoutSeconds, std::function<std::string()> check,
               std::function<void()> abort,
               std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog &) = delete;
  StepWatchdog &operator=(const StepWatchdog &) = delete;

  /// A wait for `what` (named in the timeout's reason) starts.
  void begin(std::string what);
  /// The wait returned: throws RuntimeError with the reason when the
  /// watchdog gave up on it (then every later wait throws it too: what was
  /// aborted stays so).
  void end();

private:
  void watch();

  const std::string who_;
  const double timeoutSeconds_;
  const std::function<std::string()> check_;
  const std::function<void()> abort_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool open_ = false, stopping_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point start_;
  std::string reason_; ///< set once, when the watchdog gave up
  std::thread thread_;
};

} // namespace llmc

#endif
