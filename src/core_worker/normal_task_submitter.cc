#include "src/core_worker/normal_task_submitter.h"

#include <optional>

#include <glog/logging.h>

#include <algorithm>
#include <map>

#include "src/common/util.h"
#include "src/core_worker/common.h"
#include "src/common/task_resources.h"

namespace manta::core {
namespace {
// Added to each reported run time: the per-task cost of the channel and the
// executor, so that empty tasks do not count as free.
constexpr double kTaskOverheadUs = 5;
constexpr char kEnvKeyPart[] = "|env:";
constexpr char kPlacementKeyPart[] = "|pg:";

// The hex id of a placement group named by a spec.
std::string GroupHex(const rpc::PlacementGroupSchedulingOptions& placement) {
  auto group = PlacementGroupID::FromBinaryChecked(placement.placement_group_id());
  return group.ok() ? group->Hex() : "(malformed id)";
}

// Why the tasks of a key in a removed placement group fail.
std::string PlacementGroupRemovedMessage(const rpc::PlacementGroupSchedulingOptions& placement,
                                         const rpc::RequestWorkerLeaseReply& reply) {
  std::string message = "the task's placement group " + GroupHex(placement) + " was removed (or never created)";
  if (!reply.failure_message().empty()) message += ": " + reply.failure_message();
  return message;
}

// The part of a scheduling key naming the task's placement group bundle ("|pg:<hex>:<index>"),
// empty for a task in no group.
std::string PlacementKeyPart(const rpc::PlacementGroupSchedulingOptions& placement) {
  if (placement.placement_group_id().empty()) return "";
  return kPlacementKeyPart + GroupHex(placement) + ":" + std::to_string(placement.bundle_index());
}

// A scheduling key for logs: without its runtime env, whose env_vars may hold secrets.
std::string LogKey(const std::string& key) {
  size_t env = key.find(kEnvKeyPart);
  return env == std::string::npos ? key : key.substr(0, env) + "|<runtime_env>";
}
}  // namespace

NormalTaskSubmitter::NormalTaskSubmitter(EventLoop& loop, SubmitterOptions options, RayletClientPool& raylets,
                                         TaskChannelPool& channels, TaskManager& task_manager)
    : loop_(loop), options_(std::move(options)), caller_field_(CallerAddressField(options_.self)),
      raylets_(raylets), channels_(channels),
      task_manager_(task_manager) {}

NormalTaskSubmitter::~NormalTaskSubmitter() { sweep_timer_.reset(); }

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

size_t NormalTaskSubmitter::NumLeases() const {
  absl::MutexLock lock(&mu_);
  return leases_.size();
}

size_t NormalTaskSubmitter::NumQueued() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, state] : keys_) n += state.queue.size();
  return n;
}

void NormalTaskSubmitter::Run(Deferred& later) {
  for (auto& fn : later) fn();
  later.clear();
}

void NormalTaskSubmitter::Submit(const rpc::TaskSpec& spec, PackedTaskPtr packed, int64_t now_us) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      TaskID task_id = packed->task_id();
      rpc::ErrorInfo error;
      error.set_type(rpc::TASK_CANCELLED);
      error.set_message("the submitting process is shutting down");
      later.push_back([this, task_id, error] { task_manager_.FailTask(task_id, error); });
    } else {
      // Per function too, as in Ray: task durations (and so pipelining) are per function.
      google::protobuf::Map<std::string, double> resources = ResourceMapOf(spec);
      // Per runtime env and per placement group bundle, in the shape itself: a lease (a
      // worker started for one env, holding one bundle's resources) never serves tasks
      // of another env or bundle, not even by AdoptIdleLease.
      std::string env_suffix = spec.runtime_env().empty() ? std::string() : kEnvKeyPart + spec.runtime_env();
      std::string placement = PlacementKeyPart(spec.placement());
      std::string key = SchedulingKey(resources) + placement + "|" + spec.function_name() + env_suffix;
      KeyState& state = keys_[key];
      if (state.resources.empty()) {
        state.resources = std::move(resources);
        if (state.resources.empty()) state.resources["CPU"] = 1;
        state.shape = SchedulingKey(state.resources) + placement + env_suffix;
        state.runtime_env = spec.runtime_env();
        state.placement = spec.placement();
      }
      state.queue.push_back(std::move(packed));
      // Only an idle worker gets the task now. A busy one gets the tasks queued
      // meanwhile in one push when its next reply comes: one frame and one wake-up
      // for many tasks, and the batch grows with the submission rate.
      Pump(key, &later, /*idle_only=*/true, now_us);
    }
  }
  Run(later);
}

