// GcsStateManager: the state API (ARCHITECTURE.md §18) — `manta list`, `get`,
// `summary` and the dashboard ask it for the cluster's nodes, jobs, workers, actors,
// placement groups, tasks and objects as rows with Ray's field names (workers and
// objects through GcsStateFanout).
//
// Every resource has a fixed set of fields a filter may name; filters ("=" / "!=",
// enum-like values without regard to case) apply before the limit, and the reply
// says how many rows matched, how many it returns and how many the cluster dropped.
// An unknown resource, field or predicate, or a limit out of range, is refused with
// a message naming the valid ones. Loop thread only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "protos/gcs.pb.h"
#include "src/common/rpc/grpc_server.h"
#include "src/gcs/gcs_actor_manager.h"
#include "src/gcs/gcs_job_manager.h"
#include "src/gcs/gcs_node_manager.h"
#include "src/gcs/gcs_placement_group_manager.h"
#include "src/gcs/gcs_state_fanout.h"
#include "src/gcs/gcs_task_manager.h"

namespace manta::gcs {

// Runs a manager's Handle* call, which answers at once, and returns its reply.
template <typename Manager, typename Request, typename Reply>
Reply Ask(Manager& manager, void (Manager::*handle)(const Request&, Reply*, rpc::SendReply)) {
  Reply reply;
  (manager.*handle)(Request(), &reply, [](absl::Status) {});
  return reply;
}

class GcsStateManager {
 public:
  static constexpr int64_t kDefaultLimit = 100;
  static constexpr int64_t kMaxLimit = 10000;

  GcsStateManager(GcsNodeManager& nodes, GcsJobManager& jobs, GcsActorManager& actors,
                  GcsPlacementGroupManager& groups, GcsTaskManager& tasks, GcsStateFanout& fanout)
      : nodes_(nodes), jobs_(jobs), actors_(actors), groups_(groups), tasks_(tasks), fanout_(fanout) {}

  // Workers and objects are answered later, once the raylets and owners have.
  void HandleListState(const rpc::ListStateRequest& request, rpc::ListStateReply* reply, rpc::SendReply send_reply);
  // The resources the GCS holds itself (all but workers and objects).
  absl::Status List(const rpc::ListStateRequest& request, rpc::ListStateReply* reply);
  void HandleSummarizeState(const rpc::SummarizeStateRequest& request, rpc::SummarizeStateReply* reply,
                            rpc::SendReply send_reply);
  absl::Status Summarize(const rpc::SummarizeStateRequest& request, rpc::SummarizeStateReply* reply);
  void HandleGetTaskTimeline(const rpc::GetTaskTimelineRequest& request, rpc::GetTaskTimelineReply* reply,
                             rpc::SendReply send_reply);

  // The resources, and the fields each may be filtered on.
  static const std::vector<std::string>& Resources();
  static const std::vector<std::string>& FilterKeys(const std::string& resource);

 private:
  // Every row of a small resource (all but tasks) that passes the filters.
  absl::StatusOr<nlohmann::ordered_json> FilteredRows(const std::string& resource,
                                              const std::vector<rpc::StateFilter>& filters, bool detail);
  // Every row of a small resource (all but tasks), oldest first.
  nlohmann::ordered_json NodeRows(bool detail);
  nlohmann::ordered_json JobRows(bool detail);
  nlohmann::ordered_json ActorRows(bool detail);
  nlohmann::ordered_json PlacementGroupRows(bool detail);

  GcsNodeManager& nodes_;
  GcsJobManager& jobs_;
  GcsActorManager& actors_;
  GcsPlacementGroupManager& groups_;
  GcsTaskManager& tasks_;
  GcsStateFanout& fanout_;
};

}  // namespace manta::gcs
