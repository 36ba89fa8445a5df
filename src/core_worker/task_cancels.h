// TaskCancels: a worker's record of the cancels (ray::Cancel) its owners sent for
// tasks pushed to it (ARCHITECTURE.md §5, cancellation).
//
// An owner cancels a task it pushed with a CancelTask call, which travels apart from
// the push (gRPC, not the task channel) and may come before it, while the task runs,
// or after it finished. A task running now gets its context's `cancelled` flag set
// (ray::IsCancelled reads it; its result becomes the cancelled error). A cancel for
// a task not running is kept until the task starts (then it does not run) or, when it
// never comes (it had finished already), until kMaxKept newer cancels pushed it out.
//
// The execution thread's running task is registered by its CoreWorker under the
// lock it takes around every task anyway; the tasks running on a threaded actor's
// pool register here. Starting a task costs one relaxed atomic load while no cancel
// is kept.
//
// Threading: thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "src/common/id.h"
#include "src/core_worker/task_context.h"

namespace manta::core {

class TaskCancels {
 public:
  static constexpr size_t kMaxKept = 10000;

  // Whether `task_id`, about to start, was cancelled before (the cancel is used up).
  bool TakeEarly(const TaskID& task_id) {
    if (num_kept_.load(std::memory_order_acquire) == 0) return false;
    absl::MutexLock lock(&mu_);
    if (kept_.erase(task_id) == 0) return false;
    num_kept_.store(kept_.size() + stolen_.size(), std::memory_order_release);
    return true;
  }
  // A pool thread runs `context`'s task from Begin to End.
  void Begin(TaskContext* context) {
    absl::MutexLock lock(&mu_);
    on_pool_[context->task_id] = context;
  }
  void End(TaskContext* context) {
    absl::MutexLock lock(&mu_);
    auto it = on_pool_.find(context->task_id);
    if (it != on_pool_.end() && it->second == context) on_pool_.erase(it);
  }
  // An owner cancels `task_id`: sets its flag if a pool thread runs it (true), else
  // keeps the cancel for TakeEarly (false). A thread starting a task registers it
  // (Begin, or its CoreWorker's own registration) before TakeEarly, so the cancel is
  // seen one way or the other.
  bool Cancel(const TaskID& task_id) {
    absl::MutexLock lock(&mu_);
    auto it = on_pool_.find(task_id);
    if (it != on_pool_.end()) {
      it->second->cancelled.store(true, std::memory_order_relaxed);
      return true;
    }
    KeepLocked(task_id);
    return false;
  }

  // Steals (CancelTaskRequest.steal): attempt `attempt` of `task_id` must not start
  // here. Kept like cancels, but by attempt: the owner runs a later attempt elsewhere,
  // and possibly here again.
  void Steal(const TaskID& task_id, int attempt) {
    absl::MutexLock lock(&mu_);
    KeepLocked(task_id, attempt);
  }
  // Whether attempt `attempt` of `task_id`, about to start, was stolen.
  bool TakeStolen(const TaskID& task_id, int attempt) {
    if (num_kept_.load(std::memory_order_acquire) == 0) return false;
    absl::MutexLock lock(&mu_);
    if (stolen_.erase({task_id, attempt}) == 0) return false;
    num_kept_.store(kept_.size() + stolen_.size(), std::memory_order_release);
    return true;
  }

  size_t NumKept() const {
    absl::MutexLock lock(&mu_);
    return kept_.size();
  }

 private:
  // A cancel (attempt kAnyAttempt) or a steal (of one attempt), kept until used or
  // pushed out by kMaxKept newer ones.
  static constexpr int kAnyAttempt = -1;
  using Item = std::pair<TaskID, int>;
  bool IsKeptLocked(const Item& item) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return item.second == kAnyAttempt ? kept_.contains(item.first) : stolen_.contains(item);
  }
  void EraseLocked(const Item& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (item.second == kAnyAttempt) {
      kept_.erase(item.first);
    } else {
      stolen_.erase(item);
    }
  }
  void KeepLocked(const TaskID& task_id, int attempt = kAnyAttempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool added =
        attempt == kAnyAttempt ? kept_.insert(task_id).second : stolen_.insert({task_id, attempt}).second;
    if (!added) return;
    order_.emplace_back(task_id, attempt);
    while (order_.size() > kMaxKept) {
      EraseLocked(order_.front());
      order_.pop_front();
    }
    // Drop the items used up, once they are most of the order.
    if (order_.size() > 2 * (kept_.size() + stolen_.size()) + 64) {
      std::deque<Item> live;
      for (const Item& item : order_) {
        if (IsKeptLocked(item)) live.push_back(item);
      }
      order_.swap(live);
    }
    num_kept_.store(kept_.size() + stolen_.size(), std::memory_order_release);
  }

  mutable absl::Mutex mu_;
  std::atomic<size_t> num_kept_{0};
  absl::flat_hash_set<TaskID, IdHash> kept_ ABSL_GUARDED_BY(mu_);
  // Steals kept, by (task, attempt).
  struct ItemHash {
    size_t operator()(const Item& item) const { return IdHash()(item.first) ^ static_cast<size_t>(item.second); }
  };
  absl::flat_hash_set<Item, ItemHash> stolen_ ABSL_GUARDED_BY(mu_);
  std::deque<Item> order_ ABSL_GUARDED_BY(mu_);  // what is kept, oldest first (and used-up items)
  absl::flat_hash_map<TaskID, TaskContext*, IdHash> on_pool_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
