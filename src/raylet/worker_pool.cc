#include "src/raylet/worker_pool.h"

#include <glog/logging.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_join.h"
#include "src/common/runtime_env.h"
#include "src/common/security.h"
#include "src/common/util.h"

namespace manta::raylet {

namespace {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "wait status " + std::to_string(status);
}

}  // namespace

WorkerPool::WorkerPool(EventLoop& loop, WorkerPoolOptions options, const Config& config,
                       WorkerLauncherInterface& launcher, JobConfigFetcher fetch_job_config)
    : loop_(loop), options_(std::move(options)), config_(config), launcher_(launcher),
      fetch_job_config_(std::move(fetch_job_config)) {}

WorkerPool::~WorkerPool() {
  Shutdown();
  *alive_ = false;
}

void WorkerPool::Start() {
  driver_check_timer_ = loop_.RunEvery("WorkerPool.CheckDrivers", std::max<int64_t>(1, config_.driver_liveness_check_ms),
                                       [this] { CheckDrivers(); });
}

int64_t WorkerPool::StartupConcurrency() const {
  if (config_.worker_maximum_startup_concurrency > 0) return config_.worker_maximum_startup_concurrency;
  return std::max(1, options_.num_cpus);
}

int64_t WorkerPool::IdleSoftLimit() const {
  if (config_.num_workers_soft_limit >= 0) return config_.num_workers_soft_limit;
  return std::max(0, options_.num_cpus);
}

void WorkerPool::FillRegisterReply(rpc::RegisterWorkerReply* reply) const {
  reply->set_node_id(options_.node_id.Binary());
  reply->set_object_store_socket(options_.store_socket);
  reply->set_session_dir(options_.session_dir);
  for (auto& [name, value] : config_.NonDefaultEnv()) (*reply->mutable_config())[name] = std::move(value);
}

void WorkerPool::HandleRegisterWorker(const rpc::RegisterWorkerRequest& request, rpc::RegisterWorkerReply* reply,
                                      rpc::SendReply send_reply) {
  if (shut_down_) return std::move(send_reply)(absl::UnavailableError("the raylet is shutting down"));
  if (request.worker_type() == rpc::DRIVER) return RegisterDriver(request, reply, std::move(send_reply));
  RegisterWorkerProcess(request, reply, std::move(send_reply));
}

void WorkerPool::RegisterDriver(const rpc::RegisterWorkerRequest& request, rpc::RegisterWorkerReply* reply,
                                rpc::SendReply send_reply) {
  auto job_id = JobID::FromBinaryChecked(request.job_id());
  if (!job_id.ok()) return std::move(send_reply)(absl::InvalidArgumentError("RegisterWorker (driver): bad job_id"));
  auto worker_id = WorkerID::FromBinaryChecked(request.worker_id());
  if (!worker_id.ok()) {
    return std::move(send_reply)(absl::InvalidArgumentError("RegisterWorker (driver): bad worker_id"));
  }
  if (request.pid() <= 0) return std::move(send_reply)(absl::InvalidArgumentError("RegisterWorker (driver): bad pid"));
  Driver& driver = drivers_[*worker_id];
  driver.job_id = *job_id;
  driver.pid = request.pid();
  driver.registered_ms = MonotonicMs();
  driver.registered_unix_ms = NowMs();
  driver.address = request.address();
  driver.address.set_node_id(options_.node_id.Binary());
  driver.address.set_worker_id(worker_id->Binary());
  LOG(INFO) << "driver " << worker_id->Hex() << " (pid " << request.pid() << ") of job " << job_id->Hex()
            << " registered";
  FillRegisterReply(reply);
  std::move(send_reply)(absl::OkStatus());
}

