#include "src/scheduling/bundle_resources.h"

namespace manta::scheduling {

namespace {
constexpr char kGroupInfix[] = "_group_";
constexpr char kMarker[] = "bundle";
}  // namespace

std::string BundleResourceName(const std::string& resource, const PlacementGroupID& group, int bundle_index) {
  std::string name = resource + kGroupInfix;
  if (bundle_index >= 0) name += std::to_string(bundle_index) + "_";
  return name + group.Hex();
}

std::string BundleMarkerName(const PlacementGroupID& group, int bundle_index) {
  return BundleResourceName(kMarker, group, bundle_index);
}

ResourceMap BundleDemand(const ResourceMap& request, const PlacementGroupID& group, int bundle_index) {
  ResourceMap demand;
  for (const auto& [name, quantity] : request) {
    demand[BundleResourceName(name, group, bundle_index)] = quantity;
    // What one bundle uses, the group's wildcard resources no longer offer.
    if (bundle_index >= 0) demand[BundleResourceName(name, group, -1)] = quantity;
  }
  demand[BundleMarkerName(group, bundle_index)] = kBundleMarkerDemand;
  return demand;
}

ResourceMap CommittedBundleResources(const ResourceMap& bundle, const PlacementGroupID& group, int bundle_index) {
  ResourceMap added;
  for (const auto& [name, quantity] : bundle) {
    added[BundleResourceName(name, group, bundle_index)] = quantity;
    added[BundleResourceName(name, group, -1)] = quantity;
  }
  added[BundleMarkerName(group, bundle_index)] = kBundleMarkerTotal;
  added[BundleMarkerName(group, -1)] = kBundleMarkerTotal;
  return added;
}

std::optional<PlacementGroupID> GroupOfResource(const std::string& name) {
  constexpr size_t kHexSize = 2 * PlacementGroupID::kSize;
  if (name.size() < kHexSize + sizeof(kGroupInfix)) return std::nullopt;
  if (name.find(kGroupInfix) == std::string::npos) return std::nullopt;
  std::string hex = name.substr(name.size() - kHexSize);
  char before = name[name.size() - kHexSize - 1];
  if (before != '_') return std::nullopt;
  auto id = PlacementGroupID::FromHex(hex);
  if (!id.ok()) return std::nullopt;
  return *id;
}

}  // namespace manta::scheduling
