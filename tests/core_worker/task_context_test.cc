// ScopedTaskContext: per-thread, per-owner, nesting.
#include "src/core_worker/task_context.h"

#include <thread>

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

}  // namespace
}  // namespace manta::core