void WorkerPool::RegisterWorkerProcess(const rpc::RegisterWorkerRequest& request, rpc::RegisterWorkerReply* reply,
                                       rpc::SendReply send_reply) {
  // The token is a secret: it is never echoed back or logged.
  auto token = by_token_.find(request.startup_token());
  if (request.startup_token().empty() || token == by_token_.end()) {
    LOG(WARNING) << "RegisterWorker from pid " << request.pid() << " with an unknown startup token";
    return std::move(send_reply)(absl::InvalidArgumentError(
        "RegisterWorker: unknown startup token (not a worker this raylet started, or one it already gave up on)"));
  }
  Worker& worker = *workers_.at(token->second);
  if (request.worker_id() != worker.worker_id.Binary()) {
    return std::move(send_reply)(absl::InvalidArgumentError(
        "RegisterWorker: worker id does not match MANTA_WORKER_ID " + worker.worker_id.Hex()));
  }
  FillRegisterReply(reply);
  if (worker.state != State::kStarting) {
    // A retried registration whose first reply was lost.
    return std::move(send_reply)(absl::OkStatus());
  }
  worker.address = request.address();
  worker.address.set_node_id(options_.node_id.Binary());
  worker.address.set_worker_id(worker.worker_id.Binary());
  if (worker.address.ip_address().empty()) worker.address.set_ip_address(options_.node_ip_address);
  if (request.pid() != 0 && request.pid() != worker.pid) {
    VLOG(1) << "worker " << worker.worker_id.Hex() << " registered from pid " << request.pid() << ", started as pid "
            << worker.pid;
  }
  worker.timer.reset();
  --num_starting_;
  --PoolOf(worker).starting;
  VLOG(1) << "worker " << worker.worker_id.Hex() << " (pid " << worker.pid << ") of job " << worker.job_id.Hex()
          << " registered at port " << worker.address.port();
  std::move(send_reply)(absl::OkStatus());
  ServeOrIdle(worker);
  TryStartWorkers();
}

void WorkerPool::SetJobConfig(const JobID& job_id, const rpc::JobConfig& config) {
  JobState& job = jobs_[job_id];
  job.config = config;
  job.config_known = true;
  job.config_requested = false;
  TryStartWorkers();
}

void WorkerPool::PostPopFailure(PopCallback callback, const absl::Status& error) {
  loop_.Post("WorkerPool.PopFailed", [alive = alive_, callback = std::move(callback), error]() mutable {
    if (*alive) callback(error);
  });
}

void WorkerPool::FailJob(const JobID& job_id, const absl::Status& error) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  it->second.config_requested = false;
  for (auto& [env, env_pool] : it->second.envs) {
    std::deque<PopCallback> pops = std::move(env_pool.pending_pops);
    env_pool.pending_pops.clear();
    for (PopCallback& callback : pops) PostPopFailure(std::move(callback), error);
  }
}

void WorkerPool::PopWorker(const JobID& job_id, const std::string& runtime_env, PopCallback callback) {
  if (shut_down_) {
    loop_.Post("WorkerPool.PopFailed", [callback = std::move(callback)]() mutable {
      callback(absl::UnavailableError("the raylet is shutting down"));
    });
    return;
  }
  JobState& job = jobs_[job_id];
  if (!job.config_known && !job.config_requested && fetch_job_config_) {
    job.config_requested = true;
    fetch_job_config_(job_id);
  }
  EnvPool& env_pool = job.envs[runtime_env];
  if (!env_pool.idle.empty()) {
    WorkerID id = env_pool.idle.back();
    env_pool.idle.pop_back();
    --num_idle_;
    HandOut(*workers_.at(id), std::move(callback));
    return;
  }
  env_pool.pending_pops.push_back(std::move(callback));
  TryStartWorkers();
}

void WorkerPool::PushWorker(const WorkerID& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second->state != State::kLeased) return;
  ServeOrIdle(*it->second);
}

void WorkerPool::HandOut(Worker& worker, PopCallback callback) {
  worker.state = State::kLeased;
  worker.timer.reset();
  WorkerInfo info{worker.worker_id, worker.job_id, worker.runtime_env, worker.pid, worker.address};
  loop_.Post("WorkerPool.PopResult", [this, alive = alive_, info = std::move(info),
                                      callback = std::move(callback)]() mutable {
    if (!*alive) return;
    auto it = workers_.find(info.worker_id);
    if (it == workers_.end() || it->second->state != State::kLeased) {
      // It died between being chosen and this callback: find another.
      PopWorker(info.job_id, info.runtime_env, std::move(callback));
      return;
    }
    callback(std::move(info));
  });
}

