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
// Lineage. A normal task (not an actor call) that finished successfully with a return
// in the object store keeps its spec while any of its returns is still known to the
// reference counter, and holds a lineage reference on each argument it owns that its
// spec passes by reference (so theirs is kept too): a return whose value is lost (its
// node died, or it was freed while a kept task still needed it) is rebuilt by running
// the task again (ResubmitForRecovery), with the same object ids. Only store objects
// can be lost: a task whose returns all came back inline keeps nothing, since its
// values live in this process, and every task that took one of them as an argument
// has it inlined in its spec (ArgumentsInlined), so rebuilding that task never needs
// them again. The specs kept are capped at max_lineage_bytes; beyond it the oldest are
// dropped and their returns can no longer be rebuilt.
//
// A spec is held packed (packed_task.h: serialized once at submission, shared through
// a reference-counted pointer to const): the task manager, the submitter's queue and
// the lineage share one copy per task. A retry makes a new one with the next attempt number rather than
// change the shared one.
//
// Memory: the tables shrink once mostly empty (table_shrink.h), so a burst of a
// million tasks leaves no million-slot tables behind.
//
// Threading: thread-safe (one absl::Mutex, plus a small inbox with its own for the
// tasks AddPendingTask adds, taken in by the next holder of the first); the memory
// store and reference counter are called outside them. `resubmit` runs on the thread
// that reported the failure.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "src/common/id.h"
#include "src/core_worker/memory_store.h"
#include "src/core_worker/packed_task.h"
#include "src/core_worker/reference_counter.h"
#include "src/core_worker/table_inbox.h"
#include "src/core_worker/task_event_buffer.h"

namespace manta::core {

class TaskManager {
 public:
  using Resubmit = std::function<void(const PackedTaskPtr& spec)>;
  TaskManager(MemoryStore& memory_store, ReferenceCounter& reference_counter, Resubmit resubmit,
              int64_t max_lineage_bytes = int64_t{1} << 30);

  // Where the attempts' states are recorded (task events); none by default. Set
  // before the first task.
  void SetTaskEvents(TaskEventBuffer* events) { events_ = events; }
  // Called with a result stored in a node's object store whose every ref went before
  // it arrived (its copy there must go too). Set before the first task.
  void SetOnUnreferencedResult(std::function<void(const ObjectID&, const StoredObjectPtr&)> on_unreferenced) {
    on_unreferenced_ = std::move(on_unreferenced);
  }
  TaskEventBuffer* task_events() const { return events_; }
  // Where the items of streaming tasks go (the owner's StreamTable). Set before the
  // first task.
  using StreamItems = google::protobuf::RepeatedPtrField<rpc::StreamItem>;
  void SetStreamItemsHandler(std::function<void(const StreamItems&)> handler) {
    stream_items_ = std::move(handler);
  }
  // The items of a push reply (before its results).
  void HandleStreamItems(const StreamItems& items) {
    if (stream_items_) stream_items_(items);
  }
  // A streaming task's item `id` (stream_table.h; `item` names it): recorded as an
  // owned object holding one local reference (the stream's), then stored as a return is.
  void StoreStreamItem(const ObjectID& id, const rpc::ReturnObject& item);
  // A task's result not taken (a duplicate stream item): its copy in a node's store,
  // if any, goes.
  void DiscardStoredCopy(const ObjectID& id, const rpc::ReturnObject& r);

  // Records a submitted task. `argument_ids` already carry submitted-task refs.
  void AddPendingTask(PackedTaskPtr spec, std::vector<ObjectID> argument_ids);
  // The pending task's arguments were resolved, some of their values inlined into
  // `resolved` (the same task and attempt): retries and lineage use it from now on,
  // and it takes the task events' stamps of the spec it replaces.
  void ArgumentsInlined(PackedTaskPtr resolved);
  bool IsPending(const TaskID& task_id) const;
  // Pending and not cancelled: a task waiting for its arguments goes on.
  bool ShouldRun(const TaskID& task_id) const;
  size_t NumPending() const;
  // The tasks pending now (to fail them all when this process's node is lost).
  std::vector<TaskID> PendingTaskIds() const;

