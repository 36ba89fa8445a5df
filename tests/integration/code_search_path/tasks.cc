// Remote functions in a shared library, loaded by the generic manta_worker through
// RayConfig::code_search_path (the driver links the same library to call them).
#include <ray/api.h>
#include <unistd.h>

#include <string>

int Triple(int x) { return 3 * x; }

// The executable running this task: manta_worker, not the driver's binary.
std::string WorkerExecutable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

RAY_REMOTE(Triple, WorkerExecutable);
