// manta_worker: the generic worker executable, for jobs that use code_search_path.
//
// By default a raylet starts a job's workers from the driver's own binary. A driver
// that sets RayConfig::code_search_path (or --ray_code_search_path=) instead gets
// workers started from this program, with MANTA_WORKER_MODE=1, the worker's identity
// (MANTA_JOB_ID, MANTA_WORKER_ID, ...) and MANTA_CODE_SEARCH_PATH (':'-joined shared
// libraries, or folders whose every .so is loaded) in its environment. ray::Init()
// dlopen()s those libraries, so their RAY_REMOTE functions register, then serves
// tasks until the raylet lets the worker go, and exits the process: it never returns.
//
// The raylet looks for it next to manta_raylet (the install prefix's bin/, or the
// build tree), then in PATH. It links the shared libmanta, so task libraries that
// link Manta::ray share its one function registry.
//
// Run by hand (without MANTA_WORKER_MODE=1) it prints a usage error and exits 2.
#include <ray/api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

int main(int argc, char** argv) {
  const char* mode = std::getenv("MANTA_WORKER_MODE");
  if (mode == nullptr || std::strcmp(mode, "1") != 0) {
    std::fprintf(stderr,
                 "manta_worker: not meant to be run by hand; raylets start it (with MANTA_WORKER_MODE=1) "
                 "for jobs that set code_search_path\n");
    return 2;
  }
  try {
    ray::RayConfig config;
    ray::Init(config, argc, argv);  // serves tasks and exits the process
  } catch (const std::exception& e) {
    std::fprintf(stderr, "manta_worker: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "manta_worker: ray::Init() returned in a worker process\n");
  return 1;
}
