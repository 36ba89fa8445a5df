// GcsTaskManager: rows merged per attempt, malformed batches refused whole, caps
// that evict finished attempts first and count what went, filters before the limit.
#include "src/gcs/gcs_task_manager.h"

#include <gtest/gtest.h>

#include <map>

#include "src/common/task_event_util.h"

namespace manta::gcs {
namespace {

constexpr int kStates = GcsTaskManager::kNumStates;

JobID Job() { return JobID::FromInt(3); }
// The driver's task id has random bytes: one for the whole test.
const TaskID& Driver() {
  static const TaskID driver = TaskID::ForDriver(Job());
  return driver;
}
TaskID Task(uint64_t i) { return TaskID::ForNormalTask(Job(), Driver(), i); }

// Builds a batch row by row.
class BatchBuilder {
 public:
  BatchBuilder() {
    batch_.set_job_id(Job().Binary());
    rpc::TaskKind* kind = batch_.add_kinds();
    kind->set_type(rpc::NORMAL_TASK);
    kind->set_function_name("Work");
    rpc::TaskKind* other = batch_.add_kinds();
    other->set_type(rpc::NORMAL_TASK);
    other->set_function_name("Other");
    rpc::TaskExecutor* e = batch_.add_executors();
    e->set_worker_id(WorkerID::FromRandom().Binary());
    e->set_node_id(NodeID::FromRandom().Binary());
    e->set_pid(777);
  }
  // A row of attempt `attempt` of task `i` in `state` (kind -1: no kind).
  BatchBuilder& Row(uint64_t i, int attempt, rpc::TaskStatus state, int kind = 0, int64_t at_us = 1000) {
    const int64_t n = NumRows(batch_);
    TaskEventRow row;
    row.SetTaskId(Task(i));
    row.attempt = attempt;
    row.kind = kind;
    if (kind >= 0) row.SetParentTaskId(Driver());
    row.state_us[state - 1] = at_us + n;
    const bool ran = state >= rpc::RUNNING;
    row.exec_start_us = ran ? at_us : 0;
    row.exec_end_us = state == rpc::FINISHED ? at_us + 5 : 0;
    row.executor = ran ? 0 : -1;
    AddRow(&batch_, row);
    return *this;
  }
  BatchBuilder& Error(const std::string& message) {
    rpc::TaskEventError* e = batch_.add_errors();
    e->set_row(static_cast<int32_t>(NumRows(batch_)) - 1);
    e->mutable_error()->set_type(rpc::TASK_EXECUTION_EXCEPTION);
    e->mutable_error()->set_message(message);
    return *this;
  }
  rpc::TaskEventBatch& batch() { return batch_; }

 private:
  rpc::TaskEventBatch batch_;
};

rpc::StateFilter Filter(const std::string& key, const std::string& predicate, const std::string& value) {
  rpc::StateFilter f;
  f.set_key(key);
  f.set_predicate(predicate);
  f.set_value(value);
  return f;
}

TEST(GcsTaskManagerTest, RowsOfOneAttemptMergeIntoOneRecord) {
  GcsTaskManager tasks({});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::PENDING_ARGS_AVAIL).batch()).ok());
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING, -1).batch()).ok());
  EXPECT_EQ(tasks.num_attempts(), 1);
  auto listed = tasks.List({}, 10, true);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->rows.size(), 1u);
  const auto& row = listed->rows[0];
  EXPECT_EQ(row["task_id"], Task(1).Hex());
  EXPECT_EQ(row["state"], "RUNNING");
  EXPECT_EQ(row["name"], "Work");
  EXPECT_EQ(row["type"], "NORMAL_TASK");
  EXPECT_EQ(row["worker_pid"], 777);
  EXPECT_EQ(row["job_id"], Job().Hex());
  EXPECT_EQ(row["parent_task_id"], Driver().Hex());
  EXPECT_EQ(row["events"].size(), 2u);
  // Then it fails, with its error.
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FAILED, -1).Error("it broke").batch()).ok());
  listed = tasks.List({Filter("state", "=", "failed")}, 10, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->rows.size(), 1u);
  EXPECT_EQ(listed->rows[0]["error_message"], "it broke");
  EXPECT_EQ(listed->rows[0]["error_type"], "TASK_EXECUTION_EXCEPTION");
}

