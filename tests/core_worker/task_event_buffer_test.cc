// TaskEventBuffer: one row per attempt, written at its end or when reported in
// flight, kinds described once per batch, bounded with what it dropped counted,
// running tasks reported once, short finished attempts beyond the detail rate
// counted.
#include "src/core_worker/task_event_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

namespace manta::core {
namespace {

constexpr int kStates = TaskEventBuffer::kNumStates;

JobID Job() { return JobID::FromInt(7); }

// The driver's task id has random bytes: one for the whole test.
const TaskID& Driver() {
  static const TaskID driver = TaskID::ForDriver(Job());
  return driver;
}

rpc::TaskSpec Spec(uint64_t index, const std::string& function, int attempt = 0) {
  rpc::TaskSpec spec;
  spec.set_type(rpc::NORMAL_TASK);
  spec.set_task_id(TaskID::ForNormalTask(Job(), Driver(), index).Binary());
  spec.set_parent_task_id(Driver().Binary());
  spec.set_job_id(Job().Binary());
  spec.set_function_name(function);
  spec.set_attempt_number(attempt);
  rpc::ResourceQuantity* cpu = spec.add_required_resources();
  cpu->set_name("CPU");
  cpu->set_quantity(1);
  return spec;
}

// An attempt of `function`, dispatched (submitted and assigned) at `at_us`.
PackedTaskPtr DispatchedAt(TaskEventBuffer* buffer, uint64_t index, const std::string& function, int64_t at_us) {
  rpc::TaskSpec spec = Spec(index, function);
  PackedTaskPtr packed = PackedTask::Pack(spec);
  buffer->Dispatched(spec, *packed, at_us);
  return packed;
}

TaskEventSource Source() {
  TaskEventSource source;
  source.job_id = Job();
  source.self = TaskExecutorInfo{WorkerID::FromRandom(), NodeID::FromRandom(), 4242};
  source.is_driver = true;
  return source;
}

int64_t StateAt(const rpc::TaskEventBatch& batch, int row, rpc::TaskStatus status) {
  return RowAt(batch, row).StateUs(status);
}

// Submits (or, with `dispatch`, submits and dispatches) attempts `first` to `last` of
// `function` into `tasks`.
void SubmitEach(TaskEventBuffer* buffer, uint64_t first, uint64_t last, const std::string& function,
                std::vector<PackedTaskPtr>* tasks, bool dispatch = false) {
  for (uint64_t i = first; i <= last; ++i) {
    rpc::TaskSpec spec = Spec(i, function);
    tasks->push_back(PackedTask::Pack(spec));
    if (dispatch) {
      buffer->Dispatched(spec, *tasks->back(), UnixMicros());
    } else {
      buffer->Submitted(spec, *tasks->back(), UnixMicros());
    }
  }
}

TEST(TaskEventBufferTest, AnAttemptsStatesInOneBatchShareOneRow) {
  TaskEventBuffer buffer(Source(), 1000);
  rpc::TaskSpec spec = Spec(1, "Plus");
  PackedTaskPtr packed = PackedTask::Pack(spec);
  buffer.Submitted(spec, *packed, UnixMicros());
  buffer.Reached(*packed, rpc::PENDING_NODE_ASSIGNMENT);
  buffer.ReachedAll({packed}, rpc::SUBMITTED_TO_WORKER, UnixMicros());
  rpc::TaskResult result;
  result.set_start_unix_us(UnixMicros());
  result.set_run_us(250);
  TaskExecutorInfo worker{WorkerID::FromRandom(), NodeID::FromRandom(), 99};
  buffer.Ended(*packed, result, worker, nullptr, UnixMicros());

  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(RowAt(*batch, 0).TaskId().Binary(), spec.task_id());
  EXPECT_EQ(batch->kinds_size(), 1);
  EXPECT_EQ(batch->kinds(0).function_name(), "Plus");
  EXPECT_EQ(batch->kinds(0).required_resources(0).name(), "CPU");
  EXPECT_EQ(RowAt(*batch, 0).ParentTaskId().Binary(), spec.parent_task_id());
  for (rpc::TaskStatus s : {rpc::PENDING_ARGS_AVAIL, rpc::PENDING_NODE_ASSIGNMENT, rpc::SUBMITTED_TO_WORKER,
                            rpc::FINISHED}) {
    EXPECT_GT(StateAt(*batch, 0, s), 0) << rpc::TaskStatus_Name(s);
  }
  EXPECT_EQ(StateAt(*batch, 0, rpc::FAILED), 0);
  EXPECT_EQ(RowAt(*batch, 0).exec_end_us - RowAt(*batch, 0).exec_start_us, 250);
  ASSERT_EQ(batch->executors_size(), 1);
  EXPECT_EQ(batch->executors(0).pid(), 99);
  EXPECT_EQ(batch->executors(0).worker_id(), worker.worker_id.Binary());
  EXPECT_EQ(RowAt(*batch, 0).executor, 0);
  EXPECT_EQ(batch->job_id(), Job().Binary());
  EXPECT_TRUE(batch->is_driver());
  EXPECT_EQ(batch->pid(), 4242);
  // Nothing new: no batch.
  EXPECT_FALSE(buffer.TakeBatch().has_value());
}

TEST(TaskEventBufferTest, AnAttemptInFlightIsARowOnlyOnceReportedWithTheStatesItReached) {
  TaskEventBuffer buffer(Source(), 1000);
  rpc::TaskSpec spec = Spec(1, "Plus");
  PackedTaskPtr packed = PackedTask::Pack(spec);
  buffer.Dispatched(spec, *packed, 1000);
  buffer.Reached(*packed, rpc::SUBMITTED_TO_WORKER);
  EXPECT_FALSE(buffer.TakeBatch().has_value());  // kept in the attempt until it ends
  EXPECT_TRUE(buffer.InFlight(*packed));
  EXPECT_TRUE(buffer.InFlight(*packed));  // once
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(batch->rows().size(), sizeof(TaskEventRow));
  const TaskEventRow row = RowAt(*batch, 0);
  EXPECT_EQ(row.kind, 0);
  EXPECT_EQ(batch->kinds(0).function_name(), "Plus");
  EXPECT_EQ(row.ParentTaskId().Binary(), spec.parent_task_id());
  EXPECT_EQ(row.StateUs(rpc::PENDING_ARGS_AVAIL), 1000);
  EXPECT_EQ(row.StateUs(rpc::PENDING_NODE_ASSIGNMENT), 1000);  // nothing waited between them
  EXPECT_GE(row.StateUs(rpc::SUBMITTED_TO_WORKER), row.StateUs(rpc::PENDING_NODE_ASSIGNMENT));
  EXPECT_EQ(row.StateUs(rpc::FINISHED), 0);
  EXPECT_EQ(row.executor, -1);
  EXPECT_EQ(row.owner, -1);
  // Its end is a row of its own, without the kind the GCS has.
  rpc::TaskResult result;
  buffer.Ended(*packed, result, TaskExecutorInfo{}, nullptr, 5000);
  batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(RowAt(*batch, 0).kind, -1);
  EXPECT_EQ(RowAt(*batch, 0).parent_task_id, (std::array<uint8_t, TaskID::kSize>{}));  // zeros: none
  EXPECT_EQ(StateAt(*batch, 0, rpc::FINISHED), 5000);
}

TEST(TaskEventBufferTest, AnAttemptNotSubmittedYetIsNotReportedInFlight) {
  TaskEventBuffer buffer(Source(), 1000);
  PackedTaskPtr packed = PackedTask::Pack(Spec(1, "Plus"));
  EXPECT_FALSE(buffer.InFlight(*packed));
  EXPECT_FALSE(buffer.TakeBatch().has_value());
}

TEST(TaskEventBufferTest, ARowTakesItsParentFromThePackedSpec) {
  rpc::TaskSpec spec = Spec(1, "Plus");
  spec.set_name(std::string(300, 'n'));  // fields after the parent's
  EXPECT_EQ(PackedTask::Pack(spec)->parent_task_id(), spec.parent_task_id());
  spec.clear_parent_task_id();
  EXPECT_TRUE(PackedTask::Pack(spec)->parent_task_id().empty());
  spec.clear_job_id();
  EXPECT_TRUE(PackedTask::Pack(spec)->parent_task_id().empty());
  TaskEventBuffer buffer(Source(), 10);
  PackedTaskPtr packed = PackedTask::Pack(spec);
  buffer.Submitted(spec, *packed, 1);
  buffer.Failed(*packed, rpc::ErrorInfo());
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(RowAt(*batch, 0).parent_task_id, (std::array<uint8_t, TaskID::kSize>{}));
}

TEST(TaskEventBufferTest, KindsAlternatingBetweenTwoFunctionsStayTwo) {
  TaskEventBuffer buffer(Source(), 1000);
  std::vector<PackedTaskPtr> tasks;
  for (uint64_t i = 1; i <= 6; ++i) {
    rpc::TaskSpec spec = Spec(i, i % 2 == 0 ? "Even" : "Odd");
    tasks.push_back(PackedTask::Pack(spec));
    buffer.Submitted(spec, *tasks.back(), UnixMicros());
    buffer.Failed(*tasks.back(), rpc::ErrorInfo());
  }
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 6);
  ASSERT_EQ(batch->kinds_size(), 2);
  for (int64_t i = 0; i < NumRows(*batch); ++i) {
    EXPECT_EQ(batch->kinds(RowAt(*batch, i).kind).function_name(), i % 2 == 0 ? "Odd" : "Even");
  }
  // Each batch describes the kinds its rows name, again.
  SubmitEach(&buffer, 7, 7, "Odd", &tasks);
  buffer.Failed(*tasks.back(), rpc::ErrorInfo());
  batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->kinds_size(), 1);
  EXPECT_EQ(batch->kinds(0).function_name(), "Odd");
  EXPECT_EQ(RowAt(*batch, 0).kind, 0);
}

