// Task and object microbenchmarks through the public API, named after Ray's
// microbenchmark (ray/_private/ray_perf.py) so the figures compare directly.
// Prints one JSON object. Starts its own local cluster with the `manta` CLI (in a
// private temp root) and joins it as a driver; init_shutdown_local_cluster_s times
// ray::Init() + ray::Shutdown() of a private cluster (no address).
//
//   task_bench [--seconds S] [--only name,name] [--clients N]
//
// The binary is also its own worker (single-binary mode), and its own extra
// client for multi_client_tasks_async (re-run with --client-of=<address>).
#include <ray/api.h>

#include "bench_cluster.h"
#include "src/common/process.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int SmallValue() { return 0; }
RAY_REMOTE(SmallValue);

struct Options {
  double seconds = 2.0;
  std::set<std::string> only;
  int clients = 2;
  std::string client_of;  // internal: run as an extra client of this cluster
  long client_tasks = 0;
};

bool Want(const Options& o, const std::string& name) { return o.only.empty() || o.only.count(name) > 0; }

// Repeats `step` (which does `per_step` operations) for about `seconds`; returns ops/s.
template <typename F>
double Rate(double seconds, long per_step, F step) {
  step();  // warm-up: leases, workers, connections
  long ops = 0;
  auto t0 = Clock::now();
  double elapsed = 0;
  do {
    step();
    ops += per_step;
    elapsed = Since(t0);
  } while (elapsed < seconds);
  return ops / elapsed;
}

double TasksAsync(long n) {
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) refs.push_back(ray::Task(SmallValue).Remote());
  ray::Get(refs);
  return n / Since(t0);
}

