// GcsNodeManager: the node table (register, unregister, drain, list, death).
//
// Every change is written to the store before the RPC is answered and then
// published on GCS_NODE_INFO_CHANNEL. Dead nodes stay in the table (state DEAD) so
// `manta status` can show them. Latest reported resource availability is kept in
// memory only (it is re-reported within resource_report_ms). Loop thread only.
#pragma once

#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "protos/gcs.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_publisher.h"
#include "src/gcs/store_client.h"

namespace manta::gcs {

inline constexpr char kNodeTable[] = "nodes";

class GcsNodeManager {
 public:
  using NodeListener = std::function<void(const rpc::NodeInfo&)>;

  // `system_config`: the head's config overrides (JSON), handed to registering nodes.
  GcsNodeManager(StoreClientInterface& store, GcsPublisher& publisher, ClusterID cluster_id,
                 std::function<int64_t()> now_ms, std::string system_config = "");

  // Loads the table read from the store at start-up (field = node id, value = NodeInfo).
  // Malformed entries are logged and skipped.
  void Initialize(const absl::flat_hash_map<std::string, std::string>& rows);

  void HandleRegisterNode(const rpc::RegisterNodeRequest& request, rpc::RegisterNodeReply* reply,
                          rpc::SendReply send_reply);
  void HandleUnregisterNode(const rpc::UnregisterNodeRequest& request, rpc::UnregisterNodeReply* reply,
                            rpc::SendReply send_reply);
  void HandleDrainNode(const rpc::DrainNodeRequest& request, rpc::DrainNodeReply* reply,
                       rpc::SendReply send_reply);
  void HandleGetAllNodeInfo(const rpc::GetAllNodeInfoRequest& request, rpc::GetAllNodeInfoReply* reply,
                            rpc::SendReply send_reply);
  void HandleReportResourceUsage(const rpc::ReportResourceUsageRequest& request,
                                 rpc::ReportResourceUsageReply* reply, rpc::SendReply send_reply);

  // Marks an alive node DEAD (health checks failed), persists and publishes.
  void MarkNodeDead(const NodeID& node_id, const std::string& reason);

  // Called for every node that becomes alive (registered or loaded alive) / dead.
  void AddNodeAddedListener(NodeListener listener) { added_listeners_.push_back(std::move(listener)); }
  void AddNodeRemovedListener(NodeListener listener) { removed_listeners_.push_back(std::move(listener)); }

  // Called after every accepted resource report, with the reporting node.
  void AddResourceReportListener(std::function<void(const NodeID&)> listener) {
    report_listeners_.push_back(std::move(listener));
  }

  const rpc::NodeInfo* GetNode(const NodeID& node_id) const;
  // The GCS's own Prometheus port, told in every GetAllNodeInfo reply.
  void SetGcsMetricsExportPort(int port) { gcs_metrics_export_port_ = port; }
  // The node's latest resource report; null before its first.
  const rpc::ResourceUsage* GetUsage(const NodeID& node_id) const;
  std::vector<rpc::NodeInfo> AliveNodes() const;

 private:
  // Persists `info`, then runs `done` with the store's status.
  void Persist(const rpc::NodeInfo& info, absl::AnyInvocable<void(absl::Status)> done);
  void SetDead(const NodeID& node_id, const std::string& reason, absl::AnyInvocable<void(absl::Status)> done);
  void PublishNode(const rpc::NodeInfo& info);

  StoreClientInterface& store_;
  GcsPublisher& publisher_;
  ClusterID cluster_id_;
  std::function<int64_t()> now_ms_;
  std::string system_config_;
  absl::flat_hash_map<NodeID, rpc::NodeInfo> nodes_;
  absl::flat_hash_map<NodeID, rpc::ResourceUsage> usage_;
  // Registrations whose store write is in flight, with the repeated requests waiting
  // for its outcome.
  absl::flat_hash_map<NodeID, std::vector<std::pair<rpc::RegisterNodeReply*, rpc::SendReply>>>
      pending_registrations_;
  std::vector<NodeListener> added_listeners_;
  std::vector<NodeListener> removed_listeners_;
  std::vector<std::function<void(const NodeID&)>> report_listeners_;
  int gcs_metrics_export_port_ = 0;
};

}  // namespace manta::gcs
