//===- CommWatchdog.h - giving up on a wait for other ranks -----*- C++ -*-===//
//
// A wait that depends on other ranks — an MPI collective, or a CUDA
// program whose NCCL kernels spin until their peers arrive — never returns
// when a peer has died or stopped. A watchdog thread looks at the open
// wait every `period`: when `check` names a reason to give up (a
// communicator's asynchronous error) or the wait has lasted `timeout`
// seconds (--comm-timeout), it calls `abort` once with the reason. MPI's
// abort ends the process (MPI cannot be interrupted); NCCL's aborts the
// communicators (ncclCommAbort), the kernels return, and the waiter's end()
// throws the reason. PyTorch's NCCL watchdog, in one class for both.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_RUNTIME_COMM_COMMWATCHDOG_H
#define LLMC_RUNTIME_COMM_COMMWATCHDOG_H

#include "runtime/comm/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace llmc {

class CommWatchdog {
public:
  /// `rank` starts the timeout's reason; `check` (may be empty) returns ""
  /// while all is well; both callbacks run on the watchdog's thread.
  CommWatchdog(int rank, double timeoutSeconds, std::function<std::string()> check,
               std::function<void(const std::string &reason)> abort,
               std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~CommWatchdog();
  CommWatchdog(const CommWatchdog &) = delete;
  CommWatchdog &operator=(const CommWatchdog &) = delete;

  /// A wait for `what` starts (formatted only on a timeout: nothing is
  /// allocated per wait; the label's group name must outlive the wait).
  void begin(const CommLabel &what);
  /// The wait returned: throws RuntimeError with the reason when the
  /// watchdog gave up on it (then every later wait throws it too: what was
  /// aborted stays so).
  void end();

private:
  void watch();

  const int rank_;
  const double timeoutSeconds_;
  const std::function<std::string()> check_;
  const std::function<void(const std::string &)> abort_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool open_ = false, stopping_ = false;
  CommLabel what_;
  std::chrono::steady_clock::time_point start_;
  std::string reason_; ///< set once, when the watchdog gave up
  std::thread thread_;
};

} // namespace llmc

#endif
