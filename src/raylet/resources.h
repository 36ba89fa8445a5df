// Node resources: parsing the --resources JSON and detecting machine defaults.
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

}  // namespace manta::raylet
