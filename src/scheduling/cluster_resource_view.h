// ClusterResourceView: this raylet's picture of every alive node's resources.
//
// Fed by the GCS: a full GetAllNodeInfo snapshot at start and after a GCS restart,
// then node and resource-usage pubsub messages. Dead nodes are removed. Used by the
// lease manager's scheduling policy (scheduling_policy.h) and reported by
// GetNodeStats. Availability may be stale by a report period; the lease manager
// subtracts what it spills to a node (SubtractAvailable) until that node's next report.
// Loop thread only.
#pragma once

#include <map>

#include "absl/container/flat_hash_map.h"
#include "protos/gcs.pb.h"
#include "src/common/id.h"

namespace manta::scheduling {

class ClusterResourceView {
 public:
  struct NodeResources {
    std::map<std::string, double> total;
    std::map<std::string, double> available;
    std::string address;
    int port = 0;
    // The node accepted a drain: it takes no new work.
    bool draining = false;
  };

  // Replaces the whole view with a GCS snapshot.
  void ResetFromSnapshot(const rpc::GetAllNodeInfoReply& snapshot);
  // Applies a node event: ALIVE adds (keeping known availability), DEAD removes.
  void OnNodeInfo(const rpc::NodeInfo& info);
  void OnResourceUsage(const rpc::ResourceUsage& usage);
  // Optimistically takes `amount` from a node's availability (work just sent there),
  // until its next usage report replaces it. No-op for an unknown node.
  void SubtractAvailable(const NodeID& id, const std::map<std::string, double>& amount);

  bool Contains(const NodeID& id) const { return nodes_.contains(id); }
  const NodeResources* Get(const NodeID& id) const;
  size_t NumNodes() const { return nodes_.size(); }
  const absl::flat_hash_map<NodeID, NodeResources>& nodes() const { return nodes_; }

 private:
  absl::flat_hash_map<NodeID, NodeResources> nodes_;
};

}  // namespace manta::scheduling
