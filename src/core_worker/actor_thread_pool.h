// ActorThreadPool: the threads that run a threaded actor's calls (max_concurrency > 1).
//
// Post queues a call; one of `threads` threads runs it. Threads still running user
// code when the pool is destroyed finish on their own (the pool's destruction means
// the worker is exiting); queued calls that did not start are dropped. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace manta::core {

class ActorThreadPool {
 public:
  explicit ActorThreadPool(int threads) : state_(std::make_shared<State>()) {
    for (int i = 0; i < threads; ++i) {
      std::thread([state = state_] {
        while (true) {
          std::function<void()> fn;
          {
            std::unique_lock<std::mutex> lock(state->mu);
            state->cv.wait(lock, [&] { return state->stop || !state->queue.empty(); });
            if (state->stop) return;
            fn = std::move(state->queue.front());
            state->queue.pop_front();
          }
          fn();
        }
      }).detach();
    }
  }
  ~ActorThreadPool() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->queue.clear();
    state_->cv.notify_all();
  }
  ActorThreadPool(const ActorThreadPool&) = delete;
  ActorThreadPool& operator=(const ActorThreadPool&) = delete;

  void Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->queue.push_back(std::move(fn));
    state_->cv.notify_one();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool stop = false;
  };
  std::shared_ptr<State> state_;
};

}  // namespace manta::core
