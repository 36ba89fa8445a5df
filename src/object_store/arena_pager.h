// ArenaPager: how much of the object store's arena is kept populated (ARCHITECTURE §8).
//
// Populating pages ahead of writes keeps small puts from faulting, but populating
// the whole arena at start costs a core for seconds and commits gigabytes that a
// program running small tasks never uses. So the pager keeps the populated front
// at least `window` bytes ahead of the highest allocation, moving with it in steps
// of a quarter window, from the first allocation on: a node nobody puts objects
// into populates nothing (64 MiB cost a starting raylet ~80 ms of a core, which a
// private cluster that runs for a fraction of a second paid in full). Populated pages more than twice the window beyond the data,
// unneeded for `release_after_ms`, are given back.
//
// Loop thread only (the arena does the populating on its own thread).
#pragma once

#include <cstdint>

#include "src/object_store/paged_memory.h"

namespace manta::object_store {

class ArenaPager {
 public:
  static constexpr int64_t kStepBytes = 2 << 20;

  // `window` 0: nothing is populated ahead. `release_after_ms` 0: nothing is given back.
  // `populate_now`: the window is populated at once instead of at the first allocation.
  ArenaPager(PagedMemory& memory, int64_t window, int64_t release_after_ms, bool populate_now = false);

  // A block [offset, offset + size) was allocated.
  void OnAllocate(int64_t offset, int64_t size);
  // Periodically: `allocated_end` is where the data in the arena ends now.
  void Tick(int64_t allocated_end, int64_t now_ms);

  int64_t window() const { return window_; }

 private:
  PagedMemory& memory_;
  const int64_t window_;
  const int64_t release_after_ms_;
  int64_t excess_since_ms_ = -1;  // since when more is populated than needed; -1: not
};

}  // namespace manta::object_store
