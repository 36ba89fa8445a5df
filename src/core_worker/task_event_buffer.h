// TaskEventBuffer: what happened to this process's task attempts since its last
// report to the GCS, in bounded memory (ARCHITECTURE.md §18).
//
// The owner records an attempt's states as it submits, dispatches, pushes and
// completes it; the reply tells it when and where the attempt ran. A worker records
// the tasks it runs only while they run, so a long task shows as RUNNING before its
// owner hears of it; a task that ended before a report is left to its owner.
//
// One row per attempt per batch: the attempt's PackedTask remembers its row
// (event_slot_), so its later states update that row in place instead of adding
// rows for the GCS to merge. Static information (function, resources, actor,
// placement group) is a "kind" described once per batch, so a row is a fixed
// 136-byte TaskEventRow (src/common/task_event_row.h), kept in its wire form: a batch
// is sent with one copy. When the buffer holds max_rows rows, attempts that need a
// new row are dropped and counted; an attempt that has a row still records.
//
// Detail is bounded by rate: beyond max_detailed_per_s, an attempt that finished
// within one batch and ran shorter than a worker waits before reporting a task
// running (so no other row of it exists anywhere) is counted per kind instead of
// sent. The rows kept are shared fairly between kinds (a rare function always shows)
// and spread evenly over the batch. Failures, and attempts seen in an earlier batch,
// are always sent whole. At a few hundred thousand tasks a second this spares the
// GCS nearly all of its merging, and the GCS's cap would have evicted those rows
// within a second anyway.
//
// Cost: this is on the task path of every process, at up to a few hundred thousand
// tasks a second. An owner records an attempt on two threads: the user's thread
// submits and dispatches it, the core worker's loop thread pushes it and takes its
// reply. Had they shared one mutex and one row, each attempt would move the lock and
// its row between the two cores (about 1 µs of CPU per attempt here, against 0.3
// µs). So each thread records into a lane of its own: its own mutex, rows, kinds and
// executors. A state recorded on another thread than the attempt's row adds a row
// to this thread's lane that continues that one (the attempt's slot moves to it),
// and TakeBatch joins an attempt's rows into one. The rows of new attempts are
// capped for the buffer as a whole (lanes take free rows in chunks); a later state
// of an attempt that has a row always records.
//
// Thread-safe: a record takes its thread's lane's mutex (a leaf lock); TakeBatch
// takes every lane's, in order.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "protos/core_worker.pb.h"
#include "protos/gcs.pb.h"
#include "src/common/id.h"
#include "src/common/task_event_row.h"
#include "src/core_worker/packed_task.h"

namespace manta::core {

// A worker that ran attempts, as the owner knows it from the lease and the reply.
struct TaskExecutorInfo {
  WorkerID worker_id;
  NodeID node_id;
  int pid = 0;
};

// The worker at `address` (ids it does not parse stay nil).
TaskExecutorInfo ExecutorOf(const rpc::Address& address);

// The process reporting: its job, and where it runs.
struct TaskEventSource {
  JobID job_id;
  TaskExecutorInfo self;
  bool is_driver = false;
};

// Now, in µs since the Unix epoch (clock_gettime: 30 ns here, where
// absl::GetCurrentTimeNanos takes 55).
inline int64_t UnixMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

class TaskEventBuffer;
// Now when `events` records (the submission time a caller carries); else 0.
inline int64_t SubmitTime(const TaskEventBuffer* events) { return events != nullptr ? UnixMicros() : 0; }
// Records the submission `*submitted_us` alone when there is one, and clears it.
void RecordSubmitted(TaskEventBuffer* events, const rpc::TaskSpec& spec, const PackedTask& packed,
                     int64_t* submitted_us);

class TaskEventBuffer {
 public:
  static constexpr int kNumStates = TaskEventRow::kNumStates;

  TaskEventBuffer(TaskEventSource source, int64_t max_rows);

  // `report` runs (under the buffer's lock: it must only post work) once `rows`
  // attempts have ended since the last batch, and when the buffer is half full. An
  // attempt's rows before and after a report are two rows for the GCS to merge, so
  // the count is of attempts whose row is complete: a burst of submissions does not
  // cut every attempt in two.
  void SetEarlyReport(int64_t rows, std::function<void()> report);

