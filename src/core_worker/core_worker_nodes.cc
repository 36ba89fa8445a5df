// Node deaths as the GCS publishes them (ARCHITECTURE.md §15).
//
// A node the GCS declared dead may still be running, cut off by a partition: the
// TCP connections to it then never break, and a push or call waiting on it would
// wait until the cut heals. So the declaration is final here: pushes to its workers
// fail (their tasks are retried elsewhere, an actor's calls wait for its restart),
// lease requests waiting at its raylet fail (and are asked again locally), calls to
// owners and borrowers on it fail (OWNER_DIED), and later calls to it fail at once.
#include <glog/logging.h>

#include "src/common/status_util.h"
#include "src/core_worker/core_worker.h"
#include "src/gcs/gcs_client.h"
#include "src/common/node_address.h"

namespace manta::core {

void CoreWorker::OnNodeInfo(const rpc::NodeInfo& node) {
  if (node.state() == rpc::NodeInfo::ALIVE && node.draining()) return OnNodeDraining(node);
  if (node.state() != rpc::NodeInfo::DEAD) return;
  {
    absl::MutexLock lock(&nodes_mu_);
    if (!dead_nodes_.insert(node.node_id()).second) return;
  }
  const std::string raylet = RayletAddress(node);
  const std::string hex = NodeID::FromBinaryChecked(node.node_id()).value_or(NodeID::Nil()).Hex();
  const absl::Status dead = absl::UnavailableError("node " + hex + " at " + raylet +
                                                   " was declared dead: " + node.death_reason());
  if (node.node_id() == node_id_.Binary()) {
    OnLocalNodeLost("the node this process runs on (" + hex + " at " + raylet +
                    ") was declared dead by the cluster: " + node.death_reason());
    return;
  }
  VLOG(1) << dead;
  for (const auto& channel : channels_.RemoveGroup(node.node_id())) channel->Close(dead);
  for (const auto& client : workers_.RemoveGroup(node.node_id())) client->CancelAll();
  if (raylet != options_.raylet_address) {
    raylets_.Get(raylet)->CancelAll();
    raylets_.Disconnect(raylet);
  }
}

void CoreWorker::OnNodeDraining(const rpc::NodeInfo& node) {
  auto id = NodeID::FromBinaryChecked(node.node_id());
  if (!id.ok() || !mover_->FirstDrain(*id) || mover_->PrimariesOn(*id).empty()) return;
  // Where to: this node's raylet first, then the other live nodes not draining.
  gcs_.AsyncGetAllNodeInfo([this, from = *id, from_raylet = RayletAddress(node)](const absl::Status& s,
                                                                                 rpc::GetAllNodeInfoReply&& reply) {
    if (!s.ok()) {
      LOG(WARNING) << "node " << from.Hex() << " is draining, but the node table could not be read: " << s
                   << "; the primary copies owned here stay on it";
      return;
    }
    std::vector<PrimaryMover::Target> targets;
    for (const rpc::NodeInfo& n : reply.node_info_list()) {
      auto nid = NodeID::FromBinaryChecked(n.node_id());
      if (!nid.ok() || *nid == from || n.state() != rpc::NodeInfo::ALIVE || n.draining()) continue;
      targets.push_back({*nid, RayletAddress(n)});
      if (*nid == node_id_) std::swap(targets.front(), targets.back());
    }
    mover_->Move(from, from_raylet, std::move(targets));
  });
}

void CoreWorker::RefreshNodes() {
  gcs_.AsyncGetAllNodeInfo([this](const absl::Status& s, rpc::GetAllNodeInfoReply&& reply) {
    if (!s.ok()) {
      LOG(WARNING) << "could not read the node table after the GCS restarted: " << s;
      return;
    }
    for (const rpc::NodeInfo& node : reply.node_info_list()) OnNodeInfo(node);
  });
}

void CoreWorker::OnLocalNodeLost(const std::string& why) {
  {
    absl::MutexLock lock(&nodes_mu_);
    if (!local_node_lost_.empty()) return;
    local_node_lost_ = why + "; this process's work cannot go on (start it again on a live node)";
  }
  node_lost_.store(true);
  LOG(ERROR) << why;
  raylet_watch_timer_.reset();
  // Nothing submitted here can finish now: its results would come back through a
  // node that is gone, or run where the cluster no longer looks.
  const rpc::ErrorInfo error = LocalNodeLostError();
  for (const TaskID& id : task_manager_->PendingTaskIds()) task_manager_->FailTask(id, error);
  const absl::Status closed = absl::UnavailableError(why);
  channels_.ForEachShared([&](const std::shared_ptr<TaskChannelInterface>& c) { c->Close(closed); });
}

rpc::ErrorInfo CoreWorker::LocalNodeLostError() const {
  rpc::ErrorInfo error;
  error.set_type(rpc::NODE_DIED);
  absl::MutexLock lock(&nodes_mu_);
  error.set_message(local_node_lost_);
  return error;
}

bool CoreWorker::IsNodeDead(const std::string& node_id) const {
  absl::MutexLock lock(&nodes_mu_);
  return dead_nodes_.contains(node_id);
}

}  // namespace manta::core
