// PrimaryMover: an owner moves the primary copies it owns off a node being drained
// (ARCHITECTURE.md §4), so that the node can go without losing an object.
//
// When the GCS marks a node draining, every owner hears it (the node channel) and
// asks another raylet to fetch its objects from the draining one and pin them as its
// primary copies (FetchObjects with pin_for_owner: no window in which the new copy
// could be evicted). For each object moved, the owner's marker is replaced by one
// naming the new node, and the old copy is freed. An object freed meanwhile has its
// new copy freed too. Batches go one at a time; objects a target cannot take (no
// room) are offered to the next target, and what no target takes stays where it is
// (a warning: the node stays draining until its owner frees it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "protos/common.pb.h"
#include "src/common/id.h"
#include "src/core_worker/memory_store.h"
#include "src/core_worker/object_freer.h"
#include "src/core_worker/reference_counter.h"
#include "src/raylet/raylet_client.h"

namespace manta::core {

class PrimaryMover {
 public:
  struct Target {
    NodeID node;
    std::string raylet;  // "ip:port"
  };
  // What one drain moved: `moved` objects, `left` on the draining node.
  using Done = std::function<void(int64_t moved, int64_t left)>;

  PrimaryMover(MemoryStore& store, ReferenceCounter& refs, raylet::RayletClientPool& raylets, ObjectFreer& freer,
               rpc::Address self, int64_t batch_timeout_ms);

  // True the first time `node` is seen draining (then the caller looks up targets
  // and calls Move).
  bool FirstDrain(const NodeID& node);
  // Moves every primary copy this process owns on `from` (raylet `from_raylet`) to
  // the first of `targets` that takes it. Any thread; returns at once.
  void Move(const NodeID& from, const std::string& from_raylet, std::vector<Target> targets, Done done = nullptr);
  // The objects owned here whose primary copy is on `node` (in scope, sealed).
  std::vector<ObjectID> PrimariesOn(const NodeID& node) const;

 private:
  struct Job {
    NodeID from;
    std::string from_raylet;
    std::vector<Target> targets;
    size_t target = 0;
    std::vector<ObjectID> queue;   // for the current target
    std::vector<ObjectID> refused;  // by the current target: offered to the next
    int64_t moved = 0;
    Done done;
  };
  static constexpr size_t kBatch = 64;

  void NextBatch(const std::shared_ptr<Job>& job);
  void OnFetched(const std::shared_ptr<Job>& job, const std::vector<ObjectID>& ids,
                 const std::vector<StoredObjectPtr>& markers, const absl::Status& status,
                 const rpc::FetchObjectsReply& reply);
  // `id` now has a pinned copy at `to`: the marker moves there unless the object was
  // freed or replaced meanwhile (then the new copy goes).
  bool Commit(const Job& job, const ObjectID& id, const StoredObjectPtr& old, const Target& to);

  MemoryStore& store_;
  ReferenceCounter& refs_;
  raylet::RayletClientPool& raylets_;
  ObjectFreer& freer_;
  const rpc::Address self_;
  const int64_t batch_timeout_ms_;
  absl::Mutex mu_;
  absl::flat_hash_set<NodeID> drained_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
