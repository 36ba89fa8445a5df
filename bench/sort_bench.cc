// sort_bench: the sort example (python_free_examples/sort_tasks.h) on a local
// cluster whose object store holds a quarter of the data (--store-fraction), beside
// the same work done by one core in this process (generate + partition + sort, no
// object store), in the same run. Prints one JSON object:
//   cluster_s / one_core_s            medians of --runs runs (a warm-up run first)
//   cluster_map_phase_s               of cluster_s, until every map had put its
//                                     buckets (mean)
//   cluster_gb_per_s, one_core_gb_per_s, speedup_over_one_core
//   two_one_core_sorts_at_once_s      two one-core sorts in two processes at once
//   machine_speedup_ceiling           2 x one_core_s / that: what two cores give
//                                     two independent copies of the work here
//   one_core_workers_heap_s           one_core_s in a process whose heap is set as
//                                     Manta's workers' are (worker_malloc_*), with
//   speedup_over_one_core_workers_heap  the speed-up over that
//   spilled_bytes, restored_bytes     the node's store counters over the timed runs
//   peak_node_pss_bytes               in one more run, not timed: the largest sum,
//                                     sampled every 100 ms, of the
//                                     proportional set sizes of this driver, the
//                                     raylet and its workers (shared store pages
//                                     counted once)
//   all_right                         every run's result passed valsort's checks
// With --hosts N (as root, in a build with the tests), the cluster is instead N
// hosts of the multi-host test bed, a node of 2 CPUs and a store of
// --host-store-bytes on each, the driver on host 0: see sort_bench_hosts.cc for the
// figures, and for the sort during which a host is killed.
// This binary is also its own worker.
#include <ray/api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_cluster.h"
#include "bench_main.h"
#include "nlohmann/json.hpp"
#include "src/common/config.h"
#include "src/common/flags.h"
#include "python_free_examples/sort_tasks.h"
#ifdef MANTA_SORT_BENCH_HOSTS
#include "bench/sort_bench_hosts.h"
#endif

namespace manta::bench::sort_bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using sort_example::Partition;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Shape {
  uint64_t bytes = 0, maps = 0, reduces = 0;
  uint64_t records_per_map() const { return bytes / sort_example::kRecordBytes / maps; }
};

// One sort on the cluster; true when its result passed the checks. Adds the time
// until every map finished to *map_s.
bool SortOnCluster(const Shape& s, bool ray_style, double* map_s = nullptr) {
  uint64_t made = 0;
  double map_phase = 0;
  const std::string problem =
      sort_example::RunSort(s.maps, s.records_per_map(), s.reduces, ray_style, &made, &map_phase);
  if (map_s != nullptr) *map_s += map_phase;
  if (!problem.empty()) std::cerr << "sort_bench: the sort is wrong: " << problem << std::endl;
  return problem.empty();
}

// The same work in this process, on this thread.
bool SortOnOneCore(const Shape& s) {
  uint64_t made = 0, made_checksum = 0;
  std::vector<std::vector<std::vector<uint8_t>>> columns(s.reduces);
  for (uint64_t m = 0; m < s.maps; ++m) {
    auto buckets = sort_example::MakeBuckets(m, s.records_per_map(), s.reduces, &made_checksum);
    made += s.records_per_map();
    for (uint64_t r = 0; r < s.reduces; ++r) columns[r].push_back(std::move(buckets[r]));
  }
  std::vector<Partition> partitions;
  for (auto& column : columns) {
    partitions.push_back(sort_example::SortColumn({column.begin(), column.end()}));
    column.clear();
  }
  std::vector<const Partition*> in_order;
  for (const auto& p : partitions) in_order.push_back(&p);
  return sort_example::CheckPartitions(in_order, made, made_checksum).empty();
}

