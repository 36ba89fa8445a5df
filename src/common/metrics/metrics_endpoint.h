// MetricsEndpoint: a daemon's Prometheus endpoint (ARCHITECTURE.md §18): GET /metrics
// on an HTTP port of its own serves, in the text format, this process's own metrics
// (OwnMetrics(): gRPC requests, event-loop lag, auth failures), the daemon's state as
// its loop last snapshot it (SetSnapshot), and any further sources (a raylet's
// workers' user metrics). Every scrape is answered on the endpoint's thread; nothing
// it does waits for the daemon's loop.
//
// Who may scrape: loopback peers, as anyone; another host with the cluster token
// (Authorization: Bearer) or a certificate of the cluster's CA, and over HTTPS when
// the process has TLS (plain HTTP from another host is then refused; see
// http_server.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "src/common/event_loop.h"
#include "src/common/http/http_server.h"
#include "src/common/metrics/metrics.h"
#include "src/common/rpc/auth.h"

namespace manta::metrics {

class MetricsEndpoint {
 public:
  using Source = std::function<std::vector<MetricFamily>()>;

  // `port` 0: the kernel picks one (port() after Start()). `access`: the cluster
  // token and TLS material (the process's, rpc::ProcessCredentials()).
  MetricsEndpoint(std::string host, int port, const rpc::Credentials& access);
  ~MetricsEndpoint();

  // REQUIRES: before Start(). `source` runs on the endpoint's thread.
  void AddSource(Source source);
  absl::Status Start();
  int port() const { return server_.port(); }
  void Stop() { server_.Stop(); }

  // The daemon's state, computed on its loop (thread-safe): replaces the last one.
  void SetSnapshot(std::vector<MetricFamily> families);

  // What a scrape answers now.
  std::string Render();

 private:
  http::HttpServer server_;
  const std::string token_;
  std::vector<Source> sources_;
  absl::Mutex mu_;
  std::vector<MetricFamily> snapshot_ ABSL_GUARDED_BY(mu_);
};

// The TLS material of `credentials` for an HTTP server or client (none without TLS).
http::HttpTls HttpTlsOf(const rpc::Credentials& credentials);

// One series of a snapshot family.
struct Sample {
  std::vector<std::string> tag_values;
  double value = 0;
};
// A gauge or counter family of `samples` (tag values in `tag_keys` order).
MetricFamily MakeFamily(std::string name, std::string description, Kind kind, std::vector<std::string> tag_keys,
                        std::vector<Sample> samples);

// Measures how late `loop` runs a timer due every `period_ms` and records it in
// OwnMetrics() as ray_io_context_event_loop_lag_ms{Name=`name`}. Keep the timer.
std::unique_ptr<Timer> WatchLoopLag(EventLoop& loop, const std::string& name, int64_t period_ms);

}  // namespace manta::metrics
