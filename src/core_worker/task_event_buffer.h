// TaskEventBuffer: what happened to this process's task attempts since its last
// report to the GCS, in bounded memory (ARCHITECTURE.md §18).
//
// The owner records an attempt's states as it submits, dispatches, pushes and
// completes it; the reply tells it when and where the attempt ran. A worker records
// the tasks it runs only while they run, so a long task shows as RUNNING before its
// owner hears of it; a task that ended before a report is left to its owner.
//
// One row per attempt, written once, at its end: the states before it (submitted,
// dispatched, pushed) are stamped in the attempt's PackedTask with no lock, and
// the row is made from them when the reply comes. Static information (function,
// resources, actor, placement group) is a "kind": numbered once for the buffer's
// life when first submitted, and described once per batch, so a row is a fixed
// 136-byte TaskEventRow (src/common/task_event_row.h), kept in its wire form: a batch
// is sent with one copy.
//
// In flight: an attempt that is still pending at a periodic report and was pending
// at the one before (its owner's TaskManager finds them: ReportInFlight) gets a row
// then (InFlight), and from then on each later state is a row of its own, so a
// task waiting for its arguments, a worker or its turn at an actor shows as such.
// (A state stamped while its attempt's in-flight row is being written may show only
// at the attempt's end.) An actor's creation, not in that table, is reported as it
// is submitted.
//
// When the buffer holds max_rows rows, attempts that need a new row are dropped and
// counted (short finished ones are counted per kind instead, as beyond the detail
// rate); an attempt reported in flight still records (its end must reach the GCS).
//
// Detail is bounded by rate, decided as each attempt ends: beyond
// max_detailed_per_s (a token bucket of up to a second's worth, full at start), an
// attempt that finished and ran shorter than a worker waits before reporting a task
// running (so no other row of it exists anywhere) is counted per kind instead of
// written. The attempts kept are spread over time as the bucket refills, and each
// kind keeps its first few of a batch (a rare function always shows). Failures, and
// attempts reported in flight, are always rows. At a few hundred thousand tasks a
// second this spares the owner nearly every row and the GCS nearly all of its
// merging; the GCS's cap would have evicted those rows within a second anyway.
//
// Cost: this is on the task path of every process, at up to a few hundred thousand
// tasks a second. An owner records an attempt on two threads: the user's thread
// submits and dispatches it, the core worker's loop thread pushes it and takes its
// reply. Stamps in the PackedTask are on its own cache lines, which those threads
// touch anyway; the row is written by one thread, under the lock of that thread's
// lane (its own mutex, rows, kinds and executors on cache lines of their own), so
// nothing crosses between cores per task but the attempt itself.
//
// Short attempts are counted only when no other row of them can exist: an owner's
// short_us and its workers' wait before reporting a task running are both half of
// task_events_report_ms, which a cluster's processes share (the node's config).
//
// Thread-safe: a record takes its thread's lane's mutex; after it come the running
// tasks' (running_mu_), then the table of kinds' (kinds_mu_) or the detail bucket's
// (mu_). TakeBatch takes every lane's, in order.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
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

  // `report` runs (under a lane's lock: it must only post work) once `rows` ended
  // attempts were written as rows in a lane since the last batch, and when the
  // buffer is half full.
  void SetEarlyReport(int64_t rows, std::function<void()> report);

  // Beyond `per_s` a second (0: no limit; the bucket starts with a second's worth),
  // attempts that finished and ran under `short_us` are counted in their batch's
  // `summarized` instead of written as rows.
  void SetDetailRate(int64_t per_s, int64_t short_us);

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
  // Several attempts reached `status` at `at_us`: a submitter stamps a push under its
  // own lock and records it after releasing that lock.
  void ReachedAll(const std::vector<PackedTaskPtr>& tasks, rpc::TaskStatus status, int64_t at_us);
  // Stamps an attempt pushed at `at_us` (SUBMITTED_TO_WORKER); true when it was
  // reported in flight, so that its push needs a row (ReachedAll).
  bool Sent(const PackedTask& packed, int64_t at_us);
  // `to` replaces `from` (the same attempt, arguments inlined): it takes `from`'s stamps.
  void Moved(const PackedTask& from, const PackedTask& to);
  // The attempt ran on `by` and ended at `now_us` (one clock read serves the results
  // of a reply): FAILED with `error` when it is set, else FINISHED.
  void Ended(const PackedTask& packed, const rpc::TaskResult& result, const TaskExecutorInfo& by,
             const rpc::ErrorInfo* error, int64_t now_us);
  // The attempt failed without a result (its worker died, it could not be sent...).
  void Failed(const PackedTask& packed, const rpc::ErrorInfo& error);
  // The attempt was taken back before it ran, to run again as a next attempt: no
  // failure. It leaves no row, and one reported in flight is withdrawn at the GCS.
  void Withdrawn(const PackedTask& packed);
  // The attempt is still in flight after a report period: its row now, with the
  // states it reached so far; its later states get rows of their own. False when
  // nothing was recorded: the buffer is full, or its submission was not recorded yet.
  bool InFlight(const PackedTask& packed);
  // Rows the buffer can still take in this batch (new attempts).
  int64_t FreeRows() const;

  // Worker side: the tasks running now. `spec` must stay alive until EndRunning,
  // which is given the same spec. Neither takes a lock when a thread runs one task
  // at a time (RunningSlot); EndRunning waits out a report reading the task.
  void BeginRunning(const rpc::TaskSpec& spec, int64_t start_unix_us);
  void EndRunning(const rpc::TaskSpec& spec);

  // Everything recorded since the last batch, and the running tasks not reported yet
  // that have run for at least `min_running_us` (0: all) — a task that ends soon is
  // left to its owner, so that a late report of it never revives an attempt the GCS
  // already saw end; nullopt when there is nothing to say.
  std::optional<rpc::TaskEventBatch> TakeBatch(int64_t min_running_us = 0);
  // Rows waiting for the next batch.
  int64_t NumRows() const;
  int64_t TotalDropped() const;

 private:
  using Row = TaskEventRow;
  // Threads record into kLanes lanes (a thread's lane is fixed at its first record).
  static constexpr int kLanes = 8;
  // Kinds numbered for the buffer's life, at most; beyond, an attempt's kind is
  // described from its spec when its row is written (slower: it is decoded).
  static constexpr int32_t kMaxKinds = 1 << 16;
  // A task running now, published by its thread with no lock (a worker's thread
  // runs tens of thousands a second). A slot is claimed (busy) by BeginRunning and
  // given back by EndRunning; a thread reuses its last one. A report reads a slot's
  // task as one of its `readers`, and EndRunning clears `spec` and then waits until
  // no reader is left (both sequentially consistent: either the reader sees no
  // task, or the end sees the reader), so a spec is never read after its end.
  struct alignas(64) RunningSlot {
    std::atomic<bool> busy{false};
    std::atomic<const rpc::TaskSpec*> spec{nullptr};
    std::atomic<int64_t> start_us{0};
    std::atomic<bool> reported{false};
    std::atomic<int32_t> readers{0};
  };
  // What a lane recorded in this batch: rows, and the kinds, executors and errors
  // they name by index in these vectors.
  struct Records {
    std::vector<Row> rows;
    std::vector<rpc::TaskKind> kinds;
    // Per kind: short attempts counted instead of written, and written (by the rate).
    std::vector<int64_t> summarized;
    std::vector<int32_t> detailed;
    std::vector<rpc::TaskExecutor> executors;
    std::vector<rpc::TaskEventError> errors;
  };
  // One lane: a cache line of its own, so threads in different lanes share nothing
  // per task.
  struct alignas(64) Lane {
    absl::Mutex mu;
    Records records ABSL_GUARDED_BY(mu);
    // Memory for the next batch's records, kept from a batch sent.
    Records spare ABSL_GUARDED_BY(mu);
    // A numbered kind's index in records.kinds (-1: not in this batch), and the
    // numbers set in this batch.
    std::vector<int32_t> batch_kind ABSL_GUARDED_BY(mu);
    std::vector<int32_t> batch_kinds_set ABSL_GUARDED_BY(mu);
    // Kinds described from a spec (beyond kMaxKinds): by hash, in records.kinds.
    absl::flat_hash_map<size_t, int32_t> described ABSL_GUARDED_BY(mu);
    int32_t last_executor ABSL_GUARDED_BY(mu) = -1;
    WorkerID last_executor_id ABSL_GUARDED_BY(mu);
    int64_t quota ABSL_GUARDED_BY(mu) = 0;  // new rows it may add before taking more
    int64_t ended ABSL_GUARDED_BY(mu) = 0;  // attempts ended in this batch
    int64_t dropped ABSL_GUARDED_BY(mu) = 0;
    // The detail bucket had no token for this lane until then (µs since the epoch).
    int64_t no_token_until_us ABSL_GUARDED_BY(mu) = 0;
  };

  Lane& ThisThreadsLane();
  void LockLanes() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockLanes() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // The kind's number (-1 beyond kMaxKinds). Any thread, no lane lock needed: the
  // thread's last few kinds are cached, so most calls only compare.
  int32_t NumberKind(const rpc::TaskSpec& spec);
  // Stamps `packed` with its kind's number, when it has none yet.
  void NoteKind(const rpc::TaskSpec& spec, const PackedTask& packed);
  // A new row for the attempt; within the buffer's cap when `capped` (nullptr when
  // full).
  Row* NewRow(Lane& lane, std::string_view task_id, int attempt, bool capped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // Takes more of the buffer's free rows for `lane`; false when none are left.
  bool TakeQuota(Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // A row for `packed` with every state stamped so far, its kind and parent unless
  // it was `reported` in flight (the GCS has them; and its row is not capped);
  // nullptr when full.
  Row* RowWithStamps(Lane& lane, const PackedTask& packed, bool reported) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  static bool Reported(const PackedTask& packed);
  // Stamps `status` at `at_us` in `packed` when the PackedTask keeps that state;
  // whether it needs a row of its own now (reported in flight, or a state not kept).
  static bool Stamp(const PackedTask& packed, rpc::TaskStatus status, int64_t at_us);
  // A row with `status` alone (within the cap unless reported in flight).
  void AddStateRow(const PackedTask& packed, rpc::TaskStatus status, int64_t at_us);
  // An actor's creation is reported in flight as soon as it is submitted.
  void ReportActorCreation(const PackedTask& packed);
  // The index in this batch's kinds of numbered kind `number`.
  int32_t BatchKind(Lane& lane, int32_t number) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // The index in this batch's kinds of `spec`'s kind.
  int32_t KindOf(Lane& lane, const rpc::TaskSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  int32_t ExecutorOf(Lane& lane, const TaskExecutorInfo& by) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  void AddError(Lane& lane, const Row* row, const rpc::ErrorInfo& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // Counts the finished attempt `packed` instead of writing its row when it is
  // short, was not `reported` in flight, and the detail rate is spent or the buffer
  // full (true).
  bool CountInstead(Lane& lane, const PackedTask& packed, const rpc::TaskResult& result, bool reported,
                    int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // A token of the detail bucket for `lane`; false when it is empty.
  bool TakeToken(Lane& lane, int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // One more attempt ended in this batch (asks for an early report at early_rows_).
  void CountEnded(Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // Rows (in `lane`) for the running tasks not reported yet.
  void AddRunning(Lane& lane, int64_t min_running_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // A row for the task in `slot` if it runs, was not reported and has run for
  // `min_running_us` at `now` (a reader of the slot meanwhile); false when full.
  bool AddRunningRow(Lane& lane, RunningSlot& slot, int64_t min_running_us, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lane.mu);
  // A free slot for this thread: its last one, else one found or added under
  // running_mu_.
  RunningSlot* ClaimSlot();
  // A thread's last slot, per buffer (by serial).
  struct SlotCache {
    uint64_t buffer = 0;
    RunningSlot* slot = nullptr;
  };
  static thread_local SlotCache slot_cache_;
  // Moves every lane's records to `taken` and starts the next batch; false when
  // there is nothing to report.
  bool TakeLanes(int64_t min_running_us, std::array<Records, kLanes>* taken, int64_t* dropped);
  // Gives `taken`'s memory back to the lanes (up to twice an early report's worth).
  void KeepMemory(std::array<Records, kLanes>* taken);
  // One batch's rows, in `rows`, from the lanes' records (kinds, executors and
  // errors renumbered). `sent_lane`: the lane whose rows `rows` are, as they were
  // (when only one had any).
  static void JoinLanes(std::array<Records, kLanes>* taken, rpc::TaskEventBatch* batch, std::vector<Row>* rows,
                        int* sent_lane);

  const TaskEventSource source_;
  const int64_t max_rows_;
  const int64_t quota_chunk_;
  // Told apart in the threads' caches of kinds (an address can be reused).
  const uint64_t serial_;
  // Set with every lane locked, read under any (an early report asked for runs
  // under a lane's lock).
  int64_t early_rows_ = 0;
  std::function<void()> early_report_;
  int64_t detail_per_s_ = 0;
  int64_t short_us_ = 0;
  // New rows the lanes may still take in this batch.
  std::atomic<int64_t> rows_free_;
  // Rows' memory kept from a batch sent, at most: twice an early report's worth (or
  // the cap's), as a vector grown by doubling holds up to twice its rows.
  std::atomic<int64_t> keep_rows_;
  mutable std::array<Lane, kLanes> lanes_;
  // The kinds numbered so far (a deque: references stay valid as it grows); after a
  // lane's lock.
  absl::Mutex kinds_mu_;
  std::deque<rpc::TaskKind> kinds_ ABSL_GUARDED_BY(kinds_mu_);
  absl::flat_hash_map<size_t, absl::InlinedVector<int32_t, 1>> kinds_by_hash_ ABSL_GUARDED_BY(kinds_mu_);
  mutable absl::Mutex mu_;  // after a lane's (TakeToken)
  // The rate of detailed short attempts: a bucket of up to a second's worth.
  double detail_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t detail_refilled_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Row> spare_out_ ABSL_GUARDED_BY(mu_);  // memory for the next batch's joined rows
  // The slots of the tasks running now: a few (one per execution thread); a deque,
  // so a slot stays where it is. Its lock (taken to add a slot, and by a report to
  // go through them) comes after the lanes'.
  absl::Mutex running_mu_;
  std::deque<RunningSlot> running_ ABSL_GUARDED_BY(running_mu_);
};

// The task events of one push, for the submitters: each attempt is stamped
// SUBMITTED_TO_WORKER as it is added (one clock read for the push, nothing
// allocated), and the rows of the few reported in flight are recorded through
// `later`, which the submitter runs after releasing its lock (its lock is not held
// for a lane's). A push sent in the call that dispatched a task is stamped with the
// dispatch's time, `now_us` (a microsecond or two earlier, as Dispatched stamps two
// states with one read): no clock read at all. Does nothing without a buffer.
class SentStamps {
 public:
  explicit SentStamps(TaskEventBuffer* events, int64_t now_us = 0)
      : events_(events), at_us_(events == nullptr ? 0 : now_us != 0 ? now_us : UnixMicros()) {}
  void Add(const PackedTaskPtr& task) {
    if (events_ != nullptr && events_->Sent(*task, at_us_)) reported_.push_back(task);
  }
  void Finish(std::vector<std::function<void()>>* later);

 private:
  TaskEventBuffer* events_;
  int64_t at_us_;
  std::vector<PackedTaskPtr> reported_;
};

}  // namespace manta::core
