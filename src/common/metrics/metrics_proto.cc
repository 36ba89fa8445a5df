#include "src/common/metrics/metrics_proto.h"

namespace manta::metrics {

void FamilyToProto(const MetricFamily& family, rpc::MetricFamilyData* out) {
  const MetricDef& def = family.def;
  out->set_name(def.name);
  out->set_description(def.description);
  out->set_unit(def.unit);
  out->set_kind(static_cast<rpc::MetricFamilyData::Kind>(static_cast<int>(def.kind)));
  for (const std::string& key : def.tag_keys) out->add_tag_keys(key);
  for (double b : def.boundaries) out->add_boundaries(b);
  for (const SeriesValue& s : family.series) {
    rpc::MetricSeries* series = out->add_series();
    for (const std::string& v : s.tag_values) series->add_tag_values(v);
    series->set_value(s.value);
    for (uint64_t c : s.bucket_counts) series->add_bucket_counts(c);
    series->set_sum(s.sum);
    series->set_count(s.count);
    series->set_update_unix_ns(s.update_unix_ns);
  }
  out->set_dropped_series(family.dropped_series);
}

absl::StatusOr<MetricFamily> FamilyFromProto(const rpc::MetricFamilyData& data) {
  MetricFamily family;
  MetricDef& def = family.def;
  def.name = data.name();
  def.description = data.description();
  def.unit = data.unit();
  if (!rpc::MetricFamilyData::Kind_IsValid(data.kind())) {
    return absl::InvalidArgumentError("metric '" + data.name() + "' has an unknown kind");
  }
  def.kind = static_cast<Kind>(static_cast<int>(data.kind()));
  def.tag_keys.assign(data.tag_keys().begin(), data.tag_keys().end());
  def.boundaries.assign(data.boundaries().begin(), data.boundaries().end());
  absl::Status valid = ValidateDef(def);
  if (!valid.ok()) return valid;
  const size_t buckets = def.kind == Kind::kHistogram ? def.boundaries.size() + 1 : 0;
  for (const rpc::MetricSeries& s : data.series()) {
    if (static_cast<size_t>(s.tag_values_size()) != def.tag_keys.size()) {
      return absl::InvalidArgumentError("metric '" + def.name + "': a series has " +
                                        std::to_string(s.tag_values_size()) + " tag values for " +
                                        std::to_string(def.tag_keys.size()) + " tag keys");
    }
    if (static_cast<size_t>(s.bucket_counts_size()) != buckets) {
      return absl::InvalidArgumentError("metric '" + def.name + "': a series has " +
                                        std::to_string(s.bucket_counts_size()) + " bucket counts, not " +
                                        std::to_string(buckets));
    }
    SeriesValue& v = family.series.emplace_back();
    v.tag_values.assign(s.tag_values().begin(), s.tag_values().end());
    v.value = s.value();
    v.bucket_counts.assign(s.bucket_counts().begin(), s.bucket_counts().end());
    v.sum = s.sum();
    v.count = s.count();
    v.update_unix_ns = s.update_unix_ns();
  }
  family.dropped_series = data.dropped_series();
  return family;
}

Registry& OwnMetrics() {
  static Registry* registry = new Registry();
  return *registry;
}

Registry& UserMetrics() {
  static Registry* registry = new Registry();
  return *registry;
}

namespace {

Metric* OwnMetric(MetricDef def) {
  auto metric = OwnMetrics().Register(std::move(def));
  return metric.ok() ? *metric : nullptr;  // the definitions below are valid and unique
}

}  // namespace

void RecordServedRpc(const char* method, double elapsed_ms, bool ok) {
  static Metric* const finished =
      OwnMetric({"ray_grpc_server_req_finished_total", "gRPC requests answered, by method and outcome", "requests",
                 Kind::kCounter, {"Method", "Status"}, {}});
  static Metric* const latency = OwnMetric({"ray_grpc_server_req_process_time_ms",
                                            "Time from a gRPC request's arrival to its answer (ms)", "ms",
                                            Kind::kHistogram, {"Method"}, {0.1, 0.5, 1, 5, 10, 50, 100, 500, 1000, 5000}});
  if (finished != nullptr) finished->Record(1, {{"Method", method}, {"Status", ok ? "OK" : "ERROR"}});
  if (latency != nullptr) latency->Record(elapsed_ms, {{"Method", method}});
}

void CountAuthFailure(const char* channel) {
  static Metric* const failures = OwnMetric({"manta_auth_failures_total",
                                             "Callers refused for want of the cluster token, by channel", "calls",
                                             Kind::kCounter, {"Channel"}, {}});
  if (failures != nullptr) failures->Record(1, {{"Channel", channel}});
}

}  // namespace manta::metrics
