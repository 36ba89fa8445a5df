// LocalPlacementGroups: the placement group table of local mode (LocalModeRuntime).
//
// Local mode has one process to place bundles in and reserves nothing, so a group
// is CREATED as soon as it is registered; otherwise the table behaves as the GCS
// does: names are unique per namespace among groups that are not REMOVED, removing
// a removed group is fine, an unknown id is an error, and lookups by id see removed
// groups too. The options are checked by the API (ray::CreatePlacementGroup) before
// they reach the runtime.
//
// Not thread-safe: the runtime calls it under its own mutex. Throws RayException.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ray/api/placement_group.h"
#include "ray/api/ray_runtime.h"

namespace ray {
namespace internal {

// The key of a named actor or group: its namespace and name, kept apart.
inline std::string NamedKey(const std::string& ray_namespace, const std::string& name) {
  return ray_namespace + std::string(1, '\0') + name;
}

class LocalPlacementGroups {
 public:
  // Ids are `id_prefix` (its first 10 bytes: random per runtime) and a counter.
  explicit LocalPlacementGroups(std::string id_prefix);

  // Registers a group in `ray_namespace`; returns it, CREATED. Throws when the name
  // is taken there.
  PlacementGroupInfo Create(const PlacementGroupCreationOptions& options, const std::string& ray_namespace);
  // Marks the group REMOVED (frees its name); does nothing for a removed one. Throws
  // for an unknown id.
  void Remove(const std::string& group_id);
  // True (the group is CREATED); throws when it is removed or unknown.
  bool Wait(const std::string& group_id) const;
  // Nullopt when unknown (by name: when no group of the namespace that is not
  // REMOVED has it).
  std::optional<PlacementGroupInfo> Get(const std::string& group_id) const;
  std::optional<PlacementGroupInfo> GetByName(const std::string& name, const std::string& ray_namespace) const;
  // Every group, in creation order.
  std::vector<PlacementGroupInfo> GetAll() const;
  // Why a task or actor placed by `placement` cannot run (the group is removed or
  // unknown, or has no such bundle); nullopt when it can, or when it is in no group.
  std::optional<std::string> Unusable(const PlacementOptions& placement) const;

 private:
  struct Group {
    PlacementGroupInfo info;
    std::string ray_namespace;
  };
  const Group* Find(const std::string& group_id) const;

  const std::string id_prefix_;
  uint64_t next_index_ = 0;
  std::unordered_map<std::string, Group> groups_;
  std::vector<std::string> order_;  // ids, in creation order
  // namespace + '\0' + name -> id, for named groups that are not REMOVED.
  std::unordered_map<std::string, std::string> named_;
};

}  // namespace internal
}  // namespace ray
