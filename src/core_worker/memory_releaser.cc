#include "src/core_worker/memory_releaser.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <utility>

namespace manta::core {

MemoryReleaser::MemoryReleaser(int64_t min_frees, int64_t idle_checks, std::function<void()> release)
    : min_frees_(min_frees), idle_checks_(idle_checks), release_(std::move(release)) {}

MemoryReleaser::~MemoryReleaser() { WaitForRelease(); }

bool MemoryReleaser::Due(bool idle) {
  const int64_t freed = freed_.load(std::memory_order_relaxed);
  const int64_t in_last_period = freed - freed_at_last_check_;
  const int64_t since_release = freed - freed_at_last_release_;
  freed_at_last_check_ = freed;
  const int64_t work = work_.load(std::memory_order_relaxed);
  quiet_checks_ = (idle && work == work_at_last_check_) ? quiet_checks_ + 1 : 0;
  work_at_last_check_ = work;
  const bool burst_over = since_release >= min_frees_ && in_last_period * 16 <= since_release;
  const bool idle_after_work = idle_checks_ > 0 && work != work_at_last_release_ && quiet_checks_ >= idle_checks_;
  return burst_over || idle_after_work;
}

bool MemoryReleaser::Check(bool idle) {
  if (!Due(idle)) return false;
  if (releasing_.load()) return false;  // the next check tries again
  WaitForRelease();                      // done: reap its thread
  freed_at_last_release_ = freed_at_last_check_;
  work_at_last_release_ = work_at_last_check_;
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
