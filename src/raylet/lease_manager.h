// LeaseManager: grants this node's workers to task owners (ARCHITECTURE.md §5 step 4,
// §7).
//
// A RequestWorkerLease is validated, then placed by the hybrid scheduling policy
// (scheduling_policy.h): granted here (resources taken from this node's available
// map, a worker of the request's job and runtime env popped from the WorkerPool; an
// env that cannot be applied here rejects the request with runtime_env_setup_failed,
// which owners do not retry), queued here until resources free up
// (FIFO per resource shape), spilled back to another raylet ("retry at"), or — when no
// alive node could ever satisfy it — kept pending as infeasible: warned about once
// per shape, listed in this node's usage reports, and placed again when the cluster
// view changes. A spilled-back request (grant_or_reject) is never spilled again: when
// it waits here and another node can run it now, it is rejected with place_again and
// its owner places it again from its own raylet.
//
// Placement groups (ARCHITECTURE.md §7): the GCS reserves bundles here with
// two-phase commit. PrepareBundles takes a bundle's resources from this node's
// available ones; CommitBundles adds them back as resources of their own
// (bundle_resources.h: CPU_group_<i>_<pg>, CPU_group_<pg>, bundle_group_...), which
// only requests naming the group (RequestWorkerLeaseRequest.placement) can use: the
// request's resources are renamed on arrival. ReturnBundle undoes either step and
// kills the workers leased from the bundle; requests queued for it are placed again.
// A request naming a group this node knows was removed (OnPlacementGroupRemoved) is
// rejected with placement_group_removed, which owners do not retry.
//
// Leased resources always come back: ReturnWorker, the worker's exit, the death of
// the lease's owner (a local driver or worker; a worker or driver of another node,
// as the GCS publishes it; any worker of a node marked DEAD) and the end of the
// job. Actor leases (requested by the GCS, ARCHITECTURE.md §6) differ in two ways: an
// actor given no resources asks for none (its request names CPU 0), or in a bundle is
// placed with one CPU that comes back once its worker is granted (placement_only),
// and a detached actor's worker outlives its job. A worker blocked in Get/Wait gives its lease's CPU back while it waits
// (NotifyWorkerBlocked) and takes it back after, even if that oversubscribes the
// node for a while.
//
// Thread: loop thread only. Replies to queued requests are sent later, from the loop.
// Ownership: owns the pending requests (and their RPC completions) and the leases;
// `loop`, `config`, `view` and `pool` outlive it. It listens to the pool's gone
// workers from construction to destruction.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "protos/node_manager.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/send_reply.h"
#include "src/scheduling/cluster_resource_view.h"
#include "src/scheduling/resources.h"
#include "src/scheduling/scheduling_policy.h"
#include "src/raylet/worker_pool.h"

namespace manta::raylet {

struct LeaseManagerOptions {
  NodeID node_id;
  // This node's total resources.
  scheduling::ResourceMap total;
};

class LeaseManager {
 public:
  // `random_index` is the policy's random source (tests make it deterministic).
  LeaseManager(EventLoop& loop, LeaseManagerOptions options, const Config& config, scheduling::ClusterResourceView& view,
               WorkerPool& pool, scheduling::RandomIndexFn random_index);
  ~LeaseManager();
  LeaseManager(const LeaseManager&) = delete;
  LeaseManager& operator=(const LeaseManager&) = delete;

  // Replies (status OK) with a grant, a spillback, `rejected` + failure_message
  // (malformed request; grant_or_reject that this node can never satisfy; the worker
  // could not be started) or `canceled` (CancelWorkerLease, owner gone, job ended).
  // Queued and infeasible requests are answered when that happens.
  void HandleRequestWorkerLease(const rpc::RequestWorkerLeaseRequest& request, rpc::RequestWorkerLeaseReply* reply,
                                rpc::SendReply send_reply);
  // Frees the lease's resources and returns the worker to the pool (kills it with
  // disconnect_worker). An unknown lease is not an error (it was already released).
  // The reply says so when the memory monitor killed the lease's worker (failure).
  void HandleReturnWorker(const rpc::ReturnWorkerRequest& request, rpc::ReturnWorkerReply* reply,
                          rpc::SendReply send_reply);
  // The memory monitor's choice (memory_monitor.h): kills the worker of the newest
  // lease of a retriable task (else of any task, else of an actor) and keeps why
  // for its owner's ReturnWorker. `usage` describes the node's memory use. Returns
  // the worker's pid, or 0 when nothing is leased.
  pid_t KillWorkerForMemory(const std::string& usage, double threshold);
  // success = the request was still pending (it is answered with canceled = true).
  void HandleCancelWorkerLease(const rpc::CancelWorkerLeaseRequest& request, rpc::CancelWorkerLeaseReply* reply,
                               rpc::SendReply send_reply);
  // A leased worker blocked (gives its CPU back) or unblocked (takes it back). Workers
  // without a lease (drivers) are ignored.
  void HandleNotifyWorkerBlocked(const rpc::NotifyWorkerBlockedRequest& request,
                                 rpc::NotifyWorkerBlockedReply* reply, rpc::SendReply send_reply);

