// Node resources: parsing the --resources JSON, detecting machine defaults, and the
// arithmetic the lease manager, the scheduling policy and the GCS bundle placement do
// on resource maps.
//
// Quantities are fixed point (ARCHITECTURE.md §7): whole multiples of 1/10000 of a
// unit. A ResourceMap keeps them as doubles for the wire and for printing, but every
// value in it is FromUnits(n) of an integer n, and all arithmetic and comparisons go
// through those integers, so adding and subtracting fractions (bundles splitting a
// node, 0.1 CPU tasks) never drifts: totals come back exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace manta::scheduling {

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

// The fixed-point resolution: 1 unit of a resource is this many steps.
inline constexpr int64_t kResourceStepsPerUnit = 10000;
// `quantity` in steps, rounded to the nearest step.
int64_t ToSteps(double quantity);
double FromSteps(int64_t steps);
// `quantity` rounded to the nearest step.
inline double Quantize(double quantity) { return FromSteps(ToSteps(quantity)); }
// Equal to the step.
bool SameQuantity(double a, double b);
// Every quantity of `resources` quantized; zero quantities dropped.
ResourceMap QuantizeResources(const ResourceMap& resources);
// True when every quantity of `request` is available in `available` (a missing name
// counts as 0).
bool ResourcesFit(const ResourceMap& request, const ResourceMap& available);
// `to[name] += amount[name]` for every name of `amount`.
void AddResources(ResourceMap& to, const ResourceMap& amount);
// `from[name] -= amount[name]` for every name of `amount`; may go negative (a blocked
// worker taking its CPU back oversubscribes the node for a while).
void SubtractResources(ResourceMap& from, const ResourceMap& amount);

}  // namespace manta::scheduling
