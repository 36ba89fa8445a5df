// GcsActorScheduler: places an actor on a worker and runs its factory there
// (ARCHITECTURE.md §6).
//
// Schedule(actor) asks a raylet for a worker lease (the owner's node when it is
// alive, else the first alive node) with the actor's resources; the raylet's hybrid
// policy places it there or spills it back, and a spilled-back request is sent to
// the named raylet with grant_or_reject, as for tasks. The lease belongs to the
// actor's owner for a non-detached actor (the raylet kills the worker when the owner
// dies) and to no process for a detached one. Once granted, the creation task is
// pushed to the worker over the task channel and `done` gets the outcome:
//   - the factory ran: the worker's placement;
//   - the factory threw (or is not registered): the placement and the error;
//   - a raylet said no worker can be started for the actor's runtime env: an empty
//     placement and an error of type RUNTIME_ENV_SETUP_FAILED (final, not retried);
//   - a raylet said the actor's placement group was removed: an empty placement and
//     an error of type PLACEMENT_GROUP_REMOVED (final).
// The scheduler keeps trying by itself (after a short delay) when a lease request is
// rejected or fails, or when the worker dies before the factory returned. Cancel
// stops it: a pending lease request is cancelled, a worker already leased is killed;
// `done` is then never called.
//
// Thread: the GCS loop only; `done` runs on it, never inside Schedule.
// Ownership: keeps one record per actor being scheduled; the node manager and pools
// outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "protos/common.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/task_channel/task_channel.h"
#include "src/gcs/gcs_node_manager.h"
#include "src/gcs/gcs_task_manager.h"
#include "src/raylet/raylet_client.h"

namespace manta::gcs {

// Where an actor runs.
struct ActorPlacement {
  rpc::Address worker;  // node_id, worker_id and task_port set
  std::string lease_id;
  std::string raylet_address;
  NodeID node_id;
  int32_t pid = 0;
};

class GcsActorScheduler {
 public:
  // `creation_error` is set (type not ERROR_TYPE_UNSPECIFIED) when the factory failed.
  using Done = std::function<void(const ActorPlacement& placement, const rpc::ErrorInfo& creation_error)>;

  GcsActorScheduler(EventLoop& loop, GcsNodeManager& nodes, raylet::RayletClientPool& raylets,
                    core::TaskChannelPool& channels, int64_t retry_delay_ms = 200);
  ~GcsActorScheduler();

  // Leases a worker for `actor` (its creation_spec, owner_address and
  // detached flag are used) and runs the factory. Replaces an earlier scheduling of
  // the same actor.
  void Schedule(const rpc::ActorTableData& actor, Done done);
  // Stops scheduling `actor_id` (see the top). Unknown ids are ignored.
  void Cancel(const ActorID& actor_id, const std::string& reason);
  // Returns a lease and kills its worker (an actor that died or was killed).
  void KillWorker(const ActorPlacement& placement, const std::string& reason);
  // The node (its raylet at `raylet_address`) was declared dead: lease requests
  // waiting there and creation tasks pushed to its workers fail now (the node may
  // be cut off rather than gone, and then they would wait for the cut to heal), so
  // those actors are scheduled again elsewhere.
  void OnNodeDead(const NodeID& node_id, const std::string& raylet_address);
  // Where the creation tasks' states are recorded (task events); none by default.
  void SetTaskEvents(GcsTaskManager* events) { task_events_ = events; }
  // Actors being scheduled.
  size_t NumScheduling() const { return scheduling_.size(); }

 private:
  struct Attempt;
  void RequestLease(const std::shared_ptr<Attempt>& attempt, const std::string& raylet_address,
                    bool grant_or_reject);
  void OnLeaseReply(const std::shared_ptr<Attempt>& attempt, const std::string& raylet_address,
                    bool grant_or_reject, const absl::Status& status, rpc::RequestWorkerLeaseReply&& reply);
  void PushCreation(const std::shared_ptr<Attempt>& attempt);
  void OnCreationReply(const std::shared_ptr<Attempt>& attempt, const absl::Status& status,
                       const rpc::PushTaskReply& reply);
  // Starts over after `retry_delay_ms` (a failed lease, a worker that died).
  // The scheduling ended (created, or failed for good): records it and calls done.
  void Finish(const std::shared_ptr<Attempt>& attempt, const ActorPlacement& placement, const rpc::ErrorInfo& error,
              const rpc::TaskResult* result);
  void RetryLater(const std::shared_ptr<Attempt>& attempt, const std::string& why);
  // The raylet to ask first: the owner's node if alive, else the first alive node.
  std::string PickRaylet(const rpc::ActorTableData& actor) const;
  bool Current(const std::shared_ptr<Attempt>& attempt) const;

  EventLoop& loop_;
  GcsNodeManager& nodes_;
  raylet::RayletClientPool& raylets_;
  core::TaskChannelPool& channels_;
  const int64_t retry_delay_ms_;
  GcsTaskManager* task_events_ = nullptr;
  absl::flat_hash_map<ActorID, std::shared_ptr<Attempt>> scheduling_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::gcs
