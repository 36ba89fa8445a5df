#include "src/core_worker/async_actor_loop.h"

#include <algorithm>
#include <utility>

namespace manta::core {

AsyncActorLoop::AsyncActorLoop(int max_concurrency, std::function<void()> wake)
    : max_concurrency_(std::max(1, max_concurrency)), wake_(std::move(wake)) {}

void AsyncActorLoop::Post(std::function<void()> fn) {
  bool was_empty;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    was_empty = queue_.empty();
    queue_.push_back(std::move(fn));
  }
  if (was_empty && wake_) wake_();
}

bool AsyncActorLoop::RunQueued() {
  std::deque<std::function<void()>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(queue_);
  }
  for (std::function<void()>& fn : batch) fn();
  return !batch.empty();
}

void AsyncActorLoop::Submit(Start start) {
  busy_.fetch_add(1);
  waiting_.push_back(std::move(start));
  StartWaiting();
}

void AsyncActorLoop::StartWaiting() {
  starting_ = true;
  while (running_ < max_concurrency_ && !waiting_.empty()) {
    Start start = std::move(waiting_.front());
    waiting_.pop_front();
    ++running_;
    // A call ending later starts the next waiting one from the queue, not from inside
    // its own end (calls that end at once would otherwise nest ever deeper); one that
    // ends at once makes room for this loop.
    start([this] {
      --running_;
      busy_.fetch_sub(1);
      if (!starting_ && !waiting_.empty()) Post([this] { StartWaiting(); });
    });
  }
  starting_ = false;
}

void AsyncActorLoop::Stop() {
  std::deque<std::function<void()>> dropped;
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  dropped.swap(queue_);
}

}  // namespace manta::core
