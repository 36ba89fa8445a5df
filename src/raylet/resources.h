// Node resources: parsing the --resources JSON, detecting machine defaults, and the
// arithmetic the lease manager and scheduling policy do on resource maps.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace manta::raylet {

using ResourceMap = std::map<std::string, double>;

// Parses a JSON object of resource name -> non-negative number, e.g.
// {"accelerator": 2, "special": 0.5}. InvalidArgument names what is wrong. The
// predefined names (CPU, GPU, memory, object_store_memory) must be given with their
// own flags and are rejected here.
absl::StatusOr<ResourceMap> ParseCustomResources(const std::string& json);

// Number of CPUs this process may use.
int DetectNumCpus();
// Total physical memory in bytes.
int64_t DetectMemoryBytes();
// Memory available for new allocations now (MemAvailable), in bytes; 0 if unknown.
int64_t DetectAvailableMemoryBytes();
// Renders "CPU: 2, GPU: 0, ..." with memory quantities in GiB.
std::string FormatResources(const ResourceMap& resources);

// Quantities are compared with this tolerance, so that fractional amounts added and
// subtracted many times cannot drift into "not enough".
inline constexpr double kResourceEpsilon = 1e-6;
// True when every quantity of `request` is available in `available` (a missing name
// counts as 0).
bool ResourcesFit(const ResourceMap& request, const ResourceMap& available);
// `to[name] += amount[name]` for every name of `amount`.
void AddResources(ResourceMap& to, const ResourceMap& amount);
// `from[name] -= amount[name]` for every name of `amount`; may go negative (a blocked
// worker taking its CPU back oversubscribes the node for a while).
void SubtractResources(ResourceMap& from, const ResourceMap& amount);

}  // namespace manta::raylet
