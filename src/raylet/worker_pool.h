// WorkerPool: the worker processes of this node (ARCHITECTURE.md §11).
//
// Workers are started per (job, runtime env) on demand (PopWorker) through a
// WorkerLauncherInterface, with the command and environment of the job's registration
// with the GCS (never those of a lease request): SetJobConfig gives them, and a pop
// for a job whose config is not known yet waits while `fetch_job_config` asks the GCS;
// at most worker_maximum_startup_concurrency at a time. Each start gets a fresh
// WorkerID (in the MANTA_* environment) and startup token, which travels with the
// cluster token on the secrets pipe (ProcessOptions::secrets, never the environment);
// RegisterWorker matches the startup token to the process. The runtime env (src/common/runtime_env.h) of a
// pop adds its env_vars to the worker's environment (the MANTA_* ones still win) and
// starts it in its working_dir; a worker serves pops of its own (job, env) only. An
// env that cannot be applied (a field a C++ worker cannot apply, a working_dir that
// is not a directory) fails every pop of that (job, env) waiting for a new worker,
// with a status IsRuntimeEnvError recognises. A registered worker of the (job, env)
// that is idle is handed out again before a new one is started; PushWorker returns one. Idle workers
// beyond num_workers_soft_limit are asked to exit after idle_worker_killing_time_ms;
// a worker that has not registered within worker_register_timeout_ms is killed.
// Drivers register here too. A driver is alive while its connection to this node's
// object store is open (OnStoreClientConnected/Closed, under its worker id): a Unix
// socket, so the driver runs on this machine, and its end closes when the process
// dies, whatever pid namespace it runs in (its pid is only logged). A driver that
// has not connected within worker_register_timeout_ms of registering is gone too
// (CheckDrivers, every driver_liveness_check_ms). The workers of a job whose
// driver is gone are killed. Every worker or driver
// that goes away (exit, kill) is announced once to the gone-listeners (the lease
// manager releases its leases; the node manager reports it to the GCS).
//
// Worker exits are learned from OnProcessExit, which the raylet calls after reaping
// a child on SIGCHLD (child_reaper.h). A worker the pool kills is forgotten at once;
// its later exit is ignored.
//
// Thread: loop thread only. Pop results are posted to the loop (never run inside
// PopWorker); gone-listeners run synchronously, after the pool's own state is
// consistent, and may call back into the pool. Ownership: the pool owns its
// bookkeeping only; `loop`, `config` and `launcher` outlive it. `config` is read at
// each use (the head's overrides arrive after construction).
#pragma once

#include <sys/types.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "protos/node_manager.pb.h"
#include "src/common/config.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/send_reply.h"
#include "src/common/runtime_env.h"
#include "src/raylet/worker_launcher.h"

namespace manta::raylet {

struct WorkerPoolOptions {
  NodeID node_id;
  std::string node_ip_address = "127.0.0.1";  // advertised
  std::string bind_address;                   // workers listen here; empty = node_ip_address
  // This raylet's gRPC port; may be set later with SetRayletPort().
  int raylet_port = 0;
  std::string gcs_address;
  std::string store_socket;
  // Worker logs go to <session_dir>/logs/.
  std::string session_dir;
  // The generic worker executable used when a job has no worker_command (the raylet
  // looks up "manta_worker"); empty when there is none.
  std::string default_worker_path;
  // "Number of CPUs" for the config defaults 0/-1 of the startup concurrency and the
  // idle soft limit.
  int num_cpus = 1;
  // What workers join the cluster with: the token (given in their environment, read
  // and removed from it at start) and the TLS files, if any.
  std::string cluster_token;
  rpc::TlsFiles tls;
};

// A registered worker as PopWorker hands it out.
struct WorkerInfo {
  WorkerID worker_id;
  JobID job_id;
  // The runtime env it was started for (canonical serialized JSON; "" = none).
  std::string runtime_env;
  pid_t pid = 0;
  // Its core worker's RPC address (node_id and worker_id filled in).
  rpc::Address address;
};

// A worker or driver that went away.
struct WorkerGone {
  WorkerID worker_id;
  JobID job_id;
  bool is_driver = false;
  // Whether it had registered (a worker that died while starting had not).
  bool registered = true;
  std::string reason;
};

class WorkerPool {
 public:
  using PopCallback = absl::AnyInvocable<void(absl::StatusOr<WorkerInfo>)>;
  using GoneListener = std::function<void(const WorkerGone&)>;

  // Asks for a job's config (its registration with the GCS); the answer comes back
  // through SetJobConfig or FailJob. May be null (configs then only come from
  // SetJobConfig).
  using JobConfigFetcher = std::function<void(const JobID&)>;

  WorkerPool(EventLoop& loop, WorkerPoolOptions options, const Config& config, WorkerLauncherInterface& launcher,
             JobConfigFetcher fetch_job_config = nullptr);
  // Kills every worker (Shutdown()).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // REQUIRES: before the first worker is started.
  void SetRayletPort(int port) { options_.raylet_port = port; }
  // Starts the driver liveness check (every driver_liveness_check_ms).
  void Start();
  // `listener` is called for every worker or driver that goes away.
  void AddGoneListener(GoneListener listener) { gone_listeners_.push_back(std::move(listener)); }

