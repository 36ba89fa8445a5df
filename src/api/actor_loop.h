// ActorLoop: one thread running what is posted to it, in order of posting. An async
// actor's event loop in local mode: its calls start there in submission order, and
// its coroutine calls resume there, so many run interleaved on the one thread (as
// on a cluster, where the actor's worker has such a loop).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace ray {
namespace internal {

class ActorLoop {
 public:
  ActorLoop() : thread_([this] { Main(); }) {}
  // Stops and joins. REQUIRES: not called on the loop's own thread.
  ~ActorLoop() {
    Stop();
    Join();
  }
  ActorLoop(const ActorLoop&) = delete;
  ActorLoop& operator=(const ActorLoop&) = delete;

  // Any thread; never blocks on what the loop runs. Dropped once the loop ended.
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_ && finished_.load(std::memory_order_relaxed)) return;
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  // The thread ends once nothing is queued.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_one();
  }
  // Waits for the thread to end (after Stop). REQUIRES: not on the loop's thread.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  // The thread has ended (joining it does not wait).
  bool Finished() const { return finished_.load(std::memory_order_acquire); }

 private:
  void Main() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
      if (queue_.empty()) break;
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      fn = nullptr;  // what it holds goes outside the lock too
      lock.lock();
    }
    finished_.store(true, std::memory_order_release);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace internal
}  // namespace ray
