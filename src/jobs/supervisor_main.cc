// manta_job_supervisor: runs one submitted job's entrypoint on the head and keeps its
// record (job_record.h) up to date. Started by the dashboard for POST /api/jobs/.
//
// The entrypoint runs as `/bin/sh -c <entrypoint>` in a session of its own (its
// process group is the job), with stdout and stderr appended to the record's
// log_path, in the runtime env's working_dir when one is given (a directory on the
// head), with the supervisor's environment plus the runtime env's env_vars and
// RAY_ADDRESS=<the cluster's GCS>: a driver's ray::Init() joins the cluster (it finds
// the token in the head's session). The record goes RUNNING (with the entrypoint's
// pid), then SUCCEEDED (exit code 0), FAILED (another code, a signal, or it could not
// start) or STOPPED: SIGTERM or SIGINT to the supervisor sends SIGTERM to the job's
// process group, then SIGKILL after --stop-grace-ms.
#include "src/jobs/supervisor_main.h"

#include <glog/logging.h>
#include <signal.h>

#include <atomic>
#include <iostream>
#include <map>
#include <string>

#include "src/common/daemon.h"
#include "src/common/flags.h"
#include "src/common/process.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/util.h"
#include "src/jobs/job_record.h"

namespace {

std::atomic<bool> g_stop{false};

void OnStopSignal(int) { g_stop.store(true); }

// The entrypoint's environment: the runtime env's env_vars and the cluster's address.
absl::StatusOr<std::map<std::string, std::string>> EntrypointEnv(const manta::jobs::JobRecord& record,
                                                                  const std::string& gcs_address) {
  std::map<std::string, std::string> env;
  auto vars = record.runtime_env.find("env_vars");
  if (vars != record.runtime_env.end()) {
    if (!vars->is_object()) return absl::InvalidArgumentError("runtime_env.env_vars is not an object");
    for (const auto& [name, value] : vars->items()) {
      if (!value.is_string()) return absl::InvalidArgumentError("runtime_env.env_vars." + name + " is not a string");
      env[name] = value.get<std::string>();
    }
  }
  env["RAY_ADDRESS"] = gcs_address;
  return env;
}

// Sends `signal` to the job's process group (its leader is the entrypoint's shell).
void SignalJob(pid_t leader, int signal) { kill(-leader, signal); }

class Supervisor {
 public:
  Supervisor(manta::jobs::JobStore& store, manta::jobs::JobRecord record, std::string gcs_address,
             int64_t stop_grace_ms)
      : store_(store), record_(std::move(record)), gcs_address_(std::move(gcs_address)),
        stop_grace_ms_(stop_grace_ms) {}

  // Runs the job to its end; the process's exit code.
  int Run() {
    absl::StatusOr<std::map<std::string, std::string>> env = EntrypointEnv(record_, gcs_address_);
    if (!env.ok()) return End(manta::jobs::JobStatus::kFailed, std::string(env.status().message()), std::nullopt);
    manta::ProcessOptions options;
    options.argv = {"/bin/sh", "-c", record_.entrypoint};
    options.env = *env;
    options.output_file = record_.log_path;
    options.new_session = true;
    auto dir = record_.runtime_env.find("working_dir");
    if (dir != record_.runtime_env.end() && dir->is_string()) options.working_dir = dir->get<std::string>();
    absl::StatusOr<pid_t> pid = manta::StartProcess(options);
    if (!pid.ok()) {
      const std::string why = "the entrypoint did not start: " + std::string(pid.status().message());
      return End(manta::jobs::JobStatus::kFailed, why, std::nullopt);
    }
    record_.status = manta::jobs::JobStatus::kRunning;
    record_.entrypoint_pid = *pid;
    record_.message = "the entrypoint runs (pid " + std::to_string(*pid) + ")";
    if (absl::Status s = store_.Update(record_); !s.ok()) LOG(WARNING) << s;
    return Wait(*pid);
  }

 private:
  int Wait(pid_t pid) {
    int64_t stop_deadline = 0;
    while (true) {
      absl::StatusOr<int> code = manta::WaitForChildExit(pid, 100);
      if (code.ok()) {
        if (stop_deadline != 0) {
          return End(manta::jobs::JobStatus::kStopped, "stopped by request (manta job stop)", *code);
        }
        if (*code == 0) return End(manta::jobs::JobStatus::kSucceeded, "the entrypoint exited with code 0", 0);
        const std::string how = *code > 128 ? "was ended by signal " + std::to_string(*code - 128)
                                            : "exited with code " + std::to_string(*code);
        return End(manta::jobs::JobStatus::kFailed, "the entrypoint " + how, *code);
      }
      if (!absl::IsDeadlineExceeded(code.status())) {
        return End(manta::jobs::JobStatus::kFailed, "lost the entrypoint: " + std::string(code.status().message()),
                   std::nullopt);
      }
      if (g_stop.load() && stop_deadline == 0) {
        SignalJob(pid, SIGTERM);
        stop_deadline = manta::NowMs() + stop_grace_ms_;
      } else if (stop_deadline != 0 && manta::NowMs() > stop_deadline) {
        SignalJob(pid, SIGKILL);
      }
    }
  }

  int End(manta::jobs::JobStatus status, const std::string& message, std::optional<int> exit_code) {
    record_.status = status;
    record_.message = message;
    record_.driver_exit_code = exit_code;
    record_.end_time_ms = manta::NowMs();
    // The record must say how the job ended: a few tries while the GCS restarts.
    absl::Status s;
    for (int attempt = 0; attempt < 30; ++attempt) {
      s = store_.Update(record_);
      if (s.ok()) break;
      sleep(1);
    }
    if (!s.ok()) LOG(ERROR) << "job " << record_.submission_id << " ended (" << message << ") but " << s;
    return status == manta::jobs::JobStatus::kSucceeded ? 0 : 1;
  }

  manta::jobs::JobStore& store_;
  manta::jobs::JobRecord record_;
  const std::string gcs_address_;
  const int64_t stop_grace_ms_;
};

}  // namespace

int manta::jobs::SupervisorMain(int argc, char** argv) {
  manta::FlagParser parser("manta_job_supervisor: runs a submitted job's entrypoint (started by the dashboard)");
  std::string gcs_address;
  std::string submission_id;
  int64_t stop_grace_ms = 5000;
  manta::DaemonFlags flags;
  parser.Add("--gcs-address", &gcs_address, "GCS host:port").Required();
  parser.Add("--submission-id", &submission_id, "the job's submission id (its record exists)").Required();
  parser.Add("--stop-grace-ms", &stop_grace_ms, "from SIGTERM to SIGKILL of a stopped job");
  manta::AddDaemonFlags(parser, &flags);
  if (auto exit_code = parser.Parse(argc, argv)) return *exit_code;
  auto daemon = manta::SetUpDaemon(argv[0], flags);
  if (!daemon.ok()) {
    std::cerr << "manta_job_supervisor: " << daemon.status().message() << std::endl;
    return 2;
  }
  struct sigaction stop {};
  stop.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGINT, &stop, nullptr);
  manta::jobs::JobStore store(manta::rpc::MakeChannel(gcs_address, 64 << 20));
  absl::StatusOr<manta::jobs::JobRecord> record = store.Get(submission_id);
  if (!record.ok()) {
    std::cerr << "manta_job_supervisor: " << record.status().message() << std::endl;
    return 2;
  }
  record->supervisor_pid = getpid();
  if (record->start_time_ms == 0) record->start_time_ms = manta::NowMs();
  Supervisor supervisor(store, std::move(*record), gcs_address, stop_grace_ms);
  return supervisor.Run();
}
