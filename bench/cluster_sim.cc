// cluster_sim: how big a cluster one GCS holds.
//
// A real head (GCS, Redis, one raylet, through `manta start`) and this process as
// its driver; then simulated nodes (bench/sim_nodes.h: the raylet's protocol with
// the real client code, one connection each) join in steps, 100, 500, 1000 and 2000
// by default. At each step, with every node reporting a changed availability every
// --report-ms:
//   join_s                 time for the step's new nodes to register, read the node
//                          table and subscribe
//   gcs_cpu_cores, redis_cpu_cores, raylet_cpu_cores, sim_cpu_cores
//                          CPU over --seconds of steady reporting (1.0 = one core)
//   gcs_rss_mb, gcs_rss_kb_per_node (above the GCS's own with no simulated node)
//   pubsub_messages_per_s  what all the nodes received
//   fanout_p50_ms, fanout_max_ms
//                          a node joins: from its registration call to the news
//                          reaching each node (median, last)
//   dead_first_ms, dead_all_ms
//                          a node dies (its sockets close): until the first and the
//                          last node hear it is DEAD (health checks every
//                          health_check_period_ms, DEAD after
//                          health_check_failure_threshold misses)
//   pg_ms                  a placement group of --pg-bundles STRICT_SPREAD bundles
//                          on simulated nodes, created and ready (median)
//   task_ms                a task of the driver, submitted and its result got
//                          (median; its lease comes from the head's raylet, which
//                          sees every simulated node)
// Stops early (and says so) once the GCS holds more than --max-gcs-rss-mb.
// Prints JSON, each figure named n<nodes>_<figure>.

#include <ray/api.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench_cluster.h"
#include "bench_main.h"
#include "bench_util.h"
#include "sim_nodes.h"
#include "src/common/process.h"
#include "src/common/session_processes.h"

namespace manta::bench::cluster_sim {

namespace {

using manta::bench::Clock;
using manta::bench::ProcUsage;
using manta::bench::ReadProcUsage;
using manta::bench::Since;
using Results = std::vector<std::pair<std::string, double>>;

int Noop() { return 0; }
RAY_REMOTE(Noop);

struct Daemons {
  pid_t gcs = 0;
  pid_t redis = 0;
  pid_t raylet = 0;
};

Daemons FindDaemons(const std::string& root) {
  Daemons d;
  for (const manta::ProcessRecord& r : manta::ListRecords(root)) {
    if (r.role == manta::Role::kGcs) d.gcs = r.pid;
    if (r.role == manta::Role::kRedis) d.redis = r.pid;
    if (r.role == manta::Role::kRaylet) d.raylet = r.pid;
  }
  if (d.gcs == 0 || d.redis == 0 || d.raylet == 0) manta::bench::Die("cannot find the head's daemons in " + root);
  return d;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> ParseSteps(const std::string& text) {
  std::vector<int> steps;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) steps.push_back(std::stoi(item));
  }
  return steps;
}

struct Settings {
  std::vector<int> steps;
  double seconds = 10;
  int64_t report_ms = 1000;
  int pg_bundles = 4;
  int pg_rounds = 5;
  int tasks = 50;
  double max_gcs_rss_mb = 4096;
};

// CPU (in cores) and memory of the daemons and of this process over `seconds`.
void MeasureSteadyState(const Settings& s, const Daemons& d, manta::bench::SimNodes& sims, const std::string& p,
                        Results* out) {
  const pid_t self = getpid();
  ProcUsage gcs0 = ReadProcUsage(d.gcs), redis0 = ReadProcUsage(d.redis), raylet0 = ReadProcUsage(d.raylet),
            self0 = ReadProcUsage(self);
  const int64_t messages0 = sims.MessagesReceived();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(s.seconds));
  const double wall = Since(t0);
  ProcUsage gcs1 = ReadProcUsage(d.gcs), redis1 = ReadProcUsage(d.redis), raylet1 = ReadProcUsage(d.raylet),
            self1 = ReadProcUsage(self);
  out->emplace_back(p + "gcs_cpu_cores", (gcs1.cpu_s - gcs0.cpu_s) / wall);
  out->emplace_back(p + "redis_cpu_cores", (redis1.cpu_s - redis0.cpu_s) / wall);
  out->emplace_back(p + "raylet_cpu_cores", (raylet1.cpu_s - raylet0.cpu_s) / wall);
  out->emplace_back(p + "sim_cpu_cores", (self1.cpu_s - self0.cpu_s) / wall);
  out->emplace_back(p + "gcs_rss_mb", gcs1.rss_mb);
  out->emplace_back(p + "redis_rss_mb", redis1.rss_mb);
  out->emplace_back(p + "raylet_rss_mb", raylet1.rss_mb);
  out->emplace_back(p + "pubsub_messages_per_s", static_cast<double>(sims.MessagesReceived() - messages0) / wall);
}

// A placement group on nodes the GCS thinks dead would wait for ever: say why instead.
void DieIfDeclaredDead(const manta::bench::SimNodes& sims) {
  const int64_t dead = sims.DeclaredDeadWhileUp();
  if (dead == 0) return;
  manta::bench::Die("the GCS declared " + std::to_string(dead) +
                    " simulated nodes DEAD while they were up: this process fell behind their health checks "
                    "(the machine is saturated; fewer nodes or a longer --report-ms)");
}

