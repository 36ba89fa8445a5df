// Figures that depend on how much work is in flight or has been done, rather than on
// one tight loop: first-call stalls, a map-reduce tree submitted at once, a million
// tasks in flight, what a big run leaves behind, the cost of starting a private
// cluster, a million small objects held at once, a long chain of ref arguments, and
// tasks spilling over a 3-node cluster. Prints one JSON object.
//
//   scale_bench [--only section,section] [--runs N] [--max-in-flight N] [--actors N] [--scale F]
//
// --scale multiplies the large counts (1,000,000 puts, a chain of 100,000, ...) for a
// short run (the CI smoke run uses a small one); figures named after a count keep
// their names. A section that fails makes the whole run exit 1.
//
// Sections: stalls, in_flight (includes after_big_run), startup, puts, chain, nodes,
// actors.
// Each section runs in a fresh driver process (this binary again, with --section),
// since several figures are about what happens the first time in a process. Most use
// the private cluster ray::Init() starts (2 CPUs); `nodes` starts its own with the
// `manta` CLI. The binary is also its own worker.
#include <ray/api.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_cluster.h"
#include "bench_main.h"
#include "bench_util.h"
#include "absl/container/flat_hash_map.h"
#include "src/common/id.h"
#include "src/common/process.h"
#include "src/common/security.h"

