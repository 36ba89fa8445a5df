// Where a node's raylet serves (its node manager's gRPC port), as every client dials it.
#pragma once

#include <string>

#include "protos/common.pb.h"

namespace manta {

// "ip:port" of `node`'s raylet.
inline std::string RayletAddress(const rpc::NodeInfo& node) {
  return node.node_manager_address() + ":" + std::to_string(node.node_manager_port());
}

}  // namespace manta
