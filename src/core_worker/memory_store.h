// MemoryStore: the core worker's in-process store of small object values
// (ARCHITECTURE §5 step 6): inline task results, small Puts, and errors stored as
// an object's value so every Get of it (and of its dependents) fails the same way.
//
// A value is immutable once put. Get blocks the calling user thread until every
// requested object is present or the timeout passes; GetAsync runs a callback once
// one object is present. Threading: every method is thread-safe (one absl::Mutex);
// callbacks run on the thread that made the object available (Put), or inline when
// it already was, always outside the mutex. The tables shrink once mostly empty
// (table_shrink.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "src/common/id.h"

namespace manta::core {

// One object's value: serialized bytes and metadata, or an error. Shared so that a
// Get hands out the same bytes to every caller without copying.
struct StoredObject {
  std::string data;
  std::string metadata;
  // Not OK when the object is an error value (task failed, owner died, ...); its
  // message is the human-readable error.
  absl::Status error;
  // With an error: the rpc::ErrorType (for user exceptions the C++ type name is in
  // exception_type()).
  int error_type = 0;
  // The value lives in a node's shared-memory store, not here (a marker put by the
  // owner when a large result was stored there): the node holding the primary copy
  // and its raylet's "ip:port" are plasma_node() and plasma_raylet_address().
  bool in_plasma = false;
  // Set by the owner on its own plasma markers: freeing the object deletes the
  // primary copy (borrowers' cached markers leave it alone).
  bool owner_copy = false;
  int64_t size_bytes = -1;

  const std::string& exception_type() const { return rare_ ? rare_->exception_type : Empty(); }
  const NodeID& plasma_node() const { return rare_ ? rare_->plasma_node : NilNode(); }
  const std::string& plasma_raylet_address() const { return rare_ ? rare_->plasma_raylet_address : Empty(); }
  void SetExceptionType(std::string type) { Rare().exception_type = std::move(type); }
  void SetPlasmaLocation(const NodeID& node, std::string raylet_address) {
    Rare().plasma_node = node;
    Rare().plasma_raylet_address = std::move(raylet_address);
  }
  // Raylets ("ip:port") that hold other copies, as the owner last said: a reader
  // whose pull from the primary fails tries them.
  const std::vector<std::string>& plasma_copies() const { return rare_ ? rare_->plasma_copies : NoCopies(); }
  void SetPlasmaCopies(std::vector<std::string> copies) { Rare().plasma_copies = std::move(copies); }

 private:
  // Fields few objects have, kept apart: a small task result is ~100 bytes smaller
  // (a million results held are a million of these).
  struct RareFields {
    std::string exception_type;
    NodeID plasma_node = NodeID::Nil();
    std::string plasma_raylet_address;
    std::vector<std::string> plasma_copies;
  };
  RareFields& Rare() {
    if (!rare_) rare_ = std::make_unique<RareFields>();
    return *rare_;
  }
  static const std::string& Empty() {
    static const std::string empty;
    return empty;
  }
  static const std::vector<std::string>& NoCopies() {
    static const std::vector<std::string> none;
    return none;
  }
  static const NodeID& NilNode() {
    static const NodeID nil = NodeID::Nil();
    return nil;
  }
  std::unique_ptr<RareFields> rare_;
};
using StoredObjectPtr = std::shared_ptr<const StoredObject>;

class MemoryStore {
 public:
  MemoryStore() = default;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // Stores `object` under `id` and wakes its waiters. Returns false (and keeps the
  // first value) when `id` is already present: values are immutable.
  bool Put(const ObjectID& id, StoredObjectPtr object);
  // Stores `object` in place of `expected` (the same value, somewhere else: a primary
  // copy moved); false, changing nothing, when `id` holds anything else or nothing.
  bool Replace(const ObjectID& id, const StoredObjectPtr& expected, StoredObjectPtr object);

  // Waits until at least `num_required` of `ids` are present, or `timeout_ms` passes
  // (-1 = forever, 0 = no wait). Returns one entry per id, null where absent.
  // num_required is clamped to [0, ids.size()].
  std::vector<StoredObjectPtr> Get(const std::vector<ObjectID>& ids, size_t num_required, int64_t timeout_ms);

  // Runs `callback(object)` once `id` is present: inline if it already is.
  void GetAsync(const ObjectID& id, std::function<void(StoredObjectPtr)> callback);

  // The value, or null. Never waits.
  StoredObjectPtr GetIfExists(const ObjectID& id) const;
  bool Contains(const ObjectID& id) const;
  // Forgets the values (pending async callbacks stay registered for a later Put).
  void Delete(const std::vector<ObjectID>& ids);
  // Forgets the value and returns it (null when absent); like Delete otherwise.
  StoredObjectPtr Take(const ObjectID& id);
  // The positions in `ids` of the objects not here (one pass, misses overlapped).
  std::vector<size_t> AbsentPositions(const std::vector<ObjectID>& ids) const;
  // Starts fetching the slots of `ids` into the cache (a batch about to be stored).
  void Prefetch(const std::vector<ObjectID>& ids) const;
  // Runs the async callbacks waiting for `id` with `value()`, without storing it (an
  // object freed before its value came: nobody else will be told). Blocked Gets
  // keep waiting. `value` is called only when there are callbacks.
  void ResolveAsyncWaiters(const ObjectID& id, absl::FunctionRef<StoredObjectPtr()> value);
  // Runs every pending GetAsync callback with `value(id)` (shutdown); a GetAsync of
  // an absent object after this gets `value(id)` at once instead of waiting, so a
  // call arriving while the process shuts down is never held for ever.
  void ResolveAllAsyncWaiters(const std::function<StoredObjectPtr(const ObjectID&)>& value);
  size_t Size() const;
  // Slots allocated by the store's tables (tests: they shrink).
  size_t TableCapacity() const;

 private:
  // A blocked Get: how many more of its positions must become present. Put
  // decrements it, so waking a Get of n ids costs O(1) per Put, not O(n).
  struct BlockingWaiter {
    int64_t remaining = 0;
  };

  // Looking `ids` up in order: starts fetching the slot of the one a few places on,
  // so the misses of a long list overlap.
  void PrefetchAhead(const std::vector<ObjectID>& ids, size_t i) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    constexpr size_t kAhead = 8;
    if (i + kAhead < ids.size()) objects_.prefetch(ids[i + kAhead]);
  }
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ObjectID, StoredObjectPtr, IdHash> objects_ ABSL_GUARDED_BY(mu_);
  // Per absent id: the blocked Gets waiting for it and how many of their positions
  // it fills.
  absl::flat_hash_map<ObjectID, std::vector<std::pair<BlockingWaiter*, int64_t>>, IdHash> blocking_waiters_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ObjectID, std::vector<std::function<void(StoredObjectPtr)>>, IdHash> async_waiters_
      ABSL_GUARDED_BY(mu_);
  // Set by ResolveAllAsyncWaiters: what later GetAsync calls of absent objects get.
  std::function<StoredObjectPtr(const ObjectID&)> resolve_absent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
