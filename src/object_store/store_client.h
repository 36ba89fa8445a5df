// ObjectStoreClient: a process's connection to its node's object store.
//
// Maps the arena once at Connect, so Get returns pointers into shared memory (no
// copy). Synchronous and thread-safe; calls from several threads are multiplexed on
// the one socket and never wait for each other: a Create waiting for memory or a Get
// waiting for an object holds no lock while it waits, so another thread's Delete,
// Release or Get of a present object is answered at once. (The store answers a
// connection's requests out of order; replies are matched by request id. Whichever
// caller is waiting reads the socket for all of them: no reader thread.)
// Seal and Release are sent without waiting for the reply; if the store rejects one,
// the error is logged and returned by the next TakeAsyncError().
//
// Objects in use are tracked locally (as Plasma clients do): a Get of an object this
// client already holds needs no round trip, and the store-side reference of an
// object released here is dropped only after kReleaseDelay later releases, so
// re-reading a hot object stays local. Delete drops such lingering references first.
#pragma once

#include <cstdint>
#include <memory>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/id.h"
#include "src/object_store/arena.h"

namespace manta::rpc {
class StoreRequest;
class StoreReply;
}  // namespace manta::rpc

namespace manta::object_store {

// A sealed object mapped read-only by contract (the memory is shared; never write).
struct ObjectBuffer {
  const uint8_t* data = nullptr;
  int64_t data_size = 0;
  const uint8_t* metadata = nullptr;
  int64_t metadata_size = 0;
};

// What a process does with its node's object store; ObjectStoreClient is the real
// one, FakeObjectStoreClient (fake_store_client.h) the in-memory one of unit tests.
// The contract of each call is ObjectStoreClient's, below.
class ObjectStoreClientInterface {
 public:
  virtual ~ObjectStoreClientInterface() = default;
  virtual absl::StatusOr<uint8_t*> Create(const ObjectID& id, int64_t data_size, int64_t metadata_size = 0,
                                          bool pin_on_seal = false, const std::string& owner_worker_id = {}) = 0;
  virtual absl::Status Seal(const ObjectID& id, bool release = true, bool wait = false) = 0;
  virtual absl::Status Abort(const ObjectID& id) = 0;
  virtual absl::StatusOr<std::vector<std::optional<ObjectBuffer>>> Get(const std::vector<ObjectID>& ids,
                                                                       int64_t timeout_ms) = 0;
  virtual absl::Status Release(const ObjectID& id, bool wait = false) = 0;
  virtual absl::StatusOr<bool> Contains(const ObjectID& id) = 0;
  virtual absl::Status Delete(const std::vector<ObjectID>& ids, bool wait = true) = 0;
  virtual absl::Status TakeAsyncError() = 0;
  virtual bool PeerClosed() const = 0;
  // The store's size: what one Get can hold at most.
  virtual int64_t capacity_bytes() const = 0;
};

class ObjectStoreClient final : public ObjectStoreClientInterface {
 public:
  // Objects at least this large get their page tables filled in one system call
  // at Create (instead of one page fault per 4 KiB while they are written).
  static constexpr int64_t kPopulateMinBytes = 1 << 20;
  static constexpr int64_t kPopulateChunkBytes = 2 << 20;
  // Released objects whose store reference is kept for quick re-use: at most this
  // many, only objects up to kReleaseDelayMaxObjectBytes, and at most 1/16 of the
  // store in total, so lingering references never starve the store of memory.
  static constexpr size_t kReleaseDelay = 64;
  static constexpr int64_t kReleaseDelayMaxObjectBytes = 64 << 10;

  // Connects to the store socket as `name` (a driver: its worker id in hex, which
  // tells the raylet it lives while this connection is open) and maps the arena.
  static absl::StatusOr<std::unique_ptr<ObjectStoreClient>> Connect(const std::string& socket_path,
                                                                    const std::string& name = "");
  ~ObjectStoreClient();

