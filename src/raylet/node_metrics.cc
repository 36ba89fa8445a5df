#include "src/raylet/node_metrics.h"

#include <algorithm>

#include "src/common/metrics/metrics_endpoint.h"

namespace manta::raylet {

namespace {

using metrics::Kind;
using metrics::MakeFamily;
using metrics::Sample;

double Count(size_t n) { return static_cast<double>(n); }

metrics::MetricFamily Resources(const rpc::ResourceUsage& usage) {
  std::vector<Sample> samples;
  for (const auto& [name, total] : usage.resources_total()) {
    auto it = usage.resources_available().find(name);
    const double available = it == usage.resources_available().end() ? 0 : it->second;
    samples.push_back({{name, "AVAILABLE"}, available});
    samples.push_back({{name, "USED"}, std::max(0.0, total - available)});
  }
  return MakeFamily("ray_resources", "Logical resources of the node, by name and state", Kind::kGauge,
                    {"Name", "State"}, std::move(samples));
}

metrics::MetricFamily ByteCounter(const char* name, const char* description, int64_t bytes) {
  return MakeFamily(name, description, Kind::kCounter, {}, {{{}, static_cast<double>(bytes)}});
}

}  // namespace

std::vector<metrics::MetricFamily> NodeMetricFamilies(const rpc::ResourceUsage& usage, const NodeCounts& counts) {
  const rpc::ObjectStoreStats& store = usage.object_store();
  std::vector<metrics::MetricFamily> out;
  out.push_back(Resources(usage));
  out.push_back(MakeFamily("ray_object_store_memory", "Bytes of objects held by the node's store, by location",
                           Kind::kGauge, {"Location"},
                           {{{"MMAP_SHM"}, static_cast<double>(store.used_bytes())},
                            {{"SPILLED"}, static_cast<double>(store.spilled_bytes_current())}}));
  out.push_back(MakeFamily("ray_object_store_available_memory", "Bytes of the node's store not in use", Kind::kGauge,
                           {}, {{{}, static_cast<double>(std::max<int64_t>(0, store.capacity_bytes() - store.used_bytes()))}}));
  out.push_back(MakeFamily("ray_object_store_num_local_objects", "Objects in the node's store (in memory)",
                           Kind::kGauge, {}, {{{}, static_cast<double>(store.num_objects())}}));
  out.push_back(MakeFamily("ray_scheduler_tasks", "Lease requests at the node, by state", Kind::kGauge, {"State"},
                           {{{"Running"}, Count(counts.leases)},
                            {{"Waiting"}, Count(counts.queued)},
                            {{"Infeasible"}, Count(counts.infeasible)}}));
  out.push_back(MakeFamily("ray_scheduler_unscheduleable_tasks", "Lease requests the node cannot run now, by reason",
                           Kind::kGauge, {"Reason"},
                           {{{"WaitingForResources"}, Count(counts.queued)}, {{"Infeasible"}, Count(counts.infeasible)}}));
  out.push_back(ByteCounter("ray_object_store_spilled_bytes_total", "Bytes spilled to disk", store.spilled_bytes_total()));
  out.push_back(ByteCounter("ray_object_store_restored_bytes_total", "Bytes restored from disk",
                            store.restored_bytes_total()));
  out.push_back(ByteCounter("ray_object_store_evicted_bytes_total", "Bytes evicted from the store",
                            store.evicted_bytes_total()));
  out.push_back(ByteCounter("ray_object_manager_pulled_bytes_total", "Bytes of objects pulled from other nodes",
                            store.pulled_bytes_total()));
  out.push_back(ByteCounter("ray_object_manager_pushed_bytes_total", "Bytes of objects served to other nodes",
                            store.served_bytes_total()));
  out.push_back(MakeFamily("manta_workers", "Worker processes and drivers of the node, by state", Kind::kGauge,
                           {"State"},
                           {{{"IDLE"}, Count(counts.workers_idle)},
                            {{"STARTING"}, Count(counts.workers_starting)},
                            {{"BUSY"}, Count(counts.workers_busy)},
                            {{"DRIVER"}, Count(counts.drivers)}}));
  return out;
}

}  // namespace manta::raylet
