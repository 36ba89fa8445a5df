#include "src/object_store/arena_pager.h"

#include <algorithm>

namespace manta::object_store {

ArenaPager::ArenaPager(PagedMemory& memory, int64_t window, int64_t release_after_ms, bool populate_now)
    : memory_(memory), window_(std::clamp<int64_t>(window, 0, memory.capacity())), release_after_ms_(release_after_ms) {
  if (populate_now) memory_.PrefaultUpTo(window_);
}

void ArenaPager::OnAllocate(int64_t offset, int64_t size) {
  if (window_ == 0) return;
  const int64_t wanted = offset + size + window_;
  if (wanted <= memory_.prefault_target()) return;
  // In steps: a stream of small objects wakes the populating thread once per step,
  // not once per object.
  const int64_t step = std::max<int64_t>(kStepBytes, window_ / 4);
  memory_.PrefaultUpTo(std::min(memory_.capacity(), (wanted + step - 1) / step * step));
}

void ArenaPager::Tick(int64_t allocated_end, int64_t now_ms) {
  if (release_after_ms_ <= 0) return;
  const int64_t needed = std::min(memory_.capacity(), allocated_end + window_);
  if (memory_.prefault_target() <= needed + window_) {
    excess_since_ms_ = -1;
    return;
  }
  if (excess_since_ms_ < 0) excess_since_ms_ = now_ms;
  if (now_ms - excess_since_ms_ < release_after_ms_) return;
  memory_.ReleaseFrom(needed);
  excess_since_ms_ = -1;
}

}  // namespace manta::object_store