namespace manta::bench::scale_bench {

namespace {

using manta::bench::Clock;
using manta::bench::Since;

long Sq(long i) { return i * i; }
long Add2(long a, long b) { return a + b; }
long ScaleInc(long x) { return x + 1; }
// One function per size in the first-ref-argument test, so that each is the first
// call of its function.
long IncA(long x) { return x + 1; }
long IncB(long x) { return x + 1; }
long IncC(long x) { return x + 1; }
long IncD(long x) { return x + 1; }
int ScaleNoop() { return 0; }

class ScaleSink {
 public:
  static ScaleSink* Create() { return new ScaleSink(); }
  int Small() { return 0; }
};

RAY_REMOTE(Sq, Add2, ScaleInc, IncA, IncB, IncC, IncD, ScaleNoop, ScaleSink::Create, &ScaleSink::Small);

double Ms(Clock::time_point t0) { return Since(t0) * 1000; }

// --scale (1 unless set): the factor on the sections' large counts.
double g_scale = 1;
long Scaled(long n) { return std::max(1L, std::lround(static_cast<double>(n) * g_scale)); }

// CPU time of this process (all its threads, not its children), in seconds: what the
// driver spends, which other load on the machine changes far less than a rate.
double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Resident memory of a process in bytes (0 when it is gone).
int64_t ResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

// Proportional set size of a process in bytes (shared pages divided among their
// users), 0 when it is gone.
int64_t ProportionalBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "Pss:") {
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

// The pids of this driver's private cluster (from its session's pid files) and every
// process they started (workers).
std::vector<pid_t> PrivateClusterPids() {
  namespace fs = std::filesystem;
  std::vector<pid_t> roots;
  std::error_code ec;
  const std::string prefix = std::to_string(getpid()) + "-";
  for (const auto& root : fs::directory_iterator(manta::TempRoot() + "/private", ec)) {
    if (root.path().filename().string().rfind(prefix, 0) != 0) continue;
    for (const auto& session : fs::directory_iterator(root.path() / "sessions", ec)) {
      for (const auto& file : fs::directory_iterator(session.path() / "pids", ec)) {
        std::string name = file.path().stem().string();  // "1_gcs_32541"
        size_t underscore = name.rfind('_');
        if (underscore != std::string::npos) roots.push_back(std::stoi(name.substr(underscore + 1)));
      }
    }
  }
  // Children, grandchildren: by parent pid from /proc.
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t parent = 0;
    rest >> state >> parent;
    children[parent].push_back(std::stoi(name));
  }
  std::vector<pid_t> all;
  for (size_t i = 0; i < roots.size(); ++i) {
    all.push_back(roots[i]);
    for (pid_t child : children[roots[i]]) roots.push_back(child);
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

int64_t PrivateClusterResidentBytes() {
  int64_t total = 0;
  for (pid_t pid : PrivateClusterPids()) total += ResidentBytes(pid);
  return total;
}

int64_t PrivateClusterProportionalBytes() {
  int64_t total = 0;
  for (pid_t pid : PrivateClusterPids()) total += ProportionalBytes(pid);
  return total;
}

void Init(int num_cpus = 2) {
  ray::RayConfig config;
  config.num_cpus = num_cpus;
  ray::Init(config);
}

// 1,000 Sq leaves and a binary tree of 999 Add2 over their refs, all submitted at once.
double MapReduceTreeMs(bool leaves_first) {
  auto t0 = Clock::now();
  std::vector<ray::ObjectRef<long>> level;
  level.reserve(1000);
  for (long i = 0; i < 1000; ++i) level.push_back(ray::Task(Sq).Remote(i));
  if (leaves_first) {
    ray::Get(level);
    t0 = Clock::now();
  }
  while (level.size() > 1) {
    std::vector<ray::ObjectRef<long>> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(ray::Task(Add2).Remote(level[i], level[i + 1]));
    if (level.size() % 2 == 1) next.push_back(level.back());
    level = std::move(next);
  }
  long sum = *level[0].Get();
  if (sum != 332833500) manta::bench::Die("map-reduce tree: wrong sum " + std::to_string(sum));
  return Ms(t0);
}

using Results = std::vector<std::pair<std::string, double>>;

void Stalls(int runs, Results* out) {
  Init();
  // A task taking a finished result as its argument, the first time and the next;
  // before them, the function's first call (with a plain value), so that what a new
  // function costs is told apart from what a reference argument costs.
  double first = 0, second = 0, new_function = 0;
  const std::vector<std::pair<int, long (*)(long)>> sizes = {{4, IncA}, {50, IncB}, {200, IncC}, {1000, IncD}};
  for (const auto& [n, inc] : sizes) {
    std::vector<ray::ObjectRef<long>> refs;
    for (long i = 0; i < n; ++i) refs.push_back(ray::Task(Sq).Remote(i));
    ray::Get(refs);
    auto t_new = Clock::now();
    if (*ray::Task(inc).Remote(5L).Get() != 6) manta::bench::Die("value argument: wrong result");
    new_function = std::max(new_function, Ms(t_new));
    for (int k = 0; k < 2; ++k) {
      auto t0 = Clock::now();
      long v = *ray::Task(inc).Remote(refs[k + 2]).Get();
      double ms = Ms(t0);
      if (v != (k + 2) * (k + 2) + 1) manta::bench::Die("ref argument: wrong result");
      (k == 0 ? first : second) = std::max(k == 0 ? first : second, ms);
    }
  }
  out->emplace_back("first_call_of_a_function_ms", new_function);
  out->emplace_back("first_ref_arg_task_ms", first);
  out->emplace_back("second_ref_arg_task_ms", second);

  std::vector<double> tree;
  for (int r = 0; r < runs; ++r) tree.push_back(MapReduceTreeMs(false));
  out->emplace_back("mapreduce_1000_tree_first_ms", tree[0]);
  out->emplace_back("mapreduce_1000_tree_ms", Median(tree));
  out->emplace_back("mapreduce_1000_tree_max_ms", *std::max_element(tree.begin(), tree.end()));
  std::vector<double> after_leaves;
  for (int r = 0; r < runs; ++r) after_leaves.push_back(MapReduceTreeMs(true));
  out->emplace_back("mapreduce_1000_tree_after_leaves_ms", Median(after_leaves));
  std::vector<double> chain;
  for (int r = 0; r < runs; ++r) {
    auto t0 = Clock::now();
    auto ref = ray::Task(ScaleInc).Remote(0L);
    for (int i = 1; i < 20; ++i) ref = ray::Task(ScaleInc).Remote(ref);
    if (*ref.Get() != 20) manta::bench::Die("chain: wrong result");
    chain.push_back(Ms(t0));
  }
  out->emplace_back("chain_20_inc_ms", Median(chain));
  auto t0 = Clock::now();
  ray::Shutdown();
  out->emplace_back("shutdown_after_small_run_s", Since(t0));
}

// The machine's baseline for the same growth: nanoseconds per operation (insert, find,
// erase of random object ids) on a hash table of n 64-byte entries, the kind of
// table the task path touches several times per task. Past the caches, each touch
// is a memory access.
double HashTableNsPerOp(long n) {
  std::vector<manta::ObjectID> ids(n);
  for (auto& id : ids) id = manta::ObjectID::FromRandom();
  absl::flat_hash_map<manta::ObjectID, std::array<char, 32>> table;
  auto t0 = Clock::now();
  for (const auto& id : ids) table.try_emplace(id);
  for (const auto& id : ids) table.find(id)->second[0]++;
  for (const auto& id : ids) table.erase(id);
  return Since(t0) * 1e9 / (3.0 * n);
}

// Waits up to 5 s for the driver's resident memory to come back within 64 MB of
// `start` (the background clean-up after a burst); returns what is still kept.
int64_t WaitForMemoryBack(int64_t start) {
  int64_t kept = 0;
  for (int i = 0; i < 50; ++i) {
    kept = ResidentBytes(getpid()) - start;
    if (kept < (64 << 20)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return kept;
}

// Submits n (10,000, 100,000, 1,000,000) no-op tasks, then gets them all.
void InFlight(int runs, long max_n, Results* out) {
  Init();
  std::vector<ray::ObjectRef<int>> warm;
  for (int i = 0; i < 10000; ++i) warm.push_back(ray::Task(ScaleNoop).Remote());
  ray::Get(warm);
  warm.clear();
  std::vector<double> tree_before;
  for (int r = 0; r < runs; ++r) tree_before.push_back(MapReduceTreeMs(false));
  // The machine's baselines first: what they allocate is not the driver's to give back.
  std::map<long, double> table_ns;
  for (long n : {10000L, 100000L, 1000000L}) {
    std::vector<double> ns;
    for (int r = 0; r < 3; ++r) ns.push_back(HashTableNsPerOp(n));
    table_ns[n] = Median(ns);
  }
  malloc_trim(0);
  const int64_t rss_start = ResidentBytes(getpid());
  // Each size is run several times (the small ones more often: a 10,000-task burst
  // lasts tens of milliseconds and is at the mercy of one scheduler hiccup); the
  // figures are medians.
  for (long n : {10000L, 100000L, 1000000L}) {
    if (n > max_n) break;
    const int bursts = n >= 1000000 ? std::max(3, runs / 2) : 2 * runs + 1;
    std::vector<double> rate, submit_rate, cpu_us, bytes;
    for (int b = 0; b < bursts; ++b) {
      const int64_t before = ResidentBytes(getpid());
      const double cpu0 = ProcessCpuSeconds();
      auto t0 = Clock::now();
      std::vector<ray::ObjectRef<int>> refs;
      refs.reserve(n);
      for (long i = 0; i < n; ++i) refs.push_back(ray::Task(ScaleNoop).Remote());
      const double submit_s = Since(t0);
      bytes.push_back(static_cast<double>(ResidentBytes(getpid()) - before) / n);
      auto values = ray::Get(refs);
      rate.push_back(n / Since(t0));
      submit_rate.push_back(n / submit_s);
      cpu_us.push_back((ProcessCpuSeconds() - cpu0) * 1e6 / n);
      values.clear();
      values.shrink_to_fit();
      refs.clear();
      refs.shrink_to_fit();
      WaitForMemoryBack(rss_start);
    }
    const std::string suffix = std::to_string(n);
    out->emplace_back("tasks_in_flight_" + suffix + "_per_s", Median(rate));
    out->emplace_back("tasks_in_flight_" + suffix + "_submitted_per_s", Median(submit_rate));
    out->emplace_back("driver_cpu_us_per_task_" + suffix, Median(cpu_us));
    out->emplace_back("baseline_hash_table_ns_per_op_" + suffix, table_ns[n]);
    // The first burst's: later ones reuse memory the first one faulted in.
    out->emplace_back("driver_bytes_per_pending_task_" + suffix, bytes.front());
  }
  // What the big run left: memory (once the background release has settled: no
  // longer shrinking over half a second, within 5 s), and how fast the same work is
  // afterwards.
  int64_t kept = WaitForMemoryBack(rss_start);
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int64_t now = ResidentBytes(getpid()) - rss_start;
    const bool settled = now >= kept - (1 << 20);
    kept = std::min(kept, now);
    if (settled) break;
  }
  out->emplace_back("driver_rss_kept_after_big_run_mb", kept / 1e6);
  std::vector<double> tree_after;
  for (int r = 0; r < runs; ++r) tree_after.push_back(MapReduceTreeMs(false));
  out->emplace_back("mapreduce_1000_tree_before_big_run_ms", Median(tree_before));
  out->emplace_back("mapreduce_1000_tree_after_big_run_ms", Median(tree_after));
  auto t0 = Clock::now();
  ray::Shutdown();
  out->emplace_back("shutdown_after_big_run_s", Since(t0));
}

// ray::Init() of a private cluster, then 400,000 async no-op tasks at once; with the
// default pre-faulting and with none, alternately (`runs` times each, medians).
void Startup(int runs, Results* out) {
  std::vector<double> seconds[2], rss[2];
  for (int r = 0; r < 2 * runs; ++r) {
    const bool prefault = r % 2 == 0;
    if (!prefault) setenv("MANTA_object_store_prefault_bytes", "0", 1);
    auto t0 = Clock::now();
    Init();
    std::vector<ray::ObjectRef<int>> refs;
    refs.reserve(Scaled(400000));
    for (long i = 0; i < Scaled(400000); ++i) refs.push_back(ray::Task(ScaleNoop).Remote());
    ray::Get(refs);
    refs.clear();
    seconds[prefault].push_back(Since(t0));
    std::this_thread::sleep_for(std::chrono::seconds(2));  // idle
    rss[prefault].push_back(PrivateClusterResidentBytes() / 1e6);
    ray::Shutdown();
    unsetenv("MANTA_object_store_prefault_bytes");
  }
  out->emplace_back("init_then_400k_async_s", Median(seconds[1]));
  out->emplace_back("idle_private_cluster_rss_mb", Median(rss[1]));
  out->emplace_back("init_then_400k_async_no_prefault_s", Median(seconds[0]));
  out->emplace_back("idle_private_cluster_rss_no_prefault_mb", Median(rss[0]));
}

// 1,000,000 small ray::Put()s held at once.
void Puts(Results* out) {
  Init();
  for (int i = 0; i < 10000; ++i) ray::Put(i);  // warm-up
  malloc_trim(0);
  const int64_t before = ResidentBytes(getpid());
  auto t0 = Clock::now();
  const long n = Scaled(1000000);
  std::vector<ray::ObjectRef<long>> refs;
  refs.reserve(n);
  for (long i = 0; i < n; ++i) refs.push_back(ray::Put(i));
  const double rate = static_cast<double>(n) / Since(t0);
  const int64_t held = ResidentBytes(getpid()) - before;
  if (*refs[n / 2].Get() != n / 2) manta::bench::Die("puts: wrong value");
  out->emplace_back("put_1m_small_held_per_s", rate);
  out->emplace_back("driver_bytes_per_held_small_object", static_cast<double>(held) / static_cast<double>(n));
  refs.clear();
  ray::Shutdown();
}

// A chain of 100,000 tasks, each taking the previous one's result, submitted at once.
void Chain(Results* out) {
  Init();
  auto ref = ray::Task(ScaleInc).Remote(0L);
  for (int i = 1; i < 1000; ++i) ref = ray::Task(ScaleInc).Remote(ref);  // warm-up
  ref.Get();
  const long n = Scaled(100000);
  auto t0 = Clock::now();
  ref = ray::Task(ScaleInc).Remote(0L);
  for (long i = 1; i < n; ++i) ref = ray::Task(ScaleInc).Remote(ref);
  if (*ref.Get() != n) manta::bench::Die("chain: wrong result");
  out->emplace_back("chain_100k_ref_tasks_per_s", static_cast<double>(n) / Since(t0));
  ray::Shutdown();
}

double AsyncRate(long n) {
  auto t0 = Clock::now();
  std::vector<ray::ObjectRef<int>> refs;
  refs.reserve(n);
  for (long i = 0; i < n; ++i) refs.push_back(ray::Task(ScaleNoop).Remote());
  ray::Get(refs);
  return n / Since(t0);
}

// The same 3 CPUs as one node, then as three nodes of one CPU (tasks spill over).
void Nodes(int runs, Results* out) {
  for (int nodes : {1, 3}) {
    manta::bench::BenchCluster cluster;
    const std::string store = std::to_string(int64_t{256} << 20);
    cluster.StartHead({"--num-cpus", nodes == 1 ? "3" : "1", "--object-store-memory", store});
    for (int i = 1; i < nodes; ++i) cluster.StartNode({"--num-cpus", "1", "--object-store-memory", store});
    ray::RayConfig config;
    config.address = cluster.gcs_address();
    ray::Init(config);
    AsyncRate(Scaled(10000));
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) rates.push_back(AsyncRate(Scaled(100000)));
    ray::Shutdown();
    out->emplace_back(nodes == 1 ? "one_node_3_cpus_tasks_async_per_s" : "three_nodes_1_cpu_tasks_async_per_s",
                      Median(rates));
  }
}

// `n` actors (0 CPUs each, as many as this machine's memory holds: each is a
// worker process), each awaited by a call; then calls spread over all of them.
void Actors(long n, Results* out) {
  Init();
  const int64_t before = PrivateClusterResidentBytes();
  const int64_t before_pss = PrivateClusterProportionalBytes();
  auto t0 = Clock::now();
  std::vector<ray::ActorHandle<ScaleSink>> actors;
  actors.reserve(n);
  // (An actor given no resources takes none; Ray's C++ API refuses a quantity of 0.)
  for (long i = 0; i < n; ++i) actors.push_back(ray::Actor(ScaleSink::Create).Remote());
  std::vector<ray::ObjectRef<int>> first;
  for (auto& actor : actors) first.push_back(actor.Task(&ScaleSink::Small).Remote());
  ray::Get(first);
  out->emplace_back("actors_created", static_cast<double>(n));
  out->emplace_back("actor_creations_per_s", n / Since(t0));
  out->emplace_back("cluster_rss_bytes_per_actor", static_cast<double>(PrivateClusterResidentBytes() - before) / n);
  out->emplace_back("cluster_pss_bytes_per_actor",
                    static_cast<double>(PrivateClusterProportionalBytes() - before_pss) / n);
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) {
    const long calls = std::max<long>(100000, 10 * n);
    std::vector<ray::ObjectRef<int>> refs;
    refs.reserve(calls);
    auto t1 = Clock::now();
    for (long i = 0; i < calls; ++i) refs.push_back(actors[i % n].Task(&ScaleSink::Small).Remote());
    ray::Get(refs);
    rates.push_back(calls / Since(t1));
  }
  out->emplace_back("actor_calls_async_all_alive_per_s", Median(rates));
  actors.clear();
  ray::Shutdown();
}

int RunSection(const std::string& section, const manta::bench::BenchFlags& o) {
  Results results;
  const int runs = std::stoi(o.Value("--runs", "5"));
  g_scale = std::stod(o.Value("--scale", "1"));
  if (section == "stalls") Stalls(runs, &results);
  if (section == "in_flight") InFlight(runs, std::stol(o.Value("--max-in-flight", "1000000")), &results);
  if (section == "startup") Startup(std::min(runs, 3), &results);
  if (section == "puts") Puts(&results);
  if (section == "chain") Chain(&results);
  if (section == "nodes") Nodes(runs, &results);
  if (section == "actors") Actors(std::stol(o.Value("--actors", "1000")), &results);
  for (const auto& [name, value] : results) std::printf("%s %.6g\n", name.c_str(), value);
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  const manta::bench::BenchFlags o = manta::bench::BenchFlags::Parse(argc, argv);
  try {
    if (std::string section = o.Value("--section"); !section.empty()) return RunSection(section, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scale_bench: %s\n", e.what());
    return 1;
  }
  Results results;
  int failed = 0;
  for (const std::string section : {"stalls", "in_flight", "startup", "puts", "chain", "nodes", "actors"}) {
    if (!o.Want(section)) continue;
    std::string cmd = "'" + manta::SelfExecutablePath() + "' --section=" + section;
    for (const auto& [name, value] : o.others) cmd += " " + name + "=" + value;
    std::FILE* f = popen(cmd.c_str(), "r");
    char name[128];
    double value = 0;
    while (f != nullptr && std::fscanf(f, "%127s %lf", name, &value) == 2) results.emplace_back(name, value);
    if (f == nullptr || pclose(f) != 0) {
      std::fprintf(stderr, "scale_bench: section %s failed\n", section.c_str());
      ++failed;
    }
  }
  manta::bench::PrintJson(results);
  return failed == 0 ? 0 : 1;
}

[[maybe_unused]] const bool kRegistered = AddBenchMain("scale_bench", Main);

}  // namespace manta::bench::scale_bench