void WorkerPool::ServeOrIdle(Worker& worker) {
  EnvPool& env_pool = PoolOf(worker);
  if (!env_pool.pending_pops.empty()) {
    PopCallback callback = std::move(env_pool.pending_pops.front());
    env_pool.pending_pops.pop_front();
    HandOut(worker, std::move(callback));
    return;
  }
  MakeIdle(worker);
}

void WorkerPool::MakeIdle(Worker& worker) {
  worker.state = State::kIdle;
  worker.timer.reset();
  PoolOf(worker).idle.push_back(worker.worker_id);
  ++num_idle_;
  if (static_cast<int64_t>(num_idle_) > IdleSoftLimit()) {
    WorkerID id = worker.worker_id;
    worker.timer = loop_.RunAfter("WorkerPool.IdleTimeout", config_.idle_worker_killing_time_ms,
                                  [this, id] { OnIdleTimeout(id); });
  }
}

void WorkerPool::OnIdleTimeout(const WorkerID& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second->state != State::kIdle) return;
  if (static_cast<int64_t>(num_idle_) <= IdleSoftLimit()) return;
  Worker& worker = *it->second;
  std::vector<WorkerID>& idle = PoolOf(worker).idle;
  idle.erase(std::remove(idle.begin(), idle.end(), worker_id), idle.end());
  --num_idle_;
  worker.state = State::kExiting;
  worker.timer.reset();
  VLOG(1) << "asking idle worker " << worker_id.Hex() << " (pid " << worker.pid << ") to exit: " << num_idle_ + 1
          << " idle workers, soft limit " << IdleSoftLimit();
  launcher_.AsyncRequestExit(worker.address, [this, alive = alive_, worker_id](const absl::Status& s, bool accepted) {
    if (*alive) OnExitReply(worker_id, s, accepted);
  });
}

void WorkerPool::OnExitReply(const WorkerID& worker_id, const absl::Status& status, bool accepted) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second->state != State::kExiting) return;
  Worker& worker = *it->second;
  if (status.ok() && !accepted) {
    // It still owns objects others use: keep it, and ask again after another idle period.
    VLOG(1) << "idle worker " << worker_id.Hex() << " declined to exit";
    ServeOrIdle(worker);
    return;
  }
  if (!status.ok()) {
    VLOG(1) << "Exit to idle worker " << worker_id.Hex() << " failed (" << status << "); sending SIGTERM";
    launcher_.Signal(worker.pid, SIGTERM);
  }
  worker.timer = loop_.RunAfter("WorkerPool.ExitGrace", config_.worker_exit_grace_ms, [this, worker_id] {
    KillWorker(worker_id, "did not exit within worker_exit_grace_ms of being asked to");
  });
}

void WorkerPool::TryStartWorkers() {
  if (shut_down_) return;
  const auto cap = static_cast<size_t>(StartupConcurrency());
  for (auto& [job_id, job] : jobs_) {
    if (!job.config_known) continue;  // waiting for the job's registration
    for (auto& [runtime_env, env_pool] : job.envs) {
      if (env_pool.pending_pops.size() <= env_pool.starting) continue;
      // An env that cannot be applied fails its pops now, startup slots or not.
      auto applied = ApplicableRuntimeEnv(job_id, runtime_env);
      if (!applied.ok()) {
        LOG(WARNING) << applied.status();
        FailUncoveredPops(env_pool, applied.status());
        continue;
      }
      while (num_starting_ < cap && env_pool.pending_pops.size() > env_pool.starting) {
        absl::Status s = StartWorker(job_id, runtime_env, *applied, job.config, env_pool);
        if (s.ok()) continue;
        LOG(WARNING) << s;
        FailUncoveredPops(env_pool, s);
      }
    }
    // Envs no longer used (many distinct envs must not pile up).
    absl::erase_if(job.envs, [](const auto& entry) { return entry.second.unused(); });
  }
}

