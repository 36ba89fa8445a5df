#include "src/core_worker/memory_store.h"

#include <algorithm>

#include "src/core_worker/table_shrink.h"

namespace manta::core {

bool MemoryStore::Put(const ObjectID& id, StoredObjectPtr object) {
  std::vector<std::function<void(StoredObjectPtr)>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (!objects_.emplace(id, object).second) return false;
    if (auto w = blocking_waiters_.find(id); w != blocking_waiters_.end()) {
      for (auto& [waiter, count] : w->second) waiter->remaining -= count;
      blocking_waiters_.erase(w);
      ShrinkIfMostlyEmpty(blocking_waiters_);
    }
    auto it = async_waiters_.find(id);
    if (it != async_waiters_.end()) {
      callbacks = std::move(it->second);
      async_waiters_.erase(it);
      ShrinkIfMostlyEmpty(async_waiters_);
    }
  }
  // Blocked Get()s re-check their condition when the mutex is released.
  for (auto& cb : callbacks) cb(object);
  return true;
}

bool MemoryStore::Replace(const ObjectID& id, const StoredObjectPtr& expected, StoredObjectPtr object) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  if (it == objects_.end() || it->second != expected) return false;
  it->second = std::move(object);
  return true;
}

std::vector<StoredObjectPtr> MemoryStore::Get(const std::vector<ObjectID>& ids, size_t num_required,
                                              int64_t timeout_ms) {
  num_required = std::min(num_required, ids.size());
  absl::MutexLock lock(&mu_);
  // Positions still absent, by id (an id may appear more than once).
  absl::flat_hash_map<ObjectID, int64_t> absent;
  int64_t present = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const ObjectID& id = ids[i];
    PrefetchAhead(ids, i);
    if (objects_.contains(id)) {
      ++present;
    } else {
      ++absent[id];
    }
  }
  BlockingWaiter waiter;
  waiter.remaining = static_cast<int64_t>(num_required) - present;
  if (waiter.remaining > 0 && timeout_ms != 0) {
    for (const auto& [id, count] : absent) blocking_waiters_[id].emplace_back(&waiter, count);
    auto done = [](BlockingWaiter* w) { return w->remaining <= 0; };
    absl::Condition cond(+done, &waiter);
    if (timeout_ms < 0) {
      mu_.Await(cond);
    } else {
      mu_.AwaitWithTimeout(cond, absl::Milliseconds(timeout_ms));
    }
    for (const auto& [id, count] : absent) {
      auto it = blocking_waiters_.find(id);
      if (it == blocking_waiters_.end()) continue;
      auto& list = it->second;
      list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& e) { return e.first == &waiter; }),
                 list.end());
      if (list.empty()) blocking_waiters_.erase(it);
    }
    ShrinkIfMostlyEmpty(blocking_waiters_);
  }
  std::vector<StoredObjectPtr> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    PrefetchAhead(ids, i);
    auto it = objects_.find(ids[i]);
    out.push_back(it == objects_.end() ? nullptr : it->second);
  }
  return out;
}

void MemoryStore::GetAsync(const ObjectID& id, std::function<void(StoredObjectPtr)> callback) {
  StoredObjectPtr present;
  {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(id);
    if (it != objects_.end()) {
      present = it->second;
    } else if (!resolve_absent_) {
      async_waiters_[id].push_back(std::move(callback));
      return;
    }
  }
  if (present == nullptr) {
    absl::MutexLock lock(&mu_);
    present = resolve_absent_(id);
  }
  callback(present);
}

StoredObjectPtr MemoryStore::GetIfExists(const ObjectID& id) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  return it == objects_.end() ? nullptr : it->second;
}

bool MemoryStore::Contains(const ObjectID& id) const {
  absl::MutexLock lock(&mu_);
  return objects_.contains(id);
}

void MemoryStore::Delete(const std::vector<ObjectID>& ids) {
  absl::MutexLock lock(&mu_);
  for (const auto& id : ids) objects_.erase(id);
  ShrinkIfMostlyEmpty(objects_);
}

std::vector<size_t> MemoryStore::AbsentPositions(const std::vector<ObjectID>& ids) const {
  std::vector<size_t> absent;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < ids.size(); ++i) {
    PrefetchAhead(ids, i);
    if (!objects_.contains(ids[i])) absent.push_back(i);
  }
  return absent;
}

void MemoryStore::Prefetch(const std::vector<ObjectID>& ids) const {
  absl::MutexLock lock(&mu_);
  for (const ObjectID& id : ids) objects_.prefetch(id);
}

StoredObjectPtr MemoryStore::Take(const ObjectID& id) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  if (it == objects_.end()) return nullptr;
  StoredObjectPtr value = std::move(it->second);
  objects_.erase(it);
  ShrinkIfMostlyEmpty(objects_);
  return value;
}

void MemoryStore::ResolveAsyncWaiters(const ObjectID& id, absl::FunctionRef<StoredObjectPtr()> value) {
  std::vector<std::function<void(StoredObjectPtr)>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    auto it = async_waiters_.find(id);
    if (it == async_waiters_.end()) return;
    callbacks = std::move(it->second);
    async_waiters_.erase(it);
    ShrinkIfMostlyEmpty(async_waiters_);
  }
  StoredObjectPtr v = value();
  for (auto& cb : callbacks) cb(v);
}

void MemoryStore::ResolveAllAsyncWaiters(const std::function<StoredObjectPtr(const ObjectID&)>& value) {
  absl::flat_hash_map<ObjectID, std::vector<std::function<void(StoredObjectPtr)>>, IdHash> waiters;
  {
    absl::MutexLock lock(&mu_);
    waiters.swap(async_waiters_);
    resolve_absent_ = value;
  }
  for (auto& [id, callbacks] : waiters) {
    StoredObjectPtr v = value(id);
    for (auto& cb : callbacks) cb(v);
  }
}

size_t MemoryStore::Size() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

size_t MemoryStore::TableCapacity() const {
  absl::MutexLock lock(&mu_);
  return objects_.capacity() + blocking_waiters_.capacity() + async_waiters_.capacity();
}

}  // namespace manta::core
