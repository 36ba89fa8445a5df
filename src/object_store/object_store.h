// ObjectStore: the node's object table, allocation, eviction and spilling
// (ARCHITECTURE §8). Transport-free: StoreServer feeds it client requests from the
// Unix socket; the raylet's object manager and RPC handlers call it directly.
//
// An object goes CREATED (writable by its creator, invisible to others) -> SEALED
// (immutable, visible). Clients hold references (one per Create and per object
// returned by Get) and drop them with Release; a client that disconnects drops all.
// A sealed object may be *pinned* as the primary copy on behalf of its owner: pinned
// objects are never evicted, only spilled. When a Create does not fit, sealed,
// unreferenced, unpinned objects are evicted in LRU order; then unreferenced pinned
// ones are spilled to disk (batched); the Create waits in a queue while spilling can
// make room, and fails with RESOURCE_EXHAUSTED once nothing can be spilled for
// `create_timeout_ms`. A Get of a spilled object restores it: Gets with objects to
// restore are admitted in arrival order while all their objects fit in what is
// neither in use nor still wanted by the admitted ones (one alone when they do not);
// an admitted
// Get (or one with nothing to restore) holds each object it waits for as soon as it
// is in memory, one waiting for its turn holds nothing.
// Loop thread only; callbacks run on the loop (possibly inline).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "src/common/node_event_log.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/object_store/allocator.h"
#include "src/object_store/spiller.h"

namespace manta::object_store {

using ClientId = int64_t;
// The raylet itself (object manager, pins) acts as client 0.
inline constexpr ClientId kRayletClient = 0;
// Holds for readers (HoldForReader) are references of this client. Workers are
// clients 1, 2, ...; the raylet's own transfers use negative ids above it.
inline constexpr ClientId kReaderHoldClient = std::numeric_limits<ClientId>::min();

// Where a sealed (or, for its creator, created) object lives in the arena.
struct ObjectLocation {
  int64_t offset = 0;
  int64_t data_size = 0;
  int64_t metadata_size = 0;
};

struct ObjectStoreStats {
  int64_t capacity_bytes = 0;
  int64_t used_bytes = 0;  // allocated in the arena
  int64_t num_objects = 0;  // in memory
  int64_t num_pinned = 0;
  int64_t num_spilled = 0;
  int64_t spilled_bytes_total = 0;
  int64_t restored_bytes_total = 0;
  int64_t evicted_bytes_total = 0;
  int64_t spilled_bytes_current = 0;
  int64_t num_pending_creates = 0;
};

struct ObjectStoreOptions {
  int64_t create_timeout_ms = 10000;
  // How often creates waiting for memory are checked against create_timeout_ms.
  int64_t create_check_ms = 50;
  int64_t spill_min_bytes = 100 << 20;
  // Called with the offset and size of every new allocation (to pre-fault ahead of it).
  std::function<void(int64_t offset, int64_t size)> on_allocate;
  // Spills and restores are recorded here (the timeline's raylet tracks); may be null.
  NodeEventLog* events = nullptr;
};

class ObjectStore {
 public:
  using CreateCallback = absl::AnyInvocable<void(absl::StatusOr<ObjectLocation>)>;
  using GetCallback = absl::AnyInvocable<void(std::vector<std::optional<ObjectLocation>>)>;

  // `spiller` may be null (then nothing is spilled). `capacity_bytes` of the arena.
  ObjectStore(EventLoop& loop, int64_t capacity_bytes, ObjectStoreOptions options, SpillerInterface* spiller,
              uint8_t* arena_base);
  ~ObjectStore();

