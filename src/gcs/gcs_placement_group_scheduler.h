// GcsPlacementGroupScheduler: places a placement group's bundles on nodes and
// reserves them there with two-phase commit (ARCHITECTURE.md §7).
//
// Schedule(group) places the bundles that have no node yet (PlaceBundles, over the
// alive, non-draining nodes: their registered totals and last reported availability,
// less what this scheduler reserved since that report), then:
//   1. prepare: every chosen node is asked to set the bundles aside;
//   2. commit: once every prepare succeeded, every node turns them into bundle
//      resources.
// A prepare that fails or is refused (the node's availability changed, the node
// died, the call was lost) cancels the attempt: every bundle of it is returned to
// its node (CancelResourceReserve is harmless for a bundle a node never prepared;
// it names the attempt, so a late one never takes a newer attempt's bundle),
// and `done` reports kFailed: the caller tries again later. A failed commit does
// the same. Cancel(group) abandons an attempt (the group was removed): its bundles
// are returned once the calls in flight come back, and `done` is never called.
//
// A PACK or SPREAD group that fits now, but on more (PACK) or fewer (SPREAD) nodes
// than it would once the resources in use are given back, is held back (kWaiting)
// for up to `split_wait_ms` from its first such attempt: availability the GCS sees
// lags (reports every resource_report_ms; owners return leases after
// worker_lease_idle_ms), and a group placed on a split is split for its life. After
// that it takes the placement it has.
//
// Thread: the GCS loop only; `done` runs on it, never inside Schedule.
// Ownership: one attempt per group at a time; the node manager and the raylet client
// pool outlive it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "protos/common.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/gcs/gcs_node_manager.h"
#include "src/raylet/raylet_client.h"
#include "src/scheduling/bundle_placement.h"

namespace manta::gcs {

struct PlacementGroupScheduleResult {
  enum class Kind {
    kCreated,     // every bundle is reserved; `nodes` has the node of each
    kNotNow,      // the nodes cannot hold it now, but could once resources come back
    kInfeasible,  // no set of the alive nodes could ever hold it
    kFailed,      // a prepare or commit failed: try again later
    kWaiting,     // a best-effort group fits now, but better once resources in use come
                  // back (stale availability, leases about to be returned): try again soon
  };
  Kind kind = Kind::kFailed;
  std::vector<NodeID> nodes;
  std::string reason;
};

struct PlacementGroupSchedulerOptions {
  int64_t split_wait_ms = 0;  // see the top
  // A bundle the GCS gives back (a failed or removed group) is sent this many times,
  // this long apart, before it is left to the raylet's own clean-up.
  int64_t bundle_return_attempts = 5;
  int64_t bundle_return_retry_ms = 500;
};

class GcsPlacementGroupScheduler {
 public:
  using Done = std::function<void(const PlacementGroupScheduleResult&)>;

  GcsPlacementGroupScheduler(EventLoop& loop, GcsNodeManager& nodes, raylet::RayletClientPool& raylets,
                             PlacementGroupSchedulerOptions options = {});
  ~GcsPlacementGroupScheduler();

  // Places and reserves the bundles of `group` that have no node_id (the others keep
  // theirs). Replaces an attempt in flight for the same group (which is cancelled).
  void Schedule(const rpc::PlacementGroupTableData& group, Done done);
  // Abandons the attempt for `group_id`, if any (see the top).
  void Cancel(const PlacementGroupID& group_id);
  // Returns bundles to their nodes (those with a node_id of an alive node). Each call
  // is retried while its node stays alive.
  void ReturnBundles(const std::vector<rpc::Bundle>& bundles);
  // After a GCS restart: tells every alive node which bundles it keeps (`in_use`,
  // by node); it returns the rest. `done` runs once every node answered or failed.
  void ReleaseUnusedBundles(const absl::flat_hash_map<NodeID, std::vector<rpc::Bundle>>& in_use,
                            std::function<void()> done);
  // A node reported its availability: what was reserved there before counts in it.
  void OnResourceReport(const NodeID& node_id) { reserved_since_report_.erase(node_id); }
  // Groups with an attempt in flight.
  size_t NumScheduling() const { return attempts_.size(); }

 private:
  struct Attempt;
  // Cancel without forgetting how long the group has waited for a better placement.
  void Abandon(const PlacementGroupID& group_id);
  std::vector<scheduling::BundleNode> Nodes() const;
  std::string RayletAddress(const NodeID& node_id) const;
  void Prepare(const std::shared_ptr<Attempt>& attempt);
  void OnPrepared(const std::shared_ptr<Attempt>& attempt);
  void Commit(const std::shared_ptr<Attempt>& attempt);
  // Ends the attempt: returns its bundles and reports kFailed (unless cancelled).
  void Abort(const std::shared_ptr<Attempt>& attempt, const std::string& why);
  void Finish(const std::shared_ptr<Attempt>& attempt, PlacementGroupScheduleResult result);
  // Takes `resources` (an aborted attempt's) off what counts as reserved on the node.
  void Unreserve(const NodeID& node_id, const scheduling::ResourceMap& resources);
  // `attempt_id` empty: whichever attempt holds it (removal).
  void ReturnBundle(const rpc::Bundle& bundle, const std::string& attempt_id, int attempts_left);

  // True when the placement is worse than it will be soon and the group has not
  // waited split_wait_ms for better yet (see the top).
  bool WaitForBetter(const PlacementGroupID& group_id, const scheduling::BundlePlacement& placement);

  EventLoop& loop_;
  GcsNodeManager& nodes_;
  raylet::RayletClientPool& raylets_;
  const PlacementGroupSchedulerOptions options_;
  absl::flat_hash_map<PlacementGroupID, std::shared_ptr<Attempt>> attempts_;
  // When each group held back for a better placement was first held back (ms).
  absl::flat_hash_map<PlacementGroupID, int64_t> waiting_since_ms_;
  // Resources this scheduler reserved on a node since its last report.
  absl::flat_hash_map<NodeID, scheduling::ResourceMap> reserved_since_report_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::gcs
