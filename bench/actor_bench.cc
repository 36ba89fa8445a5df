// Actor microbenchmarks through the public API, named after Ray's microbenchmark
// (ray/_private/ray_perf.py), with the normal-task figures of the same run beside
// them, and placement groups (create/remove, a task through a bundle). Prints one
// JSON object. Starts its own local cluster (bench_cluster.h) and joins it as a
// driver.
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
#include "bench_main.h"
#include "bench_util.h"
#include "src/common/process.h"

namespace manta::bench::actor_bench {

namespace {

using manta::bench::Best;
using manta::bench::BenchFlags;
using manta::bench::Clock;
using manta::bench::Rate;
using manta::bench::Since;

class ActorSink {
 public:
  static ActorSink* Create() { return new ActorSink(); }
  int Small() { return 0; }
  int SmallWithArg(int x) { return x; }
};

int ActorSmallValue() { return 0; }

RAY_REMOTE(ActorSink::Create, &ActorSink::Small, &ActorSink::SmallWithArg, ActorSmallValue);

// `n` async calls spread over `actors`, then Get of all; returns calls/s.
double CallsAsync(std::vector<ray::ActorHandle<ActorSink>>& actors, long n, bool with_arg) {
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  auto arg = ray::Put(1);
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    auto& actor = actors[i % actors.size()];
    refs.push_back(with_arg ? actor.Task(&ActorSink::SmallWithArg).Remote(arg)
                            : actor.Task(&ActorSink::Small).Remote());
  }
  ray::Get(refs);
  return n / Since(t0);
}

double TasksAsync(long n) {
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) refs.push_back(ray::Task(ActorSmallValue).Remote());
  ray::Get(refs);
  return n / Since(t0);
}

// An extra driver: its own actor, async calls (with an argument for "with_arg").
int RunClient(const BenchFlags& o) {
  ray::RayConfig config;
  config.address = o.Value("--client-of");
  ray::Init(config);
  std::vector<ray::ActorHandle<ActorSink>> actors{ray::Actor(ActorSink::Create).Remote()};
  const bool with_arg = o.Value("--client-mode") == "with_arg";
  double rate = Best(o.seconds, [&] { return CallsAsync(actors, 10000, with_arg); });
  std::printf("%f\n", rate);
  ray::Shutdown();
  return 0;
}

// Sum of the rates the extra drivers print.
double ClientsRate(const BenchFlags& o, const std::string& address, const std::string& mode) {
  return manta::bench::SumOfClientRates(
      o.clients, manta::SelfExecutablePath(),
      "--client-of=" + address + " --client-mode=" + mode + " --seconds=" + std::to_string(o.seconds));
}

}  // namespace

// Groups of one small bundle, each created and waited for, then removed (Ray's
// placement group create/removal benchmark).
double PlacementGroupsPerSecond(int n) {
  auto t0 = Clock::now();
  std::vector<ray::PlacementGroup> groups;
  for (int i = 0; i < n; ++i) {
    std::vector<std::unordered_map<std::string, double>> bundles{{{"CPU", 0.01}}};
    groups.push_back(ray::CreatePlacementGroup({"", bundles, ray::PlacementStrategy::PACK}));
  }
  for (auto& group : groups) group.Wait(60);
  for (auto& group : groups) ray::RemovePlacementGroup(group.GetID());
  return n / Since(t0);
}

// The task path through a bundle: same as single_client_tasks_sync.
double TasksInBundle(double seconds) {
  std::vector<std::unordered_map<std::string, double>> bundles{{{"CPU", 1}}};
  ray::PlacementGroup group = ray::CreatePlacementGroup({"", bundles, ray::PlacementStrategy::PACK});
  group.Wait(60);
  const double rate =
      Rate(seconds, 1, [&] { ray::Task(ActorSmallValue).SetPlacementGroup(group, 0).Remote().Get(); });
  ray::RemovePlacementGroup(group.GetID());
  return rate;
}

