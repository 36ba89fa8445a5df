// PagedMemory: what the arena pager (arena_pager.h, the store's side) needs of an
// Arena (arena.h, shared with clients); a fake in tests. Its own header, so that the
// client library does not include the store's.
#pragma once

#include <cstdint>

namespace manta::object_store {

class PagedMemory {
 public:
  virtual ~PagedMemory() = default;
  virtual int64_t capacity() const = 0;
  virtual int64_t prefault_target() const = 0;
  virtual void PrefaultUpTo(int64_t end_offset) = 0;
  virtual void ReleaseFrom(int64_t offset) = 0;
};

}  // namespace manta::object_store
