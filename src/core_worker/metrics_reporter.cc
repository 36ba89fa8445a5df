#include "src/core_worker/metrics_reporter.h"

#include <glog/logging.h>

#include "src/common/metrics/metrics_proto.h"

namespace manta::core {

namespace {

rpc::ClientOptions ReporterOptions(const Config& config) {
  rpc::ClientOptions options = rpc::ClientOptionsFromConfig(config, nullptr);
  // A report the raylet does not take in time is replaced by the next one.
  options.deadline_ms = std::max<int64_t>(config.metrics_report_period_ms, 1000);
  options.max_attempts = 1;
  return options;
}

}  // namespace

MetricsReporter::MetricsReporter(EventLoop& loop, const std::string& raylet_address, const WorkerID& worker_id,
                                 const Config& config)
    : loop_(loop), worker_id_(worker_id), raylet_(loop, raylet_address, ReporterOptions(config)) {
  if (config.metrics_report_period_ms > 0) {
    timer_ = loop_.RunEvery("MetricsReporter.Report", config.metrics_report_period_ms,
                            [this] { Report(false, nullptr); });
  }
}

MetricsReporter::~MetricsReporter() { *alive_ = false; }

void MetricsReporter::FinishAndFlush(std::function<void()> done) {
  timer_.reset();
  in_flight_ = false;  // the last report goes even if an earlier one is still out
  Report(true, std::move(done));
}

void MetricsReporter::Report(bool final, std::function<void()> done) {
  if (in_flight_) return;
  std::vector<metrics::MetricFamily> families = metrics::UserMetrics().Collect();
  if (families.empty()) {
    if (done) done();
    return;
  }
  rpc::ReportMetricsRequest request;
  request.set_worker_id(worker_id_.Binary());
  request.set_final(final);
  for (const metrics::MetricFamily& f : families) metrics::FamilyToProto(f, request.add_families());
  in_flight_ = true;
  raylet_.Call(&rpc::MetricsService::Stub::async::ReportMetrics, "Metrics.ReportMetrics", std::move(request),
               rpc::GrpcClient<rpc::MetricsService>::Callback<rpc::ReportMetricsReply>(
                   [this, alive = alive_, done](const absl::Status& s, rpc::ReportMetricsReply&&) {
                     if (!*alive) return;
                     in_flight_ = false;
                     if (!s.ok()) VLOG(1) << "the raylet did not take this process's metrics: " << s;
                     if (done) done();
                   }));
}

}  // namespace manta::core
