// sort_bench --hosts N: the sort on the multi-host test bed (tests/multihost), built
// when the tests are (it uses their test bed). Needs root.
#pragma once

#include <cstdint>

#include "nlohmann/json.hpp"

namespace sort_bench {

struct HostsRun {
  int hosts = 4;
  int cpus_per_host = 2;
  uint64_t store_bytes_per_host = 0;
  uint64_t bytes = 0, maps = 0, reduces = 0;
  int runs = 3;
  bool kill_a_host = true;
};

// Starts a cluster of `hosts` network-namespace hosts (a Manta node on each, the
// head on host 0) and runs the multi-host driver's sort scenario on host 0: a
// warm-up and `runs` timed sorts, then (kill_a_host) one more sort during which the
// last host is killed once the maps are done. Adds its figures to *out; false when a
// sort was wrong or did not run.
bool SortOnHosts(const HostsRun& run, nlohmann::ordered_json* out);

}  // namespace sort_bench
