// JobManager: the dashboard's Jobs API (Ray's REST paths), on the head.
//
//   POST /api/jobs/                  {"entrypoint", "submission_id"?, "runtime_env"?,
//                                    "metadata"?} -> {"submission_id", "job_id": null}
//   GET  /api/jobs/                  every job's record (JobDetails)
//   GET  /api/jobs/<id>              one record; 404 for an unknown id
//   GET  /api/jobs/<id>/logs[?offset=N]  {"logs": the entrypoint's output so far (its
//                                    last 8 MiB, or what follows byte N), "offset",
//                                    "next_offset": where that starts and ends}
//   POST /api/jobs/<id>/stop         {"stopped": whether it was running}
//   POST /api/packages/<sha256>?offset=N   a chunk of a working-dir archive (package.h)
//   POST /api/packages/<sha256>/done  checks and unpacks it -> {"working_dir": its path}
//
// A submission is recorded (PENDING) in the GCS (JobStore), then a
// manta_job_supervisor is started for it (found next to the dashboard), with the
// cluster token; it runs the entrypoint and records how it ends. A supervisor that
// exits without having recorded an end marks its job FAILED (checked every
// watch_period_ms on a thread of its own, which also removes uploads left unfinished
// for an hour). Stop sends the supervisor SIGTERM; so does
// the dashboard's own Stop (`manta stop`) to every job still running.
//
// Bad input gets 400 naming the problem: no entrypoint, a malformed submission id or
// one taken already (nothing is left behind), runtime_env or metadata of the wrong
// shape. Handlers run on the HTTP server's thread; the watcher on its own.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/common/http/http_server.h"
#include "src/jobs/job_record.h"
#include "src/jobs/package.h"

namespace manta::dashboard {

struct JobManagerOptions {
  std::string gcs_address;
  std::string token;    // passed to supervisors
  std::string log_dir;  // the entrypoints' logs go here (job-driver-<id>.log)
  std::string supervisor_path;  // empty: manta_job_supervisor next to this executable
  std::vector<std::string> supervisor_flags;  // more flags for it (the daemon's --tls-* files)
  int64_t watch_period_ms = 500;
  // Uploaded working directories (POST /api/packages/<id>): kept under package_dir.
  std::string package_dir;
  jobs::PackageLimits package_limits;
  size_t max_log_bytes = 8 << 20;  // the last this many bytes of a log are served
};

class JobManager {
 public:
  JobManager(JobManagerOptions options, std::shared_ptr<grpc::Channel> gcs);
  ~JobManager();

  // Routes /api/jobs/ through `guard` (the dashboard's access check). REQUIRES:
  // before the server starts.
  void Register(http::HttpServer& server, const std::function<http::Handler(http::Handler)>& guard);
  void Stop();

 private:
  http::Response Submit(const http::Request& request);
  http::Response Route(const http::Request& request);  // GET and POST under /api/jobs/<id>
  // The output's last max_log_bytes, or (offset >= 0) what follows `offset`.
  http::Response Logs(const jobs::JobRecord& record, int64_t offset);
  http::Response StopJob(const jobs::JobRecord& record);
  http::Response Package(const http::Request& request);
  http::Response FinishPackage(const std::string& id);
  void Watch();
  // Whether the record's supervisor (by pid and command line) still runs.
  static bool SupervisorRuns(const jobs::JobRecord& record);
  // Jobs left unended by a supervisor that is gone (the dashboard or the head
  // restarted): FAILED. Once, when the watcher starts.
  void FailOrphans();

  const JobManagerOptions options_;
  jobs::JobStore store_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<pid_t, std::string> supervisors_;  // running supervisor -> its submission id
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace manta::dashboard