// Two one-core sorts at once in two processes (forked: nothing shared but the
// machine): seconds until both are done; -1 when one failed. With one_core_s, it
// tells how much two cores can give this work on this machine (memory bandwidth and
// the shared cache are shared too).
double TwoOneCoreSortsAtOnce(const Shape& s) {
  const auto t0 = Clock::now();
  pid_t children[2];
  for (pid_t& child : children) {
    child = fork();
    if (child == 0) _exit(SortOnOneCore(s) ? 0 : 1);
  }
  bool right = true;
  for (pid_t child : children) {
    int status = 0;
    right &= child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return right ? Since(t0) : -1;
}

// Proportional set size of a process (smaps_rollup), 0 if gone.
int64_t PssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == "Pss:" && in >> kb) return kb * 1024;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

std::string ReadProc(pid_t pid, const char* what) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + what);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The node's processes: this driver, the raylet of the cluster at `gcs_address` and
// the raylet's children (its workers).
std::vector<pid_t> NodeProcesses(const std::string& gcs_address) {
  std::vector<pid_t> all;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (pid > 0) all.push_back(pid);
  }
  pid_t raylet = 0;
  for (pid_t pid : all) {
    std::string cmdline = ReadProc(pid, "cmdline");
    if (cmdline.find("manta_raylet") != std::string::npos && cmdline.find(gcs_address) != std::string::npos) raylet = pid;
  }
  std::vector<pid_t> node{getpid()};
  if (raylet == 0) return node;
  node.push_back(raylet);
  for (pid_t pid : all) {
    std::string stat = ReadProc(pid, "stat");
    size_t close = stat.rfind(')');
    int ppid = 0;
    if (close != std::string::npos && std::sscanf(stat.c_str() + close + 2, "%*c %d", &ppid) == 1 && ppid == raylet) {
      node.push_back(pid);
    }
  }
  return node;
}

// Samples the node's total PSS every 100 ms while it lives; keeps the peak.
class PssSampler {
 public:
  explicit PssSampler(std::string gcs_address) : gcs_address_(std::move(gcs_address)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        int64_t total = 0;
        for (pid_t pid : NodeProcesses(gcs_address_)) total += PssBytes(pid);
        peak_ = std::max<int64_t>(peak_, total);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  ~PssSampler() {
    stop_ = true;
    thread_.join();
  }
  int64_t peak() const { return peak_; }

 private:
  std::string gcs_address_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_{0};
  std::thread thread_;
};

// The head node's store counters from `manta status --json`.
nlohmann::json StoreCounters(const manta::bench::BenchCluster& cluster) {
  auto status = nlohmann::json::parse(cluster.RunManta({"status", "--json", "--address", cluster.gcs_address()}),
                                      nullptr, false);
  if (status.is_discarded() || !status.contains("nodes") || status["nodes"].empty()) return {};
  return status["nodes"][0]["object_store"];
}

int64_t Counter(const nlohmann::json& store, const char* name) {
  return store.contains(name) && store[name].is_number() ? store[name].get<int64_t>() : 0;
}

double GigaBytes(const Shape& shape) {
  return static_cast<double>(shape.records_per_map() * shape.maps * sort_example::kRecordBytes) / 1e9;
}

// The median of `runs` one-core sorts; -1 when one was wrong.
double OneCoreSeconds(const Shape& shape, int runs) {
  std::vector<double> one_core;
  bool right = true;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    right &= SortOnOneCore(shape);
    one_core.push_back(Since(t0));
  }
  return right ? Median(one_core) : -1;
}

// OneCoreSeconds in a forked process whose heap keeps what it frees as a worker's
// does (the thresholds Manta's workers set): a one-core baseline that gets the
// same help from its allocator. -1 when it failed.
double OneCoreSecondsWithWorkersHeap(const Shape& shape, int runs) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const manta::Config defaults;
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(defaults.worker_malloc_mmap_threshold_bytes));
    mallopt(M_TRIM_THRESHOLD, static_cast<int>(defaults.worker_malloc_trim_threshold_bytes));
    const double seconds = OneCoreSeconds(shape, runs);
    _exit(write(fds[1], &seconds, sizeof(seconds)) == sizeof(seconds) ? 0 : 1);
  }
  close(fds[1]);
  double seconds = -1;
  if (child < 0 || read(fds[0], &seconds, sizeof(seconds)) != sizeof(seconds)) seconds = -1;
  close(fds[0]);
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
  return seconds;
}

