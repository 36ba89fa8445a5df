#include "src/dashboard/job_manager.h"

#include <glog/logging.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "src/common/json.h"
#include "src/common/process.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/dashboard/dashboard_server.h"

namespace manta::dashboard {

namespace {

constexpr char kPrefix[] = "/api/jobs/";

int HttpStatusOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    default:
      return 502;
  }
}

http::Response Error(const absl::Status& s) { return JsonError(HttpStatusOf(s), std::string(s.message())); }

// The last `max_bytes` of `path` ("" when it does not exist yet).
// With `from` < 0: the last `max_bytes` of `path`; else at most `max_bytes` from
// offset `from`. Sets *start to where the bytes returned begin ("" when the file does
// not exist yet).
std::string ReadLog(const std::string& path, int64_t from, size_t max_bytes, int64_t* start) {
  *start = std::max<int64_t>(from, 0);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const auto limit = static_cast<std::streamoff>(max_bytes);
  if (from < 0) *start = size > limit ? size - limit : 0;
  if (*start >= size) return "";
  in.seekg(*start);
  std::string out(static_cast<size_t>(std::min<std::streamoff>(size - *start, limit)), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// The submission's fields, checked: InvalidArgument naming what is wrong.
absl::StatusOr<jobs::JobRecord> ParseSubmission(const std::string& body) {
  nlohmann::json j = ParseJson(body);
  if (!j.is_object()) return absl::InvalidArgumentError("the request body is not a JSON object");
  jobs::JobRecord r;
  if (!j.contains("entrypoint") || !j["entrypoint"].is_string() || j["entrypoint"].get<std::string>().empty()) {
    return absl::InvalidArgumentError("'entrypoint' (the command to run, a string) is missing");
  }
  r.entrypoint = j["entrypoint"].get<std::string>();
  if (j.contains("submission_id") && !j["submission_id"].is_null()) {
    if (!j["submission_id"].is_string()) return absl::InvalidArgumentError("'submission_id' is not a string");
    r.submission_id = j["submission_id"].get<std::string>();
    if (absl::Status s = jobs::CheckSubmissionId(r.submission_id); !s.ok()) return s;
  } else {
    r.submission_id = jobs::NewSubmissionId();
  }
  if (j.contains("runtime_env") && !j["runtime_env"].is_null()) {
    const nlohmann::json& env = j["runtime_env"];
    if (!env.is_object()) return absl::InvalidArgumentError("'runtime_env' is not an object");
    for (const auto& [key, value] : env.items()) {
      if (key == "env_vars") {
        if (!value.is_object()) return absl::InvalidArgumentError("'runtime_env.env_vars' is not an object");
        for (const auto& [name, v] : value.items()) {
          if (!v.is_string()) return absl::InvalidArgumentError("runtime_env.env_vars." + name + " is not a string");
        }
      } else if (key == "working_dir") {
        if (!value.is_string() || value.get<std::string>().empty() || value.get<std::string>()[0] != '/') {
          return absl::InvalidArgumentError("'runtime_env.working_dir' must be an absolute path on the head");
        }
      } else {
        return absl::InvalidArgumentError("runtime_env field '" + key +
                                          "' is not supported (env_vars and working_dir are)");
      }
    }
    r.runtime_env = env;
  }
  if (j.contains("metadata") && !j["metadata"].is_null()) {
    if (!j["metadata"].is_object()) return absl::InvalidArgumentError("'metadata' is not an object");
    for (const auto& [key, value] : j["metadata"].items()) {
      if (!value.is_string()) return absl::InvalidArgumentError("metadata." + key + " is not a string");
      r.metadata[key] = value.get<std::string>();
    }
  }
  return r;
}

}  // namespace

JobManager::JobManager(JobManagerOptions options, std::shared_ptr<grpc::Channel> gcs)
    : options_(std::move(options)), store_(std::move(gcs)), watcher_([this] { Watch(); }) {}

JobManager::~JobManager() { Stop(); }

void JobManager::Stop() {
  std::map<pid_t, std::string> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    running = supervisors_;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  // The cluster is going (`manta stop`): its jobs stop too, and say so.
  for (const auto& [pid, id] : running) (void)SignalProcess(pid, SIGTERM);
  const int64_t deadline = NowMs() + 10000;
  for (const auto& [pid, id] : running) WaitForExit(pid, std::max<int64_t>(0, deadline - NowMs()));
}

bool JobManager::SupervisorRuns(const jobs::JobRecord& record) {
  if (record.supervisor_pid <= 0) return false;
  const std::string command = ProcessCommandLine(static_cast<pid_t>(record.supervisor_pid)) + " ";
  return command.find("manta_job_supervisor") != std::string::npos &&
         command.find("--submission-id " + record.submission_id + " ") != std::string::npos;
}

void JobManager::FailOrphans() {
  absl::StatusOr<std::vector<jobs::JobRecord>> all = store_.List();
  if (!all.ok()) return;
  for (jobs::JobRecord& record : *all) {
    if (jobs::IsTerminal(record.status) || SupervisorRuns(record)) continue;
    if (record.status == jobs::JobStatus::kPending && NowMs() - record.start_time_ms < 60000) continue;
    record.status = jobs::JobStatus::kFailed;
    record.message = "its supervisor is gone (the head's dashboard or machine restarted while it ran)";
    record.end_time_ms = NowMs();
    if (absl::Status s = store_.Update(record); !s.ok()) LOG(WARNING) << s;
  }
}

void JobManager::Register(http::HttpServer& server, const std::function<http::Handler(http::Handler)>& guard) {
  server.Handle("POST", kPrefix, guard([this](const http::Request& r) {
                  return r.path == kPrefix ? Submit(r) : Route(r);
                }));
  server.Handle("GET", kPrefix, guard([this](const http::Request& r) { return Route(r); }));
  server.Handle("POST", "/api/packages/", guard([this](const http::Request& r) { return Package(r); }));
}

http::Response JobManager::Package(const http::Request& request) {
  if (options_.package_dir.empty()) return JsonError(404, "this dashboard takes no uploads");
  const std::string rest = request.path.substr(std::string("/api/packages/").size());
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  if (!jobs::IsPackageId(id)) return JsonError(400, "'" + id + "' is not a package id (a SHA-256 in hex)");
  if (slash != std::string::npos) {
    if (rest.substr(slash) != "/done") return JsonError(404, "no route POST " + request.path);
    return FinishPackage(id);
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.package_dir, ec);
  const std::string part = options_.package_dir + "/" + id + ".part";
  const auto size = static_cast<int64_t>(std::filesystem::exists(part) ? std::filesystem::file_size(part) : 0);
  auto offset = request.query.find("offset");
  if (offset == request.query.end() || std::to_string(size) != offset->second) {
    return JsonError(400, "upload of " + id + ": the next chunk starts at offset " + std::to_string(size));
  }
  // The archive: the files' bytes and, per file, its path and sizes.
  const jobs::PackageLimits& limits = options_.package_limits;
  if (size + static_cast<int64_t>(request.body.size()) > limits.max_bytes + limits.max_files * 4200) {
    std::filesystem::remove(part, ec);
    return JsonError(400, "the working directory is over job_working_dir_max_bytes (" +
                              std::to_string(limits.max_bytes) + " bytes)");
  }
  std::ofstream(part, std::ios::binary | std::ios::app) << request.body;
  return JsonResponse({{"received", size + static_cast<int64_t>(request.body.size())}});
}

http::Response JobManager::FinishPackage(const std::string& id) {
  const std::string dir = options_.package_dir + "/" + id;
  const std::string part = dir + ".part";
  std::error_code ec;
  if (std::filesystem::is_directory(dir)) {  // the same files were sent before
    std::filesystem::remove(part, ec);
    return JsonResponse({{"working_dir", dir}});
  }
  absl::StatusOr<std::string> archive = ReadFile(part);
  std::filesystem::remove(part, ec);
  if (!archive.ok()) return JsonError(400, "no upload of " + id + " to finish");
  if (jobs::PackageId(*archive) != id) return JsonError(400, "the upload of " + id + " arrived altered");
  const std::string staging = dir + ".unpacking";
  std::filesystem::remove_all(staging, ec);
  if (absl::Status s = jobs::UnpackArchive(*archive, staging, options_.package_limits); !s.ok()) {
    return JsonError(400, std::string(s.message()));
  }
  std::filesystem::rename(staging, dir, ec);
  if (ec) return JsonError(500, "cannot keep the working directory " + dir + ": " + ec.message());
  return JsonResponse({{"working_dir", dir}});
}

http::Response JobManager::Submit(const http::Request& request) {
  absl::StatusOr<jobs::JobRecord> record = ParseSubmission(request.body);
  if (!record.ok()) return Error(record.status());
  record->log_path = options_.log_dir + "/job-driver-" + record->submission_id + ".log";
  record->start_time_ms = NowMs();
  record->message = "waiting for its supervisor to start";
  if (absl::Status s = store_.Create(*record); !s.ok()) return Error(s);
  const std::string supervisor =
      options_.supervisor_path.empty() ? FindExecutable("manta_job_supervisor") : options_.supervisor_path;
  ProcessOptions process;
  process.argv = {supervisor.empty() ? "manta_job_supervisor" : supervisor, "--gcs-address", options_.gcs_address,
                  "--submission-id", record->submission_id, "--log-dir", options_.log_dir};
  process.argv.insert(process.argv.end(), options_.supervisor_flags.begin(), options_.supervisor_flags.end());
  process.env[kClusterTokenEnv] = options_.token;
  // What it says before it has a log of its own (a flag it refuses, say).
  process.output_file = options_.log_dir + "/job-supervisor-" + record->submission_id + ".out";
  absl::StatusOr<pid_t> pid = StartProcess(process);
  if (!pid.ok()) {
    record->status = jobs::JobStatus::kFailed;
    record->message = "its supervisor did not start: " + std::string(pid.status().message());
    record->end_time_ms = NowMs();
    if (absl::Status s = store_.Update(*record); !s.ok()) LOG(WARNING) << s;
    return JsonError(500, record->message);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    supervisors_[*pid] = record->submission_id;
  }
  return JsonResponse({{"submission_id", record->submission_id}, {"job_id", nullptr}});
}

http::Response JobManager::Route(const http::Request& request) {
  const std::string rest = request.path.substr(sizeof(kPrefix) - 1);
  if (rest.empty()) {  // GET /api/jobs/
    absl::StatusOr<std::vector<jobs::JobRecord>> all = store_.List();
    if (!all.ok()) return Error(all.status());
    nlohmann::json list = nlohmann::json::array();
    for (const jobs::JobRecord& r : *all) list.push_back(r.ToJson());
    return JsonResponse(list);
  }
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  const std::string action = slash == std::string::npos ? "" : rest.substr(slash + 1);
  absl::StatusOr<jobs::JobRecord> record = store_.Get(id);
  if (!record.ok()) return Error(record.status());
  if (request.method == "GET" && action.empty()) return JsonResponse(record->ToJson());
  if (request.method == "GET" && action == "logs") {
    auto offset = request.query.find("offset");
    return Logs(*record, offset == request.query.end() ? -1 : std::atoll(offset->second.c_str()));
  }
  if (request.method == "POST" && action == "stop") return StopJob(*record);
  return JsonError(404, "no route " + request.method + " " + request.path);
}

http::Response JobManager::Logs(const jobs::JobRecord& record, int64_t offset) {
  int64_t start = 0;
  std::string logs = ReadLog(record.log_path, offset, options_.max_log_bytes, &start);
  const int64_t end = start + static_cast<int64_t>(logs.size());
  return JsonResponse({{"logs", std::move(logs)}, {"offset", start}, {"next_offset", end}});
}

http::Response JobManager::StopJob(const jobs::JobRecord& record) {
  // Only the job's own supervisor (a pid may have been reused since): one this
  // dashboard started, or one an earlier dashboard of this head did.
  if (jobs::IsTerminal(record.status) || !SupervisorRuns(record)) return JsonResponse({{"stopped", false}});
  if (absl::Status s = SignalProcess(static_cast<pid_t>(record.supervisor_pid), SIGTERM); !s.ok()) {
    return JsonError(500, std::string(s.message()));
  }
  return JsonResponse({{"stopped", true}});
}

namespace {
// Uploads left unfinished (their client went away) go after an hour.
void RemoveStaleUploads(const std::string& package_dir) {
  std::error_code ec;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (auto it = std::filesystem::directory_iterator(package_dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool partial = name.ends_with(".part") || name.ends_with(".unpacking");
    std::error_code age_ec;
    if (partial && now - it->last_write_time(age_ec) > std::chrono::hours(1) && !age_ec) {
      std::filesystem::remove_all(it->path(), age_ec);
    }
  }
}
}  // namespace

void JobManager::Watch() {
  FailOrphans();
  std::unique_lock<std::mutex> lock(mu_);
  int64_t next_sweep_ms = 0;
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.watch_period_ms));
    if (!options_.package_dir.empty() && NowMs() >= next_sweep_ms) {
      RemoveStaleUploads(options_.package_dir);
      next_sweep_ms = NowMs() + 60000;
    }
    std::vector<std::pair<pid_t, std::string>> gone;
    for (auto it = supervisors_.begin(); it != supervisors_.end();) {
      if (ReapIfExited(it->first)) {
        gone.emplace_back(it->first, it->second);
        it = supervisors_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    for (const auto& [pid, id] : gone) {
      absl::StatusOr<jobs::JobRecord> record = store_.Get(id);
      if (!record.ok() || jobs::IsTerminal(record->status)) continue;
      record->status = jobs::JobStatus::kFailed;
      record->message = "its supervisor (pid " + std::to_string(pid) + ") exited before the job ended";
      record->end_time_ms = NowMs();
      if (absl::Status s = store_.Update(*record); !s.ok()) LOG(WARNING) << s;
    }
    lock.lock();
  }
}

}  // namespace manta::dashboard
