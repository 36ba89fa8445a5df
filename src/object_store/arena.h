// Arena: the node's shared-memory region that holds every object (ARCHITECTURE §8).
//
// Backed by a memfd (no file to leak when the raylet dies), mapped shared by the
// raylet and by every client, which receive the fd over the store socket. Objects
// are (offset, size) inside it.
//
// Pre-faulting: the owner populates pages (MADV_POPULATE_WRITE) on a background
// thread at idle priority: PrefaultUpTo(n) makes sure [0, n) gets populated, front
// first (the allocator hands out low offsets first), so writes land on pages that
// are already allocated and zeroed; ReleaseFrom(n) gives the pages from n on back
// to the system. ArenaPager (arena_pager.h) decides how far ahead of the data to
// go. Clients populate their own page tables for large objects (PopulateRange).
// Thread-safe after construction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "src/object_store/paged_memory.h"

namespace manta::object_store {

class Arena : public PagedMemory {
 public:
  // Creates a new arena of `capacity_bytes` (rounded up to a page).
  static absl::StatusOr<std::unique_ptr<Arena>> Create(int64_t capacity_bytes);
  // Maps an arena received from the raylet. `fd` is adopted (closed on destruction).
  static absl::StatusOr<std::unique_ptr<Arena>> Map(int fd, int64_t capacity_bytes);
  ~Arena() override;

  uint8_t* base() const { return base_; }
  int64_t capacity() const override { return capacity_; }
  int fd() const { return fd_; }

  // Asks the background thread to populate pages up to `end_offset` (owner only).
  void PrefaultUpTo(int64_t end_offset) override;
  // Bytes populated so far from offset 0.
  int64_t prefaulted_bytes() const { return prefaulted_.load(std::memory_order_acquire); }
  // Where the populated front is headed (what PrefaultUpTo and ReleaseFrom asked).
  int64_t prefault_target() const override;
  // Gives the pages of [offset, capacity) back to the system (their contents become
  // zeros) and lowers the target to `offset`. REQUIRES: no object lies there.
  void ReleaseFrom(int64_t offset) override;
  // Blocks until everything requested so far is populated (benchmarks, tests).
  void WaitForPrefault();
  // Fills this process's page tables for [offset, offset + size) without touching
  // contents, so the first access does not fault. `write` for memory about to be written.
  void PopulateRange(int64_t offset, int64_t size, bool write) const;

 private:
  Arena(int fd, uint8_t* base, int64_t capacity) : fd_(fd), base_(base), capacity_(capacity) {}
  void PrefaultMain();

  int fd_;
  uint8_t* base_;
  int64_t capacity_;
  std::atomic<int64_t> prefaulted_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t target_ = 0;   // guarded by mu_
  bool stop_ = false;    // guarded by mu_
  // Bumped by ReleaseFrom: a chunk populated across a release is not counted.
  uint64_t generation_ = 0;  // guarded by mu_
  std::thread prefault_thread_;
};

}  // namespace manta::object_store
