#include "src/object_store/allocator.h"

#include <glog/logging.h>

#include <limits>

namespace manta::object_store {

Allocator::Allocator(int64_t capacity_bytes) : capacity_(capacity_bytes / kAlignment * kAlignment) {
  if (capacity_ > 0) InsertFree(0, capacity_);
}

int64_t Allocator::RoundUp(int64_t size_bytes) {
  if (size_bytes <= 0) return kAlignment;
  // Sizes that cannot be rounded without overflowing saturate: larger than any arena.
  constexpr int64_t kLargest = std::numeric_limits<int64_t>::max() / kAlignment * kAlignment;
  if (size_bytes > kLargest) return kLargest;
  return (size_bytes + kAlignment - 1) / kAlignment * kAlignment;
}

void Allocator::InsertFree(int64_t offset, int64_t size) {
  free_by_size_.emplace(size, offset);
  free_by_offset_.emplace(offset, size);
}

void Allocator::EraseFree(int64_t offset, int64_t size) {
  free_by_size_.erase({size, offset});
  free_by_offset_.erase(offset);
}

std::optional<int64_t> Allocator::Allocate(int64_t size_bytes) {
  int64_t size = RoundUp(size_bytes);
  if (size > capacity_) return std::nullopt;
  if (size >= kPageAlignFrom) {
    // Best fit among the blocks that hold a page-aligned block of this size: from the
    // smallest large enough, the first whose padding leaves room (any block with room
    // for the largest padding does).
    for (auto it = free_by_size_.lower_bound({size, 0}); it != free_by_size_.end(); ++it) {
      auto [block_size, block_offset] = *it;
      const int64_t aligned = (block_offset + kPageBytes - 1) / kPageBytes * kPageBytes;
      if (aligned + size > block_offset + block_size) continue;
      Carve(block_offset, block_size, aligned, size);
      return aligned;
    }
  }
  auto it = free_by_size_.lower_bound({size, 0});
  if (it == free_by_size_.end()) return std::nullopt;
  auto [block_size, offset] = *it;
  Carve(offset, block_size, offset, size);
  return offset;
}

void Allocator::Carve(int64_t block_offset, int64_t block_size, int64_t offset, int64_t size) {
  EraseFree(block_offset, block_size);
  if (offset > block_offset) InsertFree(block_offset, offset - block_offset);
  const int64_t end = offset + size, block_end = block_offset + block_size;
  if (block_end > end) InsertFree(end, block_end - end);
  allocated_.emplace(offset, size);
  allocated_bytes_ += size;
}

void Allocator::Free(int64_t offset) {
  auto it = allocated_.find(offset);
  CHECK(it != allocated_.end()) << "free of unallocated offset " << offset;
  int64_t size = it->second;
  allocated_.erase(it);
  allocated_bytes_ -= size;
  // Merge with the free neighbour after, then the one before.
  auto next = free_by_offset_.find(offset + size);
  if (next != free_by_offset_.end()) {
    int64_t next_size = next->second;
    EraseFree(offset + size, next_size);
    size += next_size;
  }
  auto prev = free_by_offset_.lower_bound(offset);
  if (prev != free_by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == offset) {
      int64_t prev_offset = prev->first;
      int64_t prev_size = prev->second;
      EraseFree(prev_offset, prev_size);
      offset = prev_offset;
      size += prev_size;
    }
  }
  InsertFree(offset, size);
}

int64_t Allocator::BlockSize(int64_t offset) const {
  auto it = allocated_.find(offset);
  return it == allocated_.end() ? 0 : it->second;
}

int64_t Allocator::largest_free_block() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

}  // namespace manta::object_store
