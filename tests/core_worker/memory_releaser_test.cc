// MemoryReleaser: releases once a burst of frees is over, not while it goes on, and
// not for a few frees; in a worker, once it has been idle for a while after work.
#include "src/core_worker/memory_releaser.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace manta::core {
namespace {

class MemoryReleaserTest : public ::testing::Test {
 protected:
  void Free(int n) {
    for (int i = 0; i < n; ++i) releaser_.NoteFreed();
  }
  bool Check() {
    bool started = releaser_.Check();
    releaser_.WaitForRelease();
    return started;
  }
  std::atomic<int> released_{0};
  MemoryReleaser releaser_{1000, /*idle_checks=*/0, [this] { ++released_; }};
};

TEST_F(MemoryReleaserTest, ReleasesOnceABurstIsOver) {
  Free(600);
  EXPECT_FALSE(Check());
  Free(600);
  EXPECT_FALSE(Check());  // enough, but still freeing fast
  EXPECT_TRUE(Check());   // a quiet period after the burst
  EXPECT_EQ(released_, 1);
  EXPECT_FALSE(Check());  // nothing new since
  EXPECT_EQ(released_, 1);
}

TEST_F(MemoryReleaserTest, AFewFreesAreNotWorthIt) {
  Free(999);
  EXPECT_FALSE(Check());
  EXPECT_FALSE(Check());
  EXPECT_EQ(released_, 0);
}

TEST_F(MemoryReleaserTest, ASteadyRateReleasesAtMostEverySixteenPeriods) {
  int checks = 0;
  for (; checks < 100 && released_ == 0; ++checks) {
    Free(500);
    Check();
  }
  EXPECT_EQ(released_, 1);
  EXPECT_GE(checks, 16);
  EXPECT_LE(checks, 17);
}

TEST(MemoryReleaserOneAtATimeTest, AReleaseStillRunningIsNotStartedAgain) {
  std::atomic<bool> go{false};
  std::atomic<int> released{0};
  MemoryReleaser releaser(10, /*idle_checks=*/0, [&] {
    while (!go) std::this_thread::yield();
    ++released;
  });
  for (int i = 0; i < 10; ++i) releaser.NoteFreed();
  releaser.Check();
  EXPECT_TRUE(releaser.Check());  // quiet: starts, and blocks in `release`
  for (int i = 0; i < 10; ++i) releaser.NoteFreed();
  releaser.Check();
  EXPECT_FALSE(releaser.Check());  // due again, but the first is still running
  go = true;
  releaser.WaitForRelease();
  EXPECT_EQ(released, 1);
  EXPECT_TRUE(releaser.Check());  // the next check starts it
  releaser.WaitForRelease();
  EXPECT_EQ(released, 2);
}

class IdleReleaseTest : public ::testing::Test {
 protected:
  bool Check(bool idle) {
    bool started = releaser_.Check(idle);
    releaser_.WaitForRelease();
    return started;
  }
  std::atomic<int> released_{0};
  MemoryReleaser releaser_{1000, /*idle_checks=*/3, [this] { ++released_; }};
};

TEST_F(IdleReleaseTest, ReleasesOnceAfterWorkWhenIdleForTheChecksGiven) {
  releaser_.NoteWorkDone();
  EXPECT_FALSE(Check(true));  // work since the last check
  EXPECT_FALSE(Check(true));
  EXPECT_FALSE(Check(true));
  EXPECT_TRUE(Check(true));  // three quiet, idle checks
  EXPECT_EQ(released_, 1);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Check(true));  // no work since
  EXPECT_EQ(released_, 1);
}

TEST_F(IdleReleaseTest, NotWhileATaskRunsOrTasksKeepFinishing) {
  for (int i = 0; i < 10; ++i) {
    releaser_.NoteWorkDone();
    EXPECT_FALSE(Check(true));
  }
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Check(false));  // a long task runs
  EXPECT_EQ(released_, 0);
  EXPECT_FALSE(Check(true));
  EXPECT_FALSE(Check(true));
  EXPECT_TRUE(Check(true));
}

TEST_F(IdleReleaseTest, NothingForAnIdleProcessThatRanNoTask) {
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(Check(true));
  EXPECT_EQ(released_, 0);
}

TEST(IdleReleaseOffTest, ZeroChecksNeverReleaseForIdleness) {
  std::atomic<int> released{0};
  MemoryReleaser releaser(1000, /*idle_checks=*/0, [&] { ++released; });
  releaser.NoteWorkDone();
  for (int i = 0; i < 10; ++i) releaser.Check(true);
  releaser.WaitForRelease();
  EXPECT_EQ(released, 0);
}

TEST(MemoryReleaserTrimTest, TrimHeapReturns) { MemoryReleaser::TrimHeap(); }

}  // namespace
}  // namespace manta::core