int Run(const Shape& shape, uint64_t store_bytes, int runs, bool ray_style, int argc, char** argv) {
  nlohmann::ordered_json out;
  out["bytes"] = shape.bytes;
  out["maps"] = shape.maps;
  out["reduces"] = shape.reduces;
  out["store_bytes"] = store_bytes;
  out["runs"] = runs;
  out["style"] = ray_style ? "ray" : "manta";
  const double one_core_s = OneCoreSeconds(shape, runs);
  const double one_core_workers_heap_s = OneCoreSecondsWithWorkersHeap(shape, runs);
  bool all_right = one_core_s > 0 && one_core_workers_heap_s > 0;

  std::vector<double> two_at_once;
  for (int i = 0; i < runs; ++i) two_at_once.push_back(TwoOneCoreSortsAtOnce(shape));
  all_right &= *std::min_element(two_at_once.begin(), two_at_once.end()) > 0;

  manta::bench::BenchCluster cluster;
  cluster.StartHead({"--object-store-memory", std::to_string(store_bytes)});
  ray::RayConfig config;
  config.address = cluster.gcs_address();
  ray::Init(config, argc, argv);
  all_right &= SortOnCluster(shape, ray_style);  // warm-up: workers started, store pages touched
  const nlohmann::json before = StoreCounters(cluster);
  std::vector<double> on_cluster;
  double map_s = 0;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    all_right &= SortOnCluster(shape, ray_style, &map_s);
    on_cluster.push_back(Since(t0));
  }
  const nlohmann::json after = StoreCounters(cluster);
  // The peak PSS in a run of its own: reading smaps_rollup walks every page table
  // of the processes, the store's mapping included, and took CPU from the timed runs
  // (6% of the whole bench's with a 4 GiB store).
  int64_t peak_pss = 0;
  {
    PssSampler sampler(cluster.gcs_address());
    all_right &= SortOnCluster(shape, ray_style);
    peak_pss = sampler.peak();
  }
  ray::Shutdown();

  const double gb = GigaBytes(shape);
  out["cluster_s"] = Median(on_cluster);
  out["cluster_map_phase_s"] = map_s / runs;  // mean: maps made and put
  out["one_core_s"] = one_core_s;
  out["cluster_gb_per_s"] = gb / Median(on_cluster);
  out["one_core_gb_per_s"] = gb / one_core_s;
  out["speedup_over_one_core"] = one_core_s / Median(on_cluster);
  out["one_core_workers_heap_s"] = one_core_workers_heap_s;
  out["speedup_over_one_core_workers_heap"] = one_core_workers_heap_s / Median(on_cluster);
  out["two_one_core_sorts_at_once_s"] = Median(two_at_once);
  // What two cores give two independent copies of the work: the ceiling for the cluster.
  out["machine_speedup_ceiling"] = 2 * one_core_s / Median(two_at_once);
  out["spilled_bytes"] = Counter(after, "spilled_bytes_total") - Counter(before, "spilled_bytes_total");
  out["restored_bytes"] = Counter(after, "restored_bytes_total") - Counter(before, "restored_bytes_total");
  out["peak_node_pss_bytes"] = peak_pss;
  out["all_right"] = all_right;
  std::cout << out.dump(2) << std::endl;
  return all_right ? 0 : 1;
}

