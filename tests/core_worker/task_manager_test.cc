// TaskManager lineage: a finished task's spec is kept while its return (in the object
// store) is known and holds lineage refs on the arguments it owns and passes by
// reference; a task whose returns came back inline keeps nothing; dropping the return drops it (and
// cascades); ResubmitForRecovery runs the task again with the next attempt after
// dropping the stale value; Puts and evicted records cannot be rebuilt.
#include "src/core_worker/task_manager.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/core_worker/common.h"
#include "tests/core_worker/noop_borrower_client.h"

namespace manta::core {
namespace {

class TaskManagerTest : public ::testing::Test {
 protected:
  explicit TaskManagerTest(int64_t max_lineage_bytes = int64_t{1} << 30)
      : refs_(self_, &borrowers_),
        tasks_(store_, refs_, [this](const PackedTaskPtr& task) { resubmitted_.push_back(task->Unpack()); },
               max_lineage_bytes) {
    refs_.SetOnObjectFreed([this](const ObjectID& id) { tasks_.OnObjectFreed(id); });
  }

  // Submits a task taking `args` by reference, as the core worker does; returns its
  // return id, which holds one local ref.
  ObjectID Submit(const std::vector<ObjectID>& args = {}, int max_retries = 3) {
    TaskID task_id = TaskID::ForNormalTask(JobID::FromInt(1), root_, counter_++);
    rpc::TaskSpec spec = MakeSpec(task_id, self_, args, max_retries);
    ObjectID id = ObjectID::FromIndex(task_id, 1);
    refs_.AddOwnedTaskReturn(id, args);
    last_spec_ = PackedTask::Pack(spec);
    tasks_.AddPendingTask(last_spec_, args);
    return id;
  }
  static rpc::TaskSpec MakeSpec(const TaskID& task_id, const Address& caller, const std::vector<ObjectID>& args = {},
                                int max_retries = 3) {
    rpc::TaskSpec spec;
    spec.set_task_id(task_id.Binary());
    spec.set_function_name("f");
    spec.set_num_returns(1);
    spec.set_max_retries(max_retries);
    *spec.mutable_caller_address() = ToRpc(caller);
    for (const ObjectID& arg : args) {
      rpc::TaskArg* a = spec.add_args();
      a->set_is_ref(true);
      a->mutable_ref()->set_object_id(arg.Binary());
    }
    return spec;
  }
  void Finish(const ObjectID& id, int attempt = 0) { tasks_.CompletePendingTask(ResultOf(id, attempt)); }
  static rpc::TaskResult ResultOf(const ObjectID& id, int attempt = 0) {
    rpc::TaskResult result;
    result.set_task_id(id.Task().Binary());
    result.set_attempt_number(attempt);
    rpc::ReturnObject* r = result.add_returns();
    r->set_object_id(id.Binary());
    r->set_in_plasma(true);
    r->set_node_id(NodeID::FromRandom().Binary());
    r->set_raylet_address("127.0.0.1:9999");
    r->set_size_bytes(400000);
    return result;
  }

  // The result of a task whose return came back inline, in the reply.
  static rpc::TaskResult InlineResultOf(const ObjectID& id, const std::string& data = "small") {
    rpc::TaskResult result;
    result.set_task_id(id.Task().Binary());
    rpc::ReturnObject* r = result.add_returns();
    r->set_object_id(id.Binary());
    r->set_data(data);
    r->set_size_bytes(static_cast<int64_t>(data.size()));
    return result;
  }
  // As the core worker does once `arg`'s value is inlined into the last task's spec.
  void InlineArgumentOfLastTask(const ObjectID& arg, const std::string& data) {
    rpc::TaskSpec spec = last_spec_->Unpack();
    for (rpc::TaskArg& a : *spec.mutable_args()) {
      if (a.ref().object_id() == arg.Binary()) a.set_data(data);
    }
    last_spec_ = PackedTask::Pack(spec);
    tasks_.ArgumentsInlined(last_spec_);
  }

