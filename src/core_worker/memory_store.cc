#include "src/core_worker/memory_store.h"

#include <algorithm>

namespace manta::core {

bool MemoryStore::Put(const ObjectID& id, StoredObjectPtr object) {
  std::vector<std::function<void(StoredObjectPtr)>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (!objects_.emplace(id, object).second) return false;
    auto it = async_waiters_.find(id);
    if (it != async_waiters_.end()) {
      callbacks = std::move(it->second);
      async_waiters_.erase(it);
    }
  }
  // Blocked Get()s re-check their condition when the mutex is released.
  for (auto& cb : callbacks) cb(object);
  return true;
}

std::vector<StoredObjectPtr> MemoryStore::Get(const std::vector<ObjectID>& ids, size_t num_required,
                                              int64_t timeout_ms) {
  num_required = std::min(num_required, ids.size());
  auto count_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_t n = 0;
    for (const auto& id : ids) n += objects_.contains(id) ? 1 : 0;
    return n;
  };
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_present() >= num_required; };
  if (timeout_ms < 0) {
    mu_.Await(absl::Condition(&ready));
  } else if (timeout_ms > 0) {
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(timeout_ms));
  }
  std::vector<StoredObjectPtr> out;
  out.reserve(ids.size());
  for (const auto& id : ids) {
    auto it = objects_.find(id);
    out.push_back(it == objects_.end() ? nullptr : it->second);
  }
  return out;
}

void MemoryStore::GetAsync(const ObjectID& id, std::function<void(StoredObjectPtr)> callback) {
  StoredObjectPtr present;
  {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(id);
    if (it == objects_.end()) {
      async_waiters_[id].push_back(std::move(callback));
      return;
    }
    present = it->second;
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
}

size_t MemoryStore::Size() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

}  // namespace manta::core
