// The resources a committed placement group bundle becomes on its node, and how a
// request that names a bundle is turned into a demand for them (ARCHITECTURE.md §7).
//
// A bundle {CPU: 2} with index 1 of group G (hex) adds to its node:
//   CPU_group_1_G: 2        this bundle's CPUs
//   CPU_group_G: +2         the CPUs of every bundle of G on the node (index -1)
//   bundle_group_1_G: 1000  a marker, so that a request naming no resources still
//   bundle_group_G: +1000   lands on a node holding the bundle
// and a request {CPU: 1} for bundle 1 of G asks for {CPU_group_1_G: 1, CPU_group_G: 1,
// bundle_group_1_G: 0.001} (the wildcard too, so that what bundle 1 uses is not
// offered to requests for any bundle); for any bundle (-1), {CPU_group_G: 1,
// bundle_group_G: 0.001}.
#pragma once

#include <optional>
#include <string>

#include "src/common/id.h"
#include "src/scheduling/resources.h"

namespace manta::scheduling {

inline constexpr double kBundleMarkerTotal = 1000;
inline constexpr double kBundleMarkerDemand = 0.001;

// "CPU_group_1_<hex>" (index >= 0) or "CPU_group_<hex>" (index -1).
std::string BundleResourceName(const std::string& resource, const PlacementGroupID& group, int bundle_index);
// The marker resource of a bundle (or, for index -1, of the group on a node).
std::string BundleMarkerName(const PlacementGroupID& group, int bundle_index);

// The demand of `request` placed in bundle `bundle_index` (-1: any bundle) of `group`:
// every resource renamed (and, for one bundle, also counted against the group's
// wildcard), plus the marker.
ResourceMap BundleDemand(const ResourceMap& request, const PlacementGroupID& group, int bundle_index);

// What committing `bundle` adds to its node's totals: its indexed resources and
// marker, and its share of the group's wildcard resources and marker.
ResourceMap CommittedBundleResources(const ResourceMap& bundle, const PlacementGroupID& group, int bundle_index);

// The group a resource name of a bundle belongs to ("CPU_group_1_<hex>",
// "bundle_group_<hex>", ...); nullopt for other names.
std::optional<PlacementGroupID> GroupOfResource(const std::string& name);

}  // namespace manta::scheduling