TEST(TaskEventBufferTest, CallsOfOneFunctionShareAKindAndStatesAfterAnInFlightRowGetRowsWithoutOne) {
  TaskEventBuffer buffer(Source(), 1000);
  std::vector<PackedTaskPtr> tasks;
  SubmitEach(&buffer, 1, 3, "Square", &tasks);
  for (const PackedTaskPtr& t : tasks) EXPECT_TRUE(buffer.InFlight(*t));
  auto first = buffer.TakeBatch();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(NumRows(*first), 3);
  EXPECT_EQ(first->kinds_size(), 1);
  EXPECT_EQ(RowAt(*first, 2).kind, 0);
  EXPECT_EQ(StateAt(*first, 2, rpc::PENDING_NODE_ASSIGNMENT), 0);  // still waiting for its arguments
  // A later state is a row now; the end repeats the stamps (the GCS keeps the latest).
  buffer.Reached(*tasks[0], rpc::PENDING_NODE_ASSIGNMENT);
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_EXECUTION_EXCEPTION);
  error.set_message("boom");
  buffer.Failed(*tasks[1], error);
  auto second = buffer.TakeBatch();
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(NumRows(*second), 2);
  EXPECT_EQ(RowAt(*second, 0).kind, -1);
  EXPECT_GT(StateAt(*second, 0, rpc::PENDING_NODE_ASSIGNMENT), 0);
  EXPECT_EQ(RowAt(*second, 1).kind, -1);
  EXPECT_EQ(RowAt(*second, 1).parent_task_id, (std::array<uint8_t, TaskID::kSize>{}));  // zeros: none
  EXPECT_GT(StateAt(*second, 1, rpc::PENDING_ARGS_AVAIL), 0);
  EXPECT_GT(StateAt(*second, 1, rpc::FAILED), 0);
  ASSERT_EQ(second->errors_size(), 1);
  EXPECT_EQ(second->errors(0).row(), 1);
  EXPECT_EQ(second->errors(0).error().message(), "boom");
}

