// ActorThreadPool: the threads that run a threaded actor's calls (max_concurrency > 1).
//
// Post queues a call; one of `threads` threads runs it. Stop drops the calls that
// have not started and waits for the running ones to finish; the threads are joined
// then, so nothing of the pool outlives it (the destructor stops it, waiting as long
// as the calls take). Thread-safe; Stop must not be called from a pool thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace manta::core {

class ActorThreadPool {
 public:
  explicit ActorThreadPool(int threads);
  ~ActorThreadPool();
  ActorThreadPool(const ActorThreadPool&) = delete;
  ActorThreadPool& operator=(const ActorThreadPool&) = delete;

  // Queues `fn`; dropped if the pool is stopping.
  void Post(std::function<void()> fn);
  // Calls queued or running.
  int64_t NumBusy();
  // Drops the queued calls and waits up to `timeout_ms` (-1: as long as it takes)
  // for the running ones. True once they have all finished and the threads are
  // joined; false if some still run (call again, or leave the process).
  bool Stop(int64_t timeout_ms);

 private:
  void Work();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ == 0; }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // joined by the first Stop that sees them idle
};

}  // namespace manta::core
