// TaskManager: the owner's table of tasks it submitted and has not finished
// (ARCHITECTURE.md §5 steps 2 and 7).
//
// For each pending task it keeps the spec (to resubmit it), the retries left and the
// argument ids whose submitted-task references it holds. When a task finishes, its
// returns land in the memory store (inline values, plasma markers, or errors) and
// the argument references are released. When the worker or node running it dies,
// the task is resubmitted while retries remain; after that, or for errors that are
// not retried (user exceptions), the error becomes the value of every return.
//
// Threading: thread-safe (one absl::Mutex); the memory store and reference counter
// are called outside it. `resubmit` runs on the thread that reported the failure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "src/common/id.h"
#include "src/core_worker/memory_store.h"
#include "src/core_worker/reference_counter.h"

namespace manta::core {

class TaskManager {
 public:
  using Resubmit = std::function<void(const rpc::TaskSpec& spec)>;
  TaskManager(MemoryStore& memory_store, ReferenceCounter& reference_counter, Resubmit resubmit);

  // Records a submitted task. `argument_ids` already carry submitted-task refs.
  void AddPendingTask(const rpc::TaskSpec& spec, std::vector<ObjectID> argument_ids);
  bool IsPending(const TaskID& task_id) const;
  size_t NumPending() const;

  // The worker reported the task's result. Results for unknown tasks or for an
  // older attempt are ignored (a late reply after a retry).
  void CompletePendingTask(const rpc::TaskResult& result);

  // The worker or node running attempt `attempt` of the task died (or the push
  // failed): resubmits while retries remain and returns true; otherwise stores
  // `type`/`message` as the error of every return and returns false. Nothing
  // happens (false) when the task is not pending or at another attempt.
  bool RetryOrFailTask(const TaskID& task_id, int attempt, rpc::ErrorType type, const std::string& message);

  // Fails the task for good with `error` (no retry): every return gets the error.
  void FailTask(const TaskID& task_id, const rpc::ErrorInfo& error);

 private:
  struct Entry {
    rpc::TaskSpec spec;
    std::vector<ObjectID> argument_ids;
    int retries_left = 0;
  };
  void StoreErrorAndRelease(Entry entry, const rpc::ErrorInfo& error);
  // Stores a return value unless the object is no longer referenced.
  void PutIfReferenced(const ObjectID& id, StoredObjectPtr value);

  MemoryStore& memory_store_;
  ReferenceCounter& reference_counter_;
  Resubmit resubmit_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<TaskID, Entry> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace manta::core
