// Task and object microbenchmarks through the public API, named after Ray's
// microbenchmark (ray/_private/ray_perf.py) so the figures compare directly.
// Prints one JSON object. Starts its own local cluster with the `manta` CLI (in a
// private temp root) and joins it as a driver; init_shutdown_local_cluster_s times
// ray::Init() + ray::Shutdown() of a private cluster (no address), the best of three,
// with its two halves (init_local_cluster_s, shutdown_local_cluster_s).
//
//   task_bench [--seconds S] [--only name,name] [--clients N] [--big-bytes B]
//
// --big-bytes: the size of the big put and get (default 1 GiB; the store holds four).
//
// The binary is also its own worker (single-binary mode), and its own extra
// client for multi_client_tasks_async (re-run with --client-of=<address>).
#include <ray/api.h>

#include "bench_cluster.h"
#include "bench_main.h"
#include "bench_util.h"
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

namespace manta::bench::task_bench {

namespace {

using manta::bench::Best;
using manta::bench::Clock;
using manta::bench::Rate;
using manta::bench::Since;

int SmallValue() { return 0; }
RAY_REMOTE(SmallValue);

double TasksAsync(long n) {
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) refs.push_back(ray::Task(SmallValue).Remote());
  ray::Get(refs);
  return n / Since(t0);
}

// An extra driver of multi_client_tasks_async: joins, warms up, waits for the other
// clients, submits its tasks and prints when it began and ended them, then waits for
// the others to end before it shuts down (ClientsTogetherRate).
int RunClient(const manta::bench::BenchFlags& o) {
  ray::RayConfig config;
  config.address = o.Value("--client-of");
  ray::Init(config);
  TasksAsync(1000);  // warm-up
  const std::string barrier = o.Value("--barrier-dir");
  if (!manta::bench::AwaitClients(barrier, "ready", o.clients)) {
    std::fprintf(stderr, "the other clients did not get ready within a minute\n");
    return 1;
  }
  const int64_t start = manta::bench::SteadyNs();
  TasksAsync(std::stol(o.Value("--client-tasks", "20000")));
  std::printf("%lld %lld\n", static_cast<long long>(start), static_cast<long long>(manta::bench::SteadyNs()));
  std::fflush(stdout);
  manta::bench::AwaitClients(barrier, "done", o.clients);
  ray::Shutdown();
  return 0;
}

using Results = std::vector<std::pair<std::string, double>>;

void PlasmaPutsAndGets(const manta::bench::BenchFlags& o, ray::RayConfig& config, int argc, char** argv,
                       Results* out) {
  Results& results = *out;
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

// A 1 GiB ray::Put, and ray::Get of it (decoded, and as a view), against memcpy of
// the same bytes.
void PutGigabytes(size_t n, Results* out) {
  Results& results = *out;
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
  // Reading it back: decoded into a new std::vector<uint8_t>, and as a view; beside
  // the copy of the same bytes into a new std::vector (its pages faulted in as it is
  // written, as a decoded value's are).
  double best_new_vector = 0;
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    std::vector<uint8_t> copy(src.begin(), src.end());
    best_new_vector = std::max(best_new_vector, n / Since(t0) / 1e9);
  }
  auto ref = ray::PutBytes(src.data(), n);
  src = {};
  double best_get = 0, best_view_ms = 1e9;
  for (int r = 0; r < 4; ++r) {
    auto t0 = Clock::now();
    std::shared_ptr<std::vector<uint8_t>> got = ray::Get(ref);
    best_get = std::max(best_get, n / Since(t0) / 1e9);
    got.reset();
    t0 = Clock::now();
    ray::ObjectView<uint8_t> view = ray::GetView(ref);
    best_view_ms = std::min(best_view_ms, Since(t0) * 1e3);
    if (view.size() != n) std::fprintf(stderr, "the view holds %zu bytes, not %zu\n", view.size(), n);
  }
  results.emplace_back("memcpy_gigabytes_baseline", best_memcpy);
  results.emplace_back("single_client_put_gigabytes", best_put);
  results.emplace_back("put_gigabytes_vs_memcpy", best_put / best_memcpy);
  results.emplace_back("single_client_get_gigabytes", best_get);
  results.emplace_back("get_gigabytes_vs_memcpy", best_get / best_memcpy);
  results.emplace_back("copy_into_new_vector_gigabytes_baseline", best_new_vector);
  results.emplace_back("get_gigabytes_vs_copy_into_new_vector", best_get / best_new_vector);
  results.emplace_back("get_view_of_a_gigabyte_ms", best_view_ms);
}

// 1 GiB of doubles (a raw array: see ray/api/serializer.h): ray::Put, ray::Get into
// a new vector and ray::GetView, against memcpy into memory already written.
void PutGetDoubles(size_t bytes, Results* out) {
  const size_t n = bytes / sizeof(double);
  std::vector<double> src(n, 0.25), dst(n, 0.0);
  double best_memcpy = 0, best_put = 0, best_get = 0, best_view_ms = 1e9;
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), n * sizeof(double));
    best_memcpy = std::max(best_memcpy, n * sizeof(double) / Since(t0) / 1e9);
  }
  dst = {};
  ray::ObjectRef<std::vector<double>> ref;
  for (int r = 0; r < 3; ++r) {
    ref = {};
    auto t0 = Clock::now();
    ref = ray::Put(src);
    best_put = std::max(best_put, n * sizeof(double) / Since(t0) / 1e9);
  }
  src = {};
  for (int r = 0; r < 3; ++r) {
    auto t0 = Clock::now();
    std::shared_ptr<std::vector<double>> got = ray::Get(ref);
    best_get = std::max(best_get, n * sizeof(double) / Since(t0) / 1e9);
    got.reset();
    t0 = Clock::now();
    ray::ObjectView<double> view = ray::GetView(ref);
    best_view_ms = std::min(best_view_ms, Since(t0) * 1e3);
    if (view.size() != n) std::fprintf(stderr, "the view holds %zu doubles, not %zu\n", view.size(), n);
  }
  out->emplace_back("doubles_memcpy_gigabytes_baseline", best_memcpy);
  out->emplace_back("doubles_put_gigabytes_vs_memcpy", best_put / best_memcpy);
  out->emplace_back("doubles_get_gigabytes_vs_memcpy", best_get / best_memcpy);
  out->emplace_back("doubles_get_view_of_a_gigabyte_ms", best_view_ms);
}

