// The raylet's memory monitor (ARCHITECTURE.md §8): every memory_monitor_refresh_ms
// it reads how much memory the node uses and, past memory_usage_threshold, asks for
// one worker to be killed (LeaseManager::KillWorkerForMemory picks it) before the
// kernel's OOM killer picks anything, the raylet, GCS or store included. It waits
// for a killed worker to be gone before it asks again.
//
// "The node" is this raylet's memory cgroup when that has a limit below the
// machine's memory (a container, or a test's cgroup), else the machine. Page cache
// the kernel can drop (inactive files) does not count as used.
//
// Thread: loop thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/common/event_loop.h"

namespace manta::raylet {

struct MemoryUsage {
  int64_t used_bytes = 0;
  int64_t limit_bytes = 0;
  // Where it was read: "memory cgroup <path>" or "node".
  std::string scope;
  double fraction() const { return limit_bytes > 0 ? static_cast<double>(used_bytes) / limit_bytes : 0; }
  // "1.23 GB of 2.00 GB (0.62) in memory cgroup /x"
  std::string ToString() const;
};

// Reads the usage of this process's memory cgroup (v2 memory.current / memory.max,
// v1 memory.usage_in_bytes / memory.limit_in_bytes, less inactive file pages) when
// its limit is below the machine's memory, else the machine's (MemTotal -
// MemAvailable). `root` prefixes every path read ("" = the real /proc and /sys;
// tests lay fake files out the same way).
absl::StatusOr<MemoryUsage> ReadMemoryUsage(const std::string& root = "");

class MemoryMonitor {
 public:
  // Kills one worker because of `usage`; returns its pid, or 0 when there is no
  // worker to kill.
  using KillOne = std::function<pid_t(const MemoryUsage& usage, double threshold)>;
  using Reader = std::function<absl::StatusOr<MemoryUsage>()>;

  // `refresh_ms` <= 0: never checks. `reader` defaults to ReadMemoryUsage().
  MemoryMonitor(EventLoop& loop, double threshold, int64_t refresh_ms, KillOne kill_one, Reader reader = nullptr);
  ~MemoryMonitor();

  // One check (also what the timer runs).
  void Check();
  // Whether the last reading was past `fraction` of the threshold.
  bool Above(double fraction) const { return last_fraction_ > fraction * threshold_; }

 private:
  EventLoop& loop_;
  double threshold_;
  KillOne kill_one_;
  Reader reader_;
  std::unique_ptr<Timer> timer_;
  // The last worker killed, until it is gone.
  pid_t killed_pid_ = 0;
  double last_fraction_ = 0;
  bool warned_nothing_to_kill_ = false;
  bool warned_unreadable_ = false;
};

}  // namespace manta::raylet