  // Allocates `data_size + metadata_size` bytes for `id`, created by `client`, which
  // gets one reference. Errors: ALREADY_EXISTS (id known), INVALID_ARGUMENT (negative
  // sizes), RESOURCE_EXHAUSTED (larger than the store, or no memory in time).
  // `pin_on_seal` pins the object as primary copy when sealed.
  void Create(ClientId client, const ObjectID& id, int64_t data_size, int64_t metadata_size, bool pin_on_seal,
              CreateCallback callback);
  // Makes a created object visible. Errors: NOT_FOUND, FAILED_PRECONDITION (already
  // sealed), PERMISSION_DENIED (not created by `client`). With `release`, also drops
  // the creator's reference.
  absl::Status Seal(ClientId client, const ObjectID& id, bool release);
  // Discards an unsealed object created by `client`.
  absl::Status Abort(ClientId client, const ObjectID& id);
  // Returns, per id, the sealed object (taking a reference) or nullopt if it is not
  // sealed within `timeout_ms` (0 = don't wait, -1 = wait forever). Spilled objects
  // are restored first (not by a Get with `timeout_ms` 0, which only looks), in turn
  // with other Gets' restores (admission, above). While it waits, each object is
  // held for `client` as soon as it is available (restored, pulled, sealed), so that
  // making room for the others cannot evict or spill it again before the Get returns.
  void Get(ClientId client, const std::vector<ObjectID>& ids, int64_t timeout_ms, GetCallback callback);
  // Drops one reference of `client`. NOT_FOUND if it holds none.
  absl::Status Release(ClientId client, const ObjectID& id);
  // True when `id` is sealed here (in memory or spilled).
  bool Contains(const ObjectID& id) const;
  // Contains, or created here and still being written: a worker does not wait for
  // its seal of a task's result, so its caller may ask for it before it is sealed.
  bool ContainsOrCreating(const ObjectID& id) const;
  // Deletes the objects: at once when unreferenced, else when the last reference is
  // released. Unknown ids are ignored. Spilled bytes are removed too.
  void Delete(const std::vector<ObjectID>& ids);
  // Records the owner of a created object's primary copy (see DeleteOwnedBy).
  void SetOwner(const ObjectID& id, const WorkerID& owner);
  // The owner (a worker or driver, binary id) died: deletes the primary copies it
  // owned, which no one can free any more. Returns how many.
  int64_t DeleteOwnedBy(const WorkerID& owner);
  // Drops every reference and unsealed object of `client`.
  void DisconnectClient(ClientId client);

  // Primary-copy pinning on behalf of owners. Pin of an unknown or unsealed object:
  // NOT_FOUND. Unpin makes the object evictable.
  absl::Status Pin(const ObjectID& id);
  void Unpin(const ObjectID& id);
  // Keeps `id` (sealed, here) in memory for a reader that had it pulled here: not
  // evicted or spilled until a worker (client >= 1) takes a reference to it or asks
  // for it (a Get waiting for its turn to restore holds nothing), or `timeout_ms`
  // passes, whichever comes first. Unknown or unsealed ids are ignored;
  // holding a held object again restarts its timeout.
  void HoldForReader(const ObjectID& id, int64_t timeout_ms);
  // Objects held for readers now (tests, stats).
  size_t NumReaderHolds() const { return reader_holds_.size(); }
  // Bytes of objects in memory that cannot be evicted now: referenced (by workers,
  // transfers, Gets, holds) or being created.
  int64_t InUseBytes() const;
  int64_t capacity_bytes() const { return allocator_.capacity(); }

  ObjectStoreStats Stats() const;
  // End of the highest allocation in use: the arena above it holds no data.
  int64_t allocated_end() const { return allocator_.allocated_end(); }
  uint8_t* base() const { return base_; }
  // References `client` holds on `id` (tests, debugging).
  int64_t RefCount(const ObjectID& id) const;

 private:
  enum class State { kCreated, kSealed, kSpilled };
  struct Entry {
    State state = State::kCreated;
    ObjectLocation location;
    bool in_memory = false;  // has an allocation in the arena
    ClientId creator = kRayletClient;
    int64_t ref_count = 0;
    bool pinned = false;
    bool pin_on_seal = false;
    WorkerID owner;  // of a primary copy's owner, when known (else nil)
    bool delete_pending = false;
    bool spilling = false;   // being written to disk
    bool restoring = false;  // being read back
    std::optional<SpillLocation> spilled;
    std::list<ObjectID>::iterator lru_it;
    bool in_lru = false;
  };
  // A wait for arena memory: a client's Create or a restore from disk.
  struct PendingAlloc {
    ClientId client;
    ObjectID id;
    int64_t size;
    int64_t deadline_ms;
    absl::AnyInvocable<void(absl::StatusOr<int64_t>)> done;
  };
  struct PendingGet {
    ClientId client;
    std::vector<ObjectID> ids;
    // Per position: its reference is taken already (the object became available
    // while the Get waited, and must not be evicted or spilled before it returns).
    std::vector<bool> held;
    GetCallback callback;
    std::unique_ptr<Timer> timer;
    bool done = false;
    // Bytes of its objects known when it came (a Get with restores to do), and of
    // those it holds.
    int64_t admit_bytes = 0;
    int64_t held_bytes = 0;
    bool waited = false;  // not a look (timeout 0)
    // It may hold what it waits for: it had nothing to restore, or its turn came.
    bool admitted = false;
  };