TEST(TaskEventBufferTest, BeyondItsCapNewAttemptsAreDroppedAndCountedButAnAttemptReportedInFlightRecords) {
  TaskEventBuffer buffer(Source(), 2);
  std::vector<PackedTaskPtr> tasks;
  SubmitEach(&buffer, 1, 4, "f", &tasks, /*dispatch=*/true);
  EXPECT_TRUE(buffer.InFlight(*tasks[0]));
  EXPECT_EQ(buffer.FreeRows(), 1);
  rpc::TaskResult result;
  for (int i = 1; i < 4; ++i) buffer.Ended(*tasks[i], result, TaskExecutorInfo{}, nullptr, UnixMicros());
  EXPECT_EQ(buffer.NumRows(), 2);
  EXPECT_EQ(buffer.FreeRows(), 0);
  // Its end must reach the GCS, or the attempt would show pending for good.
  buffer.Ended(*tasks[0], result, TaskExecutorInfo{}, nullptr, UnixMicros());
  EXPECT_EQ(buffer.NumRows(), 3);
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(NumRows(*batch), 3);
  EXPECT_EQ(batch->dropped(), 2);
  EXPECT_EQ(RowAt(*batch, 2).TaskId(), tasks[0]->task_id());
  EXPECT_GT(StateAt(*batch, 2, rpc::FINISHED), 0);
  EXPECT_EQ(buffer.TotalDropped(), 2);
  // Room again after the batch.
  EXPECT_EQ(buffer.FreeRows(), 2);
  SubmitEach(&buffer, 10, 10, "f", &tasks);
  buffer.Ended(*tasks.back(), result, TaskExecutorInfo{}, nullptr, UnixMicros());
  EXPECT_EQ(buffer.NumRows(), 1);
}