void WorkerPool::FailUncoveredPops(EnvPool& env_pool, const absl::Status& error) {
  // Starting workers serve the oldest pops.
  auto uncovered = env_pool.pending_pops.begin() + static_cast<std::ptrdiff_t>(env_pool.starting);
  auto end = IsRuntimeEnvError(error) ? env_pool.pending_pops.end() : uncovered + 1;
  std::vector<PopCallback> failed;
  for (auto it = uncovered; it != end; ++it) failed.push_back(std::move(*it));
  env_pool.pending_pops.erase(uncovered, end);
  for (PopCallback& callback : failed) PostPopFailure(std::move(callback), error);
}

absl::StatusOr<std::vector<std::string>> WorkerPool::WorkerCommand(const rpc::JobConfig& config) const {
  if (config.worker_command_size() > 0) {
    return std::vector<std::string>(config.worker_command().begin(), config.worker_command().end());
  }
  if (options_.default_worker_path.empty()) {
    return absl::FailedPreconditionError(
        "the job has no worker command and no manta_worker executable was found next to manta_raylet or in PATH");
  }
  return std::vector<std::string>{options_.default_worker_path};
}

std::map<std::string, std::string> WorkerPool::WorkerEnv(const Worker& worker, const rpc::JobConfig& config,
                                                         const std::map<std::string, std::string>& env_vars) const {
  // The cluster's system config first, then the job's own variables, then the
  // runtime env's, then the worker's identity, which nothing may override.
  std::map<std::string, std::string> env = config_.NonDefaultEnv();
  for (const auto& [k, v] : config.worker_env()) env[k] = v;
  for (const auto& [k, v] : env_vars) env[k] = v;
  // Its tasks' children inherit it (ray/api/runtime_env.h): the worker's runtime reads it.
  if (!worker.runtime_env.empty()) env["MANTA_RUNTIME_ENV"] = worker.runtime_env;
  if (config.code_search_path_size() > 0) env["MANTA_CODE_SEARCH_PATH"] = absl::StrJoin(config.code_search_path(), ":");
  env["MANTA_WORKER_MODE"] = "1";
  env["MANTA_WORKER_ID"] = worker.worker_id.Hex();
  env["MANTA_JOB_ID"] = worker.job_id.Hex();
  env["MANTA_NODE_ID"] = options_.node_id.Hex();
  env["MANTA_LOG_DIR"] = options_.session_dir + "/logs";
  env["MANTA_NODE_IP_ADDRESS"] = options_.node_ip_address;
  env["MANTA_BIND_ADDRESS"] = options_.bind_address.empty() ? options_.node_ip_address : options_.bind_address;
  env["MANTA_RAYLET_ADDRESS"] = options_.node_ip_address + ":" + std::to_string(options_.raylet_port);
  env["MANTA_GCS_ADDRESS"] = options_.gcs_address;
  env["MANTA_STORE_SOCKET"] = options_.store_socket;
  env["MANTA_SESSION_DIR"] = options_.session_dir;
  env["MANTA_JOB_NAMESPACE"] = config.ray_namespace();
  if (config.default_actor_detached()) env["MANTA_DEFAULT_ACTOR_DETACHED"] = "1";
  if (options_.tls.enabled()) {
    env["MANTA_TLS_CERT"] = options_.tls.cert_file;
    env["MANTA_TLS_KEY"] = options_.tls.key_file;
    env["MANTA_TLS_CA"] = options_.tls.ca_file;
  }
  return env;
}

absl::StatusOr<WorkerRuntimeEnv> WorkerPool::ApplicableRuntimeEnv(const JobID& job_id,
                                                                   const std::string& runtime_env) const {
  auto applied = ParseWorkerRuntimeEnv(runtime_env);
  absl::Status error = applied.ok() ? absl::OkStatus() : applied.status();
  if (error.ok() && !applied->working_dir.empty()) error = CheckWorkingDir(applied->working_dir);
  if (error.ok()) return applied;
  return MarkRuntimeEnvError(absl::Status(
      error.code(), "cannot start a worker for job " + job_id.Hex() + ": " + std::string(error.message())));
}

