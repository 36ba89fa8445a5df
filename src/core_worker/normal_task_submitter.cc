#include "src/core_worker/normal_task_submitter.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "src/core_worker/common.h"

namespace manta::core {
namespace {
constexpr int64_t kLeaseRetryDelayMs = 100;
constexpr double kPipelineTargetUs = 10000;

int64_t MonotonicUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
constexpr int64_t kMaxConsecutiveLeaseFailures = 10;
}  // namespace

NormalTaskSubmitter::NormalTaskSubmitter(EventLoop& loop, SubmitterOptions options, RayletClientPool& raylets,
                                         CoreWorkerClientPool& workers, TaskManager& task_manager)
    : loop_(loop), options_(std::move(options)), raylets_(raylets), workers_(workers),
      task_manager_(task_manager) {}

NormalTaskSubmitter::~NormalTaskSubmitter() { *alive_ = false; }

std::string NormalTaskSubmitter::SchedulingKey(const google::protobuf::Map<std::string, double>& resources) {
  if (resources.empty()) return "CPU:1";
  std::map<std::string, double> sorted(resources.begin(), resources.end());
  std::string key;
  for (const auto& [name, quantity] : sorted) {
    if (!key.empty()) key += ",";
    char buf[32];
    snprintf(buf, sizeof(buf), "%g", quantity);
    key += name + ":" + buf;
  }
  return key;
}

size_t NormalTaskSubmitter::NumQueued() const {
  size_t n = 0;
  for (const auto& [key, state] : keys_) n += state.queue.size();
  return n;
}

void NormalTaskSubmitter::Submit(rpc::TaskSpec spec) {
  if (shutting_down_) {
    task_manager_.RetryOrFailTask(TaskID::FromBinary(spec.task_id()), rpc::TASK_CANCELLED,
                                  "the submitting process is shutting down");
    return;
  }
  // Per function too, as in Ray: task durations (and so pipelining) are per function.
  std::string key = SchedulingKey(spec.required_resources()) + "|" + spec.function_name();
  KeyState& state = keys_[key];
  if (state.resources.empty()) {
    state.resources = spec.required_resources();
    if (state.resources.empty()) state.resources["CPU"] = 1;
  }
  state.queue.push_back(std::move(spec));
  // Push at the end of this loop turn, so tasks submitted together travel together.
  dirty_keys_.insert(key);
  if (!flush_posted_) {
    flush_posted_ = true;
    std::weak_ptr<bool> alive = alive_;
    loop_.Post("Submitter.Flush", [this, alive] {
      if (alive.expired()) return;
      flush_posted_ = false;
      absl::flat_hash_set<std::string> keys;
      keys.swap(dirty_keys_);
      for (const std::string& k : keys) Pump(k);
    });
  }
}

void NormalTaskSubmitter::Pump(const std::string& key) {
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  KeyState& state = it->second;
  // Fill the least-loaded leases first so pipelined work spreads over workers.
  while (!state.queue.empty()) {
    Lease* best = nullptr;
    for (const std::string& lease_id : state.leases) {
      Lease& lease = leases_.at(lease_id);
      if (lease.in_flight >= PipelineDepth(state)) continue;
      if (!best || lease.in_flight < best->in_flight) best = &lease;
    }
    if (!best) break;
    PushBatch(*best, state);
  }
  // One lease request per queued task beyond what the leases in flight can absorb,
  // capped: most tasks are short and a lease is reused for many of them.
  int64_t wanted = std::min<int64_t>(static_cast<int64_t>(state.queue.size()),
                                     options_.max_pending_lease_requests_per_key);
  while (state.pending_lease_requests < wanted) {
    ++state.pending_lease_requests;
    RequestLease(key, options_.local_raylet_address, false);
  }
}

void NormalTaskSubmitter::RequestLease(const std::string& key, const std::string& raylet_address,
                                       bool grant_or_reject) {
  KeyState& state = keys_.at(key);
  rpc::RequestWorkerLeaseRequest request;
  request.set_lease_request_id(LeaseID::FromRandom().Binary());
  request.set_job_id(options_.job_id.Binary());
  *request.mutable_owner_address() = options_.self;
  *request.mutable_required_resources() = state.resources;
  request.set_grant_or_reject(grant_or_reject);
  request.set_backlog_size(static_cast<int64_t>(state.queue.size()));
  *request.mutable_job_config() = options_.job_config;
  if (!state.queue.empty()) request.set_function_name(state.queue.front().function_name());
  std::weak_ptr<bool> alive = alive_;
  raylets_.Get(raylet_address)
      ->RequestWorkerLease(request, [this, alive, key, raylet_address, grant_or_reject](
                                        const absl::Status& status, rpc::RequestWorkerLeaseReply&& reply) {
        if (alive.expired()) return;
        OnLeaseReply(key, raylet_address, grant_or_reject, status, std::move(reply));
      });
}

void NormalTaskSubmitter::OnLeaseReply(const std::string& key, const std::string& raylet_address,
                                       bool grant_or_reject, const absl::Status& status,
                                       rpc::RequestWorkerLeaseReply&& reply) {
  KeyState& state = keys_[key];
  bool granted = status.ok() && !reply.worker_address().ip_address().empty() && !reply.lease_id().empty();
  if (granted) {
    --state.pending_lease_requests;
    state.consecutive_lease_failures = 0;
    Lease lease;
    lease.lease_id = reply.lease_id();
    lease.worker = reply.worker_address();
    lease.raylet_address = raylet_address;
    lease.key = key;
    VLOG(1) << "lease " << LeaseID::FromBinary(lease.lease_id).Hex() << " granted: worker "
            << HostPort(lease.worker) << " for " << key;
    std::string lease_id = lease.lease_id;
    leases_.emplace(lease_id, std::move(lease));
    state.leases.push_back(lease_id);
    if (shutting_down_) {
      ReturnLease(lease_id, false, "owner shutting down");
      return;
    }
    Pump(key);
    auto it = leases_.find(lease_id);
    if (it != leases_.end()) MaybeStartIdleTimer(it->second);
    return;
  }
  if (status.ok() && !reply.retry_at_raylet_address().ip_address().empty() && !grant_or_reject) {
    std::string target = HostPort(reply.retry_at_raylet_address());
    VLOG(1) << "lease for " << key << " spilled back to " << target;
    RequestLease(key, target, true);
    return;
  }
  --state.pending_lease_requests;
  if (shutting_down_ || (status.ok() && reply.canceled())) return;
  if (!status.ok() || reply.rejected()) {
    std::string why = status.ok() ? reply.failure_message() : std::string(status.message());
    bool local = raylet_address == options_.local_raylet_address;
    if (local) ++state.consecutive_lease_failures;
    LOG(WARNING) << "lease request for " << key << " at " << raylet_address << " failed: " << why;
    if (state.consecutive_lease_failures >= kMaxConsecutiveLeaseFailures) {
      FailQueuedTasks(state, rpc::NODE_DIED, "no worker lease could be obtained from the local raylet " +
                                                 options_.local_raylet_address + ": " + why);
      state.consecutive_lease_failures = 0;
      return;
    }
    std::weak_ptr<bool> alive = alive_;
    loop_.PostAfter("RetryLease", kLeaseRetryDelayMs, [this, alive, key] {
      if (!alive.expired()) Pump(key);
    });
  }
}

void NormalTaskSubmitter::PushBatch(Lease& lease, KeyState& state) {
  int64_t room = PipelineDepth(state) - lease.in_flight;
  int64_t n = std::min<int64_t>({room, options_.max_tasks_per_push, static_cast<int64_t>(state.queue.size())});
  if (n <= 0) return;
  if (lease.idle_timer) lease.idle_timer.reset();
  rpc::PushTaskRequest request;
  request.set_intended_worker_id(lease.worker.worker_id());
  std::vector<rpc::TaskSpec> tasks;
  tasks.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    *request.add_tasks() = state.queue.front();
    tasks.push_back(std::move(state.queue.front()));
    state.queue.pop_front();
  }
  lease.in_flight += n;
  int64_t pushed_us = MonotonicUs();
  std::weak_ptr<bool> alive = alive_;
  std::string lease_id = lease.lease_id;
  TaskManager* task_manager = &task_manager_;
  EventLoop* loop = &loop_;
  workers_.Get(HostPort(lease.worker))
      ->PushTask(request, [this, alive, loop, task_manager, lease_id, pushed_us, tasks = std::move(tasks)](
                              const absl::Status& status, rpc::PushTaskReply&& reply) mutable {
        // On a gRPC thread: results go to their waiters right away (the task manager
        // is thread-safe); the lease bookkeeping runs on the loop.
        if (alive.expired()) return;
        if (status.ok()) {
          for (const rpc::TaskResult& result : reply.results()) task_manager->CompletePendingTask(result);
        }
        loop->Post("Submitter.PushReply", [this, alive, lease_id, tasks = std::move(tasks), status,
                                           pushed_us]() mutable {
          if (alive.expired()) return;
          if (status.ok()) RecordBatchTime(lease_id, tasks.size(), MonotonicUs() - pushed_us);
          OnPushReply(lease_id, std::move(tasks), status);
        });
      });
}