TEST(GcsTaskManagerTest, AnExportGivesEachAttemptWithItsOwnerJobAndError) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  b.batch().set_worker_id(WorkerID::FromRandom().Binary());
  b.batch().set_pid(4242);
  b.Row(1, 0, rpc::PENDING_ARGS_AVAIL).Row(2, 0, rpc::PENDING_ARGS_AVAIL, 1);
  ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(2, 0, rpc::FAILED, -1).Error("gone").batch()).ok());
  auto out = tasks.Export("");
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(NumRows(*out), 2);
  std::map<std::string, TaskEventRow> by_task;
  for (int64_t i = 0; i < NumRows(*out); ++i) by_task[RowAt(*out, i).TaskId().Hex()] = RowAt(*out, i);
  const TaskEventRow& first = by_task.at(Task(1).Hex());
  const TaskEventRow& second = by_task.at(Task(2).Hex());
  EXPECT_EQ(out->kinds(first.kind).function_name(), "Work");
  EXPECT_EQ(out->kinds(second.kind).function_name(), "Other");
  EXPECT_EQ(first.ParentTaskId(), Driver());
  EXPECT_EQ(JobID::FromBinary(TaskEventRow::AsView(first.job_id)), Job());
  ASSERT_GE(first.owner, 0);
  EXPECT_EQ(out->executors(first.owner).pid(), 4242);
  EXPECT_GT(second.StateUs(rpc::FAILED), 0);
  EXPECT_GT(second.StateUs(rpc::PENDING_ARGS_AVAIL), 0);
  ASSERT_EQ(out->errors_size(), 1);
  EXPECT_EQ(RowAt(*out, out->errors(0).row()).TaskId(), Task(2));
  EXPECT_EQ(out->errors(0).error().message(), "gone");
  // Another job's attempts only: none.
  auto other = tasks.Export(JobID::FromInt(99).Binary());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(NumRows(*other), 0);
  EXPECT_EQ(tasks.Export("abc").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GcsTaskManagerTest, ErrorsOfEarlyRowsLandWhileTheTableGrowsUnderThem) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  b.Row(0, 0, rpc::FAILED).Error("first");
  for (uint64_t i = 1; i < 5000; ++i) b.Row(i, 0, rpc::FINISHED);
  b.Row(5000, 0, rpc::FAILED).Error("last");
  ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
  auto listed = tasks.List({Filter("state", "=", "FAILED")}, 10, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->rows.size(), 2u);
  EXPECT_EQ(listed->rows[0]["error_message"], "first");
  EXPECT_EQ(listed->rows[1]["error_message"], "last");
}

TEST(GcsTaskManagerTest, ARetryReportedWithoutAKindHasItsFirstAttemptsKind) {
  GcsTaskManager tasks({});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FAILED, 1).batch()).ok());
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 1, rpc::FINISHED, -1).batch()).ok());
  auto listed = tasks.List({Filter("attempt_number", "=", "1")}, 10, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->rows.size(), 1u);
  EXPECT_EQ(listed->rows[0]["name"], "Other");
  EXPECT_EQ(listed->rows[0]["state"], "FINISHED");
}