  // Placement group bundles (see the top). Prepare: false, taking nothing, when the
  // bundles do not all fit in the available resources now; bundles already held here
  // take nothing more. Commit: FAILED_PRECONDITION for a bundle not prepared here.
  // `attempt_id` names the GCS's attempt (see ReturnBundle).
  bool PrepareBundles(const std::vector<rpc::Bundle>& bundles, const std::string& attempt_id = "");
  absl::Status CommitBundles(const std::vector<rpc::Bundle>& bundles);
  // Unknown bundles are ignored. With an `attempt_id`, only a bundle that attempt
  // holds (prepared last) is returned.
  void ReturnBundle(const PlacementGroupID& group, int bundle_index, const std::string& attempt_id = "");
  // Returns every bundle held here that `in_use` does not list.
  void ReleaseUnusedBundles(const std::vector<rpc::Bundle>& in_use);
  // The group was removed (or does not exist): its requests here are rejected
  // (placement_group_removed), its leases released (workers killed), and later
  // requests naming it rejected.
  void OnPlacementGroupRemoved(const PlacementGroupID& group);
  // Called once per group whose requests wait here for a bundle no node holds (the
  // node manager then asks the GCS whether the group still exists), and again for
  // every such group by AskAboutWaitingGroups (after a GCS restart: a removal may
  // have been missed).
  void SetWaitingGroupListener(std::function<void(const PlacementGroupID&)> listener) {
    waiting_group_listener_ = std::move(listener);
  }
  void AskAboutWaitingGroups();
  // Asked when a worker blocks: true while the node's memory is short (the memory
  // monitor's last reading), when a blocked worker keeps its CPU instead of lending
  // it (more tasks would need more memory the node does not have).
  void SetMemoryPressure(std::function<bool()> pressure) { memory_pressure_ = std::move(pressure); }
  size_t num_bundles() const { return bundles_.size(); }

  // The cluster view changed (a node joined, availability was reported): places
  // infeasible requests again, and spills queued ones another node can run now.
  void OnClusterViewChanged();
  // A node was marked DEAD: leases owned by workers on it are released (their
  // workers killed) and their queued requests dropped.
  void OnNodeDead(const NodeID& node_id);
  // A worker or driver on another node exited (published by the GCS): the leases
  // it owns here are released (their workers killed) and its requests dropped, as
  // for a local owner. A nil or unknown `owner` changes nothing.
  void OnRemoteOwnerGone(const WorkerID& owner, const std::string& reason);
  // The job ended (its driver is gone): its workers here are killed, its leases
  // released and its queued requests dropped.
  void OnJobFinished(const JobID& job_id);

  // This node's resources, committed bundles' resources included.
  const scheduling::ResourceMap& total() const { return total_; }
  // May hold negative quantities while unblocked workers oversubscribe the node.
  const scheduling::ResourceMap& available() const { return available_; }
  // Shapes of the infeasible requests waiting here, as FormatResources renders them.
  std::vector<std::string> InfeasibleShapes() const;
  // Requests waiting here, by shape: what the autoscaler adds nodes for. Requests
  // for a placement group's bundle are left out (the GCS counts pending groups).
  struct Demand {
    scheduling::ResourceMap shape;
    int64_t queued = 0;
    int64_t infeasible = 0;
  };
  std::vector<Demand> Demands() const;
  size_t num_leases() const { return leases_.size(); }
  // Requests waiting here for resources (not infeasible ones).
  size_t num_queued() const;
  size_t num_infeasible() const;

 private:
  struct Request;
  using RequestPtr = std::shared_ptr<Request>;
  struct Lease {
    LeaseID lease_id;
    WorkerID worker_id;
    JobID job_id;
    WorkerID owner_worker_id;
    NodeID owner_node_id;
    scheduling::ResourceMap resources;
    // Nil unless leased from a placement group's bundle (bundle_index, -1 = any).
    PlacementGroupID placement_group;
    int bundle_index = -1;
    // A detached actor's: kept when its job ends.
    bool detached = false;
    bool is_actor = false;
    bool retriable = false;
    std::string function_name;
    // Grant order: higher is newer.
    int64_t granted_seq = 0;
    // The CPUs (plain or of a bundle) given back while the worker is blocked.
    bool blocked = false;
    scheduling::ResourceMap released_cpu;
  };
  struct Bundle {
    scheduling::ResourceMap resources;
    bool committed = false;
    // The GCS attempt that prepared it last.
    std::string attempt_id;
  };
  using BundleKey = std::pair<PlacementGroupID, int>;
  enum class AfterRelease { kReturnToPool, kKillWorker, kWorkerGone };