TEST(TaskEventBufferTest, ARunningTaskIsReportedOnceWhileItRuns) {
  TaskEventSource source = Source();
  TaskEventBuffer buffer(source, 100);
  rpc::TaskSpec spec = Spec(1, "Sleep");
  buffer.BeginRunning(spec, 1234567);
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(StateAt(*batch, 0, rpc::RUNNING), 1234567);
  EXPECT_EQ(batch->kinds(0).function_name(), "Sleep");
  ASSERT_EQ(batch->executors_size(), 1);
  EXPECT_EQ(batch->executors(0).worker_id(), source.self.worker_id.Binary());
  EXPECT_FALSE(buffer.TakeBatch().has_value());  // reported already
  buffer.EndRunning(spec);
  EXPECT_FALSE(buffer.TakeBatch().has_value());
  // A task that ends before a batch is left to its owner.
  rpc::TaskSpec quick = Spec(2, "Quick");
  buffer.BeginRunning(quick, 1);
  buffer.EndRunning(quick);
  EXPECT_FALSE(buffer.TakeBatch().has_value());
}

// Threads run tasks one after another (their specs on their stacks, gone at each
// end) while reports read the running ones: a long task of each thread, which
// ends only once every long task was reported, is reported once, and no report
// reads a task that ended (ASan would see it).
TEST(TaskEventBufferTest, ReportsReadTasksRunningOnManyThreadsOnlyWhileTheyRun) {
  TaskEventBuffer buffer(Source(), 1 << 20);
  constexpr int kThreads = 4, kTasks = 20000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::atomic<int> done{0};
  std::atomic<bool> all_reported{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      rpc::TaskSpec slow = Spec(1000000 + t, "Slow");
      buffer.BeginRunning(slow, UnixMicros() - 10'000'000);
      for (int i = 0; i < kTasks; ++i) {
        rpc::TaskSpec quick = Spec(static_cast<uint64_t>(t * kTasks + i + 1), "Quick");
        buffer.BeginRunning(quick, UnixMicros() - 10'000'000);
        buffer.EndRunning(quick);
      }
      while (!all_reported.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      buffer.EndRunning(slow);
      done.fetch_add(1);
    });
  }
  std::map<std::string, int> slow_rows;
  auto take = [&] {
    auto batch = buffer.TakeBatch(/*min_running_us=*/1'000'000);
    if (!batch) return;
    for (int64_t i = 0; i < NumRows(*batch); ++i) {
      const TaskEventRow row = RowAt(*batch, i);
      ASSERT_GE(row.kind, 0);
      const std::string& function = batch->kinds(row.kind).function_name();
      ASSERT_TRUE(function == "Slow" || function == "Quick") << function;
      EXPECT_EQ(row.StateUs(rpc::RUNNING), row.exec_start_us);
      if (function == "Slow") ++slow_rows[std::string(TaskEventRow::AsView(row.task_id))];
    }
  };
  while (done.load() < kThreads && std::chrono::steady_clock::now() < deadline) {
    take();
    if (slow_rows.size() == static_cast<size_t>(kThreads)) all_reported.store(true);
  }
  for (std::thread& t : threads) t.join();
  take();
  ASSERT_EQ(slow_rows.size(), static_cast<size_t>(kThreads));
  for (const auto& [task_id, rows] : slow_rows) EXPECT_EQ(rows, 1);
  // A task that runs on no thread any more is never reported again.
  EXPECT_FALSE(buffer.TakeBatch().has_value());
  // A task begun on one thread may end on another.
  rpc::TaskSpec moved = Spec(1, "Moved");
  std::thread([&] { buffer.BeginRunning(moved, 1); }).join();
  buffer.EndRunning(moved);
  EXPECT_FALSE(buffer.TakeBatch().has_value());
}

TEST(TaskEventBufferTest, APeriodicReportShowsOnlyTasksThatHaveRunAWhile) {
  TaskEventBuffer buffer(Source(), 100);
  rpc::TaskSpec just_started = Spec(1, "Quick");
  rpc::TaskSpec long_running = Spec(2, "Slow");
  buffer.BeginRunning(just_started, UnixMicros());
  buffer.BeginRunning(long_running, UnixMicros() - 10'000'000);
  auto batch = buffer.TakeBatch(/*min_running_us=*/1'000'000);
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(batch->kinds(0).function_name(), "Slow");
  // The last report (at exit) takes every running task.
  batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(batch->kinds(0).function_name(), "Quick");
}

