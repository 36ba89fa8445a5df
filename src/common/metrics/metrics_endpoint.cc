#include "src/common/metrics/metrics_endpoint.h"

#include <chrono>

#include "src/common/metrics/metrics_proto.h"
#include "src/common/metrics/prometheus_text.h"

namespace manta::metrics {

namespace {

http::HttpServer::Options EndpointOptions(std::string host, int port, const rpc::Credentials& access) {
  http::HttpServer::Options options;
  options.tls = HttpTlsOf(access);
  options.host = std::move(host);
  options.port = port;
  options.max_body_bytes = 4096;  // scrapes have no body
  options.max_connections = 16;
  options.server_name = "manta-metrics";
  return options;
}

}  // namespace

http::HttpTls HttpTlsOf(const rpc::Credentials& credentials) {
  if (!credentials.tls()) return {};
  return {credentials.tls_cert, credentials.tls_key, credentials.tls_ca};
}

MetricsEndpoint::MetricsEndpoint(std::string host, int port, const rpc::Credentials& access)
    : server_(EndpointOptions(std::move(host), port, access)), token_(access.token) {}

MetricsEndpoint::~MetricsEndpoint() { server_.Stop(); }

void MetricsEndpoint::AddSource(Source source) { sources_.push_back(std::move(source)); }

absl::Status MetricsEndpoint::Start() {
  server_.Handle("GET", "/metrics", [this](const http::Request& request) {
    if (!http::MemberRequest(request, token_)) return http::Unauthorized("a scrape");
    http::Response response;
    response.content_type = std::string(kPrometheusContentType);
    response.body = Render();
    return response;
  });
  return server_.Start();
}

void MetricsEndpoint::SetSnapshot(std::vector<MetricFamily> families) {
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(families);
}

std::string MetricsEndpoint::Render() {
  std::vector<MetricFamily> families = OwnMetrics().Collect();
  {
    absl::MutexLock lock(&mu_);
    families.insert(families.end(), snapshot_.begin(), snapshot_.end());
  }
  for (const Source& source : sources_) {
    std::vector<MetricFamily> more = source();
    families.insert(families.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  std::string out;
  AppendPrometheusText(families, &out);
  return out;
}

MetricFamily MakeFamily(std::string name, std::string description, Kind kind, std::vector<std::string> tag_keys,
                        std::vector<Sample> samples) {
  MetricFamily family;
  family.def.name = std::move(name);
  family.def.description = std::move(description);
  family.def.kind = kind;
  family.def.tag_keys = std::move(tag_keys);
  for (Sample& s : samples) {
    SeriesValue& v = family.series.emplace_back();
    v.tag_values = std::move(s.tag_values);
    v.value = s.value;
  }
  return family;
}

std::unique_ptr<Timer> WatchLoopLag(EventLoop& loop, const std::string& name, int64_t period_ms) {
  auto lag = OwnMetrics().Register(MetricDef{"ray_io_context_event_loop_lag_ms",
                                             "How late the event loop ran a timer (ms)", "ms", Kind::kGauge,
                                             {"Name"}, {}});
  if (!lag.ok()) return nullptr;
  Metric* metric = *lag;
  metric->Record(0.0, std::vector<std::string>{name});  // the series exists from the start
  auto due = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now() +
                                                                     std::chrono::milliseconds(period_ms));
  return loop.RunEvery("Metrics.LoopLag", period_ms, [metric, due, name, period_ms] {
    const auto now = std::chrono::steady_clock::now();
    const double late_ms = std::chrono::duration<double, std::milli>(now - *due).count();
    metric->Record(late_ms > 0 ? late_ms : 0.0, std::vector<std::string>{name});
    *due = now + std::chrono::milliseconds(period_ms);
  });
}

}  // namespace manta::metrics
