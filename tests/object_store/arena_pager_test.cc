// ArenaPager (src/object_store/arena_pager.h) against a fake arena: how far ahead of
// the data pages are populated, blocks left to the client, and when pages are given
// back.
#include "src/object_store/arena_pager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace manta::object_store {
namespace {

constexpr int64_t kMiB = 1 << 20;

class FakeMemory : public PagedMemory {
 public:
  explicit FakeMemory(int64_t capacity) : capacity_(capacity) {}
  int64_t capacity() const override { return capacity_; }
  int64_t prefault_target() const override { return target; }
  void PrefaultUpTo(int64_t end) override { target = std::max(target, end); }
  void ReleaseFrom(int64_t offset) override {
    releases.push_back(offset);
    target = std::min(target, offset);
  }
  int64_t target = 0;
  std::vector<int64_t> releases;

 private:
  int64_t capacity_;
};

TEST(ArenaPagerTest, StartsAtTheFirstObjectAndKeepsTheWindowAheadOfTheData) {
  FakeMemory memory(1024 * kMiB);
  ArenaPager pager(memory, 64 * kMiB, 10000);
  EXPECT_EQ(memory.target, 0) << "nothing before the first object";
  pager.OnAllocate(0, 4096);
  EXPECT_EQ(memory.target, 80 * kMiB) << "in steps of a quarter window";
  for (int64_t offset = 4096; offset < 16 * kMiB; offset += 4096) pager.OnAllocate(offset, 4096);
  EXPECT_EQ(memory.target, 80 * kMiB) << "no new request for each small object";
  pager.OnAllocate(100 * kMiB, 4096);
  EXPECT_EQ(memory.target, 176 * kMiB);
  pager.OnAllocate(1000 * kMiB, 4096);
  EXPECT_EQ(memory.target, 1024 * kMiB) << "never past the arena";
}

TEST(ArenaPagerTest, BigBlocksGetTheWindowBeyondThem) {
  FakeMemory memory(8192 * kMiB);
  ArenaPager pager(memory, 64 * kMiB, 10000);
  pager.OnAllocate(0, 1024 * kMiB);
  EXPECT_EQ(memory.target, 1088 * kMiB);
}

TEST(ArenaPagerTest, PagesFarBeyondTheDataAreGivenBackOnceUnneededForAWhile) {
  FakeMemory memory(8192 * kMiB);
  ArenaPager pager(memory, 64 * kMiB, 10000);
  pager.OnAllocate(0, 1024 * kMiB);
  ASSERT_EQ(memory.target, 1088 * kMiB);
  // Still there: nothing to give back.
  pager.Tick(1024 * kMiB, 100000);
  EXPECT_TRUE(memory.releases.empty());
  // Gone: what lies beyond twice the window must stay unneeded for 10 s.
  pager.Tick(0, 200000);
  pager.Tick(0, 209999);
  EXPECT_TRUE(memory.releases.empty());
  pager.Tick(0, 210000);
  ASSERT_EQ(memory.releases.size(), 1u);
  EXPECT_EQ(memory.releases[0], 64 * kMiB) << "the window ahead of the data stays";
  EXPECT_EQ(memory.target, 64 * kMiB);
  pager.Tick(0, 400000);
  EXPECT_EQ(memory.releases.size(), 1u);
}

TEST(ArenaPagerTest, DataComingBackStopsARelease) {
  FakeMemory memory(8192 * kMiB);
  ArenaPager pager(memory, 64 * kMiB, 1000);
  pager.OnAllocate(0, 512 * kMiB);  // target 576 MiB
  pager.Tick(0, 1000);               // in excess from now
  pager.Tick(500 * kMiB, 1500);      // data up there again: not in excess
  pager.Tick(0, 2100);               // in excess again, but only from 2100
  EXPECT_TRUE(memory.releases.empty());
  pager.Tick(0, 3100);
  EXPECT_EQ(memory.releases.size(), 1u);
}

TEST(ArenaPagerTest, AskedToPopulateNowStartsWithTheWindow) {
  FakeMemory memory(1024 * kMiB);
  ArenaPager pager(memory, 256 * kMiB, 10000, /*populate_now=*/true);
  EXPECT_EQ(memory.target, 256 * kMiB);
}

TEST(ArenaPagerTest, AZeroWindowPopulatesNothing) {
  FakeMemory memory(8192 * kMiB);
  ArenaPager pager(memory, 0, 1000);
  pager.OnAllocate(0, 1024 * kMiB);
  pager.OnAllocate(2048 * kMiB, 4096);
  EXPECT_EQ(memory.target, 0);
}

TEST(ArenaPagerTest, AZeroReleaseTimeKeepsEverything) {
  FakeMemory memory(8192 * kMiB);
  ArenaPager pager(memory, 64 * kMiB, 0);
  pager.OnAllocate(4000 * kMiB, 4096);
  pager.Tick(0, 1000000);
  EXPECT_TRUE(memory.releases.empty());
}

}  // namespace
}  // namespace manta::object_store
