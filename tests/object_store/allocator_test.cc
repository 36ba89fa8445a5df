// Allocator: 64-byte aligned best-fit allocation with coalescing of free neighbours.
#include "src/object_store/allocator.h"

#include <limits>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

namespace manta::object_store {
namespace {

constexpr int64_t kA = Allocator::kAlignment;

int64_t MustAllocate(Allocator& a, int64_t size) {
  std::optional<int64_t> offset = a.Allocate(size);
  EXPECT_TRUE(offset.has_value()) << "Allocate(" << size << ") failed";
  return offset.value_or(-1);
}

// A fully free allocator has exactly one free block covering the whole capacity.
void ExpectAllFree(const Allocator& a) {
  EXPECT_EQ(a.allocated_bytes(), 0);
  EXPECT_EQ(a.free_bytes(), a.capacity());
  EXPECT_EQ(a.largest_free_block(), a.capacity());
  EXPECT_EQ(a.num_free_blocks(), 1u);
  EXPECT_EQ(a.num_allocations(), 0u);
}

TEST(AllocatorTest, RoundUpToAlignment) {
  EXPECT_EQ(Allocator::RoundUp(0), kA);
  EXPECT_EQ(Allocator::RoundUp(-5), kA);
  EXPECT_EQ(Allocator::RoundUp(1), kA);
  EXPECT_EQ(Allocator::RoundUp(63), kA);
  EXPECT_EQ(Allocator::RoundUp(64), kA);
  EXPECT_EQ(Allocator::RoundUp(65), 2 * kA);
  EXPECT_EQ(Allocator::RoundUp(1000), 1024);
}

TEST(AllocatorTest, HugeSizesSaturateInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t size : {kMax, kMax - 62, kMax - kA + 1}) {
    EXPECT_GT(Allocator::RoundUp(size), kMax - kA) << size;  // never wraps to a small block
  }
  Allocator a(1 << 20);
  EXPECT_FALSE(a.Allocate(kMax - 62).has_value());
  EXPECT_FALSE(a.Allocate(kMax).has_value());
  EXPECT_EQ(a.allocated_bytes(), 0);
}

TEST(AllocatorTest, CapacityIsRoundedDownToAlignment) {
  Allocator a(1000);
  EXPECT_EQ(a.capacity(), 960);
  ExpectAllFree(a);
  Allocator tiny(63);
  EXPECT_EQ(tiny.capacity(), 0);
  EXPECT_EQ(tiny.Allocate(1), std::nullopt);
  EXPECT_EQ(tiny.largest_free_block(), 0);
}

TEST(AllocatorTest, EveryOffsetIsAlignedAndBlocksAreRounded) {
  Allocator a(1 << 20);
  std::vector<int64_t> sizes = {1, 63, 64, 65, 100, 127, 128, 129, 1000, 4095, 4097};
  int64_t expected_used = 0;
  for (int64_t size : sizes) {
    int64_t offset = MustAllocate(a, size);
    EXPECT_EQ(offset % kA, 0) << "size " << size;
    EXPECT_EQ(a.BlockSize(offset), Allocator::RoundUp(size));
    expected_used += Allocator::RoundUp(size);
  }
  EXPECT_EQ(a.allocated_bytes(), expected_used);
  EXPECT_EQ(a.num_allocations(), sizes.size());
}

TEST(AllocatorTest, ZeroSizeTakesOneAlignedUnit) {
  Allocator a(4 * kA);
  int64_t first = MustAllocate(a, 0);
  int64_t second = MustAllocate(a, 0);
  EXPECT_NE(first, second);
  EXPECT_EQ(a.BlockSize(first), kA);
  EXPECT_EQ(a.allocated_bytes(), 2 * kA);
}

TEST(AllocatorTest, ExhaustionReturnsNullopt) {
  Allocator a(4 * kA);
  for (int i = 0; i < 4; ++i) MustAllocate(a, kA);
  EXPECT_EQ(a.free_bytes(), 0);
  EXPECT_EQ(a.largest_free_block(), 0);
  EXPECT_EQ(a.Allocate(1), std::nullopt);
  EXPECT_EQ(a.Allocate(0), std::nullopt);
  // Larger than the whole arena.
  Allocator b(4 * kA);
  EXPECT_EQ(b.Allocate(4 * kA + 1), std::nullopt);
  EXPECT_EQ(MustAllocate(b, 4 * kA), 0);
}

TEST(AllocatorTest, BlockSizeOfUnknownOffsetIsZero) {
  Allocator a(4 * kA);
  EXPECT_EQ(a.BlockSize(0), 0);
  int64_t offset = MustAllocate(a, 10);
  EXPECT_EQ(a.BlockSize(offset + kA), 0);
  a.Free(offset);
  EXPECT_EQ(a.BlockSize(offset), 0);
}

TEST(AllocatorTest, FreeOfUnallocatedOffsetDies) {
  Allocator a(4 * kA);
  EXPECT_DEATH(a.Free(0), "unallocated");
}

// Holes of 3, 1, 2 and 1 units, separated by allocated 1-unit blocks, plus a big tail.
class BestFitTest : public ::testing::Test {
 protected:
  BestFitTest() : a_(64 * kA) {
    // Layout (units): [h3:0-2][x:3][h1:4][x:5][h2:6-7][x:8][h1':9][x:10][tail 11..63]
    std::vector<int64_t> blocks;
    for (int64_t units : {3, 1, 1, 1, 2, 1, 1, 1}) blocks.push_back(MustAllocate(a_, units * kA));
    for (size_t i : {0u, 2u, 4u, 6u}) a_.Free(blocks[i]);
  }
  Allocator a_;
};

TEST_F(BestFitTest, PicksSmallestFittingBlockLowestOffsetFirst) {
  ASSERT_EQ(a_.num_free_blocks(), 5u);
  // One unit: the two 1-unit holes tie; the lower offset (4) wins.
  EXPECT_EQ(a_.Allocate(kA), 4 * kA);
  // Next one unit: the other 1-unit hole.
  EXPECT_EQ(a_.Allocate(1), 9 * kA);
  // Two units: exactly the 2-unit hole, not the front 3-unit one.
  EXPECT_EQ(a_.Allocate(2 * kA), 6 * kA);
  // One unit now: only the 3-unit hole and the tail are left; the hole is smaller.
  EXPECT_EQ(a_.Allocate(kA), 0);
  // Three units: the remaining 2-unit piece of the hole is too small: the tail.
  EXPECT_EQ(a_.Allocate(3 * kA), 11 * kA);
  EXPECT_EQ(a_.Allocate(2 * kA), 1 * kA);
}

TEST(AllocatorTest, SplitRemainderStaysFreeAfterTheBlock) {
  Allocator a(16 * kA);
  EXPECT_EQ(MustAllocate(a, kA), 0);
  EXPECT_EQ(a.num_free_blocks(), 1u);
  EXPECT_EQ(a.largest_free_block(), 15 * kA);
  EXPECT_EQ(MustAllocate(a, kA), kA);
}

// Three adjacent blocks a|b|c followed by the free tail; free them in every order.
TEST(AllocatorTest, CoalescingInEveryFreeOrderRestoresOneBlock) {
  std::vector<int> order = {0, 1, 2, 3};
  do {
    Allocator a(8 * kA);
    std::vector<int64_t> blocks;
    for (int64_t units : {1, 2, 1, 4}) blocks.push_back(MustAllocate(a, units * kA));
    ASSERT_EQ(a.free_bytes(), 0);
    for (int i : order) a.Free(blocks[i]);
    SCOPED_TRACE(::testing::PrintToString(order));
    ExpectAllFree(a);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(AllocatorTest, CoalescesWithPreviousNextAndBoth) {
  Allocator a(4 * kA);
  int64_t b0 = MustAllocate(a, kA);
  int64_t b1 = MustAllocate(a, kA);
  int64_t b2 = MustAllocate(a, kA);
  int64_t b3 = MustAllocate(a, kA);
  a.Free(b0);
  a.Free(b1);  // merges with the previous free block
  EXPECT_EQ(a.num_free_blocks(), 1u);
  EXPECT_EQ(a.largest_free_block(), 2 * kA);
  a.Free(b3);
  EXPECT_EQ(a.num_free_blocks(), 2u);
  a.Free(b2);  // merges with both neighbours
  ExpectAllFree(a);

  b0 = MustAllocate(a, 4 * kA);
  a.Free(b0);
  b0 = MustAllocate(a, kA);
  b1 = MustAllocate(a, kA);
  a.Free(b1);  // merges with the next (the free tail)
  EXPECT_EQ(a.num_free_blocks(), 1u);
  EXPECT_EQ(a.largest_free_block(), 3 * kA);
  a.Free(b0);
  ExpectAllFree(a);
}

TEST(AllocatorTest, FragmentationBlocksLargeRequestDespiteEnoughFreeBytes) {
  Allocator a(8 * kA);
  std::vector<int64_t> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(MustAllocate(a, kA));
  for (int i = 0; i < 8; i += 2) a.Free(blocks[i]);
  EXPECT_EQ(a.free_bytes(), 4 * kA);
  EXPECT_EQ(a.largest_free_block(), kA);
  EXPECT_EQ(a.num_free_blocks(), 4u);
  EXPECT_EQ(a.Allocate(2 * kA), std::nullopt);
  // Freeing one of the blocks between two holes creates a three-unit hole.
  a.Free(blocks[3]);
  EXPECT_EQ(a.largest_free_block(), 3 * kA);
  EXPECT_EQ(a.Allocate(2 * kA), 2 * kA);
}

// Blocks of kPageAlignFrom bytes or more start on a page when a free block allows
// it (the padding before them stays free, for small blocks); when only an unaligned
// block fits, they go there all the same.
TEST(AllocatorTest, LargeBlocksStartOnAPageWhenTheyCan) {
  constexpr int64_t kLarge = Allocator::kPageAlignFrom;
  Allocator a(1 << 20);
  EXPECT_EQ(MustAllocate(a, kA), 0);
  const int64_t large = MustAllocate(a, kLarge + 1);
  EXPECT_EQ(large, Allocator::kPageBytes);
  EXPECT_EQ(a.BlockSize(large), kLarge + kA);
  EXPECT_EQ(MustAllocate(a, kLarge - kA), 0 + kLarge + Allocator::kPageBytes + kA)
      << "just below the threshold: 64-byte aligned, right after the large block";
  EXPECT_EQ(MustAllocate(a, 2 * kA), kA) << "the padding before the large block serves small blocks";
  a.Free(large);
  EXPECT_EQ(MustAllocate(a, kLarge), Allocator::kPageBytes) << "freed: the same page again";

  Allocator full(kLarge + kA);
  EXPECT_EQ(MustAllocate(full, kA), 0);
  EXPECT_EQ(full.Allocate(kLarge), kA) << "only an unaligned block is free: it is used";
}

// Random allocations and frees checked against a model: no two live blocks overlap,
// each lies inside the arena, and the byte/block accounting always adds up.
TEST(AllocatorTest, RandomizedAgainstModel) {
  constexpr int64_t kCapacity = 1 << 20;
  Allocator a(kCapacity);
  std::mt19937_64 rng(12345);
  std::map<int64_t, int64_t> live;  // offset -> rounded size
  int failures = 0;
  for (int step = 0; step < 20000; ++step) {
    bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const uint64_t kind = rng() % 6;
      int64_t size = static_cast<int64_t>(kind < 2 ? rng() % 64 : kind < 5 ? rng() % 40000 : rng() % 200000);
      std::optional<int64_t> offset = a.Allocate(size);
      if (!offset) {
        ++failures;
        // Only allowed when no free block is large enough.
        ASSERT_LT(a.largest_free_block(), Allocator::RoundUp(size));
        continue;
      }
      int64_t rounded = Allocator::RoundUp(size);
      ASSERT_EQ(*offset % kA, 0);
      ASSERT_GE(*offset, 0);
      ASSERT_LE(*offset + rounded, a.capacity());
      auto next = live.lower_bound(*offset);
      if (next != live.end()) {
        ASSERT_LE(*offset + rounded, next->first) << "overlaps the next block";
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, *offset) << "overlaps the previous block";
      }
      live[*offset] = rounded;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<int64_t>(rng() % live.size()));
      ASSERT_EQ(a.BlockSize(it->first), it->second);
      a.Free(it->first);
      live.erase(it);
    }
    int64_t used = 0;
    int64_t largest_gap = 0;
    size_t gaps = 0;
    int64_t end = 0;  // of the previous live block
    for (const auto& [offset, size] : live) {
      used += size;
      if (offset > end) ++gaps;
      largest_gap = std::max(largest_gap, offset - end);
      end = offset + size;
    }
    if (end < kCapacity) ++gaps;
    largest_gap = std::max(largest_gap, kCapacity - end);
    ASSERT_EQ(a.allocated_bytes(), used);
    ASSERT_EQ(a.free_bytes(), kCapacity - used);
    ASSERT_EQ(a.num_allocations(), live.size());
    // Coalescing: every maximal gap between live blocks is exactly one free block.
    ASSERT_EQ(a.num_free_blocks(), gaps);
    ASSERT_EQ(a.largest_free_block(), largest_gap);
  }
  EXPECT_GT(failures, 0) << "the scenario should exercise exhaustion too";
  for (const auto& [offset, size] : live) a.Free(offset);
  ExpectAllFree(a);
}

}  // namespace
}  // namespace manta::object_store
