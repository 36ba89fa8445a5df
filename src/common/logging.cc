#include "src/common/logging.h"

#include <glog/logging.h>

#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "src/common/util.h"

namespace manta {

void InitLogging(const char* program, const std::string& log_dir) {
  if (log_dir.empty()) {
    FLAGS_logtostderr = true;
  } else {
    FLAGS_log_dir = log_dir;
    FLAGS_stderrthreshold = google::GLOG_ERROR;
  }
  FLAGS_logbufsecs = 0;
  FLAGS_logfile_mode = 0600;
  FLAGS_max_log_size = 512;
  google::InitGoogleLogging(program);
  google::InstallFailureSignalHandler();
  DisableMutexDeadlockDetection();
}

void InitWorkerLogging(const std::string& log_dir, const std::string& name) {
  if (!log_dir.empty()) FLAGS_timestamp_in_logfile_name = false;
  InitLogging("manta_worker", log_dir);
  if (log_dir.empty()) return;
  google::SetLogDestination(google::GLOG_INFO, (log_dir + "/" + name + ".glog.").c_str());
  for (google::LogSeverity severity : {google::GLOG_WARNING, google::GLOG_ERROR, google::GLOG_FATAL}) {
    google::SetLogDestination(severity, "");
  }
}

void DisableMutexDeadlockDetection() {
  // Debian's Abseil checks every Mutex acquisition for lock-order cycles, which
  // costs a graph update per Lock on hot paths; our lock order is static. Kept where
  // asked (the test suite: an inversion aborts the process that made it).
  const char* keep = std::getenv("MANTA_KEEP_MUTEX_DEADLOCK_DETECTION");
  if (keep != nullptr && std::string(keep) == "1") return;
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

std::string LogRateLimiter::LeftOut(int64_t left_out) {
  return left_out > 0 ? " (and " + std::to_string(left_out) + " more since the last report)" : "";
}

bool LogRateLimiter::Allow(int64_t* left_out) {
  int64_t now = MonotonicMs();
  int64_t last = last_ms_.load(std::memory_order_relaxed);
  if ((last >= 0 && now - last < period_ms_) || !last_ms_.compare_exchange_strong(last, now)) {
    left_out_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *left_out = left_out_.exchange(0);
  return true;
}

}  // namespace manta
