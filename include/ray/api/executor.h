// Where coroutines run (ray/api/coroutine.h): ray::Executor, anything that runs a
// function later on a thread of its own, and ray::ThreadPoolExecutor, one with
// threads of its own.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ray {

// Runs functions later, on a thread of its own (never inline in Post): where
// coroutines resume. Copyable; the copies post to the same place.
class Executor {
 public:
  using PostFunction = std::function<void(std::function<void()>)>;
  explicit Executor(PostFunction post) : post_(std::move(post)) {}
  void Post(std::function<void()> fn) const { post_(std::move(fn)); }

 private:
  PostFunction post_;
};

// An executor with threads of its own (ray::Spawn's, for a program without one):
// `threads` threads run what is posted, in order of posting when there is one. The
// destructor runs what was posted and joins them.
class ThreadPoolExecutor {
 public:
  explicit ThreadPoolExecutor(int threads = 1) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~ThreadPoolExecutor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  ThreadPoolExecutor(const ThreadPoolExecutor&) = delete;
  ThreadPoolExecutor& operator=(const ThreadPoolExecutor&) = delete;

  // Posts here; valid while this pool lives.
  Executor executor() {
    return Executor([this](std::function<void()> fn) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(fn));
      }
      cv_.notify_one();
    });
  }
  std::vector<std::thread::id> thread_ids() const {
    std::vector<std::thread::id> ids;
    for (const std::thread& t : threads_) ids.push_back(t.get_id());
    return ids;
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ray