TEST(TaskEventBufferTest, AnEarlyReportIsAskedForOncePerBatchWhenAttemptsEndOrTheBufferIsHalfFull) {
  TaskEventBuffer buffer(Source(), 8);
  int asked = 0;
  buffer.SetEarlyReport(2, [&] { ++asked; });
  std::vector<PackedTaskPtr> tasks;
  SubmitEach(&buffer, 1, 3, "f", &tasks);
  EXPECT_EQ(asked, 0);  // submitted, not ended: no report yet
  rpc::TaskResult result;
  for (const PackedTaskPtr& t : tasks) buffer.Ended(*t, result, TaskExecutorInfo{}, nullptr, UnixMicros());
  EXPECT_EQ(asked, 1);  // at the second end only
  ASSERT_TRUE(buffer.TakeBatch().has_value());
  // Many attempts reported in flight: asked for at half the buffer (4 of 8 rows).
  tasks.clear();
  SubmitEach(&buffer, 10, 15, "f", &tasks);
  for (int i = 0; i < 3; ++i) buffer.InFlight(*tasks[i]);
  EXPECT_EQ(asked, 1);
  buffer.InFlight(*tasks[3]);
  EXPECT_EQ(asked, 2);
}

// Submits, dispatches and ends attempt `index` (run for `run_us`, ended at `now_us`,
// or now), failed with `error` when it is set.
PackedTaskPtr RunOne(TaskEventBuffer* buffer, uint64_t index, const std::string& function, int64_t run_us,
                     const rpc::ErrorInfo* error = nullptr, int64_t now_us = 0) {
  PackedTaskPtr packed = DispatchedAt(buffer, index, function, UnixMicros());
  rpc::TaskResult result;
  result.set_start_unix_us(UnixMicros());
  result.set_run_us(run_us);
  buffer->Ended(*packed, result, TaskExecutorInfo{WorkerID::FromRandom(), NodeID::FromRandom(), 9}, error,
                now_us != 0 ? now_us : UnixMicros());
  return packed;
}

int64_t Summarized(const rpc::TaskEventBatch& batch, const std::string& function) {
  int64_t n = 0;
  for (const rpc::TaskKindCount& c : batch.summarized()) {
    if (batch.kinds(c.kind()).function_name() == function) n += c.finished();
  }
  return n;
}

// Tokens the detail bucket (at `per_s`) gained since `since_us`, rounded up.
int64_t Refilled(int64_t since_us, int64_t per_s) { return 1 + (UnixMicros() - since_us) * per_s / 1000000; }

TEST(TaskEventBufferTest, BeyondTheDetailRateShortFinishedAttemptsAreCounted) {
  TaskEventBuffer buffer(Source(), 100000);
  const int64_t start = UnixMicros();
  buffer.SetDetailRate(/*per_s=*/100, /*short_us=*/500000);  // a second's worth at start: 100
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_EXECUTION_EXCEPTION);
  error.set_message("no");
  for (uint64_t i = 0; i < 1000; ++i) {
    RunOne(&buffer, i, i % 2 == 0 ? "Even" : "Odd", 10);
    if (i == 500) {
      RunOne(&buffer, 5000, "Even", 10, &error);  // failures are always rows
      RunOne(&buffer, 5001, "Odd", 600000);       // so are long runs (a worker may have reported them)
    }
  }
  rpc::TaskSpec waiting = Spec(6000, "Even");
  PackedTaskPtr waiting_packed = PackedTask::Pack(waiting);
  buffer.Dispatched(waiting, *waiting_packed, UnixMicros());
  EXPECT_TRUE(buffer.InFlight(*waiting_packed));  // reported in flight: a row
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  const int64_t short_rows = NumRows(*batch) - 3;
  EXPECT_GE(short_rows, 100);
  EXPECT_LE(short_rows, 100 + Refilled(start, 100));
  EXPECT_EQ(Summarized(*batch, "Even") + Summarized(*batch, "Odd") + short_rows, 1000);
  EXPECT_GT(Summarized(*batch, "Even"), 0);
  EXPECT_GT(Summarized(*batch, "Odd"), 0);
  // The first attempts took the bucket's tokens; the error names its own row.
  EXPECT_EQ(RowAt(*batch, 0).TaskId(), TaskID::FromBinary(Spec(0, "").task_id()));
  ASSERT_EQ(batch->errors_size(), 1);
  EXPECT_EQ(RowAt(*batch, batch->errors(0).row()).TaskId(), TaskID::FromBinary(Spec(5000, "").task_id()));
  EXPECT_GT(StateAt(*batch, batch->errors(0).row(), rpc::FAILED), 0);

  // The rate is spent: the waiting attempt's end (its in-flight row was sent) is
  // still a row; of new short attempts the kind's first few in the batch are rows,
  // the others counted.
  const int64_t spent = UnixMicros();
  rpc::TaskResult result;
  result.set_start_unix_us(UnixMicros());
  result.set_run_us(10);
  buffer.Ended(*waiting_packed, result, TaskExecutorInfo{}, nullptr, UnixMicros());
  for (uint64_t i = 7000; i < 7500; ++i) RunOne(&buffer, i, "Even", 10);
  batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_GE(NumRows(*batch), 1 + 4);
  EXPECT_LE(NumRows(*batch), 1 + 4 + Refilled(spent, 100));
  EXPECT_EQ(RowAt(*batch, 0).TaskId(), TaskID::FromBinary(waiting.task_id()));
  EXPECT_EQ(Summarized(*batch, "Even") + NumRows(*batch) - 1, 500);
}