  // RegisterWorker. Workers: INVALID_ARGUMENT for an unknown startup token or a
  // worker id other than the one the pool assigned (an empty one included); a repeated registration of the
  // same worker is answered again. Drivers: INVALID_ARGUMENT for a malformed job or
  // worker id; re-registration updates the record.
  void HandleRegisterWorker(const rpc::RegisterWorkerRequest& request, rpc::RegisterWorkerReply* reply,
                            rpc::SendReply send_reply);

  // Hands out an idle registered worker of `job_id` started for `runtime_env`
  // (canonical serialized JSON, "" = none), else starts one (or waits for a startup
  // slot, or for the job's config) and hands it out once it registers.
  // `callback` runs later on the loop with the worker (now leased: it is not handed
  // out again until PushWorker), or an error: the env cannot be applied
  // (IsRuntimeEnvError), the worker could not be started, it exited or timed out
  // before registering, the job is unknown to the GCS, or the job's driver is gone.
  void PopWorker(const JobID& job_id, const std::string& runtime_env, PopCallback callback);
  // A worker with no runtime env.
  void PopWorker(const JobID& job_id, PopCallback callback) { PopWorker(job_id, "", std::move(callback)); }
  // How the job's workers start, as the job registered it with the GCS.
  void SetJobConfig(const JobID& job_id, const rpc::JobConfig& config);
  // The job's config cannot be had (the GCS does not know the job): its waiting pops
  // fail with `error`.
  void FailJob(const JobID& job_id, const absl::Status& error);
  // Returns a leased worker: it serves a waiting PopWorker of its job or goes idle.
  // Unknown or not-leased workers are ignored.
  void PushWorker(const WorkerID& worker_id);
  // The process id of a live worker, 0 if unknown.
  pid_t PidOf(const WorkerID& worker_id) const;
  // Kills a worker (SIGKILL) and forgets it; the gone-listeners hear of it.
  void DisconnectWorker(const WorkerID& worker_id, const std::string& reason);
  // Kills every worker of `job_id` except those kept past the job (KeepPastJobEnd),
  // and fails its waiting PopWorker calls.
  void KillJobWorkers(const JobID& job_id, const std::string& reason);
  // The worker (a detached actor's) outlives the end of its job: KillJobWorkers and
  // the driver check leave it alone. Unknown workers are ignored.
  void KeepPastJobEnd(const WorkerID& worker_id);
  // A child process exited (`status` as from waitpid). Unknown pids are ignored.
  void OnProcessExit(pid_t pid, int status);
  // A client of this node's object store connected, or its connection closed;
  // `name` is what it connected as (a driver: its worker id in hex). The close of a
  // registered driver's connection means the driver is gone: it is forgotten, the
  // gone-listeners hear of it, and its job's workers are killed (if it was the
  // job's last driver here). Other names are ignored.
  void OnStoreClientConnected(const std::string& name);
  void OnStoreClientClosed(const std::string& name);
  // Drivers registered for longer than worker_register_timeout_ms that never
  // connected to the object store are gone (as above). Runs every
  // driver_liveness_check_ms after Start().
  void CheckDrivers();
  // Kills every worker (SIGKILL) and stops the timers; pending pops are dropped.
  void Shutdown();

  // Introspection (`manta logs`, `manta list workers`).
  // A worker or driver of this node, live or gone.
  struct WorkerRecord {
    WorkerID worker_id;
    JobID job_id;
    pid_t pid = 0;
    WorkerOutputFiles output;  // none for drivers
    bool alive = false;
    bool is_driver = false;
    // STARTING, IDLE, LEASED, EXITING; RUNNING (drivers); DEAD.
    const char* state = "DEAD";
    rpc::Address address;
    int64_t start_unix_ms = 0;
    int64_t end_unix_ms = 0;
    std::string exit_detail;
  };
  // The last kMaxExitedWorkers that went away are remembered.
  static constexpr size_t kMaxExitedWorkers = 4096;
  // The workers' (not drivers') output files: the live workers', then those of the
  // remembered ones that went away.
  std::vector<WorkerRecord> WorkerLogs() const;
  // Every live worker and driver, then the remembered ones that went away.
  std::vector<WorkerRecord> WorkerRecords() const;

  size_t num_workers() const { return workers_.size(); }
  size_t num_idle() const { return num_idle_; }
  size_t num_starting() const { return num_starting_; }
  size_t num_drivers() const { return drivers_.size(); }

