#include "src/scheduling/cluster_resource_view.h"

#include "src/scheduling/resources.h"

namespace manta::scheduling {

void ClusterResourceView::ResetFromSnapshot(const rpc::GetAllNodeInfoReply& snapshot) {
  nodes_.clear();
  for (const auto& info : snapshot.node_info_list()) OnNodeInfo(info);
  for (const auto& usage : snapshot.resource_usage()) OnResourceUsage(usage);
}

void ClusterResourceView::OnNodeInfo(const rpc::NodeInfo& info) {
  auto id = NodeID::FromBinaryChecked(info.node_id());
  if (!id.ok()) return;
  if (info.state() == rpc::NodeInfo::DEAD) {
    nodes_.erase(*id);
    return;
  }
  auto [it, inserted] = nodes_.try_emplace(*id);
  NodeResources& node = it->second;
  node.total = std::map<std::string, double>(info.resources_total().begin(), info.resources_total().end());
  if (inserted) node.available = node.total;
  node.address = info.node_manager_address();
  node.port = info.node_manager_port();
  node.draining = info.draining();
}

void ClusterResourceView::OnResourceUsage(const rpc::ResourceUsage& usage) {
  auto id = NodeID::FromBinaryChecked(usage.node_id());
  if (!id.ok()) return;
  auto it = nodes_.find(*id);
  if (it == nodes_.end()) return;  // usage of a node we have not seen alive: ignore
  it->second.available =
      std::map<std::string, double>(usage.resources_available().begin(), usage.resources_available().end());
}

void ClusterResourceView::SubtractAvailable(const NodeID& id, const std::map<std::string, double>& amount) {
  auto it = nodes_.find(id);
  if (it != nodes_.end()) SubtractResources(it->second.available, amount);
}

const ClusterResourceView::NodeResources* ClusterResourceView::Get(const NodeID& id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

}  // namespace manta::scheduling
