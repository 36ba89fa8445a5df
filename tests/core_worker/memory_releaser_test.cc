// MemoryReleaser: releases once a burst of frees is over, not while it goes on, and
// not for a few frees.
#include "src/core_worker/memory_releaser.h"

#include <gtest/gtest.h>

namespace manta::core {
namespace {

class MemoryReleaserTest : public ::testing::Test {
 protected:
  void Free(int n) {
    for (int i = 0; i < n; ++i) releaser_.NoteFreed();
  }
  int released_ = 0;
  MemoryReleaser releaser_{1000, [this] { ++released_; }};
};

TEST_F(MemoryReleaserTest, ReleasesOnceABurstIsOver) {
  Free(600);
  EXPECT_FALSE(releaser_.Check());
  Free(600);
  EXPECT_FALSE(releaser_.Check());  // enough, but still freeing fast
  EXPECT_TRUE(releaser_.Check());   // a quiet period after the burst
  EXPECT_EQ(released_, 1);
  EXPECT_FALSE(releaser_.Check());  // nothing new since
  EXPECT_EQ(released_, 1);
}

TEST_F(MemoryReleaserTest, AFewFreesAreNotWorthIt) {
  Free(999);
  EXPECT_FALSE(releaser_.Check());
  EXPECT_FALSE(releaser_.Check());
  EXPECT_EQ(released_, 0);
}

TEST_F(MemoryReleaserTest, ASteadyRateReleasesAtMostEverySixteenPeriods) {
  int checks = 0;
  for (; checks < 100 && released_ == 0; ++checks) {
    Free(500);
    releaser_.Check();
  }
  EXPECT_EQ(released_, 1);
  EXPECT_GE(checks, 16);
  EXPECT_LE(checks, 17);
}

TEST(MemoryReleaserTrimTest, TrimHeapReturns) { MemoryReleaser::TrimHeap(); }

}  // namespace
}  // namespace manta::core
