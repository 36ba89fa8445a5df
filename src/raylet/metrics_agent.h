// MetricsAgent: a raylet's Prometheus endpoint (ARCHITECTURE.md §18). GET /metrics on
// --metrics-export-port serves the raylet's own metrics (gRPC, event-loop lag, auth
// failures), the node's state as the raylet's loop last snapshot it every
// metrics_report_period_ms (resources, object store memory, scheduler queues,
// spill/restore/pull/push byte counters, workers), and the user metrics its drivers
// and workers report (MetricsService.ReportMetrics), combined per node: counters,
// sums and histograms add up over processes (a process that exited keeps its last
// values), a gauge shows its newest value.
#pragma once

#include <memory>
#include <string>

#include "protos/node_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/metrics/metrics.h"
#include "src/common/metrics/metrics_endpoint.h"
#include "src/common/rpc/grpc_server.h"

namespace manta::raylet {

class MetricsAgent final : public rpc::MetricsService::CallbackService {
 public:
  MetricsAgent(EventLoop& loop, const std::string& host, int port, size_t max_series_per_metric);

  // Binds the endpoint. An error names the address.
  absl::Status Start() { return endpoint_.Start(); }
  int port() const { return endpoint_.port(); }
  void Stop() { endpoint_.Stop(); }
  metrics::MetricsEndpoint& endpoint() { return endpoint_; }

  grpc::ServerUnaryReactor* ReportMetrics(grpc::CallbackServerContext* c, const rpc::ReportMetricsRequest* q,
                                          rpc::ReportMetricsReply* r) override;
  // Loop thread. InvalidArgument naming the fault for a malformed report (which is
  // dropped whole).
  void HandleReportMetrics(const rpc::ReportMetricsRequest& request, rpc::ReportMetricsReply* reply,
                           rpc::SendReply send_reply);
  // The process went away: its last values stay in the totals.
  void OnProcessGone(const std::string& worker_id_binary) { workers_.Forget(worker_id_binary); }

 private:
  EventLoop& loop_;
  metrics::Aggregator workers_;
  metrics::MetricsEndpoint endpoint_;
};

}  // namespace manta::raylet
