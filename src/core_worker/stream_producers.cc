#include "src/core_worker/stream_producers.h"

#include <algorithm>
#include <utility>

namespace manta::core {

int64_t StreamProducers::NextIndex(const TaskID& task, int attempt) {
  absl::MutexLock lock(&mu_);
  Producer& p = producers_[task];
  if (p.attempt != attempt) {  // a new attempt on this worker: counts start again
    p = Producer();
    p.attempt = attempt;
  }
  return p.produced++;
}

bool StreamProducers::MayGoOn(const TaskID& task, int64_t index, int64_t backpressure,
                              std::function<void()> resume) {
  if (backpressure <= 0) return true;
  absl::MutexLock lock(&mu_);
  auto it = producers_.find(task);
  if (it == producers_.end()) return true;
  Producer& p = it->second;
  p.backpressure = backpressure;
  if (p.unpaused || index + 1 - p.consumed < backpressure) return true;
  p.resume = std::move(resume);
  return false;
}

void StreamProducers::Consumed(const TaskID& task, int attempt, int64_t consumed) {
  std::function<void()> resume;
  {
    absl::MutexLock lock(&mu_);
    auto it = producers_.find(task);
    if (it == producers_.end() || it->second.attempt != attempt) return;
    Producer& p = it->second;
    p.consumed = std::max(p.consumed, consumed);
    if (p.resume && p.produced - p.consumed < p.backpressure) resume = std::exchange(p.resume, nullptr);
  }
  if (resume) resume();
}

void StreamProducers::Wake(const TaskID& task) {
  std::function<void()> resume;
  {
    absl::MutexLock lock(&mu_);
    auto it = producers_.find(task);
    if (it == producers_.end()) return;
    it->second.unpaused = true;
    resume = std::exchange(it->second.resume, nullptr);
  }
  if (resume) resume();
}

void StreamProducers::Finished(const TaskID& task) {
  absl::MutexLock lock(&mu_);
  producers_.erase(task);
}

size_t StreamProducers::Size() const {
  absl::MutexLock lock(&mu_);
  return producers_.size();
}

}  // namespace manta::core