void NormalTaskSubmitter::Pump(const std::string& key, Deferred* later, bool idle_only, int64_t now_us) {
  auto it = keys_.find(key);
  if (it == keys_.end()) return;
  KeyState& state = it->second;
  // Fill the least-loaded leases first so pipelined work spreads over workers.
  const int64_t depth = PipelineDepth(state);
  while (!state.queue.empty()) {
    Lease* best = nullptr;
    for (const std::string& lease_id : state.leases) {
      Lease& lease = leases_.at(lease_id);
      // A busy lease is refilled once half its pipeline has drained, so pushes stay
      // large: refilling per reply would split them smaller with every partial reply.
      if (lease.in_flight > depth / 2 || (idle_only && lease.in_flight > 0) || lease.stealing) continue;
      if (!best || lease.in_flight < best->in_flight) best = &lease;
    }
    if (!best) {
      if (AdoptIdleLease(key, state)) continue;
      break;
    }
    SendBatch(*best, state, later, now_us);
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
  if (!state.queue.empty()) {
    request.set_function_name(state.queue.front()->function_name());
    request.set_retriable(state.queue.front()->max_retries() != 0);
  }
  if (!state.runtime_env.empty()) request.set_runtime_env(state.runtime_env);
  if (!state.placement.placement_group_id().empty()) *request.mutable_placement() = state.placement;
  std::weak_ptr<bool> alive = alive_;
  raylets_.Get(raylet_address)
      ->RequestWorkerLease(request, [this, alive, key, raylet_address, grant_or_reject](
                                        const absl::Status& status, rpc::RequestWorkerLeaseReply&& reply) {
        if (alive.expired()) return;
        OnLeaseReply(key, raylet_address, grant_or_reject, status, std::move(reply));
      });
}

std::string NormalTaskSubmitter::AddLease(const std::string& key, const std::string& raylet_address,
                                          const rpc::RequestWorkerLeaseReply& reply) {
  Lease lease;
  lease.lease_id = reply.lease_id();
  lease.worker = reply.worker_address();
  lease.executor = ExecutorOf(lease.worker);
  lease.raylet_address = raylet_address;
  lease.key = key;
  lease.idle_since_ms = MonotonicMs();
  lease.channel = ChannelTo(channels_, lease.worker);
  VLOG(1) << "lease " << LeaseID::FromBinary(lease.lease_id).Hex() << " granted: worker " << HostPort(lease.worker)
          << " for " << LogKey(key);
  std::string lease_id = lease.lease_id;
  leases_.emplace(lease_id, std::move(lease));
  return lease_id;
}

void NormalTaskSubmitter::OnLeaseReply(const std::string& key, const std::string& raylet_address,
                                       bool grant_or_reject, const absl::Status& status,
                                       rpc::RequestWorkerLeaseReply&& reply) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    KeyState& state = keys_[key];
    bool granted = status.ok() && !reply.worker_address().ip_address().empty() && !reply.lease_id().empty();
    if (granted) {
      --state.pending_lease_requests;
      state.consecutive_lease_failures = 0;
      const std::string lease_id = AddLease(key, raylet_address, reply);
      state.leases.push_back(lease_id);
      if (shutting_down_) {
        ReturnLease(lease_id, false, "owner shutting down");
      } else {
        Pump(key, &later);
        EnsureSweeping();
      }
    } else if (status.ok() && !reply.retry_at_raylet_address().ip_address().empty() && !grant_or_reject) {
      std::string target = HostPort(reply.retry_at_raylet_address());
      VLOG(1) << "lease for " << LogKey(key) << " spilled back to " << target;
      RequestLease(key, target, true);
    } else {
      --state.pending_lease_requests;
      if (!shutting_down_) OnLeaseRefused(key, state, raylet_address, status, reply, &later);
    }
  }
  Run(later);
}

