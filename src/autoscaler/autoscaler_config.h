// The autoscaler's config: `manta start --head --autoscaler FILE` (a JSON object,
// with the names of Ray's cluster config where there is one):
//
//   {
//     "available_node_types": {
//       "cpu2": {"resources": {"CPU": 2}, "min_workers": 0, "max_workers": 4}
//     },
//     "max_workers": 8,              // every type together (the head not counted)
//     "idle_timeout_minutes": 5,     // an idle node above its type's minimum goes
//     "upscaling_speed": 1.0,        // launches at once: max(5, speed * nodes of the type)
//     "launch_timeout_s": 300,       // a node that has not joined by then is terminated
//     "update_interval_s": 1,
//     "provider": {"type": "command", "launch": "...", "terminate": "...", "timeout_s": 120}
//   }
//
// Providers (node_provider.h): "command" runs the user's `launch` and `terminate`
// shell commands; "kubernetes" scales a Deployment per node type. Unknown keys are
// errors (a misspelt limit would otherwise be silently ignored).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/scheduling/resources.h"

namespace manta::autoscaler {

struct NodeTypeConfig {
  std::string name;
  // What a node of this type offers (CPU, GPU, memory, custom names).
  scheduling::ResourceMap resources;
  int min_workers = 0;
  int max_workers = 0;
  // The type's "node_config" object as JSON ("" = none): given to the provider's
  // commands as MANTA_NODE_CONFIG (a machine image, a host list, ...).
  std::string node_config_json;
};

struct ProviderConfig {
  std::string type;  // "command" or "kubernetes"
  // command: shell commands (/bin/sh -c) run on the head, with MANTA_NODE_TYPE,
  // MANTA_INSTANCE_ID, MANTA_HEAD_ADDRESS, MANTA_CLUSTER_TOKEN_FILE and
  // MANTA_NODE_RESOURCES (JSON) in their environment.
  std::string launch_command;
  std::string terminate_command;
  int64_t command_timeout_ms = 120000;
  // kubernetes: the API server (default: the pod's, from KUBERNETES_SERVICE_HOST),
  // the namespace, the service account's token and CA, and a Deployment per type.
  std::string api_server;
  std::string kube_namespace;
  std::string token_file;
  std::string ca_file;
  std::map<std::string, std::string> deployments;
};

struct AutoscalerConfig {
  std::vector<NodeTypeConfig> node_types;
  int max_workers = 0;
  double idle_timeout_s = 300;
  double upscaling_speed = 1.0;
  double launch_timeout_s = 300;
  int64_t update_interval_ms = 1000;
  ProviderConfig provider;

  // InvalidArgument names the bad key or value.
  static absl::StatusOr<AutoscalerConfig> Parse(const std::string& json_text);
  static absl::StatusOr<AutoscalerConfig> Load(const std::string& path);
  // Null for an unknown name.
  const NodeTypeConfig* Type(const std::string& name) const;
};

}  // namespace manta::autoscaler
