#include "src/dashboard/dashboard_server.h"

#include <glog/logging.h>

#include <chrono>
#include <filesystem>

#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/autoscaler/autoscaler_state.h"
#include "src/common/http/http_get.h"
#include "src/common/id.h"
#include "src/common/json.h"
#include "src/common/metrics/prometheus_text.h"
#include "src/common/rpc/call_with_token.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/security.h"
#include "src/common/state_filter.h"
#include "src/common/task_timeline.h"
#include "src/common/util.h"
#include "src/dashboard/dashboard_assets.h"

namespace manta::dashboard {

namespace {

constexpr char kCookie[] = "manta_dashboard";
constexpr int64_t kCallDeadlineS = 10;
constexpr int64_t kMaxGcsReplyBytes = 256 << 20;
constexpr size_t kMaxScrapeBytes = 16 << 20;

http::HttpServer::Options HttpOptions(const DashboardOptions& o) {
  http::HttpServer::Options options;
  options.host = o.host;
  options.port = o.port;
  options.max_body_bytes = 1 << 20;  // a chunk of an upload (JobManager), at most
  options.server_name = "manta-dashboard";
  options.tls = o.tls;
  return options;
}

// The message of a failed call, for the page.
std::string CallError(const std::string& what, const grpc::Status& s) {
  return what + ": " + s.error_message();
}

int HttpStatusOf(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 400
         : s.error_code() == grpc::StatusCode::NOT_FOUND      ? 404
                                                              : 502;
}

std::vector<std::string> QueryAll(const http::Request& request, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& [k, v] : request.query_list) {
    if (k == key && !v.empty()) out.push_back(v);
  }
  return out;
}

absl::Status AddFilters(const http::Request& request, google::protobuf::RepeatedPtrField<rpc::StateFilter>* out) {
  auto filters = ParseStateFilters(QueryAll(request, "filter"));
  if (!filters.ok()) return filters.status();
  for (rpc::StateFilter& f : *filters) *out->Add() = std::move(f);
  return absl::OkStatus();
}

}  // namespace

http::Response JsonError(int status, const std::string& message) {
  http::Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = DumpJson(nlohmann::json{{"error", message}});
  return r;
}

http::Response JsonResponse(const nlohmann::json& body) {
  http::Response r;
  r.content_type = "application/json";
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

DashboardServer::DashboardServer(DashboardOptions options)
    : options_(std::move(options)),
      http_(HttpOptions(options_)),
      gcs_channel_(rpc::MakeChannel(options_.gcs_address, kMaxGcsReplyBytes)) {}

DashboardServer::~DashboardServer() { Stop(); }

std::string DashboardServer::NewSessionValue() const {
  const std::string nonce = SecureRandomHex(16);
  const std::string mac = HmacSha256(options_.token, "manta-dashboard-session:" + nonce);
  return nonce + "." + BinaryHex(mac);
}

bool DashboardServer::ValidSession(const std::string& value) const {
  const size_t dot = value.find('.');
  if (dot != 32 || value.size() != 32 + 1 + 64) return false;
  const std::string nonce = value.substr(0, dot);
  const std::string expected = BinaryHex(HmacSha256(options_.token, "manta-dashboard-session:" + nonce));
  return ConstantTimeEquals(value.substr(dot + 1), expected);
}

http::Handler DashboardServer::Guarded(http::Response (DashboardServer::*route)(const http::Request&)) {
  return Guarded([this, route](const http::Request& request) { return (this->*route)(request); });
}

http::Handler DashboardServer::Guarded(http::Handler handler) {
  return [this, handler = std::move(handler)](const http::Request& request) {
    if (!ValidSession(request.Cookie(kCookie)) && !request.client_certified &&
        !http::HasBearerToken(request, options_.token)) {
      return JsonError(401,
                       "not logged in: give the cluster token (POST /api/login, or Authorization: Bearer <token>)");
    }
    return handler(request);
  };
}

absl::Status DashboardServer::Start() {
  for (const Asset& asset : Assets()) {
    http_.Handle("GET", asset.path, [&asset](const http::Request&) {
      http::Response r;
      r.content_type = asset.content_type;
      r.body = std::string(asset.body);
      r.headers.push_back({"Content-Security-Policy",
                           "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:"});
      r.headers.push_back({"X-Content-Type-Options", "nosniff"});
      return r;
    });
  }
  http_.Handle("POST", "/api/login", [this](const http::Request& r) { return Login(r); });
  http_.Handle("POST", "/api/logout", [](const http::Request&) {
    http::Response r = JsonResponse({{"ok", true}});
    r.headers.push_back({"Set-Cookie", std::string(kCookie) + "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"});
    return r;
  });
  http_.Handle("GET", "/api/list", Guarded(&DashboardServer::List));
  http_.Handle("GET", "/api/summary", Guarded(&DashboardServer::Summary));
  http_.Handle("GET", "/api/metrics", Guarded(&DashboardServer::Metrics));
  http_.Handle("GET", "/api/logs", Guarded(&DashboardServer::Logs));
  http_.Handle("GET", "/api/log", Guarded(&DashboardServer::Log));
  http_.Handle("GET", "/api/timeline", Guarded(&DashboardServer::Timeline));
  http_.Handle("GET", "/api/autoscaler", Guarded(&DashboardServer::Autoscaler));
  if (!options_.log_dir.empty()) {
    JobManagerOptions jobs;
    jobs.gcs_address = options_.gcs_address;
    jobs.token = options_.token;
    jobs.log_dir = options_.log_dir;
    jobs.supervisor_flags = options_.supervisor_flags;
    jobs.package_dir = (std::filesystem::path(options_.log_dir).parent_path() / "job_packages").string();
    jobs.package_limits = options_.package_limits;
    jobs_ = std::make_unique<JobManager>(jobs, gcs_channel_);
    jobs_->Register(http_, [this](http::Handler h) { return Guarded(std::move(h)); });
  }
  // Any other /api/ path (a prefix route, longer than the page's "/"): an error, not the page.
  for (const char* method : {"GET", "POST"}) {
    http_.Handle(method, "/api/", [](const http::Request& r) {
      return JsonError(404, "no such route: " + r.method + " " + r.path +
                                " (GET /api/list, /api/summary, /api/metrics, /api/logs, /api/log, /api/timeline;"
                                " GET and POST /api/jobs/; POST /api/login, /api/logout)");
    });
  }
  if (absl::Status s = http_.Start(); !s.ok()) return s;
  scraper_ = std::thread([this] { ScrapeLoop(); });
  return absl::OkStatus();
}

void DashboardServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (scraper_.joinable()) scraper_.join();
  http_.Stop();
  if (jobs_) jobs_->Stop();
}

