#include "src/common/logging.h"

#include <glog/logging.h>

#include "absl/synchronization/mutex.h"

namespace manta {

void InitLogging(const char* program, const std::string& log_dir) {
  if (log_dir.empty()) {
    FLAGS_logtostderr = true;
  } else {
    FLAGS_log_dir = log_dir;
    FLAGS_stderrthreshold = google::GLOG_ERROR;
  }
  FLAGS_logbufsecs = 0;
  FLAGS_max_log_size = 512;
  google::InitGoogleLogging(program);
  google::InstallFailureSignalHandler();
  DisableMutexDeadlockDetection();
}

void DisableMutexDeadlockDetection() {
  // Debian's Abseil checks every Mutex acquisition for lock-order cycles, which
  // costs a graph update per Lock on hot paths; our lock order is static.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace manta