  Address self_{NodeID::FromRandom(), "127.0.0.1", 1000, WorkerID::FromRandom()};
  NoopBorrowerClient borrowers_;
  ReferenceCounter refs_;
  MemoryStore store_;
  std::vector<rpc::TaskSpec> resubmitted_;
  PackedTaskPtr last_spec_;  // as the last Submit() shared it with the task manager
  TaskManager tasks_;
  TaskID root_ = TaskID::ForDriver(JobID::FromInt(1));
  uint64_t counter_ = 0;
};

TEST_F(TaskManagerTest, FinishedTaskIsKeptWhileItsReturnIsReferenced) {
  ObjectID x = Submit();
  Finish(x);
  EXPECT_EQ(tasks_.NumPending(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), 1u);
  EXPECT_GT(tasks_.LineageBytes(), 0);
  refs_.RemoveLocalReference(x);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  EXPECT_EQ(tasks_.LineageBytes(), 0);
  EXPECT_EQ(refs_.NumObjects(), 0u);
}

TEST_F(TaskManagerTest, ATaskWhoseReturnsCameBackInlineKeepsNoLineage) {
  // Its value lives in this process: there is nothing to rebuild.
  ObjectID x = Submit();
  tasks_.CompletePendingTask(InlineResultOf(x));
  EXPECT_EQ(tasks_.NumPending(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  ASSERT_NE(store_.GetIfExists(x), nullptr);
  EXPECT_EQ(store_.GetIfExists(x)->data, "small");
  // Nor does it hold lineage refs on the arguments it owns.
  ObjectID big = Submit();
  Finish(big);
  ObjectID y = Submit({big});
  tasks_.CompletePendingTask(InlineResultOf(y));
  EXPECT_EQ(refs_.LineageRefCount(big), 0);
  EXPECT_EQ(tasks_.NumLineage(), 1u);  // big's own
}

TEST_F(TaskManagerTest, AnArgumentInlinedIntoAKeptSpecIsNotNeededToRebuildIt) {
  ObjectID small = Submit();
  tasks_.CompletePendingTask(InlineResultOf(small, "seven"));
  ObjectID big = Submit();
  Finish(big);
  ObjectID y = Submit({small, big});
  InlineArgumentOfLastTask(small, "seven");
  Finish(y);  // y's return is in the store: y is kept
  EXPECT_EQ(tasks_.NumLineage(), 2u);  // big's and y's
  // The user drops both arguments: `small` goes for good (y's spec carries its
  // value), `big` stays known for y's record, which passes it by reference.
  refs_.RemoveLocalReference(small);
  refs_.RemoveLocalReference(big);
  EXPECT_FALSE(refs_.HasReference(small));
  EXPECT_EQ(refs_.LineageRefCount(big), 1);
  // Rebuilding y runs the spec with the value inlined.
  std::string why;
  ASSERT_EQ(tasks_.ResubmitForRecovery(y, store_.GetIfExists(y), &why), TaskManager::Recovery::kResubmitted) << why;
  ASSERT_EQ(resubmitted_.size(), 1u);
  ASSERT_EQ(resubmitted_[0].args_size(), 2);
  EXPECT_EQ(resubmitted_[0].args(0).data(), "seven");
  EXPECT_EQ(resubmitted_[0].args(1).ref().object_id(), big.Binary());
  EXPECT_TRUE(resubmitted_[0].args(1).data().empty());
}

TEST_F(TaskManagerTest, ABatchOfResultsCompletesEachTaskInOrder) {
  ObjectID x = Submit();
  ObjectID y = Submit();
  ObjectID z = Submit();
  google::protobuf::RepeatedPtrField<rpc::TaskResult> results;
  *results.Add() = ResultOf(x);
  *results.Add() = ResultOf(y, /*attempt=*/1);  // not this attempt: ignored
  results.Add()->set_task_id("malformed");      // skipped
  *results.Add() = ResultOf(z);
  tasks_.CompletePendingTasks(results);
  EXPECT_TRUE(store_.Contains(x));
  EXPECT_FALSE(store_.Contains(y));
  EXPECT_TRUE(store_.Contains(z));
  EXPECT_EQ(tasks_.NumPending(), 1u);
  EXPECT_EQ(tasks_.NumLineage(), 2u);
}

TEST_F(TaskManagerTest, AReturnFreedBeforeTheResultCameLeavesNoLineage) {
  ObjectID x = Submit();
  refs_.RemoveLocalReference(x);  // freed while the task ran
  Finish(x);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  EXPECT_EQ(store_.Size(), 0u);
}

TEST_F(TaskManagerTest, ArgumentsStayKnownWhileADependentsRecordIsKept) {
  ObjectID x = Submit();
  Finish(x);
  ObjectID y = Submit({x});
  Finish(y);
  // The user drops x: only y's record keeps x's entry (and x's own record).
  refs_.RemoveLocalReference(x);
  EXPECT_TRUE(refs_.HasReference(x));
  EXPECT_EQ(refs_.LineageRefCount(x), 1);
  EXPECT_EQ(tasks_.NumLineage(), 2u);
  // Dropping y cascades: y's record, x's entry, x's record.
  refs_.RemoveLocalReference(y);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  EXPECT_EQ(refs_.NumObjects(), 0u);
}

TEST_F(TaskManagerTest, RecoveryRunsTheTaskAgainWithTheNextAttempt) {
  ObjectID x = Submit();
  Finish(x);
  ASSERT_NE(store_.GetIfExists(x), nullptr);
  std::string why;
  EXPECT_EQ(tasks_.ResubmitForRecovery(x, store_.GetIfExists(x), &why), TaskManager::Recovery::kResubmitted);
  ASSERT_EQ(resubmitted_.size(), 1u);
  EXPECT_EQ(resubmitted_[0].attempt_number(), 1);
  // The stale value is gone: readers wait for the new one.
  EXPECT_EQ(store_.GetIfExists(x), nullptr);
  EXPECT_TRUE(tasks_.IsPending(x.Task()));
  EXPECT_EQ(tasks_.ResubmitForRecovery(x, store_.GetIfExists(x), &why), TaskManager::Recovery::kAlreadyPending);
  EXPECT_EQ(resubmitted_.size(), 1u);
  Finish(x, /*attempt=*/1);
  EXPECT_NE(store_.GetIfExists(x), nullptr);
  EXPECT_EQ(tasks_.NumLineage(), 1u);
  refs_.RemoveLocalReference(x);
  EXPECT_EQ(refs_.NumObjects(), 0u);
}

// A worker answers an attempt its owner took back as `stolen`: the task runs again
// (not charged: it had no retry left), once, whichever of the steal's reply and the
// result comes first; a streaming task's items are no business of this table.
TEST_F(TaskManagerTest, AStolenAttemptRunsAgainOnceWithoutACharge) {
  ObjectID x = Submit({}, /*max_retries=*/0);
  rpc::TaskResult stolen;
  stolen.set_task_id(x.Task().Binary());
  stolen.set_attempt_number(0);
  stolen.set_stolen(true);
  tasks_.CompletePendingTask(stolen);
  ASSERT_EQ(resubmitted_.size(), 1u);
  EXPECT_EQ(resubmitted_[0].attempt_number(), 1);
  EXPECT_EQ(store_.GetIfExists(x), nullptr);  // still pending
  EXPECT_FALSE(tasks_.TakeBack(x.Task(), 0, "the steal's reply"));
  tasks_.CompletePendingTask(stolen);  // a duplicate: another attempt now
  EXPECT_EQ(resubmitted_.size(), 1u);
  Finish(x, /*attempt=*/1);
  EXPECT_NE(store_.GetIfExists(x), nullptr);
}

TEST_F(TaskManagerTest, ARecoveryBasedOnAStaleValueIsNotNeeded) {
  ObjectID x = Submit();
  Finish(x);
  StoredObjectPtr first = store_.GetIfExists(x);
  std::string why;
  ASSERT_EQ(tasks_.ResubmitForRecovery(x, first, &why), TaskManager::Recovery::kResubmitted);
  Finish(x, 1);
  StoredObjectPtr rebuilt = store_.GetIfExists(x);
  ASSERT_NE(rebuilt, nullptr);
  // A reader that failed on the first copy reports late: the rebuilt value stays.
  EXPECT_EQ(tasks_.ResubmitForRecovery(x, first, &why), TaskManager::Recovery::kNotNeeded);
  EXPECT_EQ(store_.GetIfExists(x), rebuilt);
  EXPECT_EQ(resubmitted_.size(), 1u);
  refs_.RemoveLocalReference(x);
}

TEST_F(TaskManagerTest, RecoveryChecksRacingACompletionNeverResubmit) {
  // A submitter looking for an absent argument while its task completes on another
  // thread must see it pending or present, never lost.
  for (int i = 0; i < 2000; ++i) {
    ObjectID x = Submit();
    std::atomic<bool> bad{false};
    std::thread checker([&] {
      std::string why;
      while (!store_.Contains(x)) {
        auto r = tasks_.ResubmitForRecovery(x, nullptr, &why);
        if (r == TaskManager::Recovery::kResubmitted || r == TaskManager::Recovery::kImpossible) bad = true;
      }
    });
    Finish(x);
    checker.join();
    ASSERT_FALSE(bad.load()) << "iteration " << i;
    ASSERT_TRUE(resubmitted_.empty());
    refs_.RemoveLocalReference(x);
  }
  EXPECT_EQ(tasks_.NumLineage(), 0u);
}

TEST_F(TaskManagerTest, RecoveryOfAnArgumentHoldsItWhileTheTaskRunsAgain) {
  ObjectID x = Submit();
  Finish(x);
  ObjectID y = Submit({x});
  Finish(y);
  refs_.RemoveLocalReference(x);
  std::string why;
  ASSERT_EQ(tasks_.ResubmitForRecovery(y, store_.GetIfExists(y), &why), TaskManager::Recovery::kResubmitted);
  // x is held by a submitted-task ref now, not by y's record.
  EXPECT_EQ(refs_.SubmittedTaskRefCount(x), 1);
  EXPECT_EQ(refs_.LineageRefCount(x), 0);
  Finish(y, 1);
  EXPECT_EQ(refs_.LineageRefCount(x), 1);
  refs_.RemoveLocalReference(y);
  EXPECT_EQ(refs_.NumObjects(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
}

TEST_F(TaskManagerTest, PutsAndTasksOutOfRetriesCannotBeRebuilt) {
  std::string why;
  ObjectID put = ObjectID::ForPut(root_, 1);
  EXPECT_EQ(tasks_.ResubmitForRecovery(put, nullptr, &why), TaskManager::Recovery::kImpossible);
  EXPECT_NE(why.find("ray::Put"), std::string::npos) << why;
  ObjectID x = Submit({}, /*max_retries=*/0);
  Finish(x);
  EXPECT_EQ(tasks_.ResubmitForRecovery(x, store_.GetIfExists(x), &why), TaskManager::Recovery::kImpossible);
  EXPECT_NE(why.find("no retries left"), std::string::npos) << why;
  refs_.RemoveLocalReference(x);
}

TEST_F(TaskManagerTest, ARetryLeavesTheSharedSpecAsItWas) {
  ObjectID x = Submit();
  PackedTaskPtr shared = last_spec_;
  EXPECT_TRUE(tasks_.RetryOrFailTask(x.Task(), 0, rpc::WORKER_DIED, "worker died"));
  ASSERT_EQ(resubmitted_.size(), 1u);
  EXPECT_EQ(resubmitted_[0].attempt_number(), 1);
  EXPECT_EQ(shared->attempt_number(), 0);  // a submitter's queue may still hold it
  Finish(x, /*attempt=*/1);
  EXPECT_EQ(tasks_.NumLineage(), 1u);
  std::string why;
  ASSERT_EQ(tasks_.ResubmitForRecovery(x, store_.GetIfExists(x), &why), TaskManager::Recovery::kResubmitted);
  EXPECT_EQ(resubmitted_.back().attempt_number(), 2);
  EXPECT_EQ(shared->attempt_number(), 0);
}

// ray::Cancel: a marked task is never retried (its attempt's failure fails it as
// cancelled); a retry that is not charged leaves max_retries as it was; children are
// found by their parent; actor creations and forced actor calls are refused.
TEST_F(TaskManagerTest, ACancelledTaskIsNeverRetried) {
  ObjectID x = Submit({}, /*max_retries=*/3);
  auto marked = tasks_.MarkCancelled(x.Task(), /*force=*/false);
  ASSERT_TRUE(marked.ok());
  ASSERT_TRUE(*marked);
  EXPECT_FALSE(tasks_.ShouldRun(x.Task()));
  EXPECT_TRUE(tasks_.IsPending(x.Task()));
  EXPECT_FALSE(tasks_.RetryOrFailTask(x.Task(), 0, rpc::WORKER_DIED, "worker died"));
  EXPECT_TRUE(resubmitted_.empty());
  StoredObjectPtr value = store_.GetIfExists(x);
  ASSERT_TRUE(value);
  EXPECT_EQ(value->error_type, rpc::TASK_CANCELLED);
  EXPECT_NE(value->error.message().find("was cancelled"), std::string::npos) << value->error.message();
  // Not pending any more: nothing to mark.
  marked = tasks_.MarkCancelled(x.Task(), false);
  ASSERT_TRUE(marked.ok());
  EXPECT_FALSE(*marked);
}

TEST_F(TaskManagerTest, ACancelledTasksResultIsTheCancelledErrorAndItsStoredCopyGoes) {
  std::vector<ObjectID> deleted;
  tasks_.SetOnUnreferencedResult([&](const ObjectID& id, const StoredObjectPtr& value) {
    EXPECT_EQ(value->plasma_raylet_address(), "127.0.0.1:9999");
    deleted.push_back(id);
  });
  ObjectID x = Submit();
  ASSERT_TRUE(*tasks_.MarkCancelled(x.Task(), /*force=*/false));
  Finish(x);  // it finished anyway, its value in a node's store
  StoredObjectPtr value = store_.GetIfExists(x);
  ASSERT_TRUE(value);
  EXPECT_EQ(value->error_type, rpc::TASK_CANCELLED);
  EXPECT_EQ(deleted, std::vector<ObjectID>{x});
  EXPECT_EQ(tasks_.NumPending(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
}

TEST_F(TaskManagerTest, AnUnchargedRetryKeepsTheRetriesLeft) {
  ObjectID x = Submit({}, /*max_retries=*/0);
  EXPECT_TRUE(tasks_.RetryOrFailTask(x.Task(), 0, rpc::WORKER_DIED, "killed for another task", /*charge=*/false));
  ASSERT_EQ(resubmitted_.size(), 1u);
  EXPECT_FALSE(tasks_.RetryOrFailTask(x.Task(), 1, rpc::WORKER_DIED, "worker died"));
  EXPECT_EQ(store_.GetIfExists(x)->error_type, rpc::WORKER_DIED);
}

TEST_F(TaskManagerTest, ChildrenAreFoundByTheirParent) {
  const TaskID parent = TaskID::ForNormalTask(JobID::FromInt(1), root_, 999);
  std::vector<TaskID> children;
  for (uint64_t i = 0; i < 3; ++i) {
    TaskID child = TaskID::ForNormalTask(JobID::FromInt(1), parent, i);
    rpc::TaskSpec spec = MakeSpec(child, self_);
    spec.set_parent_task_id(parent.Binary());
    tasks_.AddPendingTask(PackedTask::Pack(spec), {});
    children.push_back(child);
  }
  Submit();  // a child of root_, not of `parent`
  std::vector<TaskID> found = tasks_.PendingChildren(parent);
  std::sort(found.begin(), found.end());
  std::sort(children.begin(), children.end());
  EXPECT_EQ(found, children);
}

TEST_F(TaskManagerTest, ActorCreationsAndForcedActorCallsAreNotCancelled) {
  for (rpc::TaskType type : {rpc::ACTOR_CREATION_TASK, rpc::ACTOR_TASK}) {
    TaskID task_id = TaskID::ForNormalTask(JobID::FromInt(1), root_, counter_++);
    rpc::TaskSpec spec = MakeSpec(task_id, self_);
    spec.set_type(type);
    tasks_.AddPendingTask(PackedTask::Pack(spec), {});
    EXPECT_EQ(tasks_.MarkCancelled(task_id, /*force=*/true).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(tasks_.ShouldRun(task_id));  // left unmarked
  }
}

// Task events: an attempt still pending at a second ReportInFlight (so for a report
// period) gets its in-flight row, once; an attempt that ended does not; `all` takes
// every pending one; beyond the buffer's room the rest wait for a later call.
TEST_F(TaskManagerTest, AttemptsPendingForAPeriodAreReportedInFlightOnce) {
  TaskEventSource source;
  TaskEventBuffer events(source, 3);
  tasks_.SetTaskEvents(&events);
  auto submit = [&] {
    ObjectID id = Submit();
    events.Submitted(last_spec_->Unpack(), *last_spec_, UnixMicros());
    return id;
  };
  auto rows = [&] {
    std::vector<TaskID> ids;
    if (auto batch = events.TakeBatch()) {
      for (int64_t i = 0; i < NumRows(*batch); ++i) ids.push_back(RowAt(*batch, i).TaskId());
    }
    return ids;
  };
  ObjectID a = submit(), b = submit();
  tasks_.ReportInFlight(false);
  EXPECT_TRUE(rows().empty());  // pending at one call only
  ObjectID c = submit();
  Finish(b);
  (void)rows();  // b's end
  tasks_.ReportInFlight(false);
  EXPECT_EQ(rows(), std::vector<TaskID>{a.Task()});
  tasks_.ReportInFlight(false);
  EXPECT_EQ(rows(), std::vector<TaskID>{c.Task()});
  tasks_.ReportInFlight(true);  // nothing left to report
  EXPECT_TRUE(rows().empty());
  std::vector<ObjectID> more;
  for (int i = 0; i < 5; ++i) more.push_back(submit());
  tasks_.ReportInFlight(true);
  EXPECT_EQ(rows().size(), 3u);  // the buffer's room
  tasks_.ReportInFlight(true);
  EXPECT_EQ(rows().size(), 2u);  // the rest
  tasks_.SetTaskEvents(nullptr);
}

// A taken-back attempt is no failure: one not reported leaves no row at all; one
// reported in flight gets a withdrawn row (the GCS forgets it). Its next attempt
// reports as any other.
TEST_F(TaskManagerTest, ATakenBackAttemptLeavesNoFailedRow) {
  TaskEventSource source;
  TaskEventBuffer events(source, 16);
  tasks_.SetTaskEvents(&events);
  auto rows = [&] {
    std::vector<TaskEventRow> out;
    if (auto batch = events.TakeBatch()) {
      for (int64_t i = 0; i < NumRows(*batch); ++i) out.push_back(RowAt(*batch, i));
    }
    return out;
  };
  ObjectID quiet = Submit(), reported = Submit();
  events.Submitted(last_spec_->Unpack(), *last_spec_, UnixMicros());
  tasks_.ReportInFlight(true);
  ASSERT_EQ(rows().size(), 1u);  // `reported` in flight
  ASSERT_TRUE(tasks_.TakeBack(quiet.Task(), 0, "moved"));
  ASSERT_TRUE(tasks_.TakeBack(reported.Task(), 0, "moved"));
  std::vector<TaskEventRow> after = rows();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].TaskId(), reported.Task());
  EXPECT_EQ(after[0].attempt, 0);
  EXPECT_EQ(after[0].flags, TaskEventRow::kWithdrawn);
  EXPECT_EQ(after[0].StateUs(rpc::FAILED), 0);
  Finish(quiet, /*attempt=*/1);
  Finish(reported, /*attempt=*/1);
  EXPECT_EQ(events.TotalDropped(), 0);
  tasks_.SetTaskEvents(nullptr);
}

TEST_F(TaskManagerTest, TablesShrinkOnceABurstIsFreed) {
  const size_t empty_capacity = tasks_.TableCapacity();
  std::vector<ObjectID> ids;
  for (int i = 0; i < 20000; ++i) ids.push_back(Submit());
  const size_t pending_capacity = tasks_.TableCapacity();
  EXPECT_GE(pending_capacity, ids.size());
  for (const ObjectID& id : ids) Finish(id);
  EXPECT_EQ(tasks_.NumPending(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), ids.size());
  // Freed out of order (odd ones backwards first), as a program may drop them.
  for (size_t i = ids.size(); i-- > 0;) {
    if (i % 2 == 1) refs_.RemoveLocalReference(ids[i]);
  }
  EXPECT_EQ(tasks_.NumLineage(), ids.size() / 2);
  for (size_t i = 0; i < ids.size(); i += 2) refs_.RemoveLocalReference(ids[i]);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  EXPECT_EQ(tasks_.LineageBytes(), 0);
  EXPECT_LE(tasks_.TableCapacity(), std::max<size_t>(empty_capacity, 2 * 4096));
  EXPECT_EQ(refs_.NumObjects(), 0u);
}

TEST_F(TaskManagerTest, ATaskAddedOnOneThreadIsPendingForEveryOtherAtOnce) {
  // The submitting thread adds tasks through an inbox taken in batches; a completing
  // thread that gets a result right after a submission must still find the task.
  constexpr int kTasks = 5000;
  std::vector<ObjectID> ids(kTasks);
  std::atomic<int> submitted{0};
  std::thread submitter([&] {
    for (int i = 0; i < kTasks; ++i) {
      ids[i] = Submit();
      submitted.store(i + 1, std::memory_order_release);
    }
  });
  int completed = 0;
  while (completed < kTasks) {
    const int n = submitted.load(std::memory_order_acquire);
    for (; completed < n; ++completed) {
      EXPECT_TRUE(tasks_.IsPending(ids[completed].Task())) << completed;
      Finish(ids[completed]);
    }
  }
  submitter.join();
  EXPECT_EQ(tasks_.NumPending(), 0u);
  EXPECT_EQ(tasks_.NumLineage(), static_cast<size_t>(kTasks));
  for (const ObjectID& id : ids) {
    ASSERT_NE(store_.GetIfExists(id), nullptr);
    EXPECT_EQ(refs_.GetState(id), ReferenceCounter::State::kReady);
    refs_.RemoveLocalReference(id);
  }
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  EXPECT_EQ(refs_.NumObjects(), 0u);
}

// Room for three kept records.
class ThreeRecordLineageTest : public TaskManagerTest {
 protected:
  ThreeRecordLineageTest()
      : TaskManagerTest(3 * static_cast<int64_t>(
                                MakeSpec(TaskID::ForDriver(JobID::FromInt(1)),
                                         Address{NodeID::FromRandom(), "127.0.0.1", 1000, WorkerID::FromRandom()})
                                    .ByteSizeLong())) {}
};

TEST_F(ThreeRecordLineageTest, EvictionSkipsRecordsAlreadyDropped) {
  ObjectID a = Submit(), b = Submit(), c = Submit(), d = Submit(), e = Submit();
  Finish(a);
  Finish(b);
  Finish(c);
  refs_.RemoveLocalReference(b);  // b's record goes out of order
  EXPECT_EQ(tasks_.NumLineage(), 2u);
  Finish(d);
  EXPECT_EQ(tasks_.NumLineage(), 3u);
  Finish(e);  // over the cap: the oldest kept record (a) goes, not c
  EXPECT_EQ(tasks_.NumLineage(), 3u);
  std::string why;
  EXPECT_EQ(tasks_.ResubmitForRecovery(a, store_.GetIfExists(a), &why), TaskManager::Recovery::kImpossible);
  EXPECT_EQ(tasks_.ResubmitForRecovery(c, store_.GetIfExists(c), &why), TaskManager::Recovery::kResubmitted);
}

class SmallLineageTest : public TaskManagerTest {
 protected:
  SmallLineageTest() : TaskManagerTest(/*max_lineage_bytes=*/300) {}
};

TEST_F(SmallLineageTest, OldestRecordsAreDroppedBeyondTheCap) {
  std::vector<ObjectID> ids;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(Submit());
    Finish(ids.back());
  }
  EXPECT_LE(tasks_.LineageBytes(), 300);
  EXPECT_LT(tasks_.NumLineage(), 10u);
  std::string why;
  EXPECT_EQ(tasks_.ResubmitForRecovery(ids.front(), store_.GetIfExists(ids.front()), &why), TaskManager::Recovery::kImpossible);
  EXPECT_EQ(tasks_.ResubmitForRecovery(ids.back(), store_.GetIfExists(ids.back()), &why), TaskManager::Recovery::kResubmitted);
  Finish(ids.back(), 1);
  for (const ObjectID& id : ids) refs_.RemoveLocalReference(id);
  EXPECT_EQ(tasks_.NumLineage(), 0u);
  EXPECT_EQ(refs_.NumObjects(), 0u);
}

}  // namespace
}  // namespace manta::core