void NormalTaskSubmitter::OnLeaseRefused(const std::string& key, KeyState& state, const std::string& raylet_address,
                                         const absl::Status& status, const rpc::RequestWorkerLeaseReply& reply,
                                         Deferred* later) {
  if (status.ok() && reply.rejected() && reply.runtime_env_setup_failed()) {
    // Final: no worker can be started for this env, so asking again cannot help.
    LOG(WARNING) << "lease request for " << LogKey(key) << " at " << raylet_address
                 << " failed for good: " << reply.failure_message();
    FailQueuedTasks(state, rpc::RUNTIME_ENV_SETUP_FAILED,
                    "the task's runtime_env cannot be applied: " + reply.failure_message(), later);
    state.consecutive_lease_failures = 0;
  } else if (status.ok() && reply.rejected() && reply.placement_group_removed()) {
    // Final too: the group's bundles are gone, and will not come back.
    LOG(WARNING) << "lease request for " << LogKey(key) << " at " << raylet_address
                 << " rejected: its placement group was removed: " << reply.failure_message();
    FailQueuedTasks(state, rpc::PLACEMENT_GROUP_REMOVED, PlacementGroupRemovedMessage(state.placement, reply),
                    later);
    state.consecutive_lease_failures = 0;
  } else if (status.ok() && reply.rejected() && reply.place_again()) {
    // It waited where it was spilled back to, and another node has room now: ask
    // the local raylet again at once (no failure; the raylet chooses again).
    VLOG(1) << "lease for " << LogKey(key) << " placed again: " << reply.failure_message();
    Pump(key, later);
  } else if (!(status.ok() && reply.canceled()) && (!status.ok() || reply.rejected())) {
    std::string why = status.ok() ? reply.failure_message() : std::string(status.message());
    bool local = raylet_address == options_.local_raylet_address;
    if (local) ++state.consecutive_lease_failures;
    LOG(WARNING) << "lease request for " << LogKey(key) << " at " << raylet_address << " failed: " << why;
    if (state.consecutive_lease_failures >= options_.max_consecutive_lease_failures) {
      FailQueuedTasks(state, rpc::NODE_DIED,
                      "no worker lease could be obtained from the local raylet " +
                          options_.local_raylet_address + ": " + why,
                      later);
      state.consecutive_lease_failures = 0;
    } else {
      std::weak_ptr<bool> alive = alive_;
      loop_.PostAfter("RetryLease", options_.lease_retry_delay_ms, [this, alive, key] {
        if (alive.expired()) return;
        Deferred retry_later;
        {
          absl::MutexLock lock(&mu_);
          Pump(key, &retry_later);
        }
        Run(retry_later);
      });
    }
  }
}

