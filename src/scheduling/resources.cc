#include "src/scheduling/resources.h"

#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "nlohmann/json.hpp"
#include "src/common/json.h"

namespace manta::scheduling {

absl::StatusOr<ResourceMap> ParseCustomResources(const std::string& json) {
  ResourceMap out;
  if (json.empty()) return out;
  nlohmann::json parsed = ParseJson(json);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError("--resources is not valid JSON: " + json);
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError("--resources must be a JSON object like {\"name\": 1}, got: " + json);
  }
  for (auto& [name, value] : parsed.items()) {
    if (name.empty()) return absl::InvalidArgumentError("--resources: empty resource name");
    if (name == "CPU" || name == "GPU" || name == "memory" || name == "object_store_memory") {
      return absl::InvalidArgumentError("--resources: set " + name + " with its own flag, not in --resources");
    }
    if (!value.is_number()) {
      return absl::InvalidArgumentError("--resources: value of '" + name + "' is not a number");
    }
    double v = value.get<double>();
    if (!(v >= 0) || std::isinf(v)) {
      return absl::InvalidArgumentError("--resources: value of '" + name + "' must be a non-negative number");
    }
    if (v > 0 && ToSteps(v) == 0) {
      return absl::InvalidArgumentError("--resources: value of '" + name + "' is below the resolution of 0.0001");
    }
    out[name] = Quantize(v);
  }
  return out;
}

int DetectNumCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

int64_t DetectMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * page_size;
}

int64_t DetectAvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string FormatResources(const ResourceMap& resources) {
  std::string out;
  for (const auto& [name, value] : resources) {
    if (!out.empty()) out += ", ";
    char buf[64];
    if (name == "memory" || name == "object_store_memory") {
      std::snprintf(buf, sizeof(buf), "%.2f GiB", value / (1024.0 * 1024 * 1024));
    } else if (value == std::floor(value)) {
      std::snprintf(buf, sizeof(buf), "%.0f", value);
    } else {
      std::snprintf(buf, sizeof(buf), "%.2f", value);
    }
    out += name + ": " + buf;
  }
  return out;
}

int64_t ToSteps(double quantity) { return std::llround(quantity * static_cast<double>(kResourceStepsPerUnit)); }

double FromSteps(int64_t steps) { return static_cast<double>(steps) / static_cast<double>(kResourceStepsPerUnit); }

bool SameQuantity(double a, double b) { return ToSteps(a) == ToSteps(b); }

ResourceMap QuantizeResources(const ResourceMap& resources) {
  ResourceMap out;
  for (const auto& [name, value] : resources) {
    int64_t steps = ToSteps(value);
    if (steps != 0) out.emplace(name, FromSteps(steps));
  }
  return out;
}

bool ResourcesFit(const ResourceMap& request, const ResourceMap& available) {
  for (const auto& [name, amount] : request) {
    auto it = available.find(name);
    int64_t have = it == available.end() ? 0 : ToSteps(it->second);
    if (have < ToSteps(amount)) return false;
  }
  return true;
}

void AddResources(ResourceMap& to, const ResourceMap& amount) {
  for (const auto& [name, value] : amount) {
    double& v = to[name];
    v = FromSteps(ToSteps(v) + ToSteps(value));
  }
}

void SubtractResources(ResourceMap& from, const ResourceMap& amount) {
  for (const auto& [name, value] : amount) {
    double& v = from[name];
    v = FromSteps(ToSteps(v) - ToSteps(value));
  }
}

}  // namespace manta::scheduling