 private:
  enum class State { kStarting, kIdle, kLeased, kExiting };
  struct Worker {
    WorkerID worker_id;
    JobID job_id;
    std::string runtime_env;
    pid_t pid = 0;
    std::string startup_token;  // 32 random hex digits
    State state = State::kStarting;
    rpc::Address address;
    WorkerOutputFiles output;
    int64_t start_unix_ms = 0;
    bool keep_past_job_end = false;
    // The registration deadline, the idle deadline or the exit grace period.
    std::unique_ptr<Timer> timer;
  };
  struct Driver {
    JobID job_id;
    pid_t pid = 0;  // as the driver reported it, in its own pid namespace: for logs
    rpc::Address address;
    bool store_connected = false;
    int64_t registered_ms = 0;  // MonotonicMs()
    int64_t registered_unix_ms = 0;
  };
  // The workers and pops of one (job, runtime env).
  struct EnvPool {
    std::deque<PopCallback> pending_pops;
    // Idle registered workers, most recently used last (handed out first).
    std::vector<WorkerID> idle;
    // Workers started for it that have not registered yet.
    size_t starting = 0;
    bool unused() const { return pending_pops.empty() && idle.empty() && starting == 0; }
  };
  struct JobState {
    rpc::JobConfig config;
    bool config_known = false;      // set by SetJobConfig
    bool config_requested = false;  // fetch_job_config asked, no answer yet
    // By runtime env ("" = none).
    absl::flat_hash_map<std::string, EnvPool> envs;
  };

  void RegisterWorkerProcess(const rpc::RegisterWorkerRequest& request, rpc::RegisterWorkerReply* reply,
                             rpc::SendReply send_reply);
  // Forgets a driver, tells the gone-listeners, and kills its job's workers when it
  // was the job's last driver here.
  void DriverGone(const WorkerID& id, const std::string& why);
  void RegisterDriver(const rpc::RegisterWorkerRequest& request, rpc::RegisterWorkerReply* reply,
                      rpc::SendReply send_reply);
  void FillRegisterReply(rpc::RegisterWorkerReply* reply) const;
  // Starts workers for the pops that no starting worker covers, within the startup
  // concurrency; pops whose start failed get the error.
  void TryStartWorkers();
  // What a worker of `runtime_env` gets, or why none can be started (a runtime env
  // error naming the job and the field or directory).
  absl::StatusOr<WorkerRuntimeEnv> ApplicableRuntimeEnv(const JobID& job_id, const std::string& runtime_env) const;
  absl::Status StartWorker(const JobID& job_id, const std::string& runtime_env, const WorkerRuntimeEnv& applied,
                           const rpc::JobConfig& config, EnvPool& env_pool);
  // Fails the pops of `env_pool` no starting worker covers: the oldest one, or every
  // one when `error` is a runtime env error (none of them could start either).
  void FailUncoveredPops(EnvPool& env_pool, const absl::Status& error);
  absl::StatusOr<std::vector<std::string>> WorkerCommand(const rpc::JobConfig& config) const;
  std::map<std::string, std::string> WorkerEnv(const Worker& worker, const rpc::JobConfig& config,
                                               const std::map<std::string, std::string>& env_vars) const;
  EnvPool& PoolOf(const Worker& worker) { return jobs_[worker.job_id].envs[worker.runtime_env]; }
  // Posts `callback(error)` to the loop.
  void PostPopFailure(PopCallback callback, const absl::Status& error);
  // Leases `worker` to `callback` (posted to the loop).
  void HandOut(Worker& worker, PopCallback callback);
  // `worker` (registered, not leased) serves the job's oldest pop or goes idle.
  void ServeOrIdle(Worker& worker);
  void MakeIdle(Worker& worker);
  void OnIdleTimeout(const WorkerID& worker_id);
  void OnExitReply(const WorkerID& worker_id, const absl::Status& status, bool accepted);
  void OnRegisterTimeout(const WorkerID& worker_id);
  // Kills (SIGKILL) and forgets the worker, then notifies.
  void KillWorker(const WorkerID& worker_id, const std::string& reason);
  // Forgets the worker (every index), returns what to announce.
  WorkerGone Forget(const WorkerID& worker_id, const std::string& reason);
  // After a starting worker of (job, env) went away: the oldest pop it would have
  // served fails.
  void FailUncoveredPop(const JobID& job_id, const std::string& runtime_env, const absl::Status& error);
  void Notify(const WorkerGone& gone);
  int64_t StartupConcurrency() const;
  int64_t IdleSoftLimit() const;

  EventLoop& loop_;
  WorkerPoolOptions options_;
  const Config& config_;
  WorkerLauncherInterface& launcher_;
  JobConfigFetcher fetch_job_config_;
  std::vector<GoneListener> gone_listeners_;
  absl::flat_hash_map<WorkerID, std::unique_ptr<Worker>> workers_;
  // Remembers a worker or driver that went away (the last kMaxExitedWorkers).
  void RememberGone(WorkerRecord record, std::string why);
  static WorkerRecord RecordOf(const Worker& worker);
  std::deque<WorkerRecord> gone_;
  absl::flat_hash_map<std::string, WorkerID> by_token_;
  absl::flat_hash_map<pid_t, WorkerID> by_pid_;
  absl::flat_hash_map<WorkerID, Driver> drivers_;
  absl::flat_hash_map<JobID, JobState> jobs_;
  size_t num_idle_ = 0;
  size_t num_starting_ = 0;
  bool shut_down_ = false;
  std::unique_ptr<Timer> driver_check_timer_;
  // Cleared on destruction, so that posted pop results do nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::raylet
