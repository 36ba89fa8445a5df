// GcsTaskManager: the cluster's task attempts as the core workers report them
// (ARCHITECTURE.md §18), for `manta list tasks`, summaries and the timeline.
//
// A batch's rows are merged into one record per attempt (task id, attempt number):
// its states with their times, what it runs (a "kind", interned: function, type,
// actor, resources, placement group), its parent and job, where and when it ran,
// and its error. The records are bounded by count (task_events_max_num) and bytes
// (task_events_max_bytes): beyond either, finished and failed attempts go first,
// oldest first, then the oldest of the rest. What was dropped is counted: by the
// core workers (their buffers were full) and here (evicted). No cap crashes the GCS;
// a malformed batch is refused whole with a message naming what is wrong.
//
// Nothing is persisted: after a GCS restart the table starts empty.
// Loop thread only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "protos/core_worker.pb.h"
#include "protos/gcs.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/grpc_server.h"
#include "src/common/state_filter.h"
#include "src/common/task_event_row.h"

namespace manta::gcs {

class GcsTaskManager {
 public:
  static constexpr int kNumStates = TaskEventRow::kNumStates;
  struct Limits {
    int64_t max_num = 100000;
    int64_t max_bytes = int64_t{64} << 20;
  };
  // The slot array is reserved whole, with room for a batch beyond the cap (it is
  // evicted to the cap after each batch): address space only, its pages touched as
  // slots are taken, in order. So it never moves as it grows.
  explicit GcsTaskManager(Limits limits) : limits_(limits) {
    const int64_t reserved = std::clamp<int64_t>(limits.max_num, 0, kMaxReservedSlots);
    slots_.reserve(static_cast<size_t>(reserved + reserved / 4 + 1));
  }

  void HandleAddTaskEventData(const rpc::AddTaskEventDataRequest& request, rpc::AddTaskEventDataReply* reply,
                              rpc::SendReply send_reply);
  // Merges a batch; InvalidArgument (nothing merged) when its columns disagree.
  absl::Status AddBatch(const rpc::TaskEventBatch& batch);
  // What the GCS sees itself (the actor creation tasks it pushes): attempt `attempt`
  // of `spec` reached `status` now; where and when it ran, and its error, if known.
  void RecordOwn(const rpc::TaskSpec& spec, int attempt, rpc::TaskStatus status, const rpc::TaskExecutor* executor,
                 const rpc::TaskResult* result, const rpc::ErrorInfo* error);

  // The attempts whose fields pass every filter (key, "=" or "!=", value), at most
  // `limit` of them as JSON objects (Ray's field names; `detail` adds the state
  // times, resources and placement). InvalidArgument for an unknown key or predicate.
  struct ListResult {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    int64_t num_matched = 0;
  };
  absl::StatusOr<ListResult> List(const std::vector<rpc::StateFilter>& filters, int64_t limit, bool detail) const;
  // Counts of the matching attempts by state, per function (or actor class and
  // method): {"total": n, "by_name": {name: {"type": T, "state_counts": {S: n}}}}.
  absl::StatusOr<nlohmann::ordered_json> Summarize(const std::vector<rpc::StateFilter>& filters) const;
  // Every attempt kept (of job `job_id`, or all when it is empty) as one batch, with
  // each row's owner and job: what a timeline is drawn from. InvalidArgument for a
  // malformed job id.
  absl::StatusOr<rpc::TaskEventBatch> Export(const std::string& job_id) const;
  // The keys a filter may name.
  static const std::vector<std::string>& FilterKeys();

  int64_t num_attempts() const { return static_cast<int64_t>(index_.size()); }
  int64_t bytes() const { return bytes_; }
  // Attempts dropped by core workers (reported in their batches), counted by them
  // without rows (beyond task_events_max_detailed_per_s: their state is counted), and
  // evicted here: the attempts a listing cannot show.
  int64_t dropped_at_source() const { return dropped_at_source_; }
  int64_t summarized() const { return summarized_; }
  int64_t evicted() const { return evicted_; }
  int64_t num_dropped() const { return dropped_at_source_ + summarized_ + evicted_; }
  // Attempts by (function or class and method, state) since the GCS started, for
  // ray_tasks: an attempt counts once, in its latest state. Evicting an attempt that
  // ended keeps its count (FINISHED and FAILED only grow); evicting one still going
  // removes it. Never negative.
  std::map<std::pair<std::string, rpc::TaskStatus>, int64_t> StateCounts() const;