void NormalTaskSubmitter::SendBatch(Lease& lease, KeyState& state, Deferred* later, int64_t now_us) {
  int64_t room = PipelineDepth(state) - lease.in_flight;
  int64_t n = std::min<int64_t>({room, options_.max_tasks_per_push, static_cast<int64_t>(state.queue.size())});
  if (n <= 0) return;
  PushBatch batch(lease.worker.worker_id(), n, options_.max_push_bytes);
  TaskEventBuffer* events = task_manager_.task_events();
  SentStamps stamps(events, now_us);
  while (!state.queue.empty()) {
    const PackedTask& task = *state.queue.front();
    PushBatch::Added added = batch.TryAddPacked(task, caller_field_);
    if (added == PushBatch::Added::kFull) break;
    if (added == PushBatch::Added::kAdded) stamps.Add(state.queue.front());
    if (added == PushBatch::Added::kTooBig) {
      // Can never be sent: fail it rather than take a worker down with it.
      rpc::ErrorInfo error = TooBigForAPush(static_cast<int64_t>(task.bytes().size()), "task " + task.function_name(),
                                            options_.max_push_bytes);
      TaskID task_id = task.task_id();
      later->push_back([this, task_id, error] { task_manager_.FailTask(task_id, error); });
    }
    state.queue.pop_front();
  }
  if (batch.empty()) return;
  stamps.Finish(later);
  auto push = std::make_shared<PushState>(PushState{lease.lease_id, batch.progress(), {}, lease.killed_by_cancel});
  if (events != nullptr) push->executor = lease.executor;
  if (lease.in_flight == 0) lease.busy_since_ms = MonotonicMs();
  lease.in_flight += batch.size();
  std::erase_if(lease.pushes, [](const std::shared_ptr<PushProgress>& p) { return p->unanswered() == 0; });
  lease.pushes.push_back(push->progress);
  std::weak_ptr<bool> alive = alive_;
  // Queued in order under the lock, written once it is let go.
  later->push_back([channel = lease.channel] { channel->Flush(); });
  lease.channel->QueuePush(batch.TakeRequest(), [this, alive, push](const absl::Status& status,
                                                                    rpc::PushTaskReply&& reply) {
    // On the thread that read the reply: results go to their waiters right away.
    if (alive.expired()) return;
    if (status.ok()) {
      push->executor.pid = reply.worker_pid();
      if (reply.stream_items_size() > 0) task_manager_.HandleStreamItems(reply.stream_items());
      task_manager_.CompletePendingTasks(reply.results(), &push->executor);
    }
    OnPushProgress(push, status, reply);
  });
}

int64_t NormalTaskSubmitter::PipelineDepth(const KeyState& state) const {
  // Queue about pipeline_target_us of work per worker: many tiny tasks travel and
  // run back to back, while long tasks go one per worker so that more workers (and
  // leases) share them. Unknown durations start at one task per worker.
  if (state.avg_task_us <= 0) return 1;
  int64_t depth = static_cast<int64_t>(static_cast<double>(options_.pipeline_target_us) / state.avg_task_us);
  return std::clamp<int64_t>(depth, 1, options_.max_tasks_in_flight_per_worker);
}

void NormalTaskSubmitter::OnPushProgress(const std::shared_ptr<PushState>& push, const absl::Status& status,
                                         const rpc::PushTaskReply& reply) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(push->lease_id);
    Lease* lease = it != leases_.end() ? &it->second : nullptr;
    const std::string key = lease ? lease->key : "";
    KeyState* state = nullptr;
    if (lease) {
      auto key_it = keys_.find(key);
      if (key_it != keys_.end()) state = &key_it->second;
    }
    if (status.ok()) {
      std::vector<PushProgress::Task> without_result;
      const int64_t n = push->progress->OnReply(reply, &without_result);
      if (lease && (n > 0 || !without_result.empty())) {  // (a streaming task's items are no answer)
        lease->in_flight -= n + static_cast<int64_t>(without_result.size());
        lease->busy_since_ms = MonotonicMs();
        lease->stealing = false;
      }
      if (state) {
        for (const rpc::TaskResult& result : reply.results()) {
          if (result.stolen()) continue;  // did not run
          double run_us = static_cast<double>(std::max<int64_t>(result.run_us(), 0)) + kTaskOverheadUs;
          double& avg = state->avg_task_us;
          avg = avg <= 0 ? run_us : 0.8 * avg + 0.2 * run_us;
        }
      }
      // Every result comes before the last reply; a task still pending was answered
      // without a result, and is retried.
      for (const PushProgress::Task& task : without_result) {
        later.push_back([this, task] {
          task_manager_.RetryOrFailTask(task.task_id, task.attempt, rpc::WORKER_DIED,
                                        "the worker replied without the task's result");
        });
      }
    } else {
      OnPushFailed(*push, lease, key, status, &later);
    }
    if (!key.empty()) Pump(key, &later);
    it = leases_.find(push->lease_id);
    if (it != leases_.end()) {
      MarkIdleIfSo(it->second);
      HandOverIdleLease(it->second, &later);
    }
  }
  Run(later);
}

