#include "bench_main.h"

#include <ray/api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace manta::bench {
namespace {

// The environment variable that names the bench a process runs: a bench that starts
// itself again (/proc/self/exe is this program, whatever link ran it) runs the same.
constexpr const char* kBenchEnv = "MANTA_BENCH_PROGRAM";

std::map<std::string, BenchMain>& Benches() {
  static auto* benches = new std::map<std::string, BenchMain>();
  return *benches;
}

BenchMain Find(const std::string& name) {
  auto it = Benches().find(name);
  return it == Benches().end() ? nullptr : it->second;
}

int Usage(const char* program) {
  std::fprintf(stderr, "%s: run as one of these names (a link to it), or with the name first:\n", program);
  for (const auto& [name, main] : Benches()) std::fprintf(stderr, "  %s\n", name.c_str());
  return 2;
}

}  // namespace

bool AddBenchMain(const char* name, BenchMain main) {
  Benches()[name] = main;
  return true;
}

}  // namespace manta::bench

int main(int argc, char** argv) {
  using manta::bench::Find;
  // A worker process re-runs main(): ray::Init() serves tasks and never returns.
  if (std::getenv("MANTA_WORKER_MODE") != nullptr) ray::Init();
  const char* slash = std::strrchr(argv[0], '/');
  std::string name = slash == nullptr ? argv[0] : slash + 1;
  if (Find(name) == nullptr) {
    const char* inherited = std::getenv(manta::bench::kBenchEnv);
    if (inherited != nullptr && Find(inherited) != nullptr) {
      name = inherited;
    } else if (argc > 1 && Find(argv[1]) != nullptr) {
      name = argv[1];
      argv[1] = argv[0];
      ++argv;
      --argc;
    } else {
      return manta::bench::Usage(argv[0]);
    }
  }
  setenv(manta::bench::kBenchEnv, name.c_str(), /*overwrite=*/1);
  return Find(name)(argc, argv);
}
