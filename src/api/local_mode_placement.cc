// LocalModeRuntime: the placement group calls (local_mode_runtime.h), over
// LocalPlacementGroups; removing a group kills its actors.
#include <optional>
#include <string>
#include <vector>

#include "ray/api/serializer.h"
#include "src/api/local_mode_runtime.h"

namespace ray {
namespace internal {

PlacementGroupInfo LocalModeRuntime::CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  absl::MutexLock lock(&mu_);
  return placement_groups_.Create(options, namespace_);
}

void LocalModeRuntime::RemovePlacementGroup(const std::string& group_id) {
  absl::MutexLock lock(&mu_);
  placement_groups_.Remove(group_id);
  // As on a cluster, the group's actors die with it; its tasks fail when they would
  // start (PlacementError).
  const std::string why = "its placement group " + HexId(group_id) + " was removed";
  for (auto& [id, actor] : actors_) {
    if (actor->placement_group_id == group_id) KillActorLocked(*actor, why);
  }
}

bool LocalModeRuntime::WaitPlacementGroupReady(const std::string& group_id, int64_t /*timeout_ms*/) {
  absl::MutexLock lock(&mu_);
  return placement_groups_.Wait(group_id);
}

std::optional<PlacementGroupInfo> LocalModeRuntime::GetPlacementGroupById(const std::string& group_id) {
  absl::MutexLock lock(&mu_);
  return placement_groups_.Get(group_id);
}

std::optional<PlacementGroupInfo> LocalModeRuntime::GetPlacementGroupByName(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return placement_groups_.GetByName(name, namespace_);
}

std::vector<PlacementGroupInfo> LocalModeRuntime::GetAllPlacementGroups() {
  absl::MutexLock lock(&mu_);
  return placement_groups_.GetAll();
}

}  // namespace internal
}  // namespace ray