  // The worker reported the task's result. Results for unknown tasks or for an
  // older attempt are ignored (a late reply after a retry). A `stolen` one (the
  // attempt did not run: its owner took it back) runs the task again.
  // `by`: the worker that ran it (task events), if known; `*now_us`: the time its
  // task event gets (0 or none: the clock is read once its returns are stored, into
  // `*now_us` if given).
  void CompletePendingTask(const rpc::TaskResult& result, const TaskExecutorInfo* by = nullptr,
                           int64_t* now_us = nullptr);
  // The results of one push reply, in order. With many tasks in flight the tables are
  // far bigger than the caches: the entries of the whole batch are fetched from memory
  // at once first (prefetch), so their misses overlap instead of coming one by one.
  void CompletePendingTasks(const google::protobuf::RepeatedPtrField<rpc::TaskResult>& results,
                            const TaskExecutorInfo* by = nullptr);

  // The worker or node running attempt `attempt` of the task died (or the push
  // failed): resubmits while retries remain and returns true; otherwise stores
  // `type`/`message` as the error of every return and returns false. Nothing
  // happens (false) when the task is not pending or at another attempt.
  // A cancelled task is never retried: it fails with its cancelled error. With
  // `charge` false a retry does not count against max_retries (its worker was killed
  // for another task's forced cancel).
  bool RetryOrFailTask(const TaskID& task_id, int attempt, rpc::ErrorType type, const std::string& message,
                       bool charge = true) {
    return Retry(task_id, attempt, type, message, charge ? RetryKind::kCharged : RetryKind::kFree);
  }
  // Attempt `attempt` was taken back before it ran (a worker busy with a long task gave
  // it up): it runs again as the next attempt, free, and is no failure; its task
  // events are withdrawn. As RetryOrFailTask otherwise.
  bool TakeBack(const TaskID& task_id, int attempt, const std::string& message) {
    return Retry(task_id, attempt, rpc::ERROR_TYPE_UNSPECIFIED, message, RetryKind::kTakenBack);
  }

  // Fails the task for good with `error` (no retry): every return gets the error.
  void FailTask(const TaskID& task_id, const rpc::ErrorInfo& error);

  // ray::Cancel of a task this process submitted. A pending task is marked: it is
  // never retried, and a failure of its attempt fails it as cancelled. Returns its
  // spec, or null when it is not pending (finished, failed, or never submitted here).
  // An actor creation task, and `force` for an actor call, are refused
  // (InvalidArgument) and left unmarked.
  absl::StatusOr<PackedTaskPtr> MarkCancelled(const TaskID& task_id, bool force);
  // The error of a cancelled task (TASK_CANCELLED naming it); `how` is added.
  static rpc::ErrorInfo CancelledError(const PackedTask& spec, const std::string& how = "");
  // The pending tasks that `parent` submitted (recursive cancels).
  std::vector<TaskID> PendingChildren(const TaskID& parent) const;

  enum class Recovery { kResubmitted, kAlreadyPending, kNotNeeded, kImpossible };
  // `id`, a return of a task we submitted, has no readable value any more: its
  // value in the memory store is `stale` (the marker whose copy could not be read,
  // or null when there is none). Runs that task again; its returns' stale values are
  // dropped from the memory store first, so readers wait for the new ones.
  // kAlreadyPending when the task is running or finishing; kNotNeeded when the value
  // is no longer `stale` (someone else rebuilt it, or it arrived meanwhile);
  // kImpossible (with *why) when no lineage is kept for it (a Put, dropped or
  // evicted lineage) or no retries are left. The check and the resubmission are
  // atomic with respect to completions and to other recoveries.
  Recovery ResubmitForRecovery(const ObjectID& id, const StoredObjectPtr& stale, std::string* why);

  // `id` is gone from the reference counter: the lineage of the task that created it
  // goes once none of that task's returns is left.
  void OnObjectFreed(const ObjectID& id);

  // Task events: the attempts pending now that were pending at the previous call
  // too (so for at least a report period), or with `all` every attempt pending now
  // (the last report, at exit), get their in-flight row (TaskEventBuffer::InFlight),
  // once per attempt, as far as the buffer has room; the others wait for a later
  // call. One pass over the pending table under its lock (a few ns per task, and a
  // row for each attempt reported: once).
  void ReportInFlight(bool all);

  size_t NumLineage() const;
  int64_t LineageBytes() const;
  // Slots allocated by the pending and lineage tables (tests: they shrink).
  size_t TableCapacity() const;