absl::Status WorkerPool::StartWorker(const JobID& job_id, const std::string& runtime_env,
                                     const WorkerRuntimeEnv& applied, const rpc::JobConfig& config,
                                     EnvPool& env_pool) {
  auto argv = WorkerCommand(config);
  if (!argv.ok()) return absl::Status(argv.status().code(), "cannot start a worker for job " + job_id.Hex() + ": " +
                                                                std::string(argv.status().message()));
  auto worker = std::make_unique<Worker>();
  worker->worker_id = WorkerID::FromRandom();
  worker->job_id = job_id;
  worker->runtime_env = runtime_env;
  worker->startup_token = SecureRandomHex(16);
  const std::string stem = options_.session_dir + "/logs/worker-" + worker->worker_id.Hex() + "-" + job_id.Hex();
  worker->output = {stem + ".out", stem + ".err"};
  // Never in its environment or command line, which other processes can read.
  std::map<std::string, std::string> secrets = {{kClusterTokenEnv, options_.cluster_token},
                                                {kWorkerStartupTokenEnv, worker->startup_token}};
  auto pid = launcher_.Start(*argv, WorkerEnv(*worker, config, applied.env_vars), secrets, applied.working_dir,
                             worker->output);
  if (!pid.ok()) {
    absl::Status error(pid.status().code(), "cannot start a worker for job " + job_id.Hex() + " (" + (*argv)[0] +
                                                "): " + std::string(pid.status().message()));
    // The directory went away between the check and the start: the env's fault too.
    if (!applied.working_dir.empty() && !CheckWorkingDir(applied.working_dir).ok()) {
      return MarkRuntimeEnvError(std::move(error));
    }
    return error;
  }
  worker->pid = *pid;
  worker->start_unix_ms = NowMs();
  WorkerID id = worker->worker_id;
  worker->timer = loop_.RunAfter("WorkerPool.RegisterTimeout", config_.worker_register_timeout_ms,
                                 [this, id] { OnRegisterTimeout(id); });
  VLOG(1) << "started worker " << id.Hex() << " (pid " << *pid << ") for job " << job_id.Hex() << ": " << (*argv)[0]
          << ", output " << worker->output.out << ", " << worker->output.err;
  by_token_[worker->startup_token] = id;
  by_pid_[*pid] = id;
  workers_[id] = std::move(worker);
  ++num_starting_;
  ++env_pool.starting;
  return absl::OkStatus();
}

void WorkerPool::OnRegisterTimeout(const WorkerID& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second->state != State::kStarting) return;
  Worker& worker = *it->second;
  JobID job_id = worker.job_id;
  std::string runtime_env = worker.runtime_env;
  std::string message = "worker " + worker_id.Hex() + " (pid " + std::to_string(worker.pid) +
                        ") did not register within " + std::to_string(config_.worker_register_timeout_ms) +
                        " ms; see " + worker.output.err;
  LOG(WARNING) << message << "; killing it";
  KillWorker(worker_id, "did not register in time");
  FailUncoveredPop(job_id, runtime_env, absl::DeadlineExceededError(message));
  TryStartWorkers();
}

void WorkerPool::FailUncoveredPop(const JobID& job_id, const std::string& runtime_env, const absl::Status& error) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  auto env = it->second.envs.find(runtime_env);
  if (env == it->second.envs.end()) return;
  EnvPool& env_pool = env->second;
  if (env_pool.pending_pops.size() <= env_pool.starting) return;  // every pop is still covered
  FailUncoveredPops(env_pool, error);
}

WorkerGone WorkerPool::Forget(const WorkerID& worker_id, const std::string& reason) {
  auto it = workers_.find(worker_id);
  Worker& worker = *it->second;
  EnvPool& env_pool = PoolOf(worker);
  if (worker.state == State::kStarting) {
    --num_starting_;
    --env_pool.starting;
  } else if (worker.state == State::kIdle) {
    env_pool.idle.erase(std::remove(env_pool.idle.begin(), env_pool.idle.end(), worker_id), env_pool.idle.end());
    --num_idle_;
  }
  WorkerGone gone{worker_id, worker.job_id, false, worker.state != State::kStarting, reason};
  RememberGone(RecordOf(worker), reason);
  by_token_.erase(worker.startup_token);
  by_pid_.erase(worker.pid);
  workers_.erase(it);
  return gone;
}

