#include "src/scheduling/cluster_resource_view.h"

#include "src/scheduling/bundle_resources.h"
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
  // The node table has the node's own resources; its reports add its committed
  // placement group bundles, which are kept until the next report says otherwise.
  std::map<std::string, double> total(info.resources_total().begin(), info.resources_total().end());
  for (const auto& [name, quantity] : node.total) {
    if (GroupOfResource(name).has_value()) total.emplace(name, quantity);
  }
  node.total = std::move(total);
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
  // Totals change when placement group bundles are committed or returned there.
  if (!usage.resources_total().empty()) {
    it->second.total = std::map<std::string, double>(usage.resources_total().begin(), usage.resources_total().end());
  }
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
