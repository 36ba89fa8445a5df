// ScopedTaskContext: per-thread, per-owner, nesting.
#include "src/core_worker/task_context.h"

#include "src/core_worker/task_cancels.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace manta::core {
namespace {

TEST(TaskContextTest, InstalledOnTheCallingThreadOnlyAndForItsOwner) {
  int owner = 0, other_owner = 0;
  TaskContext context{TaskID::FromRandom(), 0, 0, &owner};
  EXPECT_EQ(ScopedTaskContext::Current(&owner), nullptr);
  {
    ScopedTaskContext scope(&context);
    EXPECT_EQ(ScopedTaskContext::Current(&owner), &context);
    EXPECT_EQ(ScopedTaskContext::Current(&other_owner), nullptr);
    TaskContext* seen_elsewhere = &context;
    std::thread([&] { seen_elsewhere = ScopedTaskContext::Current(&owner); }).join();
    EXPECT_EQ(seen_elsewhere, nullptr);  // a thread the task started has no context
  }
  EXPECT_EQ(ScopedTaskContext::Current(&owner), nullptr);
}

TEST(TaskContextTest, NestedContextsRestoreTheOuterOne) {
  int owner = 0;
  TaskContext outer{TaskID::FromRandom(), 0, 0, &owner};
  TaskContext inner{TaskID::FromRandom(), 0, 0, &owner};
  ScopedTaskContext a(&outer);
  {
    ScopedTaskContext b(&inner);
    EXPECT_EQ(ScopedTaskContext::Current(&owner), &inner);
  }
  EXPECT_EQ(ScopedTaskContext::Current(&owner), &outer);
}

// TaskCancels: a cancel for a task not running is kept until the task starts (and
// used up then); one for a task running on a pool thread sets its flag; the kept
// ones are bounded.
TEST(TaskCancelsTest, ACancelBeforeTheTaskStartsIsKeptUntilItStarts) {
  TaskCancels cancels;
  const TaskID task = TaskID::FromRandom();
  EXPECT_FALSE(cancels.TakeEarly(task));
  EXPECT_FALSE(cancels.Cancel(task));  // not running: kept
  EXPECT_EQ(cancels.NumKept(), 1u);
  EXPECT_TRUE(cancels.TakeEarly(task));
  EXPECT_FALSE(cancels.TakeEarly(task));  // used up
  EXPECT_EQ(cancels.NumKept(), 0u);
}

// A steal is of one attempt: a later attempt of the task (run here after all) starts.
TEST(TaskCancelsTest, AStealSkipsOnlyTheAttemptTaken) {
  TaskCancels cancels;
  const TaskID task = TaskID::FromRandom();
  EXPECT_FALSE(cancels.TakeStolen(task, 0));
  cancels.Steal(task, 0);
  EXPECT_FALSE(cancels.TakeEarly(task));  // not a cancel
  EXPECT_FALSE(cancels.TakeStolen(task, 1));
  EXPECT_TRUE(cancels.TakeStolen(task, 0));
  EXPECT_FALSE(cancels.TakeStolen(task, 0));  // used up
  for (int i = 0; i < static_cast<int>(TaskCancels::kMaxKept) + 10; ++i) cancels.Steal(TaskID::FromRandom(), 0);
  cancels.Cancel(task);
  EXPECT_TRUE(cancels.TakeEarly(task));  // the oldest steals went, the new cancel stayed
}

TEST(TaskCancelsTest, ACancelOfATaskOnThePoolSetsItsFlag) {
  TaskCancels cancels;
  int owner = 0;
  TaskContext context{TaskID::FromRandom(), 0, 0, &owner};
  cancels.Begin(&context);
  EXPECT_TRUE(cancels.Cancel(context.task_id));
  EXPECT_TRUE(context.cancelled.load());
  cancels.End(&context);
  EXPECT_FALSE(cancels.Cancel(context.task_id));  // ended: kept, as for a task not started
}

TEST(TaskCancelsTest, CancelsOfTasksThatNeverComeAreBounded) {
  TaskCancels cancels;
  std::vector<TaskID> ids;
  for (size_t i = 0; i < TaskCancels::kMaxKept + 100; ++i) {
    ids.push_back(TaskID::FromRandom());
    cancels.Cancel(ids.back());
  }
  EXPECT_EQ(cancels.NumKept(), TaskCancels::kMaxKept);
  EXPECT_FALSE(cancels.TakeEarly(ids.front()));  // the oldest went
  EXPECT_TRUE(cancels.TakeEarly(ids.back()));
}

}  // namespace
}  // namespace manta::core
