//===- CommWatchdogTest.cpp - giving up on a wait for other ranks ---------===//
//
// A wait that ends in time is left alone; one that outlasts the timeout,
// or whose check reports an error, is aborted once and its end() throws
// the reason — as the CUDA device's wait for a program whose NCCL peer
// died, or an MPI collective. A condition variable stands in for the
// device: abort wakes it.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommWatchdog.h"

#include "runtime/support/Error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

using namespace llmc;
using namespace std::chrono_literals;

namespace {

/// A wait that only `release` (the abort) ends, or that ends by itself
/// after `after`.
class StuckWait {
public:
  void release() {
    std::lock_guard<std::mutex> lock(m_);
    released_ = true;
    ++aborts;
    cv_.notify_all();
  }
  void wait(std::chrono::milliseconds after) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, after, [&] { return released_; });
  }
  std::atomic<int> aborts{0};

private:
  std::mutex m_;
  std::condition_variable cv_;
  bool released_ = false;
};

std::string endMessage(CommWatchdog &watchdog) {
  try {
    watchdog.end();
  } catch (const RuntimeError &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(CommWatchdog, WaitsThatEndInTimeAreLeftAlone) {
  StuckWait device;
  CommWatchdog watchdog(
      0, 5, [] { return std::string(); }, [&](const std::string &) { device.release(); }, 5ms);
  for (int i = 0; i < 3; ++i) {
    watchdog.begin(CommLabel{"step ", nullptr, i});
    device.wait(20ms);
    EXPECT_EQ(endMessage(watchdog), "");
  }
  EXPECT_EQ(device.aborts, 0);
}

TEST(CommWatchdog, AWaitPastTheTimeoutIsAbortedOnceAndThrows) {
  StuckWait device;
  CommWatchdog watchdog(
      1, 0.05, [] { return std::string(); }, [&](const std::string &) { device.release(); }, 5ms);
  watchdog.begin({"the step's device work"});
  device.wait(10s); // returns once aborted
  EXPECT_EQ(endMessage(watchdog),
            "rank 1: the step's device work has not completed after 0.05 s: a peer rank died "
            "or stopped answering");
  EXPECT_EQ(device.aborts, 1);
  // What was aborted stays so: the next wait fails at once, not again aborted.
  watchdog.begin({"the next step"});
  EXPECT_NE(endMessage(watchdog), "");
  EXPECT_EQ(device.aborts, 1);
}

TEST(CommWatchdog, AnErrorTheCheckReportsAbortsBeforeTheTimeout) {
  StuckWait device;
  std::atomic<bool> broken{false};
  CommWatchdog watchdog(
      0, 3600, [&] { return broken ? std::string("rank 0: NCCL reported a remote error") : ""; },
      [&](const std::string &) { device.release(); }, 5ms);
  watchdog.begin({"the step's device work"});
  broken = true;
  device.wait(10s);
  EXPECT_EQ(endMessage(watchdog), "rank 0: NCCL reported a remote error");
  EXPECT_EQ(device.aborts, 1);
}

TEST(CommWatchdog, NoWaitOpenNothingIsChecked) {
  std::atomic<int> checks{0};
  {
    CommWatchdog watchdog(
        0, 0.001,
        [&] {
          ++checks;
          return std::string("error");
        },
        [](const std::string &) {}, 1ms);
    std::this_thread::sleep_for(30ms);
  }
  EXPECT_EQ(checks, 0);
}