TEST(GcsTaskManagerTest, AMalformedBatchIsRefusedWhole) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  b.Row(1, 0, rpc::FINISHED).Row(2, 0, rpc::FINISHED);
  rpc::TaskEventBatch bad = b.batch();
  bad.mutable_rows()->pop_back();  // not a whole number of rows
  auto s = tasks.AddBatch(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a multiple of 136"), std::string::npos) << s;
  bad = b.batch();
  TaskEventRow row = RowAt(bad, 1);
  row.kind = 9;
  SetRowAt(&bad, 1, row);
  s = tasks.AddBatch(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 1 names kind 9 of 2"), std::string::npos) << s;
  bad = b.batch();
  row = RowAt(bad, 1);
  row.kind = -7;
  SetRowAt(&bad, 1, row);
  EXPECT_EQ(tasks.AddBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = b.batch();
  bad.mutable_errors()->Add()->set_row(5);
  EXPECT_EQ(tasks.AddBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = b.batch();
  row = RowAt(bad, 0);
  row.executor = 3;
  SetRowAt(&bad, 0, row);
  EXPECT_EQ(tasks.AddBatch(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tasks.num_attempts(), 0);
  EXPECT_TRUE(tasks.AddBatch(b.batch()).ok());
  EXPECT_EQ(tasks.num_attempts(), 2);
}

TEST(GcsTaskManagerTest, TheCapEvictsFinishedAttemptsBeforeRunningOnesAndCountsThem) {
  GcsTaskManager tasks({/*max_num=*/100, /*max_bytes=*/int64_t{1} << 30});
  BatchBuilder running;
  for (uint64_t i = 0; i < 10; ++i) running.Row(i, 0, rpc::RUNNING);
  ASSERT_TRUE(tasks.AddBatch(running.batch()).ok());
  for (uint64_t round = 0; round < 10; ++round) {
    BatchBuilder finished;
    for (uint64_t i = 0; i < 100; ++i) finished.Row(1000 + round * 100 + i, 0, rpc::FINISHED);
    ASSERT_TRUE(tasks.AddBatch(finished.batch()).ok());
  }
  EXPECT_EQ(tasks.num_attempts(), 100);
  EXPECT_EQ(tasks.evicted(), 1000 - 90);
  auto listed = tasks.List({Filter("state", "=", "RUNNING")}, 5, false);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->num_matched, 10);
  EXPECT_EQ(listed->rows.size(), 5u);
  // Workers' drops add up with the GCS's own.
  rpc::TaskEventBatch dropped = BatchBuilder().batch();
  dropped.set_dropped(7);
  ASSERT_TRUE(tasks.AddBatch(dropped).ok());
  EXPECT_EQ(tasks.num_dropped(), 1000 - 90 + 7);
}

TEST(GcsTaskManagerTest, TheByteCapHoldsAndRunningAttemptsGoOnlyWhenNothingElseIsLeft) {
  GcsTaskManager tasks({/*max_num=*/1000000, /*max_bytes=*/64 * 1024});
  for (uint64_t round = 0; round < 50; ++round) {
    BatchBuilder b;
    for (uint64_t i = 0; i < 100; ++i) b.Row(round * 100 + i, 0, rpc::RUNNING);
    ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
    EXPECT_LE(tasks.bytes(), 64 * 1024);
  }
  EXPECT_GT(tasks.num_attempts(), 0);
  EXPECT_LT(tasks.num_attempts(), 5000);
  // The newest are kept.
  auto listed = tasks.List({Filter("task_id", "=", Task(4999).Hex())}, 1, false);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->num_matched, 1);
}

TEST(GcsTaskManagerTest, FiltersApplyBeforeTheLimitAndBadOnesAreNamed) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  for (uint64_t i = 0; i < 50; ++i) b.Row(i, 0, rpc::FINISHED);
  for (uint64_t i = 50; i < 53; ++i) b.Row(i, 0, rpc::FINISHED, 1);
  ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
  auto listed = tasks.List({Filter("name", "=", "Other")}, 2, false);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->num_matched, 3);
  EXPECT_EQ(listed->rows.size(), 2u);
  listed = tasks.List({Filter("name", "!=", "Other"), Filter("state", "=", "finished")}, 100, false);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->num_matched, 50);
  auto bad = tasks.List({Filter("colour", "=", "red")}, 10, false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("colour"), std::string::npos);
  EXPECT_NE(bad.status().message().find("func_or_class_name"), std::string::npos);
  EXPECT_EQ(tasks.List({Filter("state", "~", "x")}, 10, false).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GcsTaskManagerTest, ASummaryCountsStatesPerFunction) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  for (uint64_t i = 0; i < 4; ++i) b.Row(i, 0, rpc::FINISHED);
  b.Row(4, 0, rpc::FAILED).Error("x");
  b.Row(5, 0, rpc::RUNNING, 1);
  ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
  auto summary = tasks.Summarize({});
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["total"], 6);
  EXPECT_EQ((*summary)["by_name"]["Work"]["state_counts"]["FINISHED"], 4);
  EXPECT_EQ((*summary)["by_name"]["Work"]["state_counts"]["FAILED"], 1);
  EXPECT_EQ((*summary)["by_name"]["Other"]["state_counts"]["RUNNING"], 1);
}

