#include "src/core_worker/local_node.h"

namespace manta::core {

absl::StatusOr<rpc::NodeInfo> ChooseLocalNode(const rpc::GetAllNodeInfoReply& nodes, const std::string& preferred_ip,
                                              const std::function<bool(const std::string&)>& is_local,
                                              const std::string& local_addresses_text,
                                              const std::string& gcs_address) {
  const rpc::NodeInfo* chosen = nullptr;
  auto rank = [&](const rpc::NodeInfo& node) {
    return (node.node_manager_address() == preferred_ip ? 2 : 0) + (node.is_head_node() ? 1 : 0);
  };
  std::string alive;
  for (const rpc::NodeInfo& node : nodes.node_info_list()) {
    if (node.state() != rpc::NodeInfo::ALIVE || node.draining()) continue;
    alive += (alive.empty() ? "" : ", ") + node.node_manager_address();
    if (!is_local(node.node_manager_address())) continue;
    if (chosen == nullptr || rank(node) > rank(*chosen)) chosen = &node;
  }
  if (chosen != nullptr) return *chosen;
  if (alive.empty()) return absl::UnavailableError("the cluster at " + gcs_address + " has no alive node");
  return absl::NotFoundError(
      "no node of the cluster at " + gcs_address + " runs on this machine (its alive nodes are at " + alive +
      "; this machine's addresses are " + local_addresses_text +
      "). A driver uses the object store of its own machine's node: start one here first with `manta start "
      "--address " + gcs_address + " --bind-address <this machine's address> --token-file <the cluster's token>`");
}

}  // namespace manta::core