http::Response DashboardServer::Login(const http::Request& request) {
  nlohmann::json body = ParseJson(request.body);
  if (!body.is_object() || !body.contains("token") || !body["token"].is_string()) {
    return JsonError(400, "the body must be {\"token\": \"<cluster token>\"}");
  }
  if (!ConstantTimeEquals(body["token"].get<std::string>(), options_.token)) {
    LOG(WARNING) << "dashboard login with a wrong cluster token from " << request.remote_address;
    return JsonError(401, "wrong cluster token");
  }
  http::Response r = JsonResponse({{"ok", true}});
  r.headers.push_back({"Set-Cookie", std::string(kCookie) + "=" + NewSessionValue() +
                                         "; Path=/; HttpOnly; SameSite=Strict"});
  return r;
}

http::Response DashboardServer::List(const http::Request& request) {
  rpc::ListStateRequest q;
  auto resource = request.query.find("resource");
  q.set_resource(resource == request.query.end() ? "" : resource->second);
  if (absl::Status s = AddFilters(request, q.mutable_filters()); !s.ok()) return JsonError(400, std::string(s.message()));
  if (auto limit = request.query.find("limit"); limit != request.query.end()) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(limit->second, &n)) return JsonError(400, "limit '" + limit->second + "' is not a number");
    q.set_limit(n);
  }
  q.set_detail(request.query.count("detail") > 0 && request.query.at("detail") != "0");
  auto stub = rpc::StateGcsService::NewStub(gcs_channel_);
  rpc::ListStateReply reply;
  grpc::Status s = rpc::CallWithToken(*stub, &rpc::StateGcsService::Stub::ListState, q, &reply, kCallDeadlineS);
  if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("list " + q.resource(), s));
  nlohmann::json rows = ParseJson(reply.rows_json());
  return JsonResponse({{"rows", rows.is_discarded() ? nlohmann::json::array() : rows},
                       {"num_matched", reply.num_matched()},
                       {"num_returned", reply.num_returned()},
                       {"num_dropped", reply.num_dropped()},
                       {"warnings", std::vector<std::string>(reply.warnings().begin(), reply.warnings().end())}});
}