  // Beyond `per_s` a second (0: no limit), attempts that finished in one batch and ran
  // under `short_us` are counted in the batch's `summarized` instead of sent as rows.
  void SetDetailRate(int64_t per_s, int64_t short_us);
  // The rate's bucket starts empty (a process's first burst is held to the rate);
  // this fills it to a second's worth, for the last batch of a process: a program
  // that ran for less than a second keeps up to `per_s` attempts detailed.
  void FillDetailBucket();

  // Owner side. The attempt was submitted at `submitted_us` and waits for its
  // arguments (PENDING_ARGS_AVAIL, with what it runs).
  void Submitted(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us);
  // Submitted at `submitted_us` and dispatched right after, its arguments ready
  // (PENDING_NODE_ASSIGNMENT): the two in one call, as most attempts go. Nothing
  // waited between them (a microsecond or two), so both are stamped `submitted_us`:
  // a clock read spared per task.
  void Dispatched(const rpc::TaskSpec& spec, const PackedTask& packed, int64_t submitted_us);
  // The attempt reached `status` now. The second form, for callers without the
  // packed spec, always adds a row.
  void Reached(const PackedTask& packed, rpc::TaskStatus status);
  void Reached(const TaskID& task_id, int attempt, rpc::TaskStatus status);
  // Several attempts reached `status` at `at_us` (one lock): a submitter stamps a
  // push under its own lock and records it after releasing that lock.
  void ReachedAll(const std::vector<PackedTaskPtr>& tasks, rpc::TaskStatus status, int64_t at_us);
  // `to` replaces `from` (the same attempt, arguments inlined): its row is `from`'s.
  void Moved(const PackedTask& from, const PackedTask& to);
  // The attempt ran on `by` and ended at `now_us` (one clock read serves the results
  // of a reply): FAILED with `error` when it is set, else FINISHED.
  void Ended(const PackedTask& packed, const rpc::TaskResult& result, const TaskExecutorInfo& by,
             const rpc::ErrorInfo* error, int64_t now_us);
  // The attempt failed without a result (its worker died, it could not be sent...).
  void Failed(const PackedTask& packed, const rpc::ErrorInfo& error);

  // Worker side: the tasks running now. `spec` must stay alive until EndRunning,
  // which is given the same spec.
  void BeginRunning(const rpc::TaskSpec& spec, int64_t start_unix_us);
  void EndRunning(const rpc::TaskSpec& spec);

  // Everything recorded since the last batch, and the running tasks not reported yet
  // that have run for at least `min_running_us` (0: all) — a task that ends soon is
  // left to its owner, so that a late report of it never revives an attempt the GCS
  // already saw end; nullopt when there is nothing to say. Short finished attempts
  // beyond the detail rate are counted, not sent.
  std::optional<rpc::TaskEventBatch> TakeBatch(int64_t min_running_us = 0);
  // Rows waiting for the next batch (an attempt recorded on several threads has a
  // row in each thread's lane until TakeBatch joins them).
  int64_t NumRows() const;
  int64_t TotalDropped() const;

 private:
  using Row = TaskEventRow;
  // Threads record into kLanes lanes (a thread's lane is fixed at its first record).
  static constexpr int kLanes = 8;
  struct Running {
    const rpc::TaskSpec* spec = nullptr;
    int64_t start_us = 0;
    bool reported = false;
  };
  // What a lane recorded in this batch: rows, and the kinds, executors and errors
  // they name by index in these vectors.
  struct Records {
    std::vector<Row> rows;
    // Per row: the slot of the row (in another lane, or this one) of the same
    // attempt that this row continues; 0 for the attempt's first row in the batch.
    std::vector<uint64_t> continues;
    std::vector<rpc::TaskKind> kinds;
    std::vector<rpc::TaskExecutor> executors;
    std::vector<rpc::TaskEventError> errors;
  };
  // One lane: a cache line of its own, so threads in different lanes share nothing
  // per task.
  struct alignas(64) Lane {
    absl::Mutex mu;
    int index = 0;
    Records records ABSL_GUARDED_BY(mu);
    // Memory for the next batch's records, kept from a batch sent.
    Records spare ABSL_GUARDED_BY(mu);
    absl::flat_hash_map<size_t, int32_t> kind_index ABSL_GUARDED_BY(mu);
    // The kind looked up last: most submissions repeat it, and comparing is cheaper
    // than hashing.
    int32_t last_kind ABSL_GUARDED_BY(mu) = -1;
    int32_t last_executor ABSL_GUARDED_BY(mu) = -1;
    WorkerID last_executor_id ABSL_GUARDED_BY(mu);
    int64_t quota ABSL_GUARDED_BY(mu) = 0;  // new rows it may add before taking more
    int64_t ended ABSL_GUARDED_BY(mu) = 0;  // attempts ended in this batch
    int64_t dropped ABSL_GUARDED_BY(mu) = 0;
  };

