// ObjectReader: Get and Wait of a core worker: reading objects wherever they are,
// and recovering the ones whose copies are lost (ARCHITECTURE.md §4, §8).
//
// A value is in the in-process memory store (small values, errors, and markers of
// plasma-resident ones), in this node's object store, in another node's store
// (pulled here through this node's raylet) or known only to its owner elsewhere
// (asked with GetObjectStatus). A Get first reads the results of this process's
// own tasks off their task channels for a while (busy-polling, so a quick task
// costs no thread wake-up), then waits. A copy that cannot be fetched is rebuilt
// by its owner (for an owned object, here: hooks.recover) and read again, up to
// three times. A task thread that waits lends its CPU to the raylet
// (NotifyWorkerBlocked). Thread-safe; RequestFromOwners runs on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/core_worker/core_worker_types.h"
#include "src/core_worker/memory_store.h"
#include "src/core_worker/object_freer.h"
#include "src/core_worker/reference_counter.h"
#include "src/core_worker/rpc_clients.h"
#include "src/task_channel/task_channel.h"

namespace manta::object_store {
class ObjectStoreClientInterface;
struct ObjectBuffer;
}

namespace manta::core {

class ObjectReader {
 public:
  // What the reader asks of the core worker.
  struct Hooks {
    // Owner: `id` has no readable value (`cause`); `stale` is the value whose copy
    // could not be read (null: none). False when it cannot be rebuilt (its value
    // is then an error).
    std::function<bool(const ObjectID& id, const StoredObjectPtr& stale, const std::string& cause)> recover;
    // A copy of `id` now exists at `raylet_address`.
    std::function<void(const ObjectID& id, const NodeID& node_id, const std::string& raylet_address)> record_copy;
    // Whether the GCS declared the node (binary id) dead.
    std::function<bool(const std::string& node_id)> is_node_dead;
  };
  struct Parts {
    EventLoop& loop;
    const Config& config;
    MemoryStore& memory_store;
    ReferenceCounter& refs;
    object_store::ObjectStoreClientInterface& store;
    RayletClientPool& raylets;
    CoreWorkerClientPool& workers;
    TaskChannelPool& channels;
    ObjectFreer& freer;
  };
  // `context_owner`: the key of this process's TaskContexts (task_context.h).
  ObjectReader(Parts parts, Hooks hooks, bool is_driver, const WorkerID& worker_id, std::string local_raylet,
               const NodeID& node_id, const void* context_owner);

  // Waits for every object (timeout -1 = forever). DeadlineExceeded on timeout;
  // NotFound for an id this process has no reference to.
  absl::StatusOr<std::vector<ObjectValue>> Get(const std::vector<ObjectID>& ids, int64_t timeout_ms);
  // Ready flags once `num_objects` are ready or the timeout passes. With
  // `fetch_local`, an object whose copy is on another node counts once a copy has
  // been pulled here (Ray's fetch_local).
  std::vector<bool> Wait(const std::vector<ObjectID>& ids, int num_objects, int64_t timeout_ms, bool fetch_local);
  // Calls `ready` once Get of `id` would not wait: its value or error is here (an
  // object in another node's store pulled to this one first; a failed pull is left
  // to Get). Any thread; `ready` runs on this one, the loop, or the thread that
  // stored the value. An id unknown here is ready at once.
  void NotifyWhenReady(const ObjectID& id, std::function<void()> ready);
  // Borrowed objects absent here: ask their owners (loop thread). `lost_at` names,
  // per object, the raylet where its copy could not be fetched.
  void RequestFromOwners(const std::vector<ObjectID>& ids,
                         const absl::flat_hash_map<ObjectID, std::string>& lost_at = {});