void WorkerPool::KillWorker(const WorkerID& worker_id, const std::string& reason) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  launcher_.Signal(it->second->pid, SIGKILL);
  Notify(Forget(worker_id, reason));
}

pid_t WorkerPool::PidOf(const WorkerID& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? 0 : it->second->pid;
}

void WorkerPool::DisconnectWorker(const WorkerID& worker_id, const std::string& reason) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  LOG(INFO) << "killing worker " << worker_id.Hex() << " (pid " << it->second->pid << "): " << reason;
  KillWorker(worker_id, reason);
  TryStartWorkers();
}

void WorkerPool::KeepPastJobEnd(const WorkerID& worker_id) {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second->keep_past_job_end = true;
}

void WorkerPool::KillJobWorkers(const JobID& job_id, const std::string& reason) {
  std::vector<WorkerID> victims;
  for (const auto& [id, worker] : workers_) {
    if (worker->job_id == job_id && !worker->keep_past_job_end) victims.push_back(id);
  }
  if (!victims.empty()) {
    LOG(INFO) << "killing the " << victims.size() << " worker(s) of job " << job_id.Hex() << ": " << reason;
  }
  for (const WorkerID& id : victims) KillWorker(id, reason);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) {
    for (auto& [env, env_pool] : it->second.envs) {
      std::deque<PopCallback> pops = std::move(env_pool.pending_pops);
      env_pool.pending_pops.clear();
      for (PopCallback& callback : pops) PostPopFailure(std::move(callback), absl::CancelledError(reason));
    }
  }
  TryStartWorkers();
}

WorkerPool::WorkerRecord WorkerPool::RecordOf(const Worker& worker) {
  static constexpr const char* kStateNames[] = {"STARTING", "IDLE", "LEASED", "EXITING"};
  WorkerRecord r;
  r.worker_id = worker.worker_id;
  r.job_id = worker.job_id;
  r.pid = worker.pid;
  r.output = worker.output;
  r.alive = true;
  r.state = kStateNames[static_cast<int>(worker.state)];
  r.address = worker.address;
  r.start_unix_ms = worker.start_unix_ms;
  return r;
}

std::vector<WorkerPool::WorkerRecord> WorkerPool::WorkerLogs() const {
  std::vector<WorkerRecord> logs;
  logs.reserve(workers_.size() + gone_.size());
  for (const auto& [id, worker] : workers_) logs.push_back(RecordOf(*worker));
  for (const WorkerRecord& r : gone_) {
    if (!r.is_driver) logs.push_back(r);
  }
  return logs;
}

std::vector<WorkerPool::WorkerRecord> WorkerPool::WorkerRecords() const {
  std::vector<WorkerRecord> records;
  records.reserve(workers_.size() + drivers_.size() + gone_.size());
  for (const auto& [id, worker] : workers_) records.push_back(RecordOf(*worker));
  for (const auto& [id, driver] : drivers_) {
    WorkerRecord r;
    r.worker_id = id;
    r.job_id = driver.job_id;
    r.pid = driver.pid;
    r.alive = true;
    r.is_driver = true;
    r.state = "RUNNING";
    r.address = driver.address;
    r.start_unix_ms = driver.registered_unix_ms;
    records.push_back(std::move(r));
  }
  records.insert(records.end(), gone_.begin(), gone_.end());
  return records;
}

void WorkerPool::RememberGone(WorkerRecord record, std::string why) {
  record.alive = false;
  record.state = "DEAD";
  record.end_unix_ms = NowMs();
  record.exit_detail = std::move(why);
  gone_.push_back(std::move(record));
  if (gone_.size() > kMaxExitedWorkers) gone_.pop_front();
}

