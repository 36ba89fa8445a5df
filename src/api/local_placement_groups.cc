#include "src/api/local_placement_groups.h"

#include <algorithm>
#include <utility>

#include "ray/api/ray_exception.h"
#include "ray/api/serializer.h"

namespace ray {
namespace internal {
namespace {

constexpr size_t kIdPrefixBytes = 10;  // + an 8-byte counter: 18 bytes, as on a cluster

std::string Describe(const std::string& group_id) { return "placement group " + HexId(group_id); }

}  // namespace

LocalPlacementGroups::LocalPlacementGroups(std::string id_prefix)
    : id_prefix_(id_prefix.substr(0, kIdPrefixBytes) +
                 std::string(kIdPrefixBytes - std::min(id_prefix.size(), kIdPrefixBytes), '\0')) {}

const LocalPlacementGroups::Group* LocalPlacementGroups::Find(const std::string& group_id) const {
  auto it = groups_.find(group_id);
  return it == groups_.end() ? nullptr : &it->second;
}

PlacementGroupInfo LocalPlacementGroups::Create(const PlacementGroupCreationOptions& options,
                                                const std::string& ray_namespace) {
  std::string id = id_prefix_;
  for (int i = 7; i >= 0; --i) id.push_back(static_cast<char>((next_index_ >> (8 * i)) & 0xff));
  if (!options.name.empty()) {
    auto [it, inserted] = named_.emplace(NamedKey(ray_namespace, options.name), id);
    if (!inserted) {
      throw RayException("ray::CreatePlacementGroup: a placement group named '" + options.name +
                         "' already exists in namespace '" + ray_namespace + "' (" + Describe(it->second) + ")");
    }
  }
  ++next_index_;
  Group& group = groups_[id];
  group.info = PlacementGroupInfo{id, options, PlacementGroupState::CREATED};
  group.ray_namespace = ray_namespace;
  order_.push_back(id);
  return group.info;
}

void LocalPlacementGroups::Remove(const std::string& group_id) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    throw RayException("ray::RemovePlacementGroup: " + Describe(group_id) +
                       " was never created in this local-mode runtime");
  }
  Group& group = it->second;
  if (group.info.state == PlacementGroupState::REMOVED) return;
  group.info.state = PlacementGroupState::REMOVED;
  if (!group.info.options.name.empty()) named_.erase(NamedKey(group.ray_namespace, group.info.options.name));
}

bool LocalPlacementGroups::Wait(const std::string& group_id) const {
  const Group* group = Find(group_id);
  if (group == nullptr) {
    throw RayException("PlacementGroup::Wait: " + Describe(group_id) + " was never created in this local-mode runtime");
  }
  if (group->info.state == PlacementGroupState::REMOVED) {
    throw RayException("PlacementGroup::Wait: " + Describe(group_id) + " was removed");
  }
  return true;
}

std::optional<PlacementGroupInfo> LocalPlacementGroups::Get(const std::string& group_id) const {
  const Group* group = Find(group_id);
  if (group == nullptr) return std::nullopt;
  return group->info;
}

std::optional<PlacementGroupInfo> LocalPlacementGroups::GetByName(const std::string& name,
                                                                  const std::string& ray_namespace) const {
  auto it = named_.find(NamedKey(ray_namespace, name));
  if (it == named_.end()) return std::nullopt;
  return Get(it->second);
}

std::vector<PlacementGroupInfo> LocalPlacementGroups::GetAll() const {
  std::vector<PlacementGroupInfo> all;
  all.reserve(order_.size());
  for (const std::string& id : order_) all.push_back(groups_.at(id).info);
  return all;
}

std::optional<std::string> LocalPlacementGroups::Unusable(const PlacementOptions& placement) const {
  if (placement.group_id.empty()) return std::nullopt;
  const Group* group = Find(placement.group_id);
  if (group == nullptr) {
    return Describe(placement.group_id) + " was never created in this local-mode runtime";
  }
  if (group->info.state == PlacementGroupState::REMOVED) return Describe(placement.group_id) + " was removed";
  const size_t bundles = group->info.options.bundles.size();
  if (placement.bundle_index < -1 || placement.bundle_index >= static_cast<int64_t>(bundles)) {
    return Describe(placement.group_id) + " has " + std::to_string(bundles) + " bundle(s), no bundle " +
           std::to_string(placement.bundle_index);
  }
  return std::nullopt;
}

}  // namespace internal
}  // namespace ray
