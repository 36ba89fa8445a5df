// ObjectFreer: deletes the plasma copies of an owner's freed objects, and knows
// where the copies beyond an object's primary are (ARCHITECTURE.md §8).
//
// Deletions are queued per raylet and sent in one batch per loop turn: those of
// this node straight to its object store (one one-way message on the store
// socket, so the loop never waits), the others as one FreeObjects RPC per raylet.
// A deletion the local store does not take goes through the raylet instead.
// FlushLocal() sends this node's queued deletions from the calling thread, so that
// the Create that follows can reuse their memory. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/object_store/store_client.h"
#include "src/raylet/raylet_client.h"

namespace manta::core {

class ObjectFreer {
 public:
  // `local_raylet`: "ip:port" of this node's raylet, whose store `store` is.
  ObjectFreer(EventLoop& loop, object_store::ObjectStoreClientInterface& store, raylet::RayletClientPool& raylets,
              std::string local_raylet)
      : loop_(loop), store_(store), raylets_(raylets), local_raylet_(std::move(local_raylet)) {}

  // Queues the deletion of `ids` at `raylet_address`.
  void Queue(const std::string& raylet_address, const std::vector<ObjectID>& ids);
  void FlushLocal();

  // Copies: `raylet_address` holds a copy of `id` (recorded once).
  void AddCopy(const ObjectID& id, const std::string& raylet_address);
  std::vector<std::string> CopiesOf(const ObjectID& id) const;
  // Forgets the copies of `id` and returns them.
  std::vector<std::string> TakeCopies(const ObjectID& id);

 private:
  void Flush();

  EventLoop& loop_;
  object_store::ObjectStoreClientInterface& store_;
  raylet::RayletClientPool& raylets_;
  const std::string local_raylet_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<ObjectID>> pending_ ABSL_GUARDED_BY(mu_);  // by raylet
  bool flush_posted_ ABSL_GUARDED_BY(mu_) = false;
  // Owned objects: raylets holding copies other than the primary ("ip:port").
  absl::flat_hash_map<ObjectID, std::vector<std::string>> copies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
