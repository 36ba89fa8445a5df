// The node's state as Prometheus metrics (MetricsAgent snapshots it on the raylet's
// loop), with Ray's names where Ray has one.
#pragma once

#include <vector>

#include "protos/common.pb.h"
#include "src/common/metrics/metrics.h"

namespace manta::raylet {

struct NodeCounts {
  size_t leases = 0;       // running (granted) leases
  size_t queued = 0;       // requests waiting for resources here
  size_t infeasible = 0;   // requests no node can ever run
  size_t workers_idle = 0;
  size_t workers_starting = 0;
  size_t workers_busy = 0;
  size_t drivers = 0;
};

// ray_resources{Name,State}, ray_object_store_memory{Location},
// ray_object_store_available_memory, ray_object_store_num_local_objects,
// ray_scheduler_tasks{State}, ray_scheduler_unscheduleable_tasks{Reason}, byte
// counters of spilling, restoring, evicting, pulling and pushing, manta_workers{State}.
std::vector<metrics::MetricFamily> NodeMetricFamilies(const rpc::ResourceUsage& usage, const NodeCounts& counts);

}  // namespace manta::raylet
