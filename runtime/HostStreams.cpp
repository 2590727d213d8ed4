//===- HostStreams.cpp - the CPU's two streams and their events -----------===//

#include "runtime/HostStreams.h"
#include "runtime/support/Error.h"

#include <chrono>

namespace llmc {

HostStreams::~HostStreams() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable())
    worker_.join();
}

void HostStreams::beginRun() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++run_;
  queue_.clear();
  next_ = 0;
  abandoning_ = false;
  error_ = nullptr;
}

void HostStreams::setDelays(int maxMicros, uint64_t seed) {
  maxDelayMicros_ = maxMicros;
  for (int s = 0; s < 2; ++s)
    delayRng_[s].seed(seed * 2 + static_cast<uint64_t>(s));
}

void HostStreams::delay(int stream) {
  if (maxDelayMicros_ <= 0)
    return;
  std::uniform_int_distribution<int> micros(0, maxDelayMicros_);
  std::this_thread::sleep_for(std::chrono::microseconds(micros(delayRng_[stream])));
}

void HostStreams::launch(int stream, const ExecutionDevice::Step &step, const StepContext &ctx) {
  if (stream == 0) {
    delay(0);
    step(ctx);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!worker_.joinable())
      worker_ = std::thread([this] { workerLoop(); });
    queue_.push_back({&step, &ctx});
  }
  changed_.notify_all();
}

void HostStreams::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || next_ < queue_.size(); });
    if (next_ == queue_.size())
      return; // stopping, nothing left
    Item item = queue_[next_++];
    // After an error or while the run is abandoned the rest is skipped: a
    // collective after a failed one would only wait for peers in vain.
    if (error_ || abandoning_) {
      changed_.notify_all();
      continue;
    }
    busy_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      delay(1);
      (*item.step)(*item.ctx);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (failure && !error_ && !abandoning_)
      error_ = failure;
    changed_.notify_all();
  }
}

void HostStreams::record(int64_t event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t index = static_cast<size_t>(event);
    if (index >= events_.size())
      events_.resize(index + 1, 0);
    events_[index] = run_;
  }
  changed_.notify_all();
}

void HostStreams::wait(int64_t event) {
  size_t index = static_cast<size_t>(event);
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] {
    return (index < events_.size() && events_[index] == run_) || error_ || abandoning_;
  });
  if (index < events_.size() && events_[index] == run_)
    return;
  // The other stream failed (drain() reports why) or stream 0 did.
  fail("stream wait for event ", event, " abandoned: the other stream stopped with an error");
}

void HostStreams::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return next_ == queue_.size() && !busy_; });
  if (std::exception_ptr failure = error_) {
    error_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void HostStreams::abandon() {
  std::unique_lock<std::mutex> lock(mutex_);
  abandoning_ = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return next_ == queue_.size() && !busy_; });
}

} // namespace llmc
