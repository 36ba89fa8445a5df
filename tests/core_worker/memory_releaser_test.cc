// MemoryReleaser: releases once a burst of frees is over, not while it goes on, and
// not for a few frees.
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
  MemoryReleaser releaser_{1000, [this] { ++released_; }};
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
  MemoryReleaser releaser(10, [&] {
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

TEST(MemoryReleaserTrimTest, TrimHeapReturns) { MemoryReleaser::TrimHeap(); }

}  // namespace
}  // namespace manta::core
