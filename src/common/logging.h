// glog set-up for every Manta executable.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace manta {

// Initialises glog for `program`. With a non-empty `log_dir` logs go to files there
// (one per severity, named after the program) as well as to stderr for ERROR and
// above; otherwise everything goes to stderr. Installs the failure signal handler
// so a crash prints a stack trace. Call once from main().
void InitLogging(const char* program, const std::string& log_dir);
// A worker's logging: with a log directory, its log messages go to one file there,
// <name>.glog.<pid>, and only errors to stderr, so that its stderr (its output file,
// passed on to its driver) holds what the user's code printed. Without one, all to stderr.
void InitWorkerLogging(const std::string& log_dir, const std::string& name);
// Turns off Abseil's per-Lock deadlock detection (Debian's Abseil has it on: a
// global lock and a graph update on every Mutex::Lock), unless the environment
// keeps it (MANTA_KEEP_MUTEX_DEADLOCK_DETECTION=1: scripts/test sets it for every
// process of the suite). Done by InitLogging in the daemons and workers,
// and by ray::Init in a driver, not by the core worker.
void DisableMutexDeadlockDetection();

// Bounds how often one kind of event is logged (refused peers, say, which a hostile
// peer could otherwise turn into a flood): Allow() is true at most once per
// `period_ms`, and then says how many events were left out since the last line.
// Thread-safe.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(int64_t period_ms = 1000) : period_ms_(period_ms) {}
  // True when this event may be logged; *left_out is then the number suppressed.
  bool Allow(int64_t* left_out);
  // " (and N more since the last report)", or "" when N is 0: the end of the line.
  static std::string LeftOut(int64_t left_out);

 private:
  const int64_t period_ms_;
  std::atomic<int64_t> last_ms_{-1};
  std::atomic<int64_t> left_out_{0};
};

}  // namespace manta