int64_t NormalTaskSubmitter::PipelineDepth(const KeyState& state) const {
  // Queue about kPipelineTargetUs of work per worker: many tiny tasks travel and
  // run back to back, while long tasks go one per worker so that more workers (and
  // leases) share them. Unknown durations start at one task per worker.
  if (state.avg_task_us <= 0) return 1;
  int64_t depth = static_cast<int64_t>(kPipelineTargetUs / state.avg_task_us);
  return std::clamp<int64_t>(depth, 1, options_.max_tasks_in_flight_per_worker);
}

void NormalTaskSubmitter::RecordBatchTime(const std::string& lease_id, size_t num_tasks, int64_t elapsed_us) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || num_tasks == 0) return;
  auto key_it = keys_.find(it->second.key);
  if (key_it == keys_.end()) return;
  // Round trip per task: an overestimate while batches queue behind each other,
  // which errs towards spreading work.
  double per_task = std::max(1.0, static_cast<double>(elapsed_us) / static_cast<double>(num_tasks));
  double& avg = key_it->second.avg_task_us;
  avg = avg <= 0 ? per_task : 0.7 * avg + 0.3 * per_task;
}

void NormalTaskSubmitter::OnPushReply(const std::string& lease_id, std::vector<rpc::TaskSpec> tasks,
                                      const absl::Status& status) {
  auto it = leases_.find(lease_id);
  std::string key = it != leases_.end() ? it->second.key : "";
  if (status.ok()) {
    if (it != leases_.end()) it->second.in_flight -= static_cast<int64_t>(tasks.size());
    // Every result came (in early reports or in the reply) before the reply did; a
    // task still pending was answered without a result, and is retried.
    for (const rpc::TaskSpec& spec : tasks) {
      TaskID task_id = TaskID::FromBinary(spec.task_id());
      if (!task_manager_.IsPending(task_id)) continue;
      task_manager_.RetryOrFailTask(task_id, rpc::WORKER_DIED, "the worker replied without the task's result");
    }
  } else {
    std::string where = it != leases_.end() ? HostPort(it->second.worker) : "a leased worker";
    LOG(WARNING) << "pushing " << tasks.size() << " task(s) to " << where << " failed: " << status;
    if (it != leases_.end()) {
      workers_.Disconnect(HostPort(it->second.worker));
      ReturnLease(lease_id, true, "push failed: " + std::string(status.message()));
    }
    for (const rpc::TaskSpec& spec : tasks) {
      task_manager_.RetryOrFailTask(TaskID::FromBinary(spec.task_id()), rpc::WORKER_DIED,
                                    "the worker running the task died (" + std::string(status.message()) + ")");
    }
  }
  if (key.empty()) return;
  Pump(key);
  it = leases_.find(lease_id);
  if (it != leases_.end()) MaybeStartIdleTimer(it->second);
}