  int64_t Size(const Entry& e) const { return e.location.data_size + e.location.metadata_size; }
  // Allocates, evicting unpinned LRU objects as needed. nullopt when it cannot.
  std::optional<int64_t> AllocateWithEviction(int64_t size);
  std::optional<int64_t> AllocateAndEvict(int64_t size);
  void FreeMemory(const ObjectID& id, Entry& e);
  void EraseEntry(const ObjectID& id);
  void AddRef(ClientId client, const ObjectID& id, Entry& e);
  void DropReaderHold(const ObjectID& id);
  void DropRef(ClientId client, const ObjectID& id, Entry& e);
  void UpdateLru(const ObjectID& id, Entry& e);
  // Starts spilling pinned objects to make room for `needed` bytes; false if nothing
  // can be spilled.
  bool SpillForSpace(int64_t needed);
  void OnSpilled(std::vector<ObjectID> ids, absl::StatusOr<std::vector<SpillLocation>> result, rpc::NodeEvent event);
  void StartRestore(const ObjectID& id);
  // Records a restore in the node's event log (the timeline), if there is one.
  void RecordRestore(const ObjectID& id, int64_t bytes, int64_t started_us, bool ok);
  // A failed restore: the Gets waiting for `id` return now, without it.
  void FailRestore(const ObjectID& id);
  // Admits queued Gets to restore while they fit (see the class comment).
  void AdmitRestores();
  // A finished Get's admission ends: the next ones may restore.
  void EndAdmission(PendingGet& get);
  // Bytes the admitted Gets wait for and do not hold yet.
  int64_t AdmittedStillWant() const;
  // Logs (every 10 s at most) why Gets wait for their turn.
  void LogWaitingTurns();
  // Runs `done` with an offset now or once memory frees up (FIFO), or an error at
  // the deadline (creates; restores wait as long as their Gets).
  void AllocateOrQueue(ClientId client, const ObjectID& id, int64_t size, int64_t deadline_ms,
                       absl::AnyInvocable<void(absl::StatusOr<int64_t>)> done);
  void ProcessPendingCreates();
  void ExpireCreates();
  absl::Status OutOfMemory(int64_t size) const;
  void OnSealed(const ObjectID& id);
  void TryCompleteGet(const std::shared_ptr<PendingGet>& get, bool timed_out);
  // Takes the Get's reference on every position holding `id` not held yet.
  void Hold(PendingGet& get, const ObjectID& id);
  // Removes a finished or cancelled Get from waiting_gets_.
  void ForgetWaits(const std::shared_ptr<PendingGet>& get);
  bool Available(const ObjectID& id) const;

  EventLoop& loop_;
  ObjectStoreOptions options_;
  SpillerInterface* spiller_;
  uint8_t* base_;
  Allocator allocator_;
  absl::flat_hash_map<ObjectID, Entry> objects_;
  // Sealed, in-memory objects with no references, least recently used first.
  std::list<ObjectID> lru_;
  absl::flat_hash_map<ClientId, absl::flat_hash_map<ObjectID, int64_t>> client_refs_;
  std::list<PendingAlloc> pending_creates_;
  // Restores waiting for memory: served before the creates.
  std::list<PendingAlloc> pending_restores_;
  absl::flat_hash_map<ClientId, std::vector<std::shared_ptr<PendingGet>>> client_gets_;
  absl::flat_hash_map<ObjectID, std::vector<std::shared_ptr<PendingGet>>> waiting_gets_;
  // Gets with objects to restore, not admitted yet, first come first.
  std::list<std::shared_ptr<PendingGet>> restore_queue_;
  // Admitted Gets with restores to do, until they return.
  std::vector<std::shared_ptr<PendingGet>> admitted_;
  // Objects held for readers (kReaderHoldClient's references), until taken or expired.
  absl::flat_hash_map<ObjectID, std::unique_ptr<Timer>> reader_holds_;
  int64_t last_turn_log_ms_ = 0;
  int64_t spilling_bytes_ = 0;
  absl::Status last_spill_error_;
  std::unique_ptr<Timer> create_timer_;
  ObjectStoreStats counters_;
};

}  // namespace manta::object_store
