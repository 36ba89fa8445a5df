// TableInbox: how the submitting thread adds entries to a big table (the reference
// counter's objects, the task manager's tasks) without waiting for the table's mutex
// (ARCHITECTURE.md §12).
//
// The thread completing tasks holds the table mutex for work that misses the caches
// once the tables are big (a million tasks in flight); a submitting thread that took
// it for every task would wait, and each wait is a futex sleep and wake-up. Instead
// it appends the entry here, under the inbox's own mutex held for a push_back. The
// owner takes the entries into its table first thing whenever its table mutex is
// taken (so no reader ever misses one), and the submitting thread takes them in
// itself once kBatch wait: the insertions stay mostly on its core, a batch at a time,
// their cache misses overlapped.
//
// Threading: Add from any thread; TakeAll only under the owner's table mutex.
// InboxTableLock is how the owner takes that mutex.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace manta::core {

template <typename Item>
class TableInbox {
 public:
  static constexpr size_t kBatch = 64;

  // Appends `item`; true when kBatch or more wait (the caller then takes them in).
  bool Add(Item item) {
    absl::MutexLock lock(&mu_);
    added_.push_back(std::move(item));
    return added_.size() >= kBatch;
  }

  // Under the table mutex: every waiting item, in the order added, goes to
  // `take(Item&)`; `prefetch(const Item&)` is called for the item a few places on, so
  // the table slots' misses overlap.
  template <typename Prefetch, typename Take>
  void TakeAll(Prefetch&& prefetch, Take&& take) {
    {
      absl::MutexLock lock(&mu_);
      if (added_.empty()) return;
      added_.swap(taking_);
    }
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < taking_.size(); ++i) {
      if (i + kAhead < taking_.size()) prefetch(taking_[i + kAhead]);
      take(taking_[i]);
    }
    taking_.clear();  // keeps its capacity for the next swap
  }

 private:
  absl::Mutex mu_;
  std::vector<Item> added_ ABSL_GUARDED_BY(mu_);
  // added_'s other buffer; only TakeAll touches it, under the owner's table mutex.
  std::vector<Item> taking_;
};

// Holds `owner->mu_` (the table mutex), with the owner's inbox taken in first
// (`owner->TakeInLocked()`, which calls TakeAll): every section of the table goes
// through it, so no reader misses an entry still waiting. The owner befriends it.
template <typename Owner>
class ABSL_SCOPED_LOCKABLE InboxTableLock {
 public:
  explicit InboxTableLock(const Owner* owner) ABSL_EXCLUSIVE_LOCK_FUNCTION(owner->mu_) : owner_(owner) {
    owner_->mu_.Lock();
    owner_->TakeInLocked();
  }
  ~InboxTableLock() ABSL_UNLOCK_FUNCTION() { owner_->mu_.Unlock(); }
  InboxTableLock(const InboxTableLock&) = delete;
  InboxTableLock& operator=(const InboxTableLock&) = delete;

 private:
  const Owner* owner_;
};

}  // namespace manta::core
