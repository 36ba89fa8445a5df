// Allocator: best-fit allocation of byte ranges inside the object store's arena.
//
// Every block is 64-byte aligned and a multiple of 64 bytes, so objects start on a
// cache line; blocks of kPageAlignFrom bytes or more start on a page when a free
// block allows it (a copy into memory at a small offset from its source's page
// offset runs at a third of the speed: glibc's memcpy and 4K aliasing), else
// wherever they fit. Free blocks are indexed by size (best fit: the smallest block that is
// large enough; the lowest offset among equals, which keeps the arena's hot, already
// faulted-in front in use) and by offset (so a freed block merges with free
// neighbours at once: no fragmentation from adjacent frees). O(log n) per call.
// Not thread-safe: owned by the raylet loop.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace manta::object_store {

class Allocator {
 public:
  static constexpr int64_t kAlignment = 64;
  static constexpr int64_t kPageBytes = 4096;
  static constexpr int64_t kPageAlignFrom = 64 << 10;

  explicit Allocator(int64_t capacity_bytes);

  // Returns the offset of a block of at least `size_bytes` (rounded up to the
  // alignment; 0 bytes takes one aligned unit), or nullopt when no free block fits.
  std::optional<int64_t> Allocate(int64_t size_bytes);
  // REQUIRES: `offset` was returned by Allocate and not yet freed (CHECKed).
  void Free(int64_t offset);

  // Size reserved for the block at `offset` (after rounding), or 0 if none.
  int64_t BlockSize(int64_t offset) const;
  int64_t capacity() const { return capacity_; }
  int64_t allocated_bytes() const { return allocated_bytes_; }
  int64_t free_bytes() const { return capacity_ - allocated_bytes_; }
  // Size of the largest free block: the biggest allocation that can succeed now.
  int64_t largest_free_block() const;
  size_t num_free_blocks() const { return free_by_offset_.size(); }
  size_t num_allocations() const { return allocated_.size(); }
  // End of the highest block in use (0 when none): nothing above it holds data.
  int64_t allocated_end() const {
    return allocated_.empty() ? 0 : allocated_.rbegin()->first + allocated_.rbegin()->second;
  }

  static int64_t RoundUp(int64_t size_bytes);

 private:
  // Takes [offset, offset + size) out of the free block (block_offset, block_size)
  // that holds it; what is left on either side stays free.
  void Carve(int64_t block_offset, int64_t block_size, int64_t offset, int64_t size);
  void InsertFree(int64_t offset, int64_t size);
  void EraseFree(int64_t offset, int64_t size);

  int64_t capacity_;
  int64_t allocated_bytes_ = 0;
  std::set<std::pair<int64_t, int64_t>> free_by_size_;  // (size, offset)
  std::map<int64_t, int64_t> free_by_offset_;           // offset -> size
  std::map<int64_t, int64_t> allocated_;                // offset -> size
};

}  // namespace manta::object_store
