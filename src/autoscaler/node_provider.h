// NodeProvider: how the autoscaler gets and gives back machines (autoscaler.h).
//
// Calls block (a command runs, an HTTP request is answered): the daemon makes them
// on threads of their own, never on its update loop. A Launch that returns OK has
// asked for the node; the node joins the cluster later, named by the instance id
// (`manta start --instance-id`) or, for providers that name machines themselves
// (Kubernetes pods), by its node type.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "src/autoscaler/autoscaler_config.h"

namespace manta::autoscaler {

class NodeProvider {
 public:
  virtual ~NodeProvider() = default;
  virtual absl::Status Launch(const NodeTypeConfig& type, const std::string& instance_id) = 0;
  // Gives back one node; `node_type` is the type it was launched as.
  virtual absl::Status Terminate(const std::string& node_type, const std::string& instance_id) = 0;
};

// What a provider's commands need to know of the cluster.
struct ClusterContact {
  std::string gcs_address;  // host:port the new nodes join
  std::string token_file;   // the cluster token, on the head
  std::string log_file;     // the commands' output goes here (appended)
};

// The "command" provider: runs the config's `launch` / `terminate` shell commands
// (/bin/sh -c) on the head with MANTA_NODE_TYPE, MANTA_INSTANCE_ID,
// MANTA_HEAD_ADDRESS, MANTA_CLUSTER_TOKEN_FILE, MANTA_NODE_RESOURCES (JSON) and
// MANTA_NODE_CONFIG (the type's node_config, JSON) in their environment. A command
// must exit 0 within the provider's timeout_s (it is killed after); whatever it
// starts to run the node must outlive it (e.g. `ssh host manta start --address
// "$MANTA_HEAD_ADDRESS" --node-type "$MANTA_NODE_TYPE" --instance-id "$MANTA_INSTANCE_ID"`).
std::unique_ptr<NodeProvider> MakeCommandProvider(const ProviderConfig& config, const ClusterContact& contact);

// The "kubernetes" provider (kubernetes_provider.cc): a Deployment per node type,
// scaled through the API server (api_server, else the pod's own) with the service
// account's token and CA (token_file / ca_file, else the pod's). An error names a
// file it cannot read or a bad api_server.
absl::StatusOr<std::unique_ptr<NodeProvider>> MakeKubernetesProvider(const ProviderConfig& config);

}  // namespace manta::autoscaler
