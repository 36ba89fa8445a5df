// LeaseManager::Request: a lease request waiting at the lease manager (private to
// lease_manager*.cc).
#pragma once

#include <string>

#include "protos/node_manager.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/send_reply.h"
#include "src/raylet/lease_manager.h"
#include "src/scheduling/resources.h"

namespace manta::raylet {

struct LeaseManager::Request {
  enum class Stage { kQueued, kInfeasible, kPopping, kDone };
  std::string id;
  JobID job_id;
  WorkerID owner_worker_id;  // nil when the owner is not a core worker (or unknown)
  NodeID owner_node_id;
  scheduling::ResourceMap resources;
  bool grant_or_reject = false;
  std::string function_name;
  // Nil unless the request names a placement group bundle (bundle_index, -1 = any).
  PlacementGroupID placement_group;
  int bundle_index = -1;
  // The worker must have been started for this runtime env (canonical JSON; "" = none).
  std::string runtime_env;
  // Actor leases: the worker outlives the job (detached); the resources only place
  // the actor and come back once its worker is granted (placement_only).
  bool detached = false;
  bool placement_only = false;
  bool is_actor = false;
  // Its tasks may be retried (the memory monitor kills such workers first).
  bool retriable = false;
  // Tasks of this shape queued at the owner when it asked (a hint for the autoscaler).
  int64_t backlog = 0;
  rpc::RequestWorkerLeaseReply* reply = nullptr;
  rpc::SendReply send_reply;
  Stage stage = Stage::kQueued;

  // Completes the RPC (once); the reply must be filled.
  void Finish() {
    stage = Stage::kDone;
    if (send_reply) std::move(send_reply)(absl::OkStatus());
    send_reply = nullptr;
  }
  std::string Describe() const {
    return "lease request for {" + scheduling::FormatResources(resources) + "}" +
           (placement_group.IsNil() ? "" : " in placement group " + placement_group.Hex()) +
           (function_name.empty() ? "" : " (" + function_name + ")") + " of job " + job_id.Hex();
  }
};

}  // namespace manta::raylet
