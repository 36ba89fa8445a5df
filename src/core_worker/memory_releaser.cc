#include "src/core_worker/memory_releaser.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <utility>

namespace manta::core {

MemoryReleaser::MemoryReleaser(int64_t min_frees, std::function<void()> release)
    : min_frees_(min_frees), release_(std::move(release)) {}

MemoryReleaser::~MemoryReleaser() { WaitForRelease(); }

bool MemoryReleaser::Check() {
  const int64_t freed = freed_.load(std::memory_order_relaxed);
  const int64_t in_last_period = freed - freed_at_last_check_;
  const int64_t since_release = freed - freed_at_last_release_;
  freed_at_last_check_ = freed;
  if (since_release < min_frees_ || in_last_period * 16 > since_release) return false;
  if (releasing_.load()) return false;  // the next check tries again
  WaitForRelease();                      // done: reap its thread
  freed_at_last_release_ = freed;
  releasing_ = true;
  release_thread_ = std::thread([this] {
    release_();
    releasing_ = false;
  });
  return true;
}

void MemoryReleaser::WaitForRelease() {
  if (release_thread_.joinable()) release_thread_.join();
}

void MemoryReleaser::TrimHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace manta::core