TEST(TaskEventBufferTest, ARareFunctionKeepsItsRowsBesideACommonOne) {
  TaskEventBuffer buffer(Source(), 100000);
  const int64_t start = UnixMicros();
  buffer.SetDetailRate(/*per_s=*/10, /*short_us=*/500000);
  for (uint64_t i = 0; i < 1000; ++i) RunOne(&buffer, i, "Common", 10);
  RunOne(&buffer, 1000, "Rare", 10);
  RunOne(&buffer, 1001, "Rare", 10);
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  int64_t rare = 0;
  for (int64_t i = 0; i < NumRows(*batch); ++i) rare += batch->kinds(RowAt(*batch, i).kind).function_name() == "Rare";
  EXPECT_EQ(rare, 2);
  EXPECT_EQ(Summarized(*batch, "Rare"), 0);
  const int64_t common = NumRows(*batch) - rare;
  EXPECT_GE(common, 10);
  EXPECT_LE(common, 10 + Refilled(start, 10));
  EXPECT_EQ(Summarized(*batch, "Common"), 1000 - common);
}

TEST(TaskEventBufferTest, OnceTheBucketIsSpentTheAttemptsKeptAreSpreadAtTheRate) {
  TaskEventBuffer buffer(Source(), 100000);
  buffer.SetDetailRate(/*per_s=*/100, /*short_us=*/500000);
  // One attempt a millisecond (their end times, ahead of the clock): the second's
  // worth goes to the first ones, then one in ten is kept as a token refills.
  const int64_t start = UnixMicros() + 1000;
  for (uint64_t i = 0; i < 1100; ++i) RunOne(&buffer, i, "f", 10, nullptr, start + static_cast<int64_t>(i) * 1000);
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(NumRows(*batch) + Summarized(*batch, "f"), 1100);
  std::vector<uint64_t> kept;
  for (int64_t i = 0; i < NumRows(*batch); ++i) {
    for (uint64_t j = 0; j < 1100; ++j) {
      if (RowAt(*batch, i).TaskId() == TaskID::FromBinary(Spec(j, "").task_id())) kept.push_back(j);
    }
  }
  ASSERT_EQ(kept.size(), static_cast<size_t>(NumRows(*batch)));
  const auto between = [&](uint64_t from, uint64_t to) {
    return std::count_if(kept.begin(), kept.end(), [&](uint64_t j) { return j >= from && j < to; });
  };
  EXPECT_EQ(between(0, 100), 100);
  EXPECT_NEAR(between(500, 1000), 50, 2);
  EXPECT_NEAR(between(500, 600), 10, 1);
  EXPECT_NEAR(between(900, 1000), 10, 1);
}

TEST(TaskEventBufferTest, AFullBufferCountsShortAttemptsRatherThanDropThem) {
  TaskEventBuffer buffer(Source(), 2);
  buffer.SetDetailRate(/*per_s=*/100, /*short_us=*/500000);
  for (uint64_t i = 0; i < 5; ++i) RunOne(&buffer, i, "f", 10);
  RunOne(&buffer, 5, "f", 600000);  // a long one is dropped
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(NumRows(*batch), 2);
  EXPECT_EQ(Summarized(*batch, "f"), 3);
  EXPECT_EQ(batch->dropped(), 1);
}

TEST(TaskEventBufferTest, APushIsStampedBeforeTheSubmitterLetsGoOfIt) {
  TaskEventBuffer buffer(Source(), 10);
  PackedTaskPtr packed = DispatchedAt(&buffer, 1, "f", 1000);
  std::vector<std::function<void()>> later;
  SentStamps stamps(&buffer);
  stamps.Add(packed);
  stamps.Finish(&later);
  EXPECT_TRUE(later.empty());  // nothing to write until it ends
  // Its reply may come before the submitter runs `later`.
  buffer.Ended(*packed, rpc::TaskResult(), TaskExecutorInfo{}, nullptr, UnixMicros());
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_GE(StateAt(*batch, 0, rpc::SUBMITTED_TO_WORKER), 1000);
  // One reported in flight gets a row for the push, through `later`.
  PackedTaskPtr waiting = DispatchedAt(&buffer, 2, "f", 1000);
  ASSERT_TRUE(buffer.InFlight(*waiting));
  SentStamps again(&buffer);
  again.Add(waiting);
  again.Finish(&later);
  ASSERT_EQ(later.size(), 1u);
  later[0]();
  batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 2);
  EXPECT_GT(StateAt(*batch, 1, rpc::SUBMITTED_TO_WORKER), 0);
  EXPECT_EQ(RowAt(*batch, 1).kind, -1);
  // A push sent in the call that dispatched its task takes the dispatch's time.
  PackedTaskPtr at_once = DispatchedAt(&buffer, 3, "f", 2000);
  SentStamps with_dispatch(&buffer, 2000);
  with_dispatch.Add(at_once);
  buffer.Ended(*at_once, rpc::TaskResult(), TaskExecutorInfo{}, nullptr, UnixMicros());
  batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(StateAt(*batch, 0, rpc::PENDING_NODE_ASSIGNMENT), 2000);
  EXPECT_EQ(StateAt(*batch, 0, rpc::SUBMITTED_TO_WORKER), 2000);
}

