// NormalTaskSubmitter: sends an owner's ready tasks to leased workers
// (ARCHITECTURE.md §5 steps 4-5).
//
// Tasks are queued by scheduling key (resource shape + function). For a key with queued
// tasks and too few workers it asks the local raylet for a worker lease (several in
// flight per key, up to max_pending_lease_requests_per_key); a spillback reply is
// followed to the named raylet with grant_or_reject set. Granted workers get the
// key's queued tasks pushed straight to them, many per PushTask, pipelining as many
// as fit in ~10 ms of measured task time (at most max_tasks_in_flight_per_worker; one
// while durations are unknown); a lease is reused while its key has work and is
// returned after worker_lease_idle_ms without any. A failed push means the worker
// (or its node) died: its tasks go back to the task manager for retry.
//
// Threading: loop thread only (Submit is called there; RPC callbacks run there).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "protos/core_worker.pb.h"
#include "src/common/event_loop.h"
#include "src/common/id.h"
#include "src/core_worker/rpc_clients.h"
#include "src/core_worker/task_manager.h"

namespace manta::core {

struct SubmitterOptions {
  JobID job_id;
  rpc::Address self;
  std::string local_raylet_address;
  rpc::JobConfig job_config;
  int64_t max_tasks_in_flight_per_worker = 1000;
  int64_t max_tasks_per_push = 1000;
  int64_t lease_idle_ms = 100;
  int64_t max_pending_lease_requests_per_key = 10;
};

class NormalTaskSubmitter {
 public:
  NormalTaskSubmitter(EventLoop& loop, SubmitterOptions options, RayletClientPool& raylets,
                      CoreWorkerClientPool& workers, TaskManager& task_manager);
  ~NormalTaskSubmitter();

  // Queues a task whose arguments are resolved.
  void Submit(rpc::TaskSpec spec);
  // Returns every lease and cancels pending lease requests (shutdown).
  void Shutdown();

  size_t NumLeases() const { return leases_.size(); }
  size_t NumQueued() const;
  // The scheduling key of a resource shape: "CPU:1,GPU:1" (sorted; empty → CPU:1).
  static std::string SchedulingKey(const google::protobuf::Map<std::string, double>& resources);

 private:
  struct Lease {
    std::string lease_id;
    rpc::Address worker;
    std::string raylet_address;
    std::string key;
    int64_t in_flight = 0;
    std::unique_ptr<Timer> idle_timer;
  };
  struct KeyState {
    std::deque<rpc::TaskSpec> queue;
    google::protobuf::Map<std::string, double> resources;
    int64_t pending_lease_requests = 0;
    std::vector<std::string> leases;  // lease ids
    int64_t consecutive_lease_failures = 0;
    // Moving average of a task's share of its push round trip (µs); <= 0: unknown.
    double avg_task_us = 0;
  };
  // Tasks to keep in flight per worker for this key (adaptive, see .cc).
  int64_t PipelineDepth(const KeyState& state) const;
  void RecordBatchTime(const std::string& lease_id, size_t num_tasks, int64_t elapsed_us);

  // Pushes queued tasks to the key's leases and requests more leases if needed.
  void Pump(const std::string& key);
  void RequestLease(const std::string& key, const std::string& raylet_address, bool grant_or_reject);
  void OnLeaseReply(const std::string& key, const std::string& raylet_address, bool grant_or_reject,
                    const absl::Status& status, rpc::RequestWorkerLeaseReply&& reply);
  void PushBatch(Lease& lease, KeyState& state);
  // After a push's reply results were handed to the task manager.
  void OnPushReply(const std::string& lease_id, std::vector<rpc::TaskSpec> tasks, const absl::Status& status);
  void MaybeStartIdleTimer(Lease& lease);
  void ReturnLease(const std::string& lease_id, bool disconnect, const std::string& reason);
  void FailQueuedTasks(KeyState& state, rpc::ErrorType type, const std::string& message);

  EventLoop& loop_;
  SubmitterOptions options_;
  RayletClientPool& raylets_;
  CoreWorkerClientPool& workers_;
  TaskManager& task_manager_;
  absl::flat_hash_map<std::string, KeyState> keys_;
  absl::flat_hash_map<std::string, Lease> leases_;
  bool shutting_down_ = false;
  // Keys with newly queued tasks, pumped once per loop turn.
  absl::flat_hash_set<std::string> dirty_keys_;
  bool flush_posted_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace manta::core