TEST(GcsTaskManagerTest, TheGcsRecordsTheActorCreationsItPushes) {
  GcsTaskManager tasks({});
  rpc::TaskSpec spec;
  spec.set_type(rpc::ACTOR_CREATION_TASK);
  spec.set_task_id(Task(9).Binary());
  spec.set_job_id(Job().Binary());
  spec.set_function_name("Counter::Create");
  spec.set_name("Counter");
  tasks.RecordOwn(spec, 0, rpc::SUBMITTED_TO_WORKER, nullptr, nullptr, nullptr);
  rpc::TaskExecutor worker;
  worker.set_worker_id(WorkerID::FromRandom().Binary());
  worker.set_pid(31);
  rpc::TaskResult result;
  result.set_start_unix_us(5000);
  result.set_run_us(10);
  rpc::ErrorInfo error;
  error.set_type(rpc::TASK_EXECUTION_EXCEPTION);
  error.set_message("the constructor threw");
  tasks.RecordOwn(spec, 0, rpc::FAILED, &worker, &result, &error);
  auto listed = tasks.List({Filter("type", "=", "actor_creation_task")}, 10, true);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->rows.size(), 1u);
  EXPECT_EQ(listed->rows[0]["name"], "Counter");
  EXPECT_EQ(listed->rows[0]["func_or_class_name"], "Counter::Create");
  EXPECT_EQ(listed->rows[0]["state"], "FAILED");
  EXPECT_EQ(listed->rows[0]["error_message"], "the constructor threw");
  EXPECT_EQ(listed->rows[0]["worker_pid"], 31);
  EXPECT_EQ(listed->rows[0]["start_time_ms"], 5);
}

// ---- StateCounts: attempts by (function, latest state), for ray_tasks --------------

int64_t CountOf(const GcsTaskManager& tasks, const std::string& name, rpc::TaskStatus state) {
  const auto counts = tasks.StateCounts();
  auto it = counts.find({name, state});
  return it == counts.end() ? 0 : it->second;
}

// The sum over every (function, state), checking that none is negative.
int64_t TotalCount(const GcsTaskManager& tasks) {
  int64_t total = 0;
  for (const auto& [key, n] : tasks.StateCounts()) {
    EXPECT_GE(n, 0) << key.first << " " << rpc::TaskStatus_Name(key.second);
    total += n;
  }
  return total;
}

TEST(GcsTaskManagerStateCountsTest, AnAttemptCountsOnceInItsLatestState) {
  GcsTaskManager tasks({});
  EXPECT_EQ(TotalCount(tasks), 0);
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::PENDING_ARGS_AVAIL).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::PENDING_ARGS_AVAIL), 1);
  EXPECT_EQ(TotalCount(tasks), 1);
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING, -1, 2000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::PENDING_ARGS_AVAIL), 0);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 1);
  EXPECT_EQ(TotalCount(tasks), 1);
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FINISHED, -1, 3000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 1);
  EXPECT_EQ(TotalCount(tasks), 1);
}

TEST(GcsTaskManagerStateCountsTest, EachFunctionHasItsOwnCounts) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  for (uint64_t i = 0; i < 3; ++i) b.Row(i, 0, rpc::FINISHED);
  for (uint64_t i = 3; i < 5; ++i) b.Row(i, 0, rpc::RUNNING, /*kind=*/1);
  b.Row(5, 0, rpc::SUBMITTED_TO_WORKER, 1);
  ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 3);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::RUNNING), 2);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::SUBMITTED_TO_WORKER), 1);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::FINISHED), 0);
  EXPECT_EQ(TotalCount(tasks), 6);
  // One of Other's finishes: only Other's counts move.
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(3, 0, rpc::FINISHED, -1, 5000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Other", rpc::RUNNING), 1);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::FINISHED), 1);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 3);
}