TEST(TaskEventBufferTest, AnAttemptThatEndedIsNotReportedInFlight) {
  TaskEventBuffer buffer(Source(), 10);
  PackedTaskPtr packed = RunOne(&buffer, 1, "f", 10);
  EXPECT_TRUE(buffer.InFlight(*packed));  // nothing to do
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(NumRows(*batch), 1);
}

TEST(TaskEventBufferTest, WithoutADetailRateEveryAttemptIsARow) {
  TaskEventBuffer buffer(Source(), 100000);
  for (uint64_t i = 0; i < 300; ++i) RunOne(&buffer, i, "f", 10);
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(NumRows(*batch), 300);
  EXPECT_EQ(batch->summarized_size(), 0);
}

TEST(TaskEventBufferTest, AMovedAttemptKeepsItsStamps) {
  TaskEventBuffer buffer(Source(), 100);
  rpc::TaskSpec spec = Spec(1, "f");
  PackedTaskPtr before = PackedTask::Pack(spec);
  buffer.Submitted(spec, *before, 1234);
  PackedTaskPtr after = PackedTask::Pack(spec);
  buffer.Moved(*before, *after);
  buffer.Reached(*after, rpc::PENDING_NODE_ASSIGNMENT);
  buffer.Failed(*after, rpc::ErrorInfo());
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 1);
  EXPECT_EQ(StateAt(*batch, 0, rpc::PENDING_ARGS_AVAIL), 1234);
  EXPECT_GT(StateAt(*batch, 0, rpc::PENDING_NODE_ASSIGNMENT), 0);
  EXPECT_EQ(batch->kinds(RowAt(*batch, 0).kind).function_name(), "f");
}

// Runs `f` on a thread of its own (recording into another lane than the test's).
template <typename F>
void OnAnotherThread(F f) {
  std::thread thread(f);
  thread.join();
}

TEST(TaskEventBufferTest, AnAttemptRecordedOnSeveralThreadsIsOneRow) {
  TaskEventBuffer buffer(Source(), 1000);
  std::vector<rpc::TaskSpec> specs = {Spec(1, "Plus"), Spec(2, "Minus"), Spec(3, "Plus")};
  std::vector<PackedTaskPtr> tasks;
  for (const rpc::TaskSpec& spec : specs) {
    tasks.push_back(PackedTask::Pack(spec));
    buffer.Dispatched(spec, *tasks.back(), 1000);
  }
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_EXECUTION_EXCEPTION);
  error.set_message("boom");
  TaskExecutorInfo worker{WorkerID::FromRandom(), NodeID::FromRandom(), 77};
  rpc::TaskResult result;
  result.set_start_unix_us(5000);
  result.set_run_us(20);
  OnAnotherThread([&] {
    buffer.ReachedAll(tasks, rpc::SUBMITTED_TO_WORKER, UnixMicros());
    buffer.Ended(*tasks[0], result, worker, nullptr, 6000);
    buffer.Failed(*tasks[1], error);
  });
  // A third thread (another lane) ends the third.
  OnAnotherThread([&] { buffer.Ended(*tasks[2], result, worker, nullptr, 7000); });
  auto batch = buffer.TakeBatch();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(NumRows(*batch), 3);
  absl::flat_hash_map<std::string, int> row_of;  // (the lanes' order is the threads')
  for (int i = 0; i < 3; ++i) row_of[RowAt(*batch, i).TaskId().Binary()] = i;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(row_of.contains(specs[i].task_id()));
    const TaskEventRow row = RowAt(*batch, row_of[specs[i].task_id()]);
    ASSERT_GE(row.kind, 0);
    EXPECT_EQ(batch->kinds(row.kind).function_name(), specs[i].function_name());
    EXPECT_EQ(row.ParentTaskId().Binary(), specs[i].parent_task_id());
    EXPECT_EQ(row.StateUs(rpc::PENDING_ARGS_AVAIL), 1000);
    EXPECT_GT(row.StateUs(rpc::SUBMITTED_TO_WORKER), 0);
    if (i != 1) {
      EXPECT_EQ(row.exec_start_us, 5000);
      EXPECT_EQ(row.exec_end_us, 5020);
      ASSERT_GE(row.executor, 0);
      EXPECT_EQ(batch->executors(row.executor).pid(), 77);
    }
  }
  EXPECT_EQ(StateAt(*batch, row_of[specs[0].task_id()], rpc::FINISHED), 6000);
  EXPECT_EQ(StateAt(*batch, row_of[specs[2].task_id()], rpc::FINISHED), 7000);
  EXPECT_GT(StateAt(*batch, row_of[specs[1].task_id()], rpc::FAILED), 0);
  ASSERT_EQ(batch->errors_size(), 1);
  EXPECT_EQ(batch->errors(0).row(), row_of[specs[1].task_id()]);
  EXPECT_EQ(batch->errors(0).error().message(), "boom");
  EXPECT_EQ(buffer.NumRows(), 0);
}