void NormalTaskSubmitter::OnPushFailed(const PushState& push, Lease* lease, const std::string& key,
                                       const absl::Status& status, Deferred* later) {
  std::vector<PushProgress::Task> lost = push.progress->TakeUnanswered();
  std::string where = lease ? HostPort(lease->worker) : "a leased worker";
  // A worker ended by a forced cancel (ray::Cancel) was expected to go.
  const bool charge = !push.killed_by_cancel || !*push.killed_by_cancel;
  // At shutdown the channels close under the pushes (their tasks were moved elsewhere, or nobody waits).
  LOG_IF(WARNING, charge && !absl::IsCancelled(status))
      << "pushing " << lost.size() << " task(s) to " << where << " failed: " << status;
  VLOG_IF(1, absl::IsCancelled(status)) << lost.size() << " task(s) pushed to " << where << " unanswered: " << status;
  LOG_IF(INFO, !charge) << "the worker at " << where << " left after a forced cancel; " << lost.size()
                        << " task(s) without a result";
  // FailedPrecondition: this owner refuses the workers' protection (task_channel.h);
  // no worker will do, now or later, and this one is not to blame.
  const bool refused = absl::IsFailedPrecondition(status);
  std::string message = "the worker running the task died (" + std::string(status.message()) + ")";
  // Why the worker died, if its raylet killed it (the memory monitor): the tasks
  // fail or are retried for that. Waited for briefly: a dead raylet may not answer.
  // Then the other tasks lost with it retry for free.
  auto retry_all = [this, alive = std::weak_ptr<bool>(alive_), lost, message,
                    charge](const rpc::ErrorInfo* failure) {
    if (alive.expired()) return;
    for (const PushProgress::Task& task : lost) {
      if (failure != nullptr) {
        task_manager_.RetryOrFailTask(task.task_id, task.attempt, failure->type(), failure->message(), charge);
      } else {
        task_manager_.RetryOrFailTask(task.task_id, task.attempt, rpc::WORKER_DIED, message, charge);
      }
    }
  };
  if (lease) {
    // The connection is no good any more (also when the worker refused the push:
    // it is not the worker the lease was for).
    lease->channel->Close(status);
    channels_.Disconnect(TaskChannelKey(lease->worker));
    if (!refused && !lost.empty()) return ReturnLeaseThenRetry(push.lease_id, status, std::move(retry_all));
    ReturnLease(push.lease_id, !refused, "push failed: " + std::string(status.message()));
  }
  if (refused) {
    rpc::ErrorInfo error;
    error.set_type(rpc::TASK_CHANNEL_REFUSED);
    error.set_message("cannot run the task: " + std::string(status.message()));
    for (const PushProgress::Task& task : lost) {
      later->push_back([this, task_id = task.task_id, error] { task_manager_.FailTask(task_id, error); });
    }
    // Looked up now: returning the lease may have dropped the key's state.
    if (auto key_it = keys_.find(key); key_it != keys_.end()) {
      FailQueuedTasks(key_it->second, error.type(), error.message(), later);
    }
    return;
  }
  later->push_back([retry_all] { retry_all(nullptr); });
}

void NormalTaskSubmitter::ReturnLeaseThenRetry(const std::string& lease_id, const absl::Status& status,
                                               std::function<void(const rpc::ErrorInfo*)> retry) {
  auto once = std::make_shared<std::function<void(const rpc::ErrorInfo*)>>(std::move(retry));
  auto run_once = [once](const rpc::ErrorInfo* failure) {
    if (!*once) return;
    auto f = std::move(*once);
    *once = nullptr;
    f(failure);
  };
  loop_.PostAfter("NormalTaskSubmitter.FailureCauseTimeout", kFailureCauseWaitMs, [run_once] { run_once(nullptr); });
  // Posted: the reply may come inline, under mu_, which retrying takes.
  ReturnLease(lease_id, true, "push failed: " + std::string(status.message()),
              [loop = &loop_, run_once](const rpc::ErrorInfo* failure) {
                std::optional<rpc::ErrorInfo> cause;
                if (failure != nullptr) cause = *failure;
                loop->Post("NormalTaskSubmitter.FailureCause",
                           [run_once, cause] { run_once(cause ? &*cause : nullptr); });
              });
}