void WorkerPool::OnProcessExit(pid_t pid, int status) {
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) {
    VLOG(2) << "reaped pid " << pid << " (not a live worker)";
    return;
  }
  Worker& worker = *workers_.at(it->second);
  const WorkerID worker_id = worker.worker_id;
  const JobID job_id = worker.job_id;
  const std::string runtime_env = worker.runtime_env;
  const State state = worker.state;
  const std::string how = DescribeExit(status);
  if (state == State::kStarting) {
    LOG(WARNING) << "worker " << worker_id.Hex() << " (pid " << pid << ") of job " << job_id.Hex()
                 << " exited before registering (" << how << "); see " << worker.output.err;
  } else if (state == State::kLeased) {
    LOG(WARNING) << "leased worker " << worker_id.Hex() << " (pid " << pid << ") of job " << job_id.Hex()
                 << " exited (" << how << "); see " << worker.output.err;
  } else {
    VLOG(1) << "worker " << worker_id.Hex() << " (pid " << pid << ") exited (" << how << ")";
  }
  std::string err_file = worker.output.err;
  WorkerGone gone = Forget(worker_id, "worker process exited (" + how + ")");
  if (state == State::kStarting) {
    FailUncoveredPop(job_id, runtime_env,
                     absl::UnavailableError("worker " + worker_id.Hex() + " exited before registering (" + how +
                                            "); see " + err_file));
  }
  Notify(gone);
  TryStartWorkers();
}

void WorkerPool::OnStoreClientConnected(const std::string& name) {
  auto id = WorkerID::FromHex(name);
  if (!id.ok()) return;
  auto it = drivers_.find(*id);
  if (it != drivers_.end()) it->second.store_connected = true;
}

void WorkerPool::OnStoreClientClosed(const std::string& name) {
  auto id = WorkerID::FromHex(name);
  if (!id.ok() || !drivers_.contains(*id)) return;
  DriverGone(*id, "its connection to the object store closed");
}

void WorkerPool::CheckDrivers() {
  const int64_t now = MonotonicMs();
  std::vector<WorkerID> silent;
  for (const auto& [id, driver] : drivers_) {
    if (!driver.store_connected && now - driver.registered_ms > config_.worker_register_timeout_ms) {
      silent.push_back(id);
    }
  }
  for (const WorkerID& id : silent) {
    DriverGone(id, "it did not connect to the object store within " +
                       std::to_string(config_.worker_register_timeout_ms) + " ms of registering");
  }
}

void WorkerPool::DriverGone(const WorkerID& id, const std::string& why) {
  Driver driver = drivers_.at(id);
  drivers_.erase(id);
  WorkerRecord record;
  record.worker_id = id;
  record.job_id = driver.job_id;
  record.pid = driver.pid;
  record.is_driver = true;
  record.address = driver.address;
  record.start_unix_ms = driver.registered_unix_ms;
  RememberGone(std::move(record), "driver gone: " + why);
  LOG(INFO) << "driver " << id.Hex() << " (pid " << driver.pid << ") of job " << driver.job_id.Hex()
            << " is gone: " << why;
  Notify(WorkerGone{id, driver.job_id, true, true, "driver exited"});
  bool job_has_driver = std::any_of(drivers_.begin(), drivers_.end(),
                                    [&](const auto& entry) { return entry.second.job_id == driver.job_id; });
  if (!job_has_driver) KillJobWorkers(driver.job_id, "the job's driver exited");
}

void WorkerPool::Notify(const WorkerGone& gone) {
  for (size_t i = 0; i < gone_listeners_.size(); ++i) gone_listeners_[i](gone);
}

void WorkerPool::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  driver_check_timer_.reset();
  for (const auto& [id, worker] : workers_) launcher_.Signal(worker->pid, SIGKILL);
  if (!workers_.empty()) LOG(INFO) << "killed " << workers_.size() << " worker(s) at shutdown";
  workers_.clear();
  by_token_.clear();
  by_pid_.clear();
  jobs_.clear();
  drivers_.clear();
  num_idle_ = 0;
  num_starting_ = 0;
}

}  // namespace manta::raylet