http::Response DashboardServer::Summary(const http::Request& request) {
  rpc::SummarizeStateRequest q;
  auto resource = request.query.find("resource");
  q.set_resource(resource == request.query.end() ? "" : resource->second);
  if (absl::Status s = AddFilters(request, q.mutable_filters()); !s.ok()) return JsonError(400, std::string(s.message()));
  auto stub = rpc::StateGcsService::NewStub(gcs_channel_);
  rpc::SummarizeStateReply reply;
  grpc::Status s = rpc::CallWithToken(*stub, &rpc::StateGcsService::Stub::SummarizeState, q, &reply, kCallDeadlineS);
  if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("summary of " + q.resource(), s));
  nlohmann::json summary = ParseJson(reply.summary_json());
  return JsonResponse({{"summary", summary.is_discarded() ? nlohmann::json::object() : summary},
                       {"num_dropped", reply.num_dropped()},
                       {"warnings", std::vector<std::string>(reply.warnings().begin(), reply.warnings().end())}});
}

http::Response DashboardServer::Metrics(const http::Request& request) {
  // ?since_ms=T: only points after T (a page polling for what is new), and only the
  // series that have some.
  int64_t since_ms = 0;
  if (auto since = request.query.find("since_ms"); since != request.query.end() &&
                                                   !absl::SimpleAtoi(since->second, &since_ms)) {
    return JsonError(400, "since_ms '" + since->second + "' is not a number");
  }
  nlohmann::json series = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, s] : series_) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& [ms, value] : s.points) {
      if (ms > since_ms) points.push_back({ms, value});
    }
    if (points.empty() && since_ms > 0) continue;
    series.push_back({{"name", s.name}, {"labels", s.labels}, {"points", std::move(points)}});
  }
  return JsonResponse({{"period_ms", options_.scrape_period_ms},
                       {"history_points", options_.history_points},
                       {"series", std::move(series)},
                       {"dropped_series", dropped_series_.load()}});
}

http::Response DashboardServer::Logs(const http::Request& request) {
  auto node = request.query.find("node_id");
  if (node == request.query.end()) return JsonError(400, "node_id is required");
  rpc::ListStateRequest q;
  q.set_resource("nodes");
  q.set_detail(true);
  rpc::StateFilter* f = q.add_filters();
  f->set_key("node_id");
  f->set_predicate("=");
  f->set_value(node->second);
  auto gcs = rpc::StateGcsService::NewStub(gcs_channel_);
  rpc::ListStateReply nodes;
  grpc::Status s = rpc::CallWithToken(*gcs, &rpc::StateGcsService::Stub::ListState, q, &nodes, kCallDeadlineS);
  if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("nodes", s));
  nlohmann::json rows = ParseJson(nodes.rows_json());
  if (!rows.is_array() || rows.empty()) return JsonError(404, "the cluster knows no node " + node->second);
  const nlohmann::json& n = rows[0];
  if (n.value("state", "") != "ALIVE") {
    return JsonError(404, "node " + node->second + " is dead (" + n.value("death_reason", std::string()) +
                              "): its raylet cannot serve its logs");
  }
  const std::string address = n.value("node_ip", "") + ":" + std::to_string(n.value("node_manager_port", 0));
  auto logs = rpc::LogService::NewStub(rpc::MakeChannel(address, 64 << 20));
  if (request.path == "/api/logs") {
    rpc::ListLogsReply listed;
    s = rpc::CallWithToken(*logs, &rpc::LogService::Stub::ListLogs, rpc::ListLogsRequest(), &listed, kCallDeadlineS);
    if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("the logs of node " + node->second, s));
    nlohmann::json files = nlohmann::json::array();
    for (const rpc::LogFileInfo& file : listed.files()) {
      files.push_back({{"name", file.name()},
                       {"size_bytes", file.size_bytes()},
                       {"modified_ms", file.modified_ms()},
                       {"worker_id", BinaryHex(file.worker_id())},
                       {"job_id", BinaryHex(file.job_id())},
                       {"pid", file.pid()},
                       {"alive", file.alive()}});
    }
    return JsonResponse({{"files", std::move(files)}});
  }
  rpc::ReadLogRequest read;
  auto name = request.query.find("name");
  read.set_name(name == request.query.end() ? "" : name->second);
  read.set_offset(-1);
  int64_t tail = 1000;
  if (auto t = request.query.find("tail"); t != request.query.end() && !absl::SimpleAtoi(t->second, &tail)) {
    return JsonError(400, "tail '" + t->second + "' is not a number");
  }
  read.set_tail_lines(std::max<int64_t>(tail, 1));
  rpc::ReadLogReply data;
  s = rpc::CallWithToken(*logs, &rpc::LogService::Stub::ReadLog, read, &data, kCallDeadlineS);
  if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("reading " + read.name(), s));
  return JsonResponse({{"data", data.data()}, {"size_bytes", data.size_bytes()}});
}