void NormalTaskSubmitter::MarkIdleIfSo(Lease& lease) {
  if (lease.in_flight > 0) return;
  lease.idle_since_ms = MonotonicMs();
}

bool NormalTaskSubmitter::AdoptIdleLease(const std::string& key, KeyState& state) {
  if (keys_.size() < 2) return false;
  for (auto& [id, lease] : leases_) {
    if (lease.in_flight > 0 || lease.key == key) continue;
    auto other = keys_.find(lease.key);
    if (other == keys_.end() || other->second.shape != state.shape || !other->second.queue.empty()) continue;
    MoveLease(lease, key);
    return true;
  }
  return false;
}

void NormalTaskSubmitter::HandOverIdleLease(Lease& lease, Deferred* later) {
  if (lease.in_flight > 0 || keys_.size() < 2) return;
  auto own = keys_.find(lease.key);
  if (own == keys_.end() || !own->second.queue.empty()) return;
  const std::string shape = own->second.shape;
  for (auto& [key, state] : keys_) {
    if (key == lease.key || state.shape != shape || state.queue.empty()) continue;
    const std::string to = key;  // MoveLease may erase entries: copy first
    MoveLease(lease, to);
    Pump(to, later);
    return;
  }
}

void NormalTaskSubmitter::MoveLease(Lease& lease, const std::string& to_key) {
  auto from = keys_.find(lease.key);
  if (from != keys_.end()) {
    auto& ids = from->second.leases;
    ids.erase(std::remove(ids.begin(), ids.end(), lease.lease_id), ids.end());
  }
  VLOG(1) << "lease " << LeaseID::FromBinary(lease.lease_id).Hex() << " passes from " << LogKey(lease.key) << " to "
          << LogKey(to_key);
  lease.key = to_key;
  keys_.at(to_key).leases.push_back(lease.lease_id);
}

void NormalTaskSubmitter::EnsureSweeping() {
  if (sweeping_) return;
  sweeping_ = true;
  int64_t every = options_.lease_idle_ms;
  if (options_.steal_after_ms > 0) every = std::min(every, options_.steal_after_ms);  // silent workers too
  int64_t period = std::max<int64_t>(1, every / 2);
  sweep_timer_ = loop_.RunEvery("Submitter.SweepIdleLeases", period, [this] { SweepIdleLeases(); });
}

void NormalTaskSubmitter::SweepIdleLeases() {
  std::vector<std::pair<rpc::Address, PushProgress::Task>> stuck;
  {
    absl::MutexLock lock(&mu_);
    SweepIdleLeasesLocked();
    stuck = StuckTasksLocked(MonotonicMs());
  }
  for (const auto& [worker, task] : stuck) Steal(worker, task);
}

std::vector<std::pair<rpc::Address, PushProgress::Task>> NormalTaskSubmitter::StuckTasksLocked(int64_t now_ms) {
  std::vector<std::pair<rpc::Address, PushProgress::Task>> stuck;
  if (!stealer_ || options_.steal_after_ms <= 0) return stuck;
  for (auto& [id, lease] : leases_) {
    if (lease.stealing || lease.in_flight < 2 || now_ms - lease.busy_since_ms < options_.steal_after_ms) continue;
    std::vector<PushProgress::Task> unanswered;
    for (const std::shared_ptr<PushProgress>& push : lease.pushes) {
      std::vector<PushProgress::Task> tasks = push->UnansweredTasks();
      unanswered.insert(unanswered.end(), tasks.begin(), tasks.end());
    }
    if (unanswered.size() < 2) continue;
    lease.stealing = true;
    // The first is the one running (the worker runs its tasks in order).
    for (size_t i = 1; i < unanswered.size(); ++i) stuck.emplace_back(lease.worker, unanswered[i]);
    VLOG(1) << "worker " << BinaryHex(lease.worker.worker_id()) << " answered nothing for "
            << now_ms - lease.busy_since_ms << " ms: taking back the " << unanswered.size() - 1
            << " task(s) queued behind its running one";
  }
  return stuck;
}

