#include "src/gcs/gcs_placement_group_scheduler.h"

#include <glog/logging.h>

#include "src/common/util.h"
#include "src/scheduling/bundle_resources.h"
#include "src/common/node_address.h"

namespace manta::gcs {

namespace {

scheduling::ResourceMap ResourcesOf(const rpc::Bundle& bundle) {
  return scheduling::QuantizeResources(
      scheduling::ResourceMap(bundle.unit_resources().begin(), bundle.unit_resources().end()));
}

}  // namespace

struct GcsPlacementGroupScheduler::Attempt {
  // Unique: raylets tell attempts of the same group apart by it.
  std::string id = LeaseID::FromRandom().Hex();
  PlacementGroupID group_id;
  std::string describe;  // "placement group <hex> (name)"
  Done done;
  // The node of every bundle once placed (placed bundles keep theirs).
  std::vector<NodeID> nodes;
  // The bundles this attempt reserves, by node.
  absl::flat_hash_map<NodeID, std::vector<rpc::Bundle>> by_node;
  int calls_in_flight = 0;
  bool failed = false;
  std::string failure;
  bool cancelled = false;
  bool finished = false;
};

GcsPlacementGroupScheduler::GcsPlacementGroupScheduler(EventLoop& loop, GcsNodeManager& nodes,
                                                       raylet::RayletClientPool& raylets,
                                                       PlacementGroupSchedulerOptions options)
    : loop_(loop), nodes_(nodes), raylets_(raylets), options_(options) {}

GcsPlacementGroupScheduler::~GcsPlacementGroupScheduler() { *alive_ = false; }

std::vector<scheduling::BundleNode> GcsPlacementGroupScheduler::Nodes() const {
  std::vector<scheduling::BundleNode> out;
  for (const rpc::NodeInfo& info : nodes_.AliveNodes()) {
    if (info.draining()) continue;
    scheduling::BundleNode node;
    node.node_id = NodeID::FromBinary(info.node_id());
    node.total = scheduling::QuantizeResources(
        scheduling::ResourceMap(info.resources_total().begin(), info.resources_total().end()));
    const rpc::ResourceUsage* usage = nodes_.GetUsage(node.node_id);
    if (usage == nullptr) {
      node.available = node.total;
    } else {
      // The node's own resources only: bundle resources are not for other bundles.
      for (const auto& [name, quantity] : usage->resources_available()) {
        if (node.total.contains(name)) node.available[name] = scheduling::Quantize(quantity);
      }
    }
    auto reserved = reserved_since_report_.find(node.node_id);
    if (reserved != reserved_since_report_.end()) scheduling::SubtractResources(node.available, reserved->second);
    out.push_back(std::move(node));
  }
  return out;
}

bool GcsPlacementGroupScheduler::WaitForBetter(const PlacementGroupID& group_id,
                                               const scheduling::BundlePlacement& placement) {
  if (placement.outcome != scheduling::BundlePlacement::Outcome::kPlaced || !placement.better_once_freed) {
    waiting_since_ms_.erase(group_id);
    return false;
  }
  const int64_t now = MonotonicMs();
  auto [it, first] = waiting_since_ms_.try_emplace(group_id, now);
  if (now - it->second < options_.split_wait_ms) return true;
  LOG(INFO) << "placement group " << group_id.Hex() << ": " << placement.reason << "; placed as it fits now after "
            << now - it->second << " ms";
  waiting_since_ms_.erase(it);
  return false;
}

std::string GcsPlacementGroupScheduler::RayletAddress(const NodeID& node_id) const {
  const rpc::NodeInfo* info = nodes_.GetNode(node_id);
  if (info == nullptr || info->state() != rpc::NodeInfo::ALIVE) return "";
  return ::manta::RayletAddress(*info);
}

void GcsPlacementGroupScheduler::Schedule(const rpc::PlacementGroupTableData& group, Done done) {
  auto group_id = PlacementGroupID::FromBinary(group.placement_group_id());
  Abandon(group_id);
  auto attempt = std::make_shared<Attempt>();
  attempt->group_id = group_id;
  attempt->describe = "placement group " + group_id.Hex() + (group.name().empty() ? "" : " (" + group.name() + ")");
  attempt->done = std::move(done);

  std::vector<scheduling::ResourceMap> bundles;
  std::vector<NodeID> placed;
  for (const rpc::Bundle& bundle : group.bundles()) {
    bundles.push_back(ResourcesOf(bundle));
    auto node = NodeID::FromBinaryChecked(bundle.node_id());
    placed.push_back(node.ok() ? *node : NodeID::Nil());
  }
  scheduling::BundlePlacement placement = scheduling::PlaceBundles(bundles, placed, group.strategy(), Nodes());
  attempts_[group_id] = attempt;
  const bool wait = WaitForBetter(group_id, placement);
  if (placement.outcome != scheduling::BundlePlacement::Outcome::kPlaced || wait) {
    PlacementGroupScheduleResult result;
    result.kind = wait ? PlacementGroupScheduleResult::Kind::kWaiting
                  : placement.outcome == scheduling::BundlePlacement::Outcome::kNotNow
                      ? PlacementGroupScheduleResult::Kind::kNotNow
                      : PlacementGroupScheduleResult::Kind::kInfeasible;
    result.reason = wait ? placement.reason + ": waiting up to " + std::to_string(options_.split_wait_ms) +
                               " ms for resources to come back"
                         : placement.reason;
    // `done` never runs inside Schedule.
    loop_.Post("PlacementGroup.NotPlaced", [this, alive = std::weak_ptr<bool>(alive_), attempt, result] {
      if (!alive.expired()) Finish(attempt, result);
    });
    return;
  }
  attempt->nodes = placement.nodes;
  for (int i = 0; i < group.bundles_size(); ++i) {
    if (!placed[i].IsNil()) continue;
    rpc::Bundle bundle = group.bundles(i);
    bundle.set_node_id(placement.nodes[i].Binary());
    attempt->by_node[placement.nodes[i]].push_back(std::move(bundle));
  }
  Prepare(attempt);
}

void GcsPlacementGroupScheduler::Prepare(const std::shared_ptr<Attempt>& attempt) {
  attempt->calls_in_flight = static_cast<int>(attempt->by_node.size());
  if (attempt->calls_in_flight == 0) {
    loop_.Post("PlacementGroup.NothingToPlace", [this, alive = std::weak_ptr<bool>(alive_), attempt] {
      if (!alive.expired()) OnPrepared(attempt);
    });
    return;
  }
  for (const auto& [node_id, bundles] : attempt->by_node) {
    for (const rpc::Bundle& bundle : bundles) scheduling::AddResources(reserved_since_report_[node_id], ResourcesOf(bundle));
    std::string address = RayletAddress(node_id);
    if (address.empty()) {
      attempt->failed = true;
      attempt->failure = "node " + node_id.Hex() + " is gone";
      loop_.Post("PlacementGroup.NodeGone", [this, alive = std::weak_ptr<bool>(alive_), attempt] {
        if (alive.expired()) return;
        if (--attempt->calls_in_flight == 0) OnPrepared(attempt);
      });
      continue;
    }
    rpc::PrepareBundleResourcesRequest request;
    request.set_attempt_id(attempt->id);
    for (const rpc::Bundle& bundle : bundles) *request.add_bundles() = bundle;
    raylets_.Get(address)->PrepareBundleResources(
        request, [this, alive = std::weak_ptr<bool>(alive_), attempt, node_id](
                     const absl::Status& status, rpc::PrepareBundleResourcesReply&& reply) {
          if (alive.expired()) return;
          if (!status.ok() || !reply.success()) {
            attempt->failed = true;
            attempt->failure = "node " + node_id.Hex() + (status.ok() ? " has not the resources now"
                                                                      : " failed to prepare: " + status.ToString());
          }
          if (--attempt->calls_in_flight == 0) OnPrepared(attempt);
        });
  }
}

void GcsPlacementGroupScheduler::OnPrepared(const std::shared_ptr<Attempt>& attempt) {
  if (attempt->cancelled) return Abort(attempt, "cancelled");
  if (attempt->failed) return Abort(attempt, attempt->failure);
  Commit(attempt);
}

void GcsPlacementGroupScheduler::Commit(const std::shared_ptr<Attempt>& attempt) {
  attempt->calls_in_flight = static_cast<int>(attempt->by_node.size());
  if (attempt->calls_in_flight == 0) {
    PlacementGroupScheduleResult result{PlacementGroupScheduleResult::Kind::kCreated, attempt->nodes, ""};
    return Finish(attempt, std::move(result));
  }
  for (const auto& [node_id, bundles] : attempt->by_node) {
    rpc::CommitBundleResourcesRequest request;
    for (const rpc::Bundle& bundle : bundles) *request.add_bundles() = bundle;
    std::string address = RayletAddress(node_id);
    auto on_reply = [this, alive = std::weak_ptr<bool>(alive_), attempt, node_id](const absl::Status& status) {
      if (alive.expired()) return;
      if (!status.ok()) {
        attempt->failed = true;
        attempt->failure = "node " + node_id.Hex() + " failed to commit: " + status.ToString();
      }
      if (--attempt->calls_in_flight > 0) return;
      if (attempt->cancelled) return Abort(attempt, "cancelled");
      if (attempt->failed) return Abort(attempt, attempt->failure);
      PlacementGroupScheduleResult result{PlacementGroupScheduleResult::Kind::kCreated, attempt->nodes, ""};
      Finish(attempt, std::move(result));
    };
    if (address.empty()) {
      loop_.Post("PlacementGroup.CommitNodeGone", [on_reply] { on_reply(absl::UnavailableError("the node is gone")); });
      continue;
    }
    raylets_.Get(address)->CommitBundleResources(
        request, [on_reply](const absl::Status& status, rpc::CommitBundleResourcesReply&&) { on_reply(status); });
  }
}

void GcsPlacementGroupScheduler::Abort(const std::shared_ptr<Attempt>& attempt, const std::string& why) {
  for (const auto& [node_id, bundles] : attempt->by_node) {
    for (const rpc::Bundle& bundle : bundles) {
      ReturnBundle(bundle, attempt->id, static_cast<int>(options_.bundle_return_attempts));
      Unreserve(node_id, ResourcesOf(bundle));
    }
  }
  if (attempt->cancelled) {
    VLOG(1) << attempt->describe << ": abandoned attempt returned its bundles";
    return;
  }
  LOG(INFO) << attempt->describe << " could not be reserved (" << why << "); it is tried again";
  PlacementGroupScheduleResult result;
  result.kind = PlacementGroupScheduleResult::Kind::kFailed;
  result.reason = why;
  Finish(attempt, std::move(result));
}

void GcsPlacementGroupScheduler::Finish(const std::shared_ptr<Attempt>& attempt,
                                        PlacementGroupScheduleResult result) {
  if (attempt->finished || attempt->cancelled) return;
  attempt->finished = true;
  auto it = attempts_.find(attempt->group_id);
  if (it != attempts_.end() && it->second == attempt) attempts_.erase(it);
  Done done = std::move(attempt->done);
  done(result);
}

void GcsPlacementGroupScheduler::Cancel(const PlacementGroupID& group_id) {
  waiting_since_ms_.erase(group_id);
  Abandon(group_id);
}

void GcsPlacementGroupScheduler::Abandon(const PlacementGroupID& group_id) {
  auto it = attempts_.find(group_id);
  if (it == attempts_.end()) return;
  std::shared_ptr<Attempt> attempt = it->second;
  attempts_.erase(it);
  attempt->cancelled = true;
  // Calls in flight come back to OnPrepared / the commit reply, which return the
  // bundles. A finished attempt has none in flight: nothing to return here, its
  // bundles belong to the group now.
}

void GcsPlacementGroupScheduler::ReturnBundles(const std::vector<rpc::Bundle>& bundles) {
  for (const rpc::Bundle& bundle : bundles) ReturnBundle(bundle, "", static_cast<int>(options_.bundle_return_attempts));
}

void GcsPlacementGroupScheduler::Unreserve(const NodeID& node_id, const scheduling::ResourceMap& resources) {
  auto it = reserved_since_report_.find(node_id);
  if (it == reserved_since_report_.end()) return;  // a report since counts it already
  scheduling::SubtractResources(it->second, resources);
  // A report in between may have cleared part of it: never count less than nothing.
  for (auto r = it->second.begin(); r != it->second.end();) {
    r = scheduling::ToSteps(r->second) <= 0 ? it->second.erase(r) : std::next(r);
  }
  if (it->second.empty()) reserved_since_report_.erase(it);
}

void GcsPlacementGroupScheduler::ReturnBundle(const rpc::Bundle& bundle, const std::string& attempt_id,
                                              int attempts_left) {
  auto node_id = NodeID::FromBinaryChecked(bundle.node_id());
  if (!node_id.ok()) return;
  std::string address = RayletAddress(*node_id);
  if (address.empty()) return;  // a dead node holds nothing
  rpc::CancelResourceReserveRequest request;
  *request.mutable_bundle() = bundle;
  request.set_attempt_id(attempt_id);
  raylets_.Get(address)->CancelResourceReserve(
      request, [this, alive = std::weak_ptr<bool>(alive_), bundle, attempt_id, attempts_left](
                   const absl::Status& status, rpc::CancelResourceReserveReply&&) {
        if (alive.expired() || status.ok()) return;
        if (attempts_left <= 1) {
          LOG(WARNING) << "could not return bundle " << bundle.bundle_index() << " of placement group "
                       << PlacementGroupID::FromBinary(bundle.placement_group_id()).Hex() << " to node "
                       << NodeID::FromBinary(bundle.node_id()).Hex() << ": " << status;
          return;
        }
        loop_.PostAfter("PlacementGroup.ReturnBundle", options_.bundle_return_retry_ms,
                        [this, alive, bundle, attempt_id, attempts_left] {
                          if (!alive.expired()) ReturnBundle(bundle, attempt_id, attempts_left - 1);
                        });
      });
}

void GcsPlacementGroupScheduler::ReleaseUnusedBundles(
    const absl::flat_hash_map<NodeID, std::vector<rpc::Bundle>>& in_use, std::function<void()> done) {
  std::vector<rpc::NodeInfo> alive_nodes = nodes_.AliveNodes();
  auto remaining = std::make_shared<size_t>(alive_nodes.size());
  auto shared_done = std::make_shared<std::function<void()>>(std::move(done));
  if (alive_nodes.empty()) {
    loop_.Post("PlacementGroup.NoNodesToRelease", [shared_done] { (*shared_done)(); });
    return;
  }
  for (const rpc::NodeInfo& info : alive_nodes) {
    NodeID node_id = NodeID::FromBinary(info.node_id());
    rpc::ReleaseUnusedBundlesRequest request;
    auto it = in_use.find(node_id);
    if (it != in_use.end()) {
      for (const rpc::Bundle& bundle : it->second) *request.add_bundles_in_use() = bundle;
    }
    raylets_.Get(RayletAddress(node_id))
        ->ReleaseUnusedBundles(request, [node_id, remaining, shared_done](const absl::Status& status,
                                                                          rpc::ReleaseUnusedBundlesReply&&) {
          if (!status.ok()) {
            LOG(WARNING) << "node " << node_id.Hex() << " did not confirm which bundles it keeps: " << status;
          }
          if (--*remaining == 0) (*shared_done)();
        });
  }
}

}  // namespace manta::gcs
