// AsyncActorLoop: how an async actor's calls share its worker's execution thread (an
// actor whose class has ray::Coroutine methods, ray/api/coroutine.h). A call starts
// on that thread as its push is read; when its coroutine awaits, the thread goes on
// with the next call or push; the coroutine continues there (RunQueued) when what
// it awaits is ready. At most `max_concurrency` calls are started and not finished
// at once; the others wait, in the order they came, for one to finish.
//
// Thread-safe: Post from any thread (it calls `wake` so that the execution thread,
// perhaps asleep waiting for pushes, runs the queue). Submit, RunQueued and a call's
// `finished` run on the execution thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace manta::core {

class AsyncActorLoop {
 public:
  AsyncActorLoop(int max_concurrency, std::function<void()> wake);
  AsyncActorLoop(const AsyncActorLoop&) = delete;
  AsyncActorLoop& operator=(const AsyncActorLoop&) = delete;

  // A call: `start(finished)` runs once fewer than max_concurrency calls are running
  // (at once if there is room); the call calls `finished` once, when it is done.
  using Start = std::function<void(std::function<void()> finished)>;
  void Submit(Start start);
  // Queues `fn` (a call's coroutine resuming) for the execution thread; dropped once
  // stopped.
  void Post(std::function<void()> fn);
  // Runs what was queued before the call (what that queues runs at the next call).
  // Returns whether anything ran.
  bool RunQueued();
  // Calls submitted and not finished.
  int64_t NumBusy() const { return busy_.load(); }
  // Drops what is queued; later posts are dropped. Calls suspended in an await are
  // abandoned: their callers get no reply (the actor is going away).
  void Stop();

 private:
  // Starts waiting calls while there is room.
  void StartWaiting();

  const int64_t max_concurrency_;
  const std::function<void()> wake_;
  std::atomic<int64_t> busy_{0};
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Execution thread only.
  int64_t running_ = 0;
  bool starting_ = false;  // inside StartWaiting
  std::deque<Start> waiting_;
};

}  // namespace manta::core
