// NormalTaskSubmitter: sends an owner's ready tasks to leased workers
// (ARCHITECTURE.md §5 steps 4-5).
//
// Tasks are queued by scheduling key (resource shape + placement group bundle +
// function + runtime env). For
// a key with queued tasks and too few workers it asks the local raylet for a worker
// lease (several in flight per key, up to max_pending_lease_requests_per_key); a spillback reply is
// followed to the named raylet with grant_or_reject set. Granted workers get the
// key's queued tasks pushed over their task channel (task_channel.h), many per push,
// pipelining as many as fit in ~10 ms of the task time the workers report (at most
// max_tasks_in_flight_per_worker; one while durations are unknown). A busy worker is
// refilled once half of that has drained, in one push, so pushes stay large while a
// worker answers in interim replies. A lease request
// carries the key's runtime env; a reply saying the env cannot be applied fails the
// key's queued tasks at once (RUNTIME_ENV_SETUP_FAILED), without retrying. Likewise
// a request carries the key's placement (TaskSpec.placement), and a reply saying the
// placement group was removed fails the key's queued tasks (PLACEMENT_GROUP_REMOVED);
// a lease in one bundle never serves tasks of another bundle or of no group. A lease is
// reused while its key has work and is returned after worker_lease_idle_ms without
// any; meanwhile an idle lease passes to another key of the same resource shape and
// runtime env that has tasks queued (a lease is for a shape, not a function), so a program that
// moves from one function to the next does not wait for the idle lease to be
// returned and granted again. A failed push means the worker (or its node) died: its tasks go back to the
// task manager for retry.
//
// Pipelining must not leave tasks stuck behind a long one while other workers could
// run them: a worker that has answered nothing for steal_after_ms with tasks queued
// behind the one it runs stops getting more, and its owner takes those back (a
// CancelTask with `steal`, through the stealer the core worker sets): each one the
// worker has not started runs again elsewhere as a new attempt, not charged to its
// retries (the worker answers the old attempt as `stolen` when it gets to it).
//
// Threading: thread-safe. Submit runs on the submitting thread and pushes from
// there when a leased worker has room (the synchronous task path has no thread hop
// before the socket); push replies are handled on the thread that read them; lease
// replies and the idle sweep run on the loop. One absl::Mutex guards the state; the
// task manager is called only after it is released (its resubmissions re-enter).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/core_worker/push_batch.h"
#include "src/core_worker/rpc_clients.h"
#include "src/task_channel/task_channel.h"
#include "src/core_worker/task_manager.h"

namespace manta::core {

struct SubmitterOptions {
  JobID job_id;
  rpc::Address self;
  std::string local_raylet_address;
  int64_t max_tasks_in_flight_per_worker = 1000;
  int64_t max_tasks_per_push = 1000;
  // A push stops growing at this many bytes of specs (the task channel's frames are
  // capped); a single task over it fails.
  int64_t max_push_bytes = 256 << 20;
  int64_t lease_idle_ms = 10;
  int64_t max_pending_lease_requests_per_key = 10;
  int64_t lease_retry_delay_ms = 100;
  int64_t max_consecutive_lease_failures = 10;
  int64_t pipeline_target_us = 10000;  // work kept in flight per worker, in reported task time
  // A worker that has answered nothing for this long while tasks wait behind the one
  // it runs has them taken back (stolen) to run elsewhere; 0: never.
  int64_t steal_after_ms = 50;
};

class NormalTaskSubmitter {
 public:
  NormalTaskSubmitter(EventLoop& loop, SubmitterOptions options, RayletClientPool& raylets,
                      TaskChannelPool& channels, TaskManager& task_manager);
  ~NormalTaskSubmitter();

  // Queues a task whose arguments are resolved, and pushes it at once when a
  // leased worker of its key has room. `packed` is `spec` packed (shared with the
  // task manager, never changed): the queue holds it and a push carries its bytes;
  // `spec` gives the scheduling key. `now_us`, when not 0, is the time now as the
  // caller read it (its dispatch's task event stamp): a push sent in this call is
  // stamped with it rather than with a clock read of its own. Any thread.
  void Submit(const rpc::TaskSpec& spec, PackedTaskPtr packed, int64_t now_us = 0);
  // Returns every lease; later submissions fail as cancelled (shutdown). Any thread.
  void Shutdown();

  // ray::Cancel: where attempt `attempt` of the task is. kDequeued: it was queued and is not any more
  // (the caller fails it). kInFlight: pushed to `*worker`, which the caller tells;
  // with `force` the worker may leave, and the other tasks lost with it are retried
  // without counting against their retries. kNotFound: neither (not resolved yet, or
  // answered). Any thread.
  enum class CancelResult { kNotFound, kDequeued, kInFlight };
  CancelResult Cancel(const TaskID& task_id, int attempt, bool force, rpc::Address* worker);

  // Takes attempt `attempt` of `task` back from `worker`; `done(true)` when the worker
  // will not run it. Set by the core worker before the first task; without one,
  // nothing is stolen.
  using Stealer = std::function<void(const rpc::Address& worker, const TaskID& task, int attempt,
                                     std::function<void(bool taken)> done)>;
  void SetStealer(Stealer stealer) { stealer_ = std::move(stealer); }

  size_t NumLeases() const;
  size_t NumQueued() const;
  // The scheduling key of a resource shape: "CPU:1,GPU:1" (sorted; empty → CPU:1).
  static std::string SchedulingKey(const google::protobuf::Map<std::string, double>& resources);