int Main(int argc, char** argv) {
  const BenchFlags o = BenchFlags::Parse(argc, argv);
  if (!o.Value("--client-of").empty()) return RunClient(o);
  const int creations = std::stoi(o.Value("--creations", "100"));

  std::vector<std::pair<std::string, double>> results;
  manta::bench::BenchCluster cluster;
  cluster.StartHead({"--object-store-memory", std::to_string(int64_t{1} << 30)});
  cluster.WaitForPrefault();
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);

  // The task path of the same run, for comparison.
  if (o.Want("single_client_tasks_sync")) {
    results.emplace_back("single_client_tasks_sync",
                         Rate(o.seconds, 1, [] { ray::Task(ActorSmallValue).Remote().Get(); }));
  }
  if (o.Want("single_client_tasks_async")) {
    results.emplace_back("single_client_tasks_async", Best(o.seconds, [] { return TasksAsync(10000); }));
  }
  std::vector<ray::ActorHandle<ActorSink>> one{ray::Actor(ActorSink::Create).Remote()};
  if (o.Want("1_1_actor_calls_sync")) {
    results.emplace_back("1_1_actor_calls_sync",
                         Rate(o.seconds, 1, [&] { one[0].Task(&ActorSink::Small).Remote().Get(); }));
  }
  if (o.Want("1_1_actor_calls_async")) {
    results.emplace_back("1_1_actor_calls_async", Best(o.seconds, [&] { return CallsAsync(one, 10000, false); }));
  }
  if (o.Want("1_1_actor_calls_concurrent")) {
    std::vector<ray::ActorHandle<ActorSink>> threaded{ray::Actor(ActorSink::Create).SetMaxConcurrency(16).Remote()};
    results.emplace_back("1_1_actor_calls_concurrent",
                         Best(o.seconds, [&] { return CallsAsync(threaded, 10000, false); }));
  }
  if (o.Want("1_n_actor_calls_async")) {
    std::vector<ray::ActorHandle<ActorSink>> many;
    for (int i = 0; i < 4; ++i) many.push_back(ray::Actor(ActorSink::Create).Remote());
    results.emplace_back("1_n_actor_calls_async", Best(o.seconds, [&] { return CallsAsync(many, 10000, false); }));
  }
  if (o.Want("n_n_actor_calls_async")) {
    results.emplace_back("n_n_actor_calls_async", ClientsRate(o, cluster.gcs_address(), "plain"));
  }
  if (o.Want("n_n_actor_calls_with_arg_async")) {
    results.emplace_back("n_n_actor_calls_with_arg_async", ClientsRate(o, cluster.gcs_address(), "with_arg"));
  }
  one.clear();
  if (o.Want("placement_groups_created_and_removed_per_s")) {
    results.emplace_back("placement_groups_created_and_removed_per_s", PlacementGroupsPerSecond(creations));
  }
  if (o.Want("single_client_tasks_sync_in_bundle")) {
    results.emplace_back("single_client_tasks_sync_in_bundle", TasksInBundle(o.seconds));
  }
  if (o.Want("actor_creations_per_s")) {
    // Actors of 0 CPU, each awaited through one call (Ray's definition). As in Ray's
    // C++ API, an actor given no resources takes none (a quantity of 0 is refused).
    std::vector<ray::ActorHandle<ActorSink>> created;
    auto t0 = Clock::now();
    for (int i = 0; i < creations; ++i) created.push_back(ray::Actor(ActorSink::Create).Remote());
    std::vector<ray::ObjectRef<int>> first_calls;
    for (auto& actor : created) first_calls.push_back(actor.Task(&ActorSink::Small).Remote());
    ray::Get(first_calls);
    results.emplace_back("actor_creations_per_s", creations / Since(t0));
  }
  ray::Shutdown();

  manta::bench::PrintJson(results);
  return 0;
}

[[maybe_unused]] const bool kRegistered = AddBenchMain("actor_bench", Main);

}  // namespace manta::bench::actor_bench