http::Response DashboardServer::Log(const http::Request& request) { return Logs(request); }

http::Response DashboardServer::Autoscaler(const http::Request&) {
  nlohmann::json state;
  grpc::Status s = autoscaler::ReadAutoscalerState(gcs_channel_, &state);
  if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("the autoscaler's state", s));
  if (state.is_null()) return JsonResponse({{"enabled", false}});
  state["enabled"] = true;
  return JsonResponse(state);
}

http::Response DashboardServer::Timeline(const http::Request& request) {
  rpc::GetTaskTimelineRequest q;
  if (auto job = request.query.find("job_id"); job != request.query.end() && !job->second.empty()) {
    auto id = JobID::FromHex(job->second);
    if (!id.ok()) return JsonError(400, "'" + job->second + "' is not a job id (8 hex digits)");
    q.set_job_id(id->Binary());
  }
  auto stub = rpc::StateGcsService::NewStub(gcs_channel_);
  rpc::GetTaskTimelineReply reply;
  grpc::Status s = rpc::CallWithToken(*stub, &rpc::StateGcsService::Stub::GetTaskTimeline, q, &reply, 30);
  if (!s.ok()) return JsonError(HttpStatusOf(s), CallError("the timeline", s));
  std::vector<std::string> warnings;
  const std::vector<rpc::GetNodeEventsReply> nodes = FetchNodeEvents(options_.gcs_address, &warnings);
  http::Response r = JsonResponse({{"traceEvents", TaskTimelineTrace(reply.attempts(), nodes)}, {"warnings", warnings}});
  if (request.query.count("download") > 0) {
    r.headers.push_back({"Content-Disposition", "attachment; filename=\"manta-timeline.json\""});
  }
  return r;
}

void DashboardServer::ScrapeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    ScrapeOnce();
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.scrape_period_ms), [this] { return stopping_; });
  }
}

void DashboardServer::ScrapeOnce() {
  auto stub = rpc::NodeInfoGcsService::NewStub(gcs_channel_);
  rpc::GetAllNodeInfoReply nodes;
  grpc::Status s = rpc::CallWithToken(*stub, &rpc::NodeInfoGcsService::Stub::GetAllNodeInfo,
                                      rpc::GetAllNodeInfoRequest(), &nodes, kCallDeadlineS);
  if (!s.ok()) {
    VLOG(1) << "dashboard: cannot list the nodes: " << s.error_message();
    return;
  }
  std::vector<std::pair<std::string, int>> endpoints;
  const std::string gcs_host = options_.gcs_address.substr(0, options_.gcs_address.rfind(':'));
  if (nodes.gcs_metrics_export_port() > 0) endpoints.push_back({gcs_host, nodes.gcs_metrics_export_port()});
  for (const rpc::NodeInfo& n : nodes.node_info_list()) {
    if (n.state() == rpc::NodeInfo::ALIVE && n.metrics_export_port() > 0) {
      endpoints.push_back({n.node_manager_address(), n.metrics_export_port()});
    }
  }
  const int64_t now = NowMs();
  http::HttpGetOptions get;
  get.timeout_ms = 2000;
  get.max_bytes = kMaxScrapeBytes;
  get.bearer_token = options_.token;
  get.tls = options_.tls;
  for (const auto& [host, port] : endpoints) {
    auto text = http::HttpGet(host, port, "/metrics", get);
    if (!text.ok()) {
      VLOG(1) << "dashboard: " << text.status().message();
      continue;
    }
    const std::string instance = host + ":" + std::to_string(port);
    for (metrics::ParsedSample& sample : metrics::ParsePrometheusText(*text)) {
      // Histograms' buckets would be most of the series; their _sum and _count stay.
      if (sample.labels.count("le") > 0) continue;
      sample.labels["instance"] = instance;
      std::string key = sample.name;
      for (const auto& [k, v] : sample.labels) key += "\x1f" + k + "=" + v;
      AddPoint(key, sample.name, sample.labels, now, sample.value);
    }
  }
}

void DashboardServer::AddPoint(const std::string& key, const std::string& name,
                               const std::map<std::string, std::string>& labels, int64_t now_ms, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (series_.size() >= options_.max_series) {
      dropped_series_.fetch_add(1);
      return;
    }
    it = series_.emplace(key, Series{name, labels, {}}).first;
  }
  it->second.points.push_back({now_ms, value});
  while (it->second.points.size() > options_.history_points) it->second.points.pop_front();
}

size_t DashboardServer::num_series() const {
  std::lock_guard<std::mutex> lock(mu_);
  return series_.size();
}

}  // namespace manta::dashboard