int RunClient(const Options& o) {
  ray::RayConfig config;
  config.address = o.client_of;
  ray::Init(config);
  TasksAsync(1000);  // warm-up
  double rate = TasksAsync(o.client_tasks);
  std::printf("%f\n", rate);
  ray::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A worker process re-runs main(): let it reach ray::Init (which serves tasks and
  // never returns) before this driver starts a cluster of its own.
  if (std::getenv("MANTA_WORKER_MODE") != nullptr) ray::Init();
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
      if (a == flag && i + 1 < argc) return argv[++i];
      return "";
    };
    if (auto v = value("--seconds"); !v.empty()) {
      o.seconds = std::stod(v);
    } else if (auto v = value("--only"); !v.empty()) {
      size_t start = 0;
      while (start <= v.size()) {
        size_t end = v.find(',', start);
        if (end == std::string::npos) end = v.size();
        o.only.insert(v.substr(start, end - start));
        start = end + 1;
      }
    } else if (auto v = value("--clients"); !v.empty()) {
      o.clients = std::stoi(v);
    } else if (auto v = value("--client-of"); !v.empty()) {
      o.client_of = v;
    } else if (auto v = value("--client-tasks"); !v.empty()) {
      o.client_tasks = std::stol(v);
    }
  }
  if (!o.client_of.empty()) return RunClient(o);

  std::vector<std::pair<std::string, double>> results;
  manta::bench::BenchCluster cluster;
  // 4 GiB of object store (room for a 1 GiB put while the previous one is being
  // freed), pre-faulted before measuring.
  cluster.StartHead({"--object-store-memory", std::to_string(int64_t{4} << 30)});
  cluster.WaitForPrefault();
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);

  if (Want(o, "single_client_tasks_sync")) {
    results.emplace_back("single_client_tasks_sync",
                         Rate(o.seconds, 1, [] { ray::Task(SmallValue).Remote().Get(); }));
  }
  if (Want(o, "single_client_tasks_async")) {
    double best = 0;
    TasksAsync(10000);
    auto t0 = Clock::now();
    do {
      best = std::max(best, TasksAsync(10000));
    } while (Since(t0) < o.seconds);
    results.emplace_back("single_client_tasks_async", best);
  }
  if (Want(o, "single_client_tasks_and_get_batch")) {
    // Ray's definition: submit 1000 tasks, get them all; count batches per second.
    results.emplace_back("single_client_tasks_and_get_batch", Rate(o.seconds, 1, [] {
                           std::vector<ray::ObjectRef<int>> refs;
                           for (int i = 0; i < 1000; ++i) refs.push_back(ray::Task(SmallValue).Remote());
                           ray::Get(refs);
                         }));
  }
  if (Want(o, "single_client_put_calls_in_memory_store")) {
    // Small Puts (an int) stay in the owner's memory store (max_direct_put_bytes).
    results.emplace_back("single_client_put_calls_in_memory_store", Rate(o.seconds, 1000, [] {
                           for (int i = 0; i < 1000; ++i) ray::Put(i);
                         }));
  }
  if (Want(o, "single_client_put_calls_Plasma_Store") || Want(o, "single_client_get_calls_Plasma_Store")) {
    // As in Ray, small Puts that go to the node's shared-memory store: this driver
    // re-joins with max_direct_put_bytes = 0.
    ray::Shutdown();
    setenv("MANTA_max_direct_put_bytes", "0", 1);
    ray::Init(config, argc, argv);
    results.emplace_back("single_client_put_calls_Plasma_Store", Rate(o.seconds, 1000, [] {
                           for (int i = 0; i < 1000; ++i) ray::Put(i);
                         }));
    auto ref = ray::Put(0);
    results.emplace_back("single_client_get_calls_Plasma_Store", Rate(o.seconds, 1000, [&] {
                           for (int i = 0; i < 1000; ++i) ray::Get(ref);
                         }));
    ray::Shutdown();
    unsetenv("MANTA_max_direct_put_bytes");
    ray::Init(config, argc, argv);
  }
  if (Want(o, "single_client_put_gigabytes")) {
    const size_t n = size_t{1} << 30;
    std::vector<uint8_t> src(n, 1), dst(n, 0);
    double best_memcpy = 0;
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      std::memcpy(dst.data(), src.data(), n);
      best_memcpy = std::max(best_memcpy, n / Since(t0) / 1e9);
    }
    dst = {};
    double best_put = 0;
    for (int r = 0; r < 4; ++r) {
      auto t0 = Clock::now();
      auto ref = ray::Put(src);
      best_put = std::max(best_put, n / Since(t0) / 1e9);
    }
    results.emplace_back("memcpy_gigabytes_baseline", best_memcpy);
    results.emplace_back("single_client_put_gigabytes", best_put);
    results.emplace_back("put_gigabytes_vs_memcpy", best_put / best_memcpy);
  }
  if (Want(o, "single_client_wait_1k_refs")) {
    results.emplace_back("single_client_wait_1k_refs", Rate(o.seconds, 1, [] {
                           std::vector<ray::ObjectRef<int>> not_ready;
                           for (int i = 0; i < 1000; ++i) not_ready.push_back(ray::Task(SmallValue).Remote());
                           while (!not_ready.empty()) {
                             auto result = ray::Wait(not_ready, 1, -1);
                             not_ready.assign(result.unready.begin(), result.unready.end());
                           }
                         }));
  }
  if (Want(o, "multi_client_tasks_async")) {
    // Extra driver processes of this binary join the cluster and submit at once.
    long per_client = 20000;
    std::vector<std::FILE*> children;
    for (int c = 0; c < o.clients; ++c) {
      std::string cmd = "'" + manta::SelfExecutablePath() + "' --client-of=" + cluster.gcs_address() +
                        " --client-tasks=" + std::to_string(per_client);
      children.push_back(popen(cmd.c_str(), "r"));
    }
    double total = 0;
    for (std::FILE* f : children) {
      double rate = 0;
      if (f && std::fscanf(f, "%lf", &rate) == 1) total += rate;
      if (f) pclose(f);
    }
    results.emplace_back("multi_client_tasks_async", total);
  }
  ray::Shutdown();

  if (Want(o, "init_shutdown_local_cluster_s")) {
    double best = 1e9;
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      ray::RayConfig c;
      ray::Init(c, argc, argv);
      ray::Shutdown();
      best = std::min(best, Since(t0));
    }
    results.emplace_back("init_shutdown_local_cluster_s", best);
  }

  std::cout << "{";
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("%s\n  \"%s\": %.6g", i ? "," : "", results[i].first.c_str(), results[i].second);
  }
  std::cout << "\n}" << std::endl;
  return 0;
}
