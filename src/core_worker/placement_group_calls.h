// PlacementGroupCalls: a process's calls about placement groups (ARCHITECTURE.md §7):
// creating, removing, waiting for and looking up groups through the GCS, on behalf of
// user threads (each call waits for the GCS's answer on the core worker's loop).
// Where tasks and actors run in a group is set on their specs (core_worker.cc,
// core_worker_actors.cc) and honoured by the raylets and the GCS.
//
// Threading: thread-safe; never call it from the loop thread (it waits for the loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "protos/gcs.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"

namespace manta::gcs {
class PlacementGroupInfoClientInterface;
}

namespace manta::core {

class PlacementGroupCalls {
 public:
  // `ray_namespace`: the job's, where groups are created and (by default) looked up.
  PlacementGroupCalls(EventLoop& loop, gcs::PlacementGroupInfoClientInterface& gcs, const Config& config,
                      JobID job_id, std::string ray_namespace)
      : loop_(loop), gcs_(gcs), config_(config), job_id_(job_id), ray_namespace_(std::move(ray_namespace)) {}

  // Registers a group in the job's namespace (bundles and strategy are validated by
  // the GCS: INVALID_ARGUMENT) and returns its id at once; the GCS places it later.
  // ALREADY_EXISTS when `name` (not empty) is taken in the namespace.
  absl::StatusOr<PlacementGroupID> Create(const std::string& name,
                                          const std::vector<std::map<std::string, double>>& bundles,
                                          rpc::PlacementStrategy strategy);
  // Removes a group (its actors are killed, its tasks fail). OK for a removed group;
  // NOT_FOUND for one never created.
  absl::Status Remove(const PlacementGroupID& group_id);
  // True once the group is CREATED, false when `timeout_ms` (>= 0) passes first.
  // NOT_FOUND when it is removed or unknown.
  absl::StatusOr<bool> WaitReady(const PlacementGroupID& group_id, int64_t timeout_ms);
  // A group as the GCS has it; nullopt when unknown. By name: a group of
  // `ray_namespace` (empty: the job's) that is not REMOVED.
  absl::StatusOr<std::optional<rpc::PlacementGroupTableData>> Get(const PlacementGroupID& group_id);
  absl::StatusOr<std::optional<rpc::PlacementGroupTableData>> GetNamed(const std::string& name,
                                                                       const std::string& ray_namespace);
  // Every group of the cluster, removed ones included.
  absl::StatusOr<std::vector<rpc::PlacementGroupTableData>> GetAll();

 private:
  // A call to the GCS: `request(gcs, callback)` runs on the loop.
  template <typename Reply>
  using Request = std::function<void(gcs::PlacementGroupInfoClientInterface&,
                                     std::function<void(const absl::Status&, Reply&&)>)>;
  // Runs `request` and waits (at most timeout_ms) for its reply.
  template <typename Reply>
  absl::StatusOr<Reply> Ask(const Request<Reply>& request, int64_t timeout_ms);

  EventLoop& loop_;
  gcs::PlacementGroupInfoClientInterface& gcs_;
  const Config& config_;
  const JobID job_id_;
  const std::string ray_namespace_;
};

}  // namespace manta::core
