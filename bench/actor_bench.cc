// Actor microbenchmarks through the public API, named after Ray's microbenchmark
// (ray/_private/ray_perf.py), with the normal-task figures of the same run beside
// them. Prints one JSON object. Starts its own local cluster (bench_cluster.h) and
// joins it as a driver.
//
//   actor_bench [--seconds S] [--only name,name] [--clients N] [--creations N]
//
// The binary is also its own worker, and its own extra driver for the n:n figures
// (re-run with --client-of=<address>).
#include <ray/api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "src/common/process.h"

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class Sink {
 public:
  static Sink* Create() { return new Sink(); }
  int Small() { return 0; }
  int SmallWithArg(int x) { return x; }
};

int SmallValue() { return 0; }

RAY_REMOTE(Sink::Create, &Sink::Small, &Sink::SmallWithArg, SmallValue);

struct Options {
  double seconds = 2.0;
  std::set<std::string> only;
  int clients = 2;
  int creations = 100;
  std::string client_of;  // internal: an extra driver of this cluster
  std::string client_mode;
};

bool Want(const Options& o, const std::string& name) { return o.only.empty() || o.only.count(name) > 0; }

// Repeats `step` (which does `per_step` operations) for about `seconds`, after one
// warm-up step; returns operations per second.
template <typename F>
double Rate(double seconds, long per_step, F step) {
  step();
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

// The best rate of `batch` (returns ops/s) over about `seconds`, after a warm-up.
template <typename F>
double Best(double seconds, F batch) {
  batch();
  double best = 0;
  auto t0 = Clock::now();
  do {
    best = std::max(best, batch());
  } while (Since(t0) < seconds);
  return best;
}

// `n` async calls spread over `actors`, then Get of all; returns calls/s.
double CallsAsync(std::vector<ray::ActorHandle<Sink>>& actors, long n, bool with_arg) {
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  auto arg = ray::Put(1);
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    auto& actor = actors[i % actors.size()];
    refs.push_back(with_arg ? actor.Task(&Sink::SmallWithArg).Remote(arg) : actor.Task(&Sink::Small).Remote());
  }
  ray::Get(refs);
  return n / Since(t0);
}

double TasksAsync(long n) {
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) refs.push_back(ray::Task(SmallValue).Remote());
  ray::Get(refs);
  return n / Since(t0);
}

// An extra driver: its own actor, async calls (with an argument for "with_arg").
int RunClient(const Options& o) {
  ray::RayConfig config;
  config.address = o.client_of;
  ray::Init(config);
  std::vector<ray::ActorHandle<Sink>> actors{ray::Actor(Sink::Create).Remote()};
  const bool with_arg = o.client_mode == "with_arg";
  double rate = Best(o.seconds, [&] { return CallsAsync(actors, 10000, with_arg); });
  std::printf("%f\n", rate);
  ray::Shutdown();
  return 0;
}

// Sum of the rates the extra drivers print.
double ClientsRate(const Options& o, const std::string& address, const std::string& mode) {
  std::vector<std::FILE*> children;
  for (int c = 0; c < o.clients; ++c) {
    std::string cmd = "'" + manta::SelfExecutablePath() + "' --client-of=" + address + " --client-mode=" + mode +
                      " --seconds=" + std::to_string(o.seconds);
    children.push_back(popen(cmd.c_str(), "r"));
  }
  double total = 0;
  for (std::FILE* f : children) {
    double rate = 0;
    if (f && std::fscanf(f, "%lf", &rate) == 1) total += rate;
    if (f) pclose(f);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
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
    } else if (auto v = value("--creations"); !v.empty()) {
      o.creations = std::stoi(v);
    } else if (auto v = value("--client-of"); !v.empty()) {
      o.client_of = v;
    } else if (auto v = value("--client-mode"); !v.empty()) {
      o.client_mode = v;
    }
  }
  if (!o.client_of.empty()) return RunClient(o);

  std::vector<std::pair<std::string, double>> results;
  manta::bench::BenchCluster cluster;
  cluster.StartHead({"--object-store-memory", std::to_string(int64_t{1} << 30)});
  cluster.WaitForPrefault();
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);

  // The task path of the same run, for comparison.
  if (Want(o, "single_client_tasks_sync")) {
    results.emplace_back("single_client_tasks_sync", Rate(o.seconds, 1, [] { ray::Task(SmallValue).Remote().Get(); }));
  }
  if (Want(o, "single_client_tasks_async")) {
    results.emplace_back("single_client_tasks_async", Best(o.seconds, [] { return TasksAsync(10000); }));
  }
  std::vector<ray::ActorHandle<Sink>> one{ray::Actor(Sink::Create).Remote()};
  if (Want(o, "1_1_actor_calls_sync")) {
    results.emplace_back("1_1_actor_calls_sync",
                         Rate(o.seconds, 1, [&] { one[0].Task(&Sink::Small).Remote().Get(); }));
  }
  if (Want(o, "1_1_actor_calls_async")) {
    results.emplace_back("1_1_actor_calls_async", Best(o.seconds, [&] { return CallsAsync(one, 10000, false); }));
  }
  if (Want(o, "1_1_actor_calls_concurrent")) {
    std::vector<ray::ActorHandle<Sink>> threaded{ray::Actor(Sink::Create).SetMaxConcurrency(16).Remote()};
    results.emplace_back("1_1_actor_calls_concurrent",
                         Best(o.seconds, [&] { return CallsAsync(threaded, 10000, false); }));
  }
  if (Want(o, "1_n_actor_calls_async")) {
    std::vector<ray::ActorHandle<Sink>> many;
    for (int i = 0; i < 4; ++i) many.push_back(ray::Actor(Sink::Create).Remote());
    results.emplace_back("1_n_actor_calls_async", Best(o.seconds, [&] { return CallsAsync(many, 10000, false); }));
  }
  if (Want(o, "n_n_actor_calls_async")) {
    results.emplace_back("n_n_actor_calls_async", ClientsRate(o, cluster.gcs_address(), "plain"));
  }
  if (Want(o, "n_n_actor_calls_with_arg_async")) {
    results.emplace_back("n_n_actor_calls_with_arg_async", ClientsRate(o, cluster.gcs_address(), "with_arg"));
  }
  one.clear();
  if (Want(o, "actor_creations_per_s")) {
    // Actors of 0 CPU, each awaited through one call (Ray's definition).
    std::vector<ray::ActorHandle<Sink>> created;
    auto t0 = Clock::now();
    for (int i = 0; i < o.creations; ++i) created.push_back(ray::Actor(Sink::Create).SetResource("CPU", 0).Remote());
    std::vector<ray::ObjectRef<int>> first_calls;
    for (auto& actor : created) first_calls.push_back(actor.Task(&Sink::Small).Remote());
    ray::Get(first_calls);
    results.emplace_back("actor_creations_per_s", o.creations / Since(t0));
  }
  ray::Shutdown();

  std::cout << "{";
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("%s\n  \"%s\": %.6g", i ? "," : "", results[i].first.c_str(), results[i].second);
  }
  std::cout << "\n}" << std::endl;
  return 0;
}
