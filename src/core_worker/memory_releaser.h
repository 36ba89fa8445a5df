// MemoryReleaser: gives the memory of a finished burst of work back to the OS.
//
// When a million tasks' entries are freed, glibc keeps the freed blocks in its
// arenas and the process stays gigabytes larger than before the burst, unless
// malloc_trim is called. Trimming walks the whole heap, and the pages it releases
// fault back in when they are used again, so it is done only once a burst is over:
// - when at least `min_frees` objects were freed since the last release and the
//   last check period freed less than 1/16 of them (a process working at a steady
//   rate reuses the memory it frees and is released at most every 16 periods);
// - in a worker, whose heap keeps what one task frees for the next (see
//   worker_malloc_trim_threshold_bytes), when it ran tasks since the last release
//   and then none for `idle_checks` checks in a row, idle at each.
//
// Threading: NoteFreed and NoteWorkDone on any thread (relaxed atomics, on the paths
// that free an object or finish a task); Check on one thread (a timer on the core
// worker's loop). `release` runs on a thread of the releaser's own (a trim of a
// large heap takes ~100 ms: not on the loop), one at a time; the destructor waits
// for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace manta::core {

class MemoryReleaser {
 public:
  // `release` returns the free memory (the core worker's: malloc_trim).
  // `idle_checks` 0: never released for being idle after work.
  MemoryReleaser(int64_t min_frees, int64_t idle_checks, std::function<void()> release);
  ~MemoryReleaser();
  MemoryReleaser(const MemoryReleaser&) = delete;
  MemoryReleaser& operator=(const MemoryReleaser&) = delete;

  void NoteFreed() { freed_.fetch_add(1, std::memory_order_relaxed); }
  // A task (or a push of tasks) finished running.
  void NoteWorkDone() { work_.fetch_add(1, std::memory_order_relaxed); }
  // Called every check period, with whether the process runs no task now: starts a
  // release when one is due (and none is running). Returns true when it did.
  bool Check(bool idle = true);
  // Waits until the release started last (if any) is done.
  void WaitForRelease();

  // Returns free heap memory to the OS now (malloc_trim where glibc provides it).
  static void TrimHeap();

 private:
  // Whether frees or idleness after work make a release due now (called once a check).
  bool Due(bool idle);

  const int64_t min_frees_;
  const int64_t idle_checks_;
  const std::function<void()> release_;
  std::atomic<int64_t> freed_{0};
  std::atomic<int64_t> work_{0};
  int64_t freed_at_last_check_ = 0;
  int64_t freed_at_last_release_ = 0;
  int64_t work_at_last_check_ = 0;
  int64_t work_at_last_release_ = 0;
  int64_t quiet_checks_ = 0;
  std::atomic<bool> releasing_{false};
  std::thread release_thread_;
};

}  // namespace manta::core