 private:
  // kCharged counts against max_retries; kFree does not (the worker went for another
  // task's forced cancel); kTakenBack neither, and the attempt is no failure.
  enum class RetryKind { kCharged, kFree, kTakenBack };
  bool Retry(const TaskID& task_id, int attempt, rpc::ErrorType type, const std::string& message, RetryKind kind);

  struct Entry {
    PackedTaskPtr spec;
    std::vector<ObjectID> argument_ids;
    int retries_left = 0;
    // A result is being stored: the task is still pending (readers wait, recovery
    // does nothing) but no retry or failure may touch it. The spec was moved out.
    bool completing = false;
    // ray::Cancel: never retried.
    bool cancelled = false;
    // Task events: ReportInFlight calls that saw this attempt pending (2: reported).
    uint8_t seen = 0;
    // Retries: the spec of the next attempt (a copy of `spec`, one attempt on).
    PackedTaskPtr NextAttempt() const;
  };
  struct LineageEntry {
    Entry task;
    // The arguments we own, each holding a lineage reference for this entry.
    std::vector<ObjectID> owned_args;
    // Indexes of the returns still known to the reference counter; the entry goes
    // with the last.
    absl::InlinedVector<uint32_t, 2> returns_alive;
    int64_t bytes = 0;
    uint64_t seq = 0;  // its place in lineage_order_
  };
  void StoreErrorAndRelease(Entry entry, const rpc::ErrorInfo& error);
  // CompletePendingTask, once the entry is taken (`completing`).
  void CompleteTaken(const TaskID& task_id, Entry entry, const rpc::TaskResult& result, const TaskExecutorInfo* by,
                     int64_t* now_us);
  // The result of a task cancelled before it finished: its returns are the
  // cancelled error (copies it stored are deleted), unless it failed anyway.
  rpc::TaskResult CancelledInstead(const PackedTask& spec, const rpc::TaskResult& result);
  // What a finished task's return turned out to be.
  enum class ReturnKind { kError, kInStore, kInline, kForeign };
  // Stores one return of a finished task: its value or error, where its copy is,
  // the refs inside it.
  ReturnKind StoreReturn(const TaskID& task_id, const rpc::ReturnObject& r);
  // After the returns are stored: the task leaves the pending table (its spec kept
  // as lineage when `keep_lineage`), and the references it held go.
  void FinishCompletion(const TaskID& task_id, Entry entry, const rpc::TaskResult& result, bool keep_lineage);
  // Keeps a finished task's spec; returns the argument ids whose lineage references
  // dropped by eviction must be removed (outside the mutex).
  std::vector<ObjectID> KeepLineageLocked(Entry entry, std::vector<ObjectID> owned_args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<ObjectID> DropLineageLocked(const TaskID& task_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether lineage_order_'s item (seq, task) is still a kept task.
  bool IsKeptLocked(const std::pair<uint64_t, TaskID>& item) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the items of tasks no longer kept from lineage_order_ once they are most.
  void CompactLineageOrderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores a return value unless the object is no longer referenced.
  void PutIfReferenced(const ObjectID& id, StoredObjectPtr value);

  // Holds mu_, with the tasks added since it was last held taken into pending_ first.
  using TablesLock = InboxTableLock<TaskManager>;
  friend TablesLock;
  void TakeInLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task added by AddPendingTask, not yet in pending_.
  using Added = std::pair<TaskID, Entry>;

  MemoryStore& memory_store_;
  ReferenceCounter& reference_counter_;
  Resubmit resubmit_;
  const int64_t max_lineage_bytes_;
  TaskEventBuffer* events_ = nullptr;
  std::function<void(const ObjectID&, const StoredObjectPtr&)> on_unreferenced_;
  std::function<void(const StreamItems&)> stream_items_;
  mutable absl::Mutex mu_;
  // Tasks added and not yet in pending_ (table_inbox.h): every section under mu_
  // takes them in first (TablesLock), so no reader ever misses one.
  mutable TableInbox<Added> inbox_;
  mutable absl::flat_hash_map<TaskID, Entry, IdHash> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TaskID, LineageEntry, IdHash> lineage_ ABSL_GUARDED_BY(mu_);
  // Kept tasks, oldest first, for eviction: (seq, task). A dropped task's item stays
  // until it reaches the front or a compaction (a task kept again gets a new seq).
  std::deque<std::pair<uint64_t, TaskID>> lineage_order_ ABSL_GUARDED_BY(mu_);
  uint64_t next_lineage_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lineage_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace manta::core
