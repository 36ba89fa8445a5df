// DashboardServer: the web dashboard a head serves (ARCHITECTURE.md §18). The page
// (src/dashboard/static, built into the binary) reads JSON routes that ask the GCS's
// state API, the raylets' log services and the daemons' Prometheus endpoints, the
// same sources the CLI reads.
//
// Access: every /api route but /api/login needs the session cookie, which
// /api/login sets (HttpOnly, SameSite=Strict) for the right cluster token: its value
// is a random nonce and its HMAC under the token, so the server keeps no session
// state and a forged or stale cookie is refused. A program may instead send the
// token (Authorization: Bearer) or, over HTTPS, a certificate of the cluster's CA.
// Static assets need nothing. With TLS (`tls`), another host must use HTTPS (plain
// HTTP is for loopback only, see http_server.h), so a token sent to /api/login never
// crosses the network in clear; the scraper uses HTTPS and the token too.
//
// Metrics: a thread of its own scrapes every daemon's endpoint each scrape_period_ms
// and keeps the last history_points values of at most max_series series (histogram
// buckets are left out); beyond that new series are dropped and counted. Memory is
// thereby bounded however long the cluster runs and however many tasks it runs.
//
// Threads: HTTP handlers run on the HTTP server's thread and wait for the GCS or a
// raylet (a few seconds at most); the scraper on its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "nlohmann/json.hpp"
#include "src/common/http/http_server.h"
#include "src/dashboard/job_manager.h"

namespace manta::dashboard {

struct DashboardOptions {
  std::string host = "127.0.0.1";
  int port = 8265;
  std::string gcs_address;
  std::string token;  // the cluster token
  http::HttpTls tls;  // the process's TLS material: HTTPS for other hosts, and for scrapes
  int64_t scrape_period_ms = 2000;
  size_t history_points = 300;
  size_t max_series = 2000;
  // The Jobs API (job_manager.h): where entrypoints' logs go ("": the Jobs API is off).
  std::string log_dir;
  std::vector<std::string> supervisor_flags;  // the daemon's --tls-* files, for the job supervisors
  jobs::PackageLimits package_limits;  // of uploaded working directories
};

class DashboardServer {
 public:
  explicit DashboardServer(DashboardOptions options);
  ~DashboardServer();

  // Binds the HTTP port and starts the scraper. An error names the address.
  absl::Status Start();
  int port() const { return http_.port(); }
  void Stop();

  // For tests: a valid session cookie value, and whether `value` is one.
  std::string NewSessionValue() const;
  bool ValidSession(const std::string& value) const;
  // Series kept and series dropped for want of room.
  size_t num_series() const;
  uint64_t dropped_series() const { return dropped_series_.load(); }

 private:
  http::Response Login(const http::Request& request);
  http::Response List(const http::Request& request);
  http::Response Summary(const http::Request& request);
  http::Response Metrics(const http::Request& request);
  http::Response Logs(const http::Request& request);
  http::Response Log(const http::Request& request);
  http::Response Timeline(const http::Request& request);
  // What the autoscaler published (autoscaler/main.cc), or {"enabled": false}.
  http::Response Autoscaler(const http::Request& request);
  // Wraps a data route: 401 without a valid session.
  http::Handler Guarded(http::Response (DashboardServer::*route)(const http::Request&));
  http::Handler Guarded(http::Handler handler);

  // The scraper thread: every endpoint of the cluster, every scrape_period_ms.
  void ScrapeLoop();
  void ScrapeOnce();
  void AddPoint(const std::string& key, const std::string& name, const std::map<std::string, std::string>& labels,
                int64_t now_ms, double value);

  struct Series {
    std::string name;
    std::map<std::string, std::string> labels;
    std::deque<std::pair<int64_t, double>> points;
  };

  const DashboardOptions options_;
  http::HttpServer http_;
  // One channel to the GCS for every route and scrape (gRPC reconnects it as needed).
  std::shared_ptr<grpc::Channel> gcs_channel_;
  mutable std::mutex mu_;
  std::map<std::string, Series> series_;  // guarded by mu_
  std::atomic<uint64_t> dropped_series_{0};
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread scraper_;
  std::unique_ptr<JobManager> jobs_;  // with a log_dir
};

// JSON error bodies: {"error": message}.
http::Response JsonError(int status, const std::string& message);
http::Response JsonResponse(const nlohmann::json& body);

}  // namespace manta::dashboard