  // Allocates a writable object: `data_size` bytes at the returned pointer, followed
  // by `metadata_size` metadata bytes. Waits while the store makes room; errors:
  // ALREADY_EXISTS, RESOURCE_EXHAUSTED (too big, or no memory in time).
  // `pin_on_seal`: the primary copy, of the owner named by `owner_worker_id` (binary;
  // the raylet deletes it when that process dies).
  absl::StatusOr<uint8_t*> Create(const ObjectID& id, int64_t data_size, int64_t metadata_size = 0,
                                  bool pin_on_seal = false, const std::string& owner_worker_id = {}) override;
  // Makes the object visible; with `release` (the usual case) also drops the
  // creator's reference. Asynchronous unless `wait`.
  absl::Status Seal(const ObjectID& id, bool release = true, bool wait = false) override;
  absl::Status Abort(const ObjectID& id) override;
  // Per id, the object (holding a reference: call Release) or nullopt when not sealed
  // within `timeout_ms` (0 = don't wait, -1 = forever).
  absl::StatusOr<std::vector<std::optional<ObjectBuffer>>> Get(const std::vector<ObjectID>& ids,
                                                               int64_t timeout_ms) override;
  // Drops one reference. Asynchronous unless `wait`.
  absl::Status Release(const ObjectID& id, bool wait = false) override;
  absl::StatusOr<bool> Contains(const ObjectID& id) override;
  // Deletes objects (every copy on this node). Without `wait` it is one-way, like
  // Seal and Release.
  absl::Status Delete(const std::vector<ObjectID>& ids, bool wait = true) override;
  // The first error of an asynchronous Seal/Release since the last call, if any.
  absl::Status TakeAsyncError() override;
  // Whether the store (its raylet) closed the connection: the node's raylet is gone.
  // Reads nothing, takes no lock: any thread, any time.
  bool PeerClosed() const override;
  int64_t capacity_bytes() const override { return arena_->capacity(); }

  const Arena& arena() const { return *arena_; }

 private:
  ObjectStoreClient(int fd) : fd_(fd) {}
  // Sends `request` and, unless it is one-way, waits for its reply, releasing mu_
  // while it waits (state read before the call may have changed after it).
  absl::StatusOr<rpc::StoreReply> Call(rpc::StoreRequest& request, bool one_way)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Waiter;  // a reply being waited for
  // Waits until `waiter` is done: reads the socket for every caller while no other
  // caller does, else sleeps until the reader hands a reply over.
  void AwaitReply(Waiter* waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands a reply that arrived to its waiter (or records a one-way request's error).
  void Deliver(const std::string& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The connection failed: every waiting and later call fails with `status`.
  void Break(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SendFrame(const std::string& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReadFrame(std::string* body);  // only by the one caller that is reading

  struct InUse {
    ObjectBuffer buffer;
    int64_t count = 0;  // references handed out by Get and not yet released
    bool queued = false;  // in release_queue_
  };
  // Sends the store-level Release of `id` and forgets it.
  absl::Status ReleaseToStore(const ObjectID& id, bool wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends one store-level Release.
  absl::Status SendRelease(const ObjectID& id, bool wait) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The 2 MiB chunks of a new object's range whose page tables this process has not
  // filled before (marked filled now: its mapping is never unmapped, so they stay),
  // as runs of [first, end) chunk numbers.
  std::vector<std::pair<int64_t, int64_t>> ChunksToPopulate(int64_t offset, int64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  absl::CondVar replies_;  // signalled when a reply has been handed over or reading stops
  std::vector<bool> populated_chunks_ ABSL_GUARDED_BY(mu_);  // one bit per 2 MiB of arena
  absl::flat_hash_map<ObjectID, InUse> in_use_ ABSL_GUARDED_BY(mu_);
  std::deque<ObjectID> release_queue_ ABSL_GUARDED_BY(mu_);
  int64_t lingering_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // sizes in release_queue_
  absl::flat_hash_map<uint64_t, Waiter*> waiters_ ABSL_GUARDED_BY(mu_);  // by request id
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // a caller is reading the socket
  absl::Status broken_ ABSL_GUARDED_BY(mu_);   // why the connection failed, once it has
  const int fd_;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status async_error_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Arena> arena_;
};

}  // namespace manta::object_store