TEST(GcsTaskManagerStateCountsTest, AttemptsCountedWithoutRowsAreFinishedAndCountedAsNotListed) {
  GcsTaskManager tasks({});
  BatchBuilder b;
  b.Row(1, 0, rpc::FINISHED).Row(2, 0, rpc::RUNNING, /*kind=*/1);
  rpc::TaskKindCount* work = b.batch().add_summarized();
  work->set_kind(0);
  work->set_finished(900);
  rpc::TaskKindCount* other = b.batch().add_summarized();
  other->set_kind(1);
  other->set_finished(40);
  ASSERT_TRUE(tasks.AddBatch(b.batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 901);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::FINISHED), 40);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::RUNNING), 1);
  EXPECT_EQ(TotalCount(tasks), 942);
  EXPECT_EQ(tasks.num_attempts(), 2);  // no records for them
  EXPECT_EQ(tasks.summarized(), 940);
  EXPECT_EQ(tasks.num_dropped(), 940);  // a listing cannot show them
  // A summary naming a kind the batch does not have, or counting below zero, is refused
  // (with the whole batch).
  BatchBuilder bad;
  bad.Row(3, 0, rpc::FINISHED);
  bad.batch().add_summarized()->set_kind(2);
  auto s = tasks.AddBatch(bad.batch());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a summary counts 0 of kind 2 of 2"), std::string::npos) << s;
  bad.batch().mutable_summarized(0)->set_kind(0);
  bad.batch().mutable_summarized(0)->set_finished(-5);
  EXPECT_EQ(tasks.AddBatch(bad.batch()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tasks.num_attempts(), 2);
  EXPECT_EQ(TotalCount(tasks), 942);
}

TEST(GcsTaskManagerStateCountsTest, FailedAttemptsAndTheirRetriesCountApart) {
  GcsTaskManager tasks({});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING).batch()).ok());
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FAILED, -1, 2000).Error("boom").batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FAILED), 1);
  // The retry (reported without a kind) counts under the same function.
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 1, rpc::RUNNING, -1, 3000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 1);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FAILED), 1);
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 1, rpc::FINISHED, -1, 4000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 1);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FAILED), 1);
  EXPECT_EQ(TotalCount(tasks), 2);
}

// An attempt taken back before it ran (a busy worker gave it up) is withdrawn: listed
// nowhere, counted nowhere, not as evicted either; its next attempt counts as usual.
TEST(GcsTaskManagerStateCountsTest, AWithdrawnAttemptIsForgotten) {
  GcsTaskManager tasks({});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::SUBMITTED_TO_WORKER).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::SUBMITTED_TO_WORKER), 1);
  BatchBuilder withdraw;
  TaskEventRow row;
  row.SetTaskId(Task(1));
  row.flags = TaskEventRow::kWithdrawn;
  AddRow(&withdraw.batch(), row);
  row.SetTaskId(Task(2));  // never reported: nothing to forget
  AddRow(&withdraw.batch(), row);
  withdraw.Row(1, 1, rpc::PENDING_NODE_ASSIGNMENT);
  ASSERT_TRUE(tasks.AddBatch(withdraw.batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::SUBMITTED_TO_WORKER), 0);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::PENDING_NODE_ASSIGNMENT), 1);
  EXPECT_EQ(TotalCount(tasks), 1);
  EXPECT_EQ(tasks.num_attempts(), 1);
  EXPECT_EQ(tasks.evicted(), 0);
  auto listed = tasks.List({}, 10, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->rows.size(), 1u);
  EXPECT_EQ(listed->rows[0]["attempt_number"], 1);
}