// Tasks per second of o.clients extra driver processes submitting at once (Ray's
// definition: all their tasks over the time from the first one's start to the last
// one's end, the clients started together).
double MultiClientTasks(const manta::bench::BenchFlags& o, const std::string& gcs_address) {
  const long per_client = 20000;
  return manta::bench::ClientsTogetherRate(o.clients, manta::SelfExecutablePath(),
                                           "--client-of=" + gcs_address + " --client-tasks=" +
                                               std::to_string(per_client),
                                           per_client);
}

}  // namespace

int Main(int argc, char** argv) {
  const manta::bench::BenchFlags o = manta::bench::BenchFlags::Parse(argc, argv);
  if (!o.Value("--client-of").empty()) return RunClient(o);

  Results results;
  const size_t big_bytes = std::stoull(o.Value("--big-bytes", std::to_string(size_t{1} << 30)));
  manta::bench::BenchCluster cluster;
  // 4 GiB of object store (room for a 1 GiB put while the previous one is being
  // freed), pre-faulted before measuring.
  cluster.StartHead({"--object-store-memory", std::to_string(4 * big_bytes)});
  cluster.WaitForPrefault();
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);

  if (o.Want("single_client_tasks_sync")) {
    results.emplace_back("single_client_tasks_sync",
                         Rate(o.seconds, 1, [] { ray::Task(SmallValue).Remote().Get(); }));
  }
  if (o.Want("single_client_tasks_async")) {
    results.emplace_back("single_client_tasks_async", Best(o.seconds, [] { return TasksAsync(10000); }));
  }
  if (o.Want("single_client_tasks_and_get_batch")) {
    // Ray's definition: submit 1000 tasks, get them all; count batches per second.
    results.emplace_back("single_client_tasks_and_get_batch", Rate(o.seconds, 1, [] {
                           std::vector<ray::ObjectRef<int>> refs;
                           for (int i = 0; i < 1000; ++i) refs.push_back(ray::Task(SmallValue).Remote());
                           ray::Get(refs);
                         }));
  }
  if (o.Want("single_client_put_calls_in_memory_store")) {
    // Small Puts (an int) stay in the owner's memory store (max_direct_put_bytes).
    results.emplace_back("single_client_put_calls_in_memory_store", Rate(o.seconds, 1000, [] {
                           for (int i = 0; i < 1000; ++i) ray::Put(i);
                         }));
  }
  if (o.Want("single_client_put_calls_Plasma_Store") || o.Want("single_client_get_calls_Plasma_Store")) {
    PlasmaPutsAndGets(o, config, argc, argv, &results);
  }
  if (o.Want("single_client_put_gigabytes")) PutGigabytes(big_bytes, &results);
  if (o.Want("doubles_get_gigabytes_vs_memcpy")) PutGetDoubles(big_bytes, &results);
  if (o.Want("single_client_wait_1k_refs")) {
    results.emplace_back("single_client_wait_1k_refs", Rate(o.seconds, 1, [] {
                           std::vector<ray::ObjectRef<int>> not_ready;
                           for (int i = 0; i < 1000; ++i) not_ready.push_back(ray::Task(SmallValue).Remote());
                           while (!not_ready.empty()) {
                             auto result = ray::Wait(not_ready, 1, -1);
                             not_ready.assign(result.unready.begin(), result.unready.end());
                           }
                         }));
  }
  if (o.Want("multi_client_tasks_async")) {
    results.emplace_back("multi_client_tasks_async", MultiClientTasks(o, cluster.gcs_address()));
  }
  ray::Shutdown();

  if (o.Want("init_shutdown_local_cluster_s")) {
    // The best of 3 (with its two halves: Init, and Shutdown).
    double best = 1e9, best_init = 0, best_shutdown = 0;
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      ray::RayConfig c;
      ray::Init(c, argc, argv);
      const double init = Since(t0);
      ray::Shutdown();
      if (Since(t0) < best) {
        best = Since(t0);
        best_init = init;
        best_shutdown = best - init;
      }
    }
    results.emplace_back("init_shutdown_local_cluster_s", best);
    results.emplace_back("init_local_cluster_s", best_init);
    results.emplace_back("shutdown_local_cluster_s", best_shutdown);
  }

  manta::bench::PrintJson(results);
  return 0;
}

[[maybe_unused]] const bool kRegistered = AddBenchMain("task_bench", Main);

}  // namespace manta::bench::task_bench
