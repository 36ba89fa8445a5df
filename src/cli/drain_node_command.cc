// `manta drain-node NODE_ID`: asks the GCS to drain one alive node (NodeInfoGcsService
// DrainNode, as the autoscaler does before it removes an idle node). The GCS marks the
// node draining: it gets no new lease, and the owners of the objects it holds move
// their primary copies off it. The node keeps running; `manta status` shows it
// "(draining)".
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "protos/gcs.grpc.pb.h"
#include "src/cli/cluster_call.h"
#include "src/cli/commands.h"
#include "src/common/id.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"

namespace manta::cli {
namespace {

constexpr int64_t kDrainDeadlineS = 10;

// DrainNode of `node` on the GCS at `address`. NOT_FOUND (no alive node with that id)
// carries the GCS's message; a GCS that cannot be reached says so.
absl::Status DrainNode(const std::string& address, const NodeID& node) {
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(address, 1 << 20));
  rpc::DrainNodeRequest request;
  request.set_node_id(node.Binary());
  request.set_reason("drained by `manta drain-node`");
  rpc::DrainNodeReply reply;
  grpc::Status s =
      CallWithToken(*stub, &rpc::NodeInfoGcsService::Stub::DrainNode, request, &reply, kDrainDeadlineS);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::NotFoundError(s.error_message());
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return absl::InvalidArgumentError(s.error_message());
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::UnavailableError("cannot reach the GCS at " + address + ": " + s.error_message() +
                                  (s.error_code() == grpc::StatusCode::UNAVAILABLE ? rpc::TlsHint() : ""));
  }
  if (!s.ok()) return absl::InternalError("the GCS at " + address + " did not drain it: " + s.error_message());
  if (!reply.accepted()) return absl::FailedPreconditionError("the GCS at " + address + " did not accept it");
  return absl::OkStatus();
}

int DrainFailed(const std::string& why, int exit_code) {
  std::cerr << "manta drain-node: " << why << std::endl;
  return exit_code;
}

}  // namespace

int RunDrainNode(const ClusterFlags& flags, const std::string& node_hex) {
  // A malformed id is the caller's mistake: named before any cluster is looked for.
  auto node = NodeID::FromHex(node_hex);
  if (!node.ok()) {
    return DrainFailed("bad node id '" + node_hex + "': " + std::string(node.status().message()) +
                           " (the node ids `manta status` and `manta list nodes` print)",
                       2);
  }
  auto address = JoinCluster(flags);
  if (!address.ok()) return DrainFailed(std::string(address.status().message()), 1);
  if (absl::Status s = DrainNode(*address, *node); !s.ok()) {
    std::string why(s.message());
    if (absl::IsNotFound(s)) why += " (`manta status` lists the alive nodes)";
    return DrainFailed(why, 1);
  }
  std::cout << "node " << node->Hex()
            << " is draining: it takes no new work, and its objects' owners move their primary copies off it"
            << std::endl;
  return 0;
}

}  // namespace manta::cli