TEST(GcsTaskManagerStateCountsTest, EvictionKeepsEndedCountsAndDropsRunningOnes) {
  GcsTaskManager tasks({/*max_num=*/3, /*max_bytes=*/int64_t{1} << 30});
  BatchBuilder running;
  for (uint64_t i = 0; i < 5; ++i) running.Row(i, 0, rpc::RUNNING);
  ASSERT_TRUE(tasks.AddBatch(running.batch()).ok());
  // Nothing had ended: the two oldest running attempts went, and their counts with them.
  EXPECT_EQ(tasks.evicted(), 2);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 3);
  BatchBuilder ended;
  for (uint64_t i = 10; i < 13; ++i) ended.Row(i, 0, rpc::FINISHED);
  ended.Row(13, 0, rpc::FAILED).Error("x");
  ASSERT_TRUE(tasks.AddBatch(ended.batch()).ok());
  // The ended attempts go first; their counts stay.
  EXPECT_EQ(tasks.num_attempts(), 3);
  EXPECT_EQ(tasks.evicted(), 6);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 3);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FAILED), 1);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 3);
  // Now the running ones are pushed out by newer running ones: the count follows
  // what is kept, and never goes below zero.
  BatchBuilder newer;
  for (uint64_t i = 20; i < 26; ++i) newer.Row(i, 0, rpc::PENDING_NODE_ASSIGNMENT, 1);
  ASSERT_TRUE(tasks.AddBatch(newer.batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::PENDING_NODE_ASSIGNMENT), 3);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 3);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FAILED), 1);
  EXPECT_EQ(TotalCount(tasks), 3 + 1 + 3);
}

TEST(GcsTaskManagerStateCountsTest, ALateReportOfAnEvictedRunningAttemptCountsItOnceAgain) {
  GcsTaskManager tasks({/*max_num=*/1, /*max_bytes=*/int64_t{1} << 30});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING).Row(2, 0, rpc::RUNNING).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 1);
  // Task 1 was evicted while running; its end arrives later.
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FINISHED, -1, 5000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "(unknown)", rpc::FINISHED), 1);  // its kind went with it
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 1);
  EXPECT_EQ(TotalCount(tasks), 2);
}

TEST(GcsTaskManagerStateCountsTest, DuplicateAndLateReportsDoNotCountTwice) {
  GcsTaskManager tasks({});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING).Row(1, 0, rpc::RUNNING).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 1);
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FINISHED, -1, 3000).batch()).ok());
  for (int repeat = 0; repeat < 3; ++repeat) {
    // The same report again (a retried RPC), with and without its kind.
    ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::FINISHED, repeat % 2 ? 0 : -1, 3000).batch()).ok());
  }
  // An earlier state arriving after the end does not move it back.
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::PENDING_ARGS_AVAIL, -1, 500).batch()).ok());
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING, -1, 2000).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "Work", rpc::FINISHED), 1);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Work", rpc::PENDING_ARGS_AVAIL), 0);
  EXPECT_EQ(TotalCount(tasks), 1);
  EXPECT_EQ(tasks.num_attempts(), 1);
}

TEST(GcsTaskManagerStateCountsTest, AnAttemptLearningItsKindMovesItsCount) {
  GcsTaskManager tasks({});
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING, -1).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "(unknown)", rpc::RUNNING), 1);
  ASSERT_TRUE(tasks.AddBatch(BatchBuilder().Row(1, 0, rpc::RUNNING, 1).batch()).ok());
  EXPECT_EQ(CountOf(tasks, "(unknown)", rpc::RUNNING), 0);
  EXPECT_EQ(CountOf(tasks, "Other", rpc::RUNNING), 1);
  EXPECT_EQ(TotalCount(tasks), 1);
}

TEST(GcsTaskManagerStateCountsTest, TheGcsOwnRecordsAreCounted) {
  GcsTaskManager tasks({});
  rpc::TaskSpec spec;
  spec.set_type(rpc::ACTOR_CREATION_TASK);
  spec.set_task_id(Task(9).Binary());
  spec.set_job_id(Job().Binary());
  spec.set_function_name("Counter::Create");
  tasks.RecordOwn(spec, 0, rpc::SUBMITTED_TO_WORKER, nullptr, nullptr, nullptr);
  EXPECT_EQ(CountOf(tasks, "Counter::Create", rpc::SUBMITTED_TO_WORKER), 1);
  tasks.RecordOwn(spec, 0, rpc::FINISHED, nullptr, nullptr, nullptr);
  EXPECT_EQ(CountOf(tasks, "Counter::Create", rpc::SUBMITTED_TO_WORKER), 0);
  EXPECT_EQ(CountOf(tasks, "Counter::Create", rpc::FINISHED), 1);
}

}  // namespace
}  // namespace manta::gcs
