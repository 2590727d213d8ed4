//===- HostStreams.cpp - the CPU's streams and their events ---------------===//

#include "runtime/HostStreams.h"
#include "runtime/support/Error.h"

#include <chrono>

namespace llmc {

HostStreams::HostStreams(std::vector<int> laneOfStream) : laneOfStream_(std::move(laneOfStream)) {
  if (!laneOfStream_.empty() && laneOfStream_[0] != 0)
    fail("HostStreams: stream 0 runs on the calling thread (lane 0)");
}

HostStreams::~HostStreams() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto &l : lanes_)
    if (l && l->thread.joinable())
      l->thread.join();
}

int HostStreams::laneOf(int stream) const {
  if (laneOfStream_.empty())
    return stream;
  return static_cast<size_t>(stream) < laneOfStream_.size() ? laneOfStream_[stream] : 1;
}

HostStreams::Lane &HostStreams::lane(int index) {
  if (static_cast<size_t>(index) >= lanes_.size())
    lanes_.resize(static_cast<size_t>(index) + 1);
  std::unique_ptr<Lane> &l = lanes_[static_cast<size_t>(index)];
  if (!l) {
    l = std::make_unique<Lane>();
    l->delayRng.seed(delaySeed_ * 8 + static_cast<uint64_t>(index));
  }
  return *l;
}

void HostStreams::beginRun() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++run_;
  for (auto &l : lanes_)
    if (l) {
      l->queue.clear();
      l->next = 0;
    }
  abandoning_ = false;
  error_ = nullptr;
}

void HostStreams::setDelays(int maxMicros, uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  maxDelayMicros_ = maxMicros;
  delaySeed_ = seed;
  callerRng_.seed(seed * 8);
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i])
      lanes_[i]->delayRng.seed(seed * 8 + i);
}

void HostStreams::delay(std::mt19937_64 &rng) {
  if (maxDelayMicros_ <= 0)
    return;
  std::uniform_int_distribution<int> micros(0, maxDelayMicros_);
  std::this_thread::sleep_for(std::chrono::microseconds(micros(rng)));
}

void HostStreams::launch(int stream, const ExecutionDevice::Step &step, const StepContext &ctx) {
  int index = laneOf(stream);
  if (index == 0) {
    delay(callerRng_);
    step(ctx);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Lane &l = lane(index);
    if (!l.thread.joinable())
      l.thread = std::thread([this, &l] { workerLoop(l); });
    l.queue.push_back({&step, &ctx});
  }
  changed_.notify_all();
}

void HostStreams::workerLoop(Lane &l) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || l.next < l.queue.size(); });
    if (l.next == l.queue.size())
      return; // stopping, nothing left
    Item item = l.queue[l.next++];
    // After an error or while the run is abandoned the rest is skipped: a
    // collective after a failed one would only wait for peers in vain.
    if (error_ || abandoning_) {
      changed_.notify_all();
      continue;
    }
    l.busy = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      delay(l.delayRng);
      (*item.step)(*item.ctx);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    l.busy = false;
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
  // Another lane failed (drain() reports why) or lane 0 did.
  fail("stream wait for event ", event, " abandoned: another stream stopped with an error");
}

bool HostStreams::idle() const {
  for (const auto &l : lanes_)
    if (l && (l->next < l->queue.size() || l->busy))
      return false;
  return true;
}

void HostStreams::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return idle(); });
  if (std::exception_ptr failure = error_) {
    error_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void HostStreams::abandon() {
  std::unique_lock<std::mutex> lock(mutex_);
  abandoning_ = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return idle(); });
}

} // namespace llmc