double PlacementGroupMs(const Settings& s, const manta::bench::SimNodes& sims) {
  std::vector<double> times;
  for (int r = 0; r < s.pg_rounds; ++r) {
    ray::PlacementGroupCreationOptions options;
    options.bundles.assign(s.pg_bundles, {{"sim", 1}});
    options.strategy = ray::PlacementStrategy::STRICT_SPREAD;
    const auto t0 = Clock::now();
    ray::PlacementGroup group = ray::CreatePlacementGroup(options);
    if (!group.Wait(60)) {
      DieIfDeclaredDead(sims);
      manta::bench::Die("a placement group on the simulated nodes was not ready in 60 s");
    }
    times.push_back(Since(t0) * 1e3);
    ray::RemovePlacementGroup(group.GetID());
  }
  return Median(times);
}

double TaskMs(const Settings& s) {
  std::vector<double> times;
  for (int i = 0; i < s.tasks; ++i) {
    const auto t0 = Clock::now();
    if (*ray::Task(Noop).Remote().Get() != 0) manta::bench::Die("Noop returned a wrong value");
    times.push_back(Since(t0) * 1e3);
  }
  return Median(times);
}

// One step: grow to `n` nodes and measure. False when the GCS grew past the cap.
bool Step(const Settings& s, int n, const Daemons& d, manta::bench::SimNodes& sims, double base_gcs_rss_mb,
          Results* out) {
  const std::string p = "n" + std::to_string(n) + "_";
  const auto t0 = Clock::now();
  if (absl::Status up = sims.GrowTo(n, 60000 + int64_t{100} * n); !up.ok()) manta::bench::Die(up.ToString());
  out->emplace_back(p + "join_s", Since(t0));
  MeasureSteadyState(s, d, sims, p, out);
  const double rss = ReadProcUsage(d.gcs).rss_mb;
  out->emplace_back(p + "gcs_rss_kb_per_node", (rss - base_gcs_rss_mb) * 1024.0 / n);
  std::vector<double> fanout = sims.FanOutOfNewNode(60000);
  out->emplace_back(p + "fanout_p50_ms", Median(fanout));
  out->emplace_back(p + "fanout_max_ms", fanout.empty() ? 0 : fanout.back());
  DieIfDeclaredDead(sims);
  out->emplace_back(p + "pg_ms", PlacementGroupMs(s, sims));
  out->emplace_back(p + "task_ms", TaskMs(s));
  auto dead = sims.TimeToNoticeDeath(120000);
  if (!dead.ok()) manta::bench::Die(dead.status().ToString());
  out->emplace_back(p + "dead_first_ms", dead->first);
  out->emplace_back(p + "dead_all_ms", dead->second);
  out->emplace_back(p + "failed_calls", static_cast<double>(sims.Failures()));
  std::cerr << "cluster_sim: " << n << " nodes measured" << std::endl;
  return ReadProcUsage(d.gcs).rss_mb <= s.max_gcs_rss_mb;
}

Settings ParseSettings(const manta::bench::BenchFlags& o) {
  Settings s;
  s.steps = ParseSteps(o.Value("--nodes", "100,500,1000,2000"));
  s.seconds = o.seconds;
  s.report_ms = std::stol(o.Value("--report-ms", "1000"));
  s.pg_bundles = std::stoi(o.Value("--pg-bundles", "4"));
  s.pg_rounds = std::stoi(o.Value("--pg-rounds", "5"));
  s.tasks = std::stoi(o.Value("--tasks", "50"));
  s.max_gcs_rss_mb = std::stod(o.Value("--max-gcs-rss-mb", "4096"));
  return s;
}

int Run(const manta::bench::BenchFlags& o, int argc, char** argv) {
  const Settings s = ParseSettings(o);
  manta::RaiseOpenFileLimit();
  manta::bench::BenchCluster cluster;
  cluster.StartHead({"--num-cpus", "2", "--object-store-memory", std::to_string(int64_t{256} << 20)});
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);
  const Daemons d = FindDaemons(cluster.root());
  Results results;
  {
    manta::bench::SimNodes sims({cluster.gcs_address(), s.report_ms});
    TaskMs(s);  // warm-up: the head's first worker
    MeasureSteadyState(s, d, sims, "n0_", &results);
    const double base_gcs_rss_mb = ReadProcUsage(d.gcs).rss_mb;
    for (int n : s.steps) {
      bool within_cap = false;
      try {
        within_cap = Step(s, n, d, sims, base_gcs_rss_mb, &results);
      } catch (const std::exception&) {
        std::cerr << "cluster_sim: the figures measured before " << n << " nodes failed:" << std::endl;
        for (const auto& [name, value] : results) std::cerr << "  " << name << " " << value << std::endl;
        throw;
      }
      if (!within_cap) {
        std::cerr << "cluster_sim: the GCS holds more than " << s.max_gcs_rss_mb << " MB; stopping at " << n
                  << " nodes" << std::endl;
        results.emplace_back("stopped_at_nodes", n);
        break;
      }
    }
  }
  ray::Shutdown();
  manta::bench::PrintJson(results);
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  const manta::bench::BenchFlags o = manta::bench::BenchFlags::Parse(argc, argv);
  try {
    return Run(o, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "cluster_sim: " << e.what() << std::endl;
    return 1;
  }
}

[[maybe_unused]] const bool kRegistered = AddBenchMain("cluster_sim", Main);

}  // namespace manta::bench::cluster_sim