 private:
  struct Lease {
    std::string lease_id;
    rpc::Address worker;
    TaskExecutorInfo executor;  // the worker's ids, parsed once (task events)
    std::string raylet_address;
    std::string key;
    std::shared_ptr<TaskChannelInterface> channel;
    int64_t in_flight = 0;
    int64_t idle_since_ms = 0;  // meaningful while in_flight == 0
    // While in_flight > 0: when it last answered, or got work while idle.
    int64_t busy_since_ms = 0;
    bool stealing = false;  // its queued tasks are being taken back: push nothing more
    // The pushes sent to it that may still be unanswered (Cancel looks in them).
    std::vector<std::shared_ptr<PushProgress>> pushes;
    // A forced cancel may end its worker: the other tasks lost with it are not to
    // blame (shared with its pushes, which may fail after the lease is gone).
    std::shared_ptr<bool> killed_by_cancel = std::make_shared<bool>(false);
  };
  struct KeyState {
    std::deque<PackedTaskPtr> queue;
    google::protobuf::Map<std::string, double> resources;
    // SchedulingKey(resources), the placement and the runtime env: keys of one shape
    // share leases.
    std::string shape;
    std::string runtime_env;  // of every task of the key (TaskSpec.runtime_env)
    rpc::PlacementGroupSchedulingOptions placement;  // of every task of the key
    int64_t pending_lease_requests = 0;
    std::vector<std::string> leases;  // lease ids
    int64_t consecutive_lease_failures = 0;
    // Moving average of the run time the workers report (µs); <= 0: unknown.
    double avg_task_us = 0;
  };
  // One push in flight: the lease it went to, and how far its replies got.
  struct PushState {
    std::string lease_id;
    std::shared_ptr<PushProgress> progress;
    TaskExecutorInfo executor;  // the leased worker (task events)
    std::shared_ptr<bool> killed_by_cancel;  // its lease's
  };
  // Task-manager calls decided under mu_, made after it is released.
  using Deferred = std::vector<std::function<void()>>;

  // Tasks to keep in flight per worker for this key (adaptive, see .cc).
  int64_t PipelineDepth(const KeyState& state) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes queued tasks to the key's leases (only to idle ones if `idle_only`) and
  // requests more leases if needed. `now_us`: as in Submit.
  void Pump(const std::string& key, Deferred* later, bool idle_only = false, int64_t now_us = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequestLease(const std::string& key, const std::string& raylet_address, bool grant_or_reject)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnLeaseReply(const std::string& key, const std::string& raylet_address, bool grant_or_reject,
                    const absl::Status& status, rpc::RequestWorkerLeaseReply&& reply);
  // A lease request that was not granted: fails the key's queued tasks when asking
  // again cannot help, asks again at once (place_again) or after a delay.
  void OnLeaseRefused(const std::string& key, KeyState& state, const std::string& raylet_address,
                      const absl::Status& status, const rpc::RequestWorkerLeaseReply& reply, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the lease `reply` granted (for `key`, from the raylet at `raylet_address`);
  // returns its id.
  std::string AddLease(const std::string& key, const std::string& raylet_address,
                       const rpc::RequestWorkerLeaseReply& reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendBatch(Lease& lease, KeyState& state, Deferred* later, int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A reply (or the failure) of a push arrived; its results are already stored.
  void OnPushProgress(const std::shared_ptr<PushState>& push, const absl::Status& status,
                      const rpc::PushTaskReply& reply);
  // A push failed: its unanswered tasks are retried elsewhere, or fail at once when
  // this owner refused the worker's protection (and so do those queued for the key).
  void OnPushFailed(const PushState& push, Lease* lease, const std::string& key, const absl::Status& status,
                    Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkIdleIfSo(Lease& lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An idle lease of another key of `key`'s shape whose own queue is empty now
  // serves `key`; false when there is none.
  bool AdoptIdleLease(const std::string& key, KeyState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `lease` is idle with nothing queued for its key: it moves to a key of its shape
  // that has tasks queued, if any, and gets them.
  void HandOverIdleLease(Lease& lease, Deferred* later) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MoveLease(Lease& lease, const std::string& to_key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Loop thread: returns leases idle for lease_idle_ms; stops when none are left.
  void SweepIdleLeases();
  void SweepIdleLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The tasks queued behind the running one at leases silent for steal_after_ms
  // (those leases stop getting work until they answer).
  std::vector<std::pair<rpc::Address, PushProgress::Task>> StuckTasksLocked(int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Steal(const rpc::Address& worker, const PushProgress::Task& task);
  void EnsureSweeping() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `on_reply`, if set, runs on the loop with the raylet's reply: why it ended the
  // lease itself (its memory monitor killed the worker), else nullptr.
  void ReturnLease(const std::string& lease_id, bool disconnect, const std::string& reason,
                   std::function<void(const rpc::ErrorInfo*)> on_reply = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns a lease whose push failed (killing its worker), then runs `retry` with
  // why the raylet ended it (its memory monitor), or nullptr when it does not say
  // within kFailureCauseWaitMs.
  void ReturnLeaseThenRetry(const std::string& lease_id, const absl::Status& status,
                            std::function<void(const rpc::ErrorInfo*)> retry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a failed push waits for its raylet to say why the worker died.
  static constexpr int64_t kFailureCauseWaitMs = 1000;
  void FailQueuedTasks(KeyState& state, rpc::ErrorType type, const std::string& message, Deferred* later)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(Deferred& later);

  EventLoop& loop_;
  const SubmitterOptions options_;
  const std::string caller_field_;  // CallerAddressField(options_.self), added to each spec pushed
  RayletClientPool& raylets_;
  TaskChannelPool& channels_;
  TaskManager& task_manager_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, KeyState> keys_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // The idle sweep runs while leases exist (loop thread owns the timer).
  bool sweeping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<Timer> sweep_timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  Stealer stealer_;
};

}  // namespace manta::core
