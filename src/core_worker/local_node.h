// Which node of a cluster a driver joins: the one on its own host.
//
// A driver reads and writes objects through its node's shared-memory store, over a
// Unix socket, so it must attach to a raylet on the machine it runs on, never to
// one elsewhere (such as the head's). A pure function, so that the choice is tested
// without a cluster; the caller supplies what "this machine" means.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "protos/gcs.pb.h"

namespace manta::core {

// Among `nodes` (the GCS's node table), the alive, not draining node whose raylet
// address `is_local` says is this machine's: the one at `preferred_ip` (the address
// this machine reaches the GCS from, or the one the user set) first, then the head,
// then the first listed. NotFound, naming the nodes and `local_addresses_text`,
// when no alive node is on this machine.
absl::StatusOr<rpc::NodeInfo> ChooseLocalNode(const rpc::GetAllNodeInfoReply& nodes, const std::string& preferred_ip,
                                              const std::function<bool(const std::string&)>& is_local,
                                              const std::string& local_addresses_text,
                                              const std::string& gcs_address);

}  // namespace manta::core
