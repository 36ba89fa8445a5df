#include "src/raylet/metrics_agent.h"

#include "src/common/id.h"
#include "src/common/metrics/metrics_proto.h"
#include "src/common/rpc/serve_on_loop.h"

namespace manta::raylet {

namespace {

// At most this many metrics per report (a process with more sends the first).
constexpr int kMaxReportedFamilies = 10000;

}  // namespace

MetricsAgent::MetricsAgent(EventLoop& loop, const std::string& host, int port, size_t max_series_per_metric)
    : loop_(loop), workers_(4096, max_series_per_metric), endpoint_(host, port, rpc::ProcessCredentials()) {
  endpoint_.AddSource([this] { return workers_.Combined(); });
}

void MetricsAgent::HandleReportMetrics(const rpc::ReportMetricsRequest& request, rpc::ReportMetricsReply*,
                                       rpc::SendReply send_reply) {
  if (request.worker_id().size() != WorkerID::kSize) {
    return std::move(send_reply)(absl::InvalidArgumentError("ReportMetrics: malformed worker_id"));
  }
  if (request.families_size() > kMaxReportedFamilies) {
    return std::move(send_reply)(absl::InvalidArgumentError(
        "ReportMetrics: " + std::to_string(request.families_size()) + " metrics in one report (at most " +
        std::to_string(kMaxReportedFamilies) + ")"));
  }
  std::vector<metrics::MetricFamily> families;
  families.reserve(request.families_size());
  for (const rpc::MetricFamilyData& data : request.families()) {
    auto family = metrics::FamilyFromProto(data);
    if (!family.ok()) return std::move(send_reply)(family.status());
    families.push_back(std::move(*family));
  }
  workers_.Update(request.worker_id(), std::move(families));
  if (request.final()) workers_.Forget(request.worker_id());
  std::move(send_reply)(absl::OkStatus());
}

MANTA_SERVE_ON_LOOP(MetricsAgent, "Metrics", ReportMetrics, *this, MetricsAgent)

}  // namespace manta::raylet
