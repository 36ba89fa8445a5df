// TaskEventRow: one task attempt's row in a TaskEventBatch (ARCHITECTURE.md §18).
//
// Rows travel as fixed 136-byte records packed back to back in the batch's `rows`
// bytes, in the byte order of the hosts Manta runs on (little-endian; a big-endian
// build fails here). A core worker keeps its rows in this form and sends them with
// one copy; the GCS reads them with one copy each. Protobuf's varint columns cost
// about 200 ns per row to write and 100 ns to read, a hot part of the task path at
// a few hundred thousand tasks a second.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "protos/gcs.pb.h"
#include "src/common/id.h"

namespace manta {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "task event rows are little-endian records");

struct TaskEventRow {
  static constexpr int kNumStates = 6;  // PENDING_ARGS_AVAIL .. FAILED

  std::array<uint8_t, TaskID::kSize> task_id{};
  // The attempt's parent task, when the row has a kind (zeros otherwise).
  std::array<uint8_t, TaskID::kSize> parent_task_id{};
  // Set only in the GCS's answers: the job of the attempt (zeros: unknown).
  std::array<uint8_t, JobID::kSize> job_id{};
  int32_t attempt = 0;
  // What it runs: an index into the batch's kinds; -1 when described before.
  int32_t kind = -1;
  // Where it ran: an index into the batch's executors; -1 when not in this row.
  int32_t executor = -1;
  // Set only in the GCS's answers: the process that submitted it (executors), or -1.
  int32_t owner = -1;
  // kWithdrawn: the attempt was taken back before it ran (a busy worker gave it up to
  // run elsewhere, as a next attempt); the GCS forgets it. The row carries nothing else.
  int32_t flags = 0;
  static constexpr int32_t kWithdrawn = 1;
  // When it reached PENDING_ARGS_AVAIL .. FAILED (µs since the Unix epoch); 0: not
  // in this row.
  std::array<int64_t, kNumStates> state_us{};
  // When it ran (0: not in this row).
  int64_t exec_start_us = 0;
  int64_t exec_end_us = 0;

  int64_t StateUs(rpc::TaskStatus status) const { return state_us[static_cast<int>(status) - 1]; }
  TaskID TaskId() const { return IdOf(task_id); }
  TaskID ParentTaskId() const { return IdOf(parent_task_id); }
  void SetTaskId(const TaskID& id) { std::memcpy(task_id.data(), id.Data(), TaskID::kSize); }
  void SetParentTaskId(const TaskID& id) { std::memcpy(parent_task_id.data(), id.Data(), TaskID::kSize); }

  // (A plain copy: the GCS reads a few hundred thousand ids a second.)
  static TaskID IdOf(const std::array<uint8_t, TaskID::kSize>& bytes) {
    TaskID id;
    std::memcpy(id.MutableData(), bytes.data(), TaskID::kSize);
    return id;
  }
  template <size_t N>
  static std::string_view AsView(const std::array<uint8_t, N>& bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), N};
  }
};

static_assert(sizeof(TaskEventRow) == 136, "the wire size of a task event row");
static_assert(std::is_trivially_copyable_v<TaskEventRow>);

// The rows of a batch (a malformed batch has a length that is not a multiple of
// the row size: the GCS checks it).
inline int64_t NumRows(const rpc::TaskEventBatch& batch) {
  return static_cast<int64_t>(batch.rows().size() / sizeof(TaskEventRow));
}

inline TaskEventRow RowAt(const rpc::TaskEventBatch& batch, int64_t i) {
  TaskEventRow row;
  std::memcpy(&row, batch.rows().data() + static_cast<size_t>(i) * sizeof(TaskEventRow), sizeof(TaskEventRow));
  return row;
}

inline void AddRow(rpc::TaskEventBatch* batch, const TaskEventRow& row) {
  batch->mutable_rows()->append(reinterpret_cast<const char*>(&row), sizeof(TaskEventRow));
}

// Replaces row i (tests and the GCS's own edits).
inline void SetRowAt(rpc::TaskEventBatch* batch, int64_t i, const TaskEventRow& row) {
  std::memcpy(batch->mutable_rows()->data() + static_cast<size_t>(i) * sizeof(TaskEventRow), &row,
              sizeof(TaskEventRow));
}

}  // namespace manta