  Lane& ThisThreadsLane();
  void LockLanes() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockLanes() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // The attempt's row in this batch: in this lane, or a new one (nullptr when full).
  Row* RowOf(Lane& lane, const PackedTask& packed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // A new attempt's row, within the buffer's cap (nullptr when full).
  Row* NewRow(Lane& lane, std::string_view task_id, int attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  Row* AddRow(Lane& lane, std::string_view task_id, int attempt, uint64_t continues)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // Takes more of the buffer's free rows for `lane`; false when none are left.
  bool TakeQuota(Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  void Describe(Lane& lane, Row* row, const rpc::TaskSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  int32_t KindOf(Lane& lane, const rpc::TaskSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  int32_t ExecutorOf(Lane& lane, const TaskExecutorInfo& by) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  void AddError(Lane& lane, const Row* row, const rpc::ErrorInfo& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // One more attempt ended in this batch (asks for an early report at early_rows_).
  void CountEnded(Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // Rows (in `lane`) for the running tasks not reported yet.
  void AddRunning(Lane& lane, int64_t min_running_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // Moves every lane's records to `taken` and starts the next batch; false when
  // there is nothing to report.
  bool TakeLanes(int64_t min_running_us, std::array<Records, kLanes>* taken, int64_t* dropped);
  // Gives `taken`'s memory back to the lanes (up to twice an early report's worth).
  void KeepMemory(std::array<Records, kLanes>* taken);
  // One batch's rows, in `rows`, from the lanes' records: kinds, executors and errors
  // renumbered, and an attempt's rows in several lanes joined into one. `sent_lane`:
  // the lane whose rows `rows` are, as they were (when only one had any).
  static void JoinLanes(std::array<Records, kLanes>* taken, rpc::TaskEventBatch* batch, std::vector<Row>* rows,
                        int* sent_lane);
  // Joins each row that continues another into the attempt's first row in the batch.
  static void JoinContinuing(std::array<Records, kLanes>* taken);
  // The attempt's first row (lane, index) for lane `lane`'s row `index`; lane -1
  // when its chain is broken.
  static std::pair<int, size_t> FirstRowOf(const std::array<Records, kLanes>& taken, int lane, size_t index);
  // How many short attempts the detail rate lets this batch keep (-1: all).
  int64_t DetailBudget(int64_t* short_us);

  const TaskEventSource source_;
  const int64_t max_rows_;
  const int64_t quota_chunk_;
  // Set with every lane locked, read under any (an early report asked for runs
  // under a lane's lock).
  int64_t early_rows_ = 0;
  std::function<void()> early_report_;
  // Rows belong to batch `generation_` (changed with every lane locked); a
  // PackedTask's slot is (generation << 32 | lane << 28 | index + 1).
  std::atomic<uint32_t> generation_{1};
  // New rows the lanes may still take in this batch.
  std::atomic<int64_t> rows_free_;
  // Rows' memory kept from a batch sent, at most: twice an early report's worth (or
  // the cap's), as a vector grown by doubling holds up to twice its rows.
  std::atomic<int64_t> keep_rows_;
  mutable std::array<Lane, kLanes> lanes_;
  mutable absl::Mutex mu_;  // after the lanes' (TakeBatch)
  // The rate of detailed short attempts: a bucket of up to a second's worth.
  int64_t detail_per_s_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t short_us_ ABSL_GUARDED_BY(mu_) = 0;
  double detail_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t detail_refilled_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Row> spare_out_ ABSL_GUARDED_BY(mu_);  // memory for the next batch's joined rows
  // The tasks running now: a few (one per execution thread), so a vector. Its lock
  // comes after the lanes'.
  absl::Mutex running_mu_;
  std::vector<Running> running_ ABSL_GUARDED_BY(running_mu_);
};

// Stamps `sent` SUBMITTED_TO_WORKER now, and records it through `later`, which the
// submitter runs after releasing its lock (its lock is not held for the record).
void RecordSent(TaskEventBuffer* events, std::vector<PackedTaskPtr> sent, std::vector<std::function<void()>>* later);

}  // namespace manta::core
