// Metric snapshots on the wire (MetricFamilyData, common.proto): a core worker sends
// its users' metrics to its raylet, which exports them (ARCHITECTURE.md §18).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "protos/common.pb.h"
#include "src/common/metrics/metrics.h"

namespace manta::metrics {

void FamilyToProto(const MetricFamily& family, rpc::MetricFamilyData* out);
// InvalidArgument naming the metric and the fault: a bad definition (ValidateDef), a
// series with another number of tag values than the metric has keys, a histogram
// series whose bucket counts do not match its boundaries.
absl::StatusOr<MetricFamily> FamilyFromProto(const rpc::MetricFamilyData& data);

// The registries of this process. Own(): a daemon's (and a core worker's) own
// metrics, exported by its endpoint. User(): what users record through ray::Gauge,
// ray::Counter, ray::Histogram and ray::Sum, which a core worker sends to its raylet.
Registry& OwnMetrics();
Registry& UserMetrics();

// Own metrics every daemon has: a gRPC call `method` answered `elapsed_ms` after it
// arrived (ray_grpc_server_req_finished_total, ray_grpc_server_req_process_time_ms);
// a caller refused for want of the cluster token on `channel` (grpc, task, object,
// http: manta_auth_failures_total).
void RecordServedRpc(const char* method, double elapsed_ms, bool ok);
void CountAuthFailure(const char* channel);

}  // namespace manta::metrics
