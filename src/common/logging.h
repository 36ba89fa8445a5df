// glog set-up for every Manta executable.
#pragma once

#include <string>

namespace manta {

// Initialises glog for `program`. With a non-empty `log_dir` logs go to files there
// (one per severity, named after the program) as well as to stderr for ERROR and
// above; otherwise everything goes to stderr. Installs the failure signal handler
// so a crash prints a stack trace. Call once from main().
void InitLogging(const char* program, const std::string& log_dir);
// Turns off Abseil's per-Lock deadlock detection (done by InitLogging; drivers,
// which do not own logging set-up, call it directly).
void DisableMutexDeadlockDetection();

}  // namespace manta