 private:
  absl::StatusOr<std::vector<ObjectValue>> GetWithRecovery(const std::vector<ObjectID>& ids, int64_t timeout_ms,
                                                           int recovery_rounds);
  // Before a Get waits: NotFound for an id this process has no reference to; asks
  // the owners of borrowed values absent here; reads our tasks' results off their
  // channels for a while. Returns whether the Get will block (NotifyBlocked(true)
  // was called).
  absl::StatusOr<bool> AwaitAbsent(const std::vector<ObjectID>& ids, int64_t timeout_ms);
  // Values at positions `lost` of `ids` could not be read: owned ones are rebuilt,
  // borrowed ones reported to their owners; the caller reads them again.
  void RecoverLost(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& values,
                   const std::vector<ObjectValue>& out, const std::vector<size_t>& lost);
  // NotifyWhenReady's pull of an object stored on another node (loop thread).
  void PullThenNotify(const ObjectID& id, const StoredObjectPtr& marker, std::function<void()> ready);
  // Reads the replies of this process's task channels (non-blocking). Returns true
  // when anything was read; *in_flight tells whether any push awaits replies.
  bool PollTaskChannels(bool* in_flight);
  // Busy-polls the task channels for up to task_channel_spin_us while `done` is false.
  void SpinOnTaskChannels(const std::function<bool()>& done);
  // Reads plasma-resident values through the local store, fetching remote ones.
  // Positions (in `ids`) whose copy could not be fetched go to *lost, with the
  // error set in *out.
  // RESOURCE_EXHAUSTED, naming the sizes, when the objects (sizes as their markers
  // know them) are more than the node's store holds.
  absl::Status CheckFitsInStore(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& markers) const;
  absl::Status ReadPlasmaValues(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& markers,
                                int64_t deadline_ms, std::vector<ObjectValue>* out,
                                const std::vector<size_t>& positions, std::vector<size_t>* lost);
  // ReadPlasmaValues' pulls of the objects not on this node (`missing`, at
  // `missing_pos` in its ids) through this node's raylet; the ones that fail get an
  // OBJECT_LOST error in *out and their position in *lost.
  // Wait's two halves: the values (or markers) once `num_objects` are ready or the
  // timeout passes, null for those not ready; then, for fetch_local, the pulls.
  std::vector<StoredObjectPtr> WaitReady(const std::vector<ObjectID>& ids, int num_objects, int64_t timeout_ms);
  void FetchReadyHere(const std::vector<ObjectID>& ids, const std::vector<StoredObjectPtr>& values, int num_objects,
                      int64_t deadline_ms, std::vector<bool>* ready);
  absl::Status PullToThisNode(const std::vector<ObjectID>& missing, const std::vector<size_t>& missing_pos,
                              const std::vector<StoredObjectPtr>& markers, int64_t deadline_ms,
                              std::vector<ObjectValue>* out, const std::vector<size_t>& positions,
                              std::vector<size_t>* lost);
  // Points `v` at an object a store Get returned, holding its reference.
  void TakeFromStore(const ObjectID& id, const object_store::ObjectBuffer& buffer, ObjectValue* v);
  // Pulls `missing` (at `missing_pos` in ReadPlasmaValues' ids) to this node and
  // reads them from its store together with `here` (in it already), in one Get,
  // pulling again what was evicted before it was read.
  absl::Status FetchAndRead(std::vector<ObjectID> missing, std::vector<size_t> missing_pos,
                            std::vector<ObjectID> here, std::vector<size_t> here_pos,
                            const std::vector<StoredObjectPtr>& markers, int64_t deadline_ms,
                            std::vector<ObjectValue>* out, const std::vector<size_t>& positions,
                            std::vector<size_t>* lost);
  // FetchAndRead's store Gets of `ids` (at `pos`): each found is taken; one not in
  // the store any more goes to `gone` (to be pulled again) when `may_pull_again`,
  // else gets an OBJECT_LOST error; while some wait for room, all are asked for
  // again together.
  absl::Status ReadFetched(std::vector<ObjectID> ids, std::vector<size_t> pos, bool may_pull_again, int64_t deadline_ms,
                           std::vector<ObjectValue>* out, const std::vector<size_t>& positions,
                           std::vector<size_t>* lost, std::vector<ObjectID>* gone, std::vector<size_t>* gone_pos);
  // One FetchObjects call to this node's raylet, waiting `wait_ms` (-1: the pull
  // timeout, four times: the request may wait for its turn).
  absl::StatusOr<rpc::FetchObjectsReply> Fetch(const rpc::FetchObjectsRequest& request, int64_t wait_ms);
  // Adds `id` to `request`: its size and locations (the primary's, then the copies').
  void AddFetched(const ObjectID& id, const StoredObject& marker, rpc::FetchObjectsRequest* request);
  // A task thread starts or stops waiting: the raylet lends its CPU meanwhile.
  void NotifyBlocked(bool blocked);

  EventLoop& loop_;
  const Config& config_;
  MemoryStore& memory_store_;
  ReferenceCounter& refs_;
  object_store::ObjectStoreClientInterface& store_;
  RayletClientPool& raylets_;
  CoreWorkerClientPool& workers_;
  TaskChannelPool& channels_;
  ObjectFreer& freer_;
  const Hooks hooks_;
  const bool is_driver_;
  const WorkerID worker_id_;
  const std::string local_raylet_;
  const NodeID node_id_;
  const void* const context_owner_;
  // Borrowed ids we asked the owner about (loop thread).
  absl::flat_hash_set<ObjectID> owner_requests_;
};

}  // namespace manta::core
