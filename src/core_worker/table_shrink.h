// ShrinkIfMostlyEmpty: gives back the slot array of a hash table that a burst of work
// grew and that is now mostly empty (the tables of the task path: ownership, pending
// tasks, lineage, memory store).
//
// absl's hash tables keep their capacity when entries are erased: a table that once
// held a million pending tasks keeps its million-slot array for good, and every later
// lookup probes that sparse array. The tables call this after erasing. A table is
// rebuilt at the size it needs only once at most 1/8 of its capacity is used, so the
// O(capacity) rebuild is paid for by the many erasures before it (amortized O(1) per
// erase), and a table whose size merely fluctuates never shrinks and grows back.
// Small tables are left alone.
//
// Returns true when the table shrank; iterators and references into it are then
// invalid. Not thread-safe: the caller holds the table's mutex.
#pragma once

#include <cstddef>

namespace manta::core {

// Below this capacity a table is not worth rebuilding (at most a few hundred KB).
inline constexpr size_t kMinShrinkCapacity = 4096;

template <typename Table>
bool ShrinkIfMostlyEmpty(Table& table) {
  if (table.capacity() < kMinShrinkCapacity || table.size() * 8 > table.capacity()) return false;
  table.rehash(0);
  return true;
}

}  // namespace manta::core