// --hosts: the sort on the multi-host test bed, beside one core here.
int RunOnHosts(const Shape& shape, int hosts, uint64_t store_bytes_per_host, int runs, bool kill_a_host) {
#ifdef MANTA_SORT_BENCH_HOSTS
  nlohmann::ordered_json out;
  out["bytes"] = shape.bytes;
  out["maps"] = shape.maps;
  out["reduces"] = shape.reduces;
  out["runs"] = runs;
  out["style"] = "manta";
  const double one_core_s = OneCoreSeconds(shape, runs);
  ::sort_bench::HostsRun run{hosts, 2, store_bytes_per_host, shape.bytes, shape.maps, shape.reduces, runs, kill_a_host};
  bool all_right = ::sort_bench::SortOnHosts(run, &out) && one_core_s > 0;
  const double cluster_s = out.value("cluster_s", 0.0);
  out["one_core_s"] = one_core_s;
  out["cluster_gb_per_s"] = cluster_s > 0 ? GigaBytes(shape) / cluster_s : 0.0;
  out["one_core_gb_per_s"] = GigaBytes(shape) / one_core_s;
  out["speedup_over_one_core"] = cluster_s > 0 ? one_core_s / cluster_s : 0.0;
  out["all_right"] = all_right;
  std::cout << out.dump(2) << std::endl;
  return all_right ? 0 : 1;
#else
  (void)shape, (void)hosts, (void)store_bytes_per_host, (void)runs, (void)kill_a_host;
  std::cerr << "sort_bench: --hosts needs the multi-host test bed, which is built with the tests "
               "(configure with -DMANTA_BUILD_TESTS=ON)"
            << std::endl;
  return 2;
#endif
}

}  // namespace

int Main(int argc, char** argv) {
  Shape shape{uint64_t{1} << 30, 24, 12};
  uint64_t store_fraction = 4;
  int runs = 3;
  // Unsigned sizes: a negative value would wrap to a huge one (and the sort would take all memory).
  constexpr int64_t kMaxFlag = std::numeric_limits<int64_t>::max();
  manta::FlagParser flags("sort_bench: the sort example on a local cluster against one core");
  flags.Add("--bytes", &shape.bytes, "bytes of records to sort").Range(1, kMaxFlag);
  flags.Add("--maps", &shape.maps, "map tasks").Range(1, kMaxFlag);
  flags.Add("--reduces", &shape.reduces, "reduce tasks").Range(1, kMaxFlag);
  flags.Add("--store-fraction", &store_fraction, "the object store holds bytes / this").Range(1, kMaxFlag);
  uint64_t store_bytes = 0;
  flags.Add("--store-bytes", &store_bytes, "the object store's size (instead of --store-fraction)").NonNegative();
  flags.Add("--runs", &runs, "timed runs of each (the median is reported)").Range(1, 1000);
  bool ray_style = false;
  flags.AddFlag("--ray-style", &ray_style, "Ray's C++ API's way: ray::Put in maps, ray::Get in reduces");
  int hosts = 0;
  flags.Add("--hosts", &hosts, "run on this many hosts of the multi-host test bed (root)").NonNegative();
  uint64_t host_store_bytes = 0;
  flags.Add("--host-store-bytes", &host_store_bytes, "with --hosts: each host's store (default bytes / hosts)")
      .NonNegative();
  bool no_kill = false;
  flags.AddFlag("--no-kill", &no_kill, "with --hosts: skip the sort during which a host is killed");
  flags.AllowExtras();
  if (std::optional<int> exit_code = flags.Parse(argc, argv)) return *exit_code;
  if (hosts > 0) {
    if (ray_style) {
      std::cerr << "sort_bench: --hosts runs Manta's style only (in Ray's, a map's buckets die with its host's "
                   "worker, their owner)"
                << std::endl;
      return 2;
    }
    if (host_store_bytes == 0) host_store_bytes = shape.bytes / static_cast<uint64_t>(hosts);
    return RunOnHosts(shape, hosts, host_store_bytes, std::max(runs, 1), !no_kill);
  }
  try {
    if (store_bytes == 0) store_bytes = shape.bytes / std::max<uint64_t>(store_fraction, 1);
    return Run(shape, store_bytes, std::max(runs, 1), ray_style, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "sort_bench: " << e.what() << std::endl;
    return 1;
  }
}

[[maybe_unused]] const bool kRegistered = AddBenchMain("sort_bench", Main);

}  // namespace manta::bench::sort_bench