void NormalTaskSubmitter::MaybeStartIdleTimer(Lease& lease) {
  if (lease.in_flight > 0 || lease.idle_timer) return;
  auto key_it = keys_.find(lease.key);
  if (key_it != keys_.end() && !key_it->second.queue.empty()) return;
  std::string lease_id = lease.lease_id;
  lease.idle_timer = loop_.RunAfter("ReturnIdleLease", options_.lease_idle_ms, [this, lease_id] {
    auto it = leases_.find(lease_id);
    if (it == leases_.end() || it->second.in_flight > 0) return;
    ReturnLease(lease_id, false, "idle");
  });
}

void NormalTaskSubmitter::ReturnLease(const std::string& lease_id, bool disconnect, const std::string& reason) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  Lease lease = std::move(it->second);
  leases_.erase(it);
  auto key_it = keys_.find(lease.key);
  if (key_it != keys_.end()) {
    auto& ids = key_it->second.leases;
    ids.erase(std::remove(ids.begin(), ids.end(), lease_id), ids.end());
    if (ids.empty() && key_it->second.queue.empty() && key_it->second.pending_lease_requests == 0) {
      keys_.erase(key_it);
    }
  }
  rpc::ReturnWorkerRequest request;
  request.set_lease_id(lease_id);
  request.set_worker_id(lease.worker.worker_id());
  request.set_disconnect_worker(disconnect);
  request.set_reason(reason);
  raylets_.Get(lease.raylet_address)->ReturnWorker(request, [lease_id](const absl::Status& s, rpc::ReturnWorkerReply&&) {
    if (!s.ok()) VLOG(1) << "returning lease " << LeaseID::FromBinary(lease_id).Hex() << ": " << s;
  });
}

void NormalTaskSubmitter::FailQueuedTasks(KeyState& state, rpc::ErrorType type, const std::string& message) {
  std::deque<rpc::TaskSpec> queue = std::move(state.queue);
  state.queue.clear();
  for (const rpc::TaskSpec& spec : queue) {
    rpc::ErrorInfo error;
    error.set_type(type);
    error.set_message(message);
    task_manager_.FailTask(TaskID::FromBinary(spec.task_id()), error);
  }
}

void NormalTaskSubmitter::Shutdown() {
  shutting_down_ = true;
  std::vector<std::string> ids;
  for (const auto& [id, lease] : leases_) ids.push_back(id);
  for (const auto& id : ids) ReturnLease(id, false, "owner shutting down");
}

}  // namespace manta::core