TEST(TaskEventBufferTest, ThreadsRecordingAtOnceLoseNothing) {
  constexpr int kPerThread = 20000;
  TaskEventBuffer buffer(Source(), 1000000);
  std::vector<rpc::TaskSpec> specs;
  std::vector<PackedTaskPtr> tasks;
  for (int i = 0; i < 2 * kPerThread; ++i) {
    specs.push_back(Spec(static_cast<uint64_t>(i), i % 2 == 0 ? "Even" : "Odd"));
    tasks.push_back(PackedTask::Pack(specs.back()));
  }
  std::array<std::atomic<int>, 2> dispatched{};
  std::atomic<bool> ended_all{false};
  std::vector<rpc::TaskEventBatch> batches;
  // Two submitting threads, one ending right behind them, and batches taken meanwhile.
  auto submit = [&](int side) {
    for (int j = 0; j < kPerThread; ++j) {
      const int i = side * kPerThread + j;
      buffer.Dispatched(specs[i], *tasks[i], UnixMicros());
      dispatched[side].store(j + 1, std::memory_order_release);
    }
  };
  std::thread a(submit, 0), b(submit, 1);
  std::thread ender([&] {
    rpc::TaskResult result;
    for (int j = 0; j < kPerThread; ++j) {
      for (int side = 0; side < 2; ++side) {
        while (dispatched[side].load(std::memory_order_acquire) <= j) std::this_thread::yield();
        buffer.Ended(*tasks[side * kPerThread + j], result, TaskExecutorInfo{}, nullptr, UnixMicros());
      }
    }
    ended_all.store(true);
  });
  // Meanwhile some attempts are reported in flight, racing their ends.
  int reported = 0;
  while (!ended_all.load()) {
    for (int side = 0; side < 2; ++side) {
      const int j = dispatched[side].load(std::memory_order_acquire) - 1;
      if (j >= 0 && j % 7 == 0) reported += buffer.InFlight(*tasks[side * kPerThread + j]) ? 1 : 0;
    }
    if (auto batch = buffer.TakeBatch()) batches.push_back(std::move(*batch));
  }
  a.join();
  b.join();
  ender.join();
  if (auto batch = buffer.TakeBatch()) batches.push_back(std::move(*batch));
  // Every attempt was dispatched and ended: its row with a kind (the one reported in
  // flight, or its end) and its end.
  absl::flat_hash_map<std::string, std::string> function_of;
  for (const rpc::TaskSpec& spec : specs) function_of[spec.task_id()] = spec.function_name();
  absl::flat_hash_map<std::string, int> dispatches, ends;
  for (const rpc::TaskEventBatch& batch : batches) {
    EXPECT_EQ(batch.dropped(), 0);
    for (int64_t i = 0; i < NumRows(batch); ++i) {
      const TaskEventRow row = RowAt(batch, i);
      EXPECT_GT(row.StateUs(rpc::PENDING_NODE_ASSIGNMENT), 0);
      if (row.kind >= 0) {
        ++dispatches[row.TaskId().Binary()];
        EXPECT_EQ(batch.kinds(row.kind).function_name(), function_of[row.TaskId().Binary()]);
      }
      if (row.StateUs(rpc::FINISHED) > 0) ++ends[row.TaskId().Binary()];
    }
  }
  EXPECT_EQ(dispatches.size(), 2u * kPerThread);
  EXPECT_EQ(ends.size(), 2u * kPerThread);
  for (const auto& [id, n] : dispatches) EXPECT_EQ(n, 1);
  for (const auto& [id, n] : ends) EXPECT_EQ(n, 1);
  EXPECT_GT(reported, 0);
}

}  // namespace
}  // namespace manta::core