void NormalTaskSubmitter::Steal(const rpc::Address& worker, const PushProgress::Task& task) {
  std::weak_ptr<bool> alive = alive_;
  stealer_(worker, task.task_id, task.attempt, [this, alive, worker, task](bool taken) {
    if (!taken || alive.expired()) return;  // it runs there after all (or we are gone)
    task_manager_.TakeBack(task.task_id, task.attempt,
                           "moved off worker " + BinaryHex(worker.worker_id()) + ", busy with a long task");
  });
}

void NormalTaskSubmitter::SweepIdleLeasesLocked() {
  const int64_t now = MonotonicMs();
  std::vector<std::string> idle;
  for (const auto& [id, lease] : leases_) {
    if (lease.in_flight > 0 || now - lease.idle_since_ms < options_.lease_idle_ms) continue;
    auto key_it = keys_.find(lease.key);
    if (key_it != keys_.end() && !key_it->second.queue.empty()) continue;
    idle.push_back(id);
  }
  for (const std::string& id : idle) ReturnLease(id, false, "idle");
  // Channels to workers that went away (their leases were returned before).
  channels_.Prune([](TaskChannelInterface& c) { return c.IsClosed() && c.InFlight() == 0; });
  if (leases_.empty()) {
    sweeping_ = false;
    sweep_timer_.reset();
  }
}

void NormalTaskSubmitter::ReturnLease(const std::string& lease_id, bool disconnect, const std::string& reason,
                                      std::function<void(const rpc::ErrorInfo*)> on_reply) {
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
  raylets_.Get(lease.raylet_address)
      ->ReturnWorker(request, [lease_id, on_reply = std::move(on_reply)](const absl::Status& s,
                                                                          rpc::ReturnWorkerReply&& reply) {
        if (!s.ok()) VLOG(1) << "returning lease " << LeaseID::FromBinary(lease_id).Hex() << ": " << s;
        if (on_reply) on_reply(s.ok() && reply.has_failure() ? &reply.failure() : nullptr);
      });
}

void NormalTaskSubmitter::FailQueuedTasks(KeyState& state, rpc::ErrorType type, const std::string& message,
                                          Deferred* later) {
  std::deque<PackedTaskPtr> queue = std::move(state.queue);
  state.queue.clear();
  for (const PackedTaskPtr& task : queue) {
    rpc::ErrorInfo error;
    error.set_type(type);
    error.set_message(message);
    TaskID task_id = task->task_id();
    later->push_back([this, task_id, error] { task_manager_.FailTask(task_id, error); });
  }
}

NormalTaskSubmitter::CancelResult NormalTaskSubmitter::Cancel(const TaskID& task_id, int attempt, bool force,
                                                              rpc::Address* worker) {
  absl::MutexLock lock(&mu_);
  for (auto& [key, state] : keys_) {
    auto it = std::find_if(state.queue.begin(), state.queue.end(),
                           [&](const PackedTaskPtr& task) { return task->task_id() == task_id; });
    if (it != state.queue.end()) {
      state.queue.erase(it);
      return CancelResult::kDequeued;
    }
  }
  for (auto& [id, lease] : leases_) {
    for (const std::shared_ptr<PushProgress>& push : lease.pushes) {
      if (!push->Unanswered(task_id, attempt)) continue;  // (an older attempt may linger where it was stolen)
      *worker = lease.worker;
      *lease.killed_by_cancel |= force;
      return CancelResult::kInFlight;
    }
  }
  return CancelResult::kNotFound;
}

void NormalTaskSubmitter::Shutdown() {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    // Nothing queued will run: a thread waiting for one of these gets the error.
    for (auto& [key, state] : keys_) {
      FailQueuedTasks(state, rpc::TASK_CANCELLED, "the submitting process is shutting down", &later);
    }
    std::vector<std::string> ids;
    for (const auto& [id, lease] : leases_) ids.push_back(id);
    for (const auto& id : ids) ReturnLease(id, false, "owner shutting down");
  }
  Run(later);
}

}  // namespace manta::core
