#include "src/core_worker/actor_thread_pool.h"

#include <utility>

#include "absl/time/time.h"

namespace manta::core {

ActorThreadPool::ActorThreadPool(int threads) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

ActorThreadPool::~ActorThreadPool() { Stop(-1); }

void ActorThreadPool::Work() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &ActorThreadPool::HasWorkOrStopping));
    if (stopping_) return;
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    mu_.Unlock();
    fn();
    fn = nullptr;  // what the call held goes before the pool says it is idle
    mu_.Lock();
    --running_;
  }
}

void ActorThreadPool::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.push_back(std::move(fn));
}

int64_t ActorThreadPool::NumBusy() {
  absl::MutexLock lock(&mu_);
  return running_ + static_cast<int64_t>(queue_.size());
}

bool ActorThreadPool::Stop(int64_t timeout_ms) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
    const absl::Condition idle(this, &ActorThreadPool::Idle);
    if (timeout_ms < 0) {
      mu_.Await(idle);
    } else if (!mu_.AwaitWithTimeout(idle, absl::Milliseconds(timeout_ms))) {
      return false;
    }
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  return true;
}

}  // namespace manta::core
