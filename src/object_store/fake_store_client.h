// FakeObjectStoreClient: an in-memory ObjectStoreClientInterface for unit tests.
//
// Objects live in this process's heap; Get waits (bounded by its timeout) for an
// object to be sealed, as the real store does. An object deleted while a reader
// holds it goes when the last reference is released. `Close()` makes the store look
// gone (PeerClosed, every later call UNAVAILABLE), as when the node's raylet dies.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/object_store/store_client.h"

namespace manta::object_store {

class FakeObjectStoreClient final : public ObjectStoreClientInterface {
 public:
  absl::StatusOr<uint8_t*> Create(const ObjectID& id, int64_t data_size, int64_t metadata_size = 0,
                                  bool /*pin_on_seal*/ = false, const std::string& /*owner*/ = {}) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return Closed();
    if (objects_.contains(id)) return absl::AlreadyExistsError("object " + id.Hex() + " already exists");
    Object& object = objects_[id];
    object.bytes.resize(static_cast<size_t>(data_size + metadata_size));
    object.data_size = data_size;
    object.refs = 1;  // the creator's, until Seal releases it
    ++creates_;
    return object.bytes.data();
  }
  absl::Status Seal(const ObjectID& id, bool release = true, bool /*wait*/ = false) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return Closed();
    auto it = objects_.find(id);
    if (it == objects_.end() || it->second.sealed) return absl::NotFoundError("no unsealed object " + id.Hex());
    it->second.sealed = true;
    return release ? ReleaseLocked(id) : absl::OkStatus();
  }
  absl::Status Abort(const ObjectID& id) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return Closed();
    auto it = objects_.find(id);
    if (it == objects_.end() || it->second.sealed) return absl::NotFoundError("no unsealed object " + id.Hex());
    objects_.erase(it);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::optional<ObjectBuffer>>> Get(const std::vector<ObjectID>& ids,
                                                               int64_t timeout_ms) override {
    absl::MutexLock lock(&mu_);
    auto all_sealed = [this, &ids]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (closed_) return true;
      for (const ObjectID& id : ids) {
        auto it = objects_.find(id);
        if (it == objects_.end() || !it->second.sealed || it->second.deleted) return false;
      }
      return true;
    };
    if (timeout_ms < 0) {
      mu_.Await(absl::Condition(&all_sealed));
    } else if (timeout_ms > 0) {
      mu_.AwaitWithTimeout(absl::Condition(&all_sealed), absl::Milliseconds(timeout_ms));
    }
    if (closed_) return Closed();
    std::vector<std::optional<ObjectBuffer>> out(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = objects_.find(ids[i]);
      if (it == objects_.end() || !it->second.sealed || it->second.deleted) continue;
      Object& object = it->second;
      ++object.refs;
      out[i] = ObjectBuffer{object.bytes.data(), object.data_size, object.bytes.data() + object.data_size,
                            static_cast<int64_t>(object.bytes.size()) - object.data_size};
    }
    return out;
  }
  absl::Status Release(const ObjectID& id, bool /*wait*/ = false) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return Closed();
    return ReleaseLocked(id);
  }
  absl::StatusOr<bool> Contains(const ObjectID& id) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return Closed();
    auto it = objects_.find(id);
    return it != objects_.end() && it->second.sealed && !it->second.deleted;
  }
  absl::Status Delete(const std::vector<ObjectID>& ids, bool /*wait*/ = true) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return Closed();
    for (const ObjectID& id : ids) {
      auto it = objects_.find(id);
      if (it == objects_.end() || it->second.deleted) continue;
      ++deletes_;
      it->second.deleted = true;
      if (it->second.refs == 0) objects_.erase(it);
    }
    return absl::OkStatus();
  }
  absl::Status TakeAsyncError() override { return absl::OkStatus(); }
  bool PeerClosed() const override {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  int64_t capacity_bytes() const override { return capacity_bytes_; }

  // --- For the test ---------------------------------------------------------
  void set_capacity_bytes(int64_t bytes) { capacity_bytes_ = bytes; }
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // Sealed objects not deleted.
  size_t NumObjects() const {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [id, object] : objects_) n += object.sealed && !object.deleted ? 1 : 0;
    return n;
  }
  int creates() const {
    absl::MutexLock lock(&mu_);
    return creates_;
  }
  int deletes() const {
    absl::MutexLock lock(&mu_);
    return deletes_;
  }

 private:
  struct Object {
    std::vector<uint8_t> bytes;  // data, then metadata
    int64_t data_size = 0;
    int64_t refs = 0;
    bool sealed = false;
    bool deleted = false;  // goes when the last reference is released
  };
  static absl::Status Closed() { return absl::UnavailableError("the fake object store is closed"); }
  absl::Status ReleaseLocked(const ObjectID& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = objects_.find(id);
    if (it == objects_.end() || it->second.refs == 0) return absl::NotFoundError("no reference to " + id.Hex());
    if (--it->second.refs == 0 && it->second.deleted) objects_.erase(it);
    return absl::OkStatus();
  }

  mutable absl::Mutex mu_;
  absl::flat_hash_map<ObjectID, Object> objects_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> capacity_bytes_{int64_t{1} << 40};
  int creates_ ABSL_GUARDED_BY(mu_) = 0;
  int deletes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::object_store