 private:
  struct Key {
    TaskID task_id;
    int32_t attempt = 0;
    bool operator==(const Key& o) const { return attempt == o.attempt && task_id == o.task_id; }
  };
  // First attempts hash as their task ids do (IdHash: a parent's tasks in neighbouring
  // slots), so that merging and evicting walk the index in order.
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return IdHash()(k.task_id) ^ (static_cast<size_t>(k.attempt) * 0x9e3779b97f4a7c15ull);
    }
  };
  struct Attempt {
    int32_t kind = -1;
    int32_t job = -1;
    int32_t executor = -1;
    int32_t owner = -1;  // the process that submitted it (executors_)
    TaskID parent;
    std::array<int64_t, kNumStates> state_us{};
    int64_t exec_start_us = 0;
    int64_t exec_end_us = 0;
    std::unique_ptr<rpc::ErrorInfo> error;
  };
  static constexpr uint32_t kNone = ~uint32_t{0};
  static constexpr int64_t kMaxReservedSlots = int64_t{1} << 20;
  // An attempt's record, in one of two lists: attempts still going (oldest first) and
  // finished or failed ones (in the order they ended). Eviction takes the head of the
  // second, then of the first.
  enum class ListId : uint8_t { kFree, kActive, kTerminal };
  struct Slot {
    Key key;
    Attempt attempt;
    uint32_t prev = kNone;
    uint32_t next = kNone;
    ListId list = ListId::kFree;
  };
  struct Chain {
    uint32_t head = kNone;
    uint32_t tail = kNone;
  };
  // What one attempt may cost: its slot and its index entry (with its control byte),
  // each twice, as the slot array and the index may have grown to twice what they
  // hold. An upper bound, so that the byte cap bounds the memory really used.
  static constexpr int64_t kAttemptBytes =
      static_cast<int64_t>(2 * sizeof(Slot) + 2 * (sizeof(Key) + sizeof(uint32_t) + 1));

  static absl::Status Validate(const rpc::TaskEventBatch& batch);
  int32_t InternKind(const rpc::TaskKind& kind);
  int32_t InternExecutor(const rpc::TaskExecutor& executor);
  int32_t InternJob(const std::string& job_id);
  // The attempt's slot, new ones (in the active list) with the kind of the attempt
  // before if it has none.
  uint32_t Find(const Key& key);
  Chain& ListOf(ListId id) { return id == ListId::kActive ? active_ : terminal_; }
  void Link(uint32_t slot, ListId list);
  void Unlink(uint32_t slot);
  // Attempts a batch counted without rows: they finished, and no row of them exists.
  // `kinds` maps the batch's kinds to the table's (-2: not interned yet).
  void AddSummarized(const rpc::TaskEventBatch& b, std::vector<int32_t>* kinds);
  void SetError(Attempt& a, const rpc::ErrorInfo& error);
  void Evict();
  void Erase(uint32_t slot);
  // A row withdrawing an attempt taken back before it ran: forgets the attempt.
  bool Withdrawn(const TaskEventRow& row);
  // The latest state the attempt reached.
  static rpc::TaskStatus StateOf(const Attempt& a);
  // StateOf's name, but CANCELLED for a failure that is a cancel (TASK_CANCELLED),
  // as listings and summaries show it.
  static std::string StateName(const Attempt& a);
  // When it was first seen (its earliest state): lists go oldest first.
  static int64_t FirstSeen(const Attempt& a);
  std::string FieldOf(const Key& key, const Attempt& a, const std::string& field) const;
  // Whether the attempt passes every filter (checked by CheckFilters).
  bool Matches(const Key& key, const Attempt& a, const std::vector<rpc::StateFilter>& filters) const;
  static absl::Status CheckFilters(const std::vector<rpc::StateFilter>& filters);
  nlohmann::ordered_json ToJson(const Key& key, const Attempt& a, bool detail) const;

  const Limits limits_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<Key, uint32_t, KeyHash> index_;
  Chain active_;
  Chain terminal_;
  int64_t bytes_ = 0;
  int64_t dropped_at_source_ = 0;
  int64_t summarized_ = 0;
  int64_t evicted_ = 0;
  std::vector<rpc::TaskKind> kinds_;
  absl::flat_hash_map<std::string, int32_t> kind_index_;
  std::vector<rpc::TaskExecutor> executors_;
  absl::flat_hash_map<std::string, int32_t> executor_index_;
  std::vector<JobID> jobs_;
  // StateCounts, by (kind, state): entry (kind + 1) * kNumStates + state - 1.
  void CountState(int32_t kind, rpc::TaskStatus state, int64_t delta);
  std::vector<int64_t> state_counts_;
};

}  // namespace manta::gcs