  // Turns the request's resources into its placement group bundle's; false when it
  // was rejected (a malformed or removed group).
  bool TakePlacement(const rpc::RequestWorkerLeaseRequest& request, const RequestPtr& request_ptr);
  void Place(const RequestPtr& request);
  scheduling::SchedulingDecision Schedule(const scheduling::ResourceMap& resources) const;
  bool LocalDraining() const;
  void Enqueue(const RequestPtr& request);
  void AddInfeasible(const RequestPtr& request);
  void Spill(const RequestPtr& request, const NodeID& node_id);
  void Reject(const RequestPtr& request, const std::string& message);
  // A spilled-back request waiting here that `node_id` can run now: rejected with
  // place_again, for its owner to place it again from its own raylet.
  void PlaceAgainFromHome(const RequestPtr& request, const NodeID& node_id);
  // Grants every queued request that fits, FIFO per shape.
  void Dispatch();
  void Grant(const RequestPtr& request);
  void OnWorkerPopped(const RequestPtr& request, absl::StatusOr<WorkerInfo> worker);
  // Takes a pending request out of wherever it waits, giving back resources held for
  // it; the caller answers it.
  void Unlink(const RequestPtr& request);
  // Answers and forgets every pending request matching `match` with canceled = true.
  void DropRequests(const std::function<bool(const Request&)>& match, const std::string& reason);
  void ReleaseLease(const LeaseID& lease_id, AfterRelease after, const std::string& reason);
  // Releases (killing their workers) every lease matching `match`.
  void ReleaseLeases(const std::function<bool(const Lease&)>& match, const std::string& reason);
  // `owner` (a worker or driver, here or on another node) is gone: drops its pending
  // requests (canceled), then releases the leases it holds here, killing their
  // workers. Does not Dispatch. A nil `owner` matches nothing.
  void ForgetOwner(const WorkerID& owner, const std::string& why);
  void OnWorkerGone(const WorkerGone& gone);
  void PlaceInfeasible();
  // Takes the pending requests matching `match` out of where they wait (and out of
  // requests_; one waiting for its worker gives its resources back); PlaceAgain puts
  // them back through the policy.
  std::vector<RequestPtr> TakeWaiting(const std::function<bool(const Request&)>& match);
  void PlaceAgain(const std::vector<RequestPtr>& requests);
  // Answers `request` with rejected + placement_group_removed.
  void RejectRemovedGroup(const RequestPtr& request);
  void SpillQueuedElsewhere();

  EventLoop& loop_;
  LeaseManagerOptions options_;
  const Config& config_;
  scheduling::ClusterResourceView& view_;
  WorkerPool& pool_;
  scheduling::RandomIndexFn random_index_;
  scheduling::ResourceMap total_;
  scheduling::ResourceMap available_;
  absl::flat_hash_map<BundleKey, Bundle> bundles_;
  absl::flat_hash_set<PlacementGroupID> removed_groups_;
  // Groups the waiting-group listener was told about.
  absl::flat_hash_set<PlacementGroupID> asked_groups_;
  std::function<void(const PlacementGroupID&)> waiting_group_listener_;
  std::function<bool()> memory_pressure_;
  // Pending requests by lease_request_id, and where they wait.
  absl::flat_hash_map<std::string, RequestPtr> requests_;
  std::map<scheduling::ResourceMap, std::deque<RequestPtr>> queued_;
  std::map<scheduling::ResourceMap, std::deque<RequestPtr>> infeasible_;
  std::set<scheduling::ResourceMap> warned_infeasible_;
  absl::flat_hash_map<LeaseID, Lease> leases_;
  absl::flat_hash_map<WorkerID, LeaseID> lease_by_worker_;
  int64_t grants_ = 0;
  // Why the memory monitor killed the workers of recent leases, oldest first, until
  // their owners return them (at most kMaxMemoryKillsKept).
  static constexpr size_t kMaxMemoryKillsKept = 1024;
  std::deque<std::pair<LeaseID, std::string>> memory_kills_;
  // Cleared on destruction, so that late pool callbacks do nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::raylet
