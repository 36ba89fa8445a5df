// sort_bench --hosts N (see sort_bench_hosts.h). Figures added to sort_bench's JSON:
//   cluster_s, cluster_map_phase_s      median / mean of the timed sorts, as the
//                                       driver on host 0 timed them
//   bytes_moved_between_hosts_per_sort  what the hosts sent on their links (eth0's
//                                       transmitted bytes, summed over the hosts), per
//                                       sort, the warm-up included
//   spilled_bytes_per_sort, restored_bytes_per_sort   the nodes' store counters
//   peak_rss_bytes_per_host             per host, the peak (sampled every 200 ms) of
//                                       its processes' private resident memory plus
//                                       the store's resident pages (counted once)
//   host_killed                         the sort during which the last host was
//                                       killed once its maps were done: right, its
//                                       seconds, and when the host was declared dead
#include "bench/sort_bench_hosts.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/multihost/multihost_cluster.h"

namespace sort_bench {
namespace {

namespace fs = std::filesystem;
using manta::testing::MultiHostCluster;
using manta::testing::TestBed;

constexpr int64_t kDriverTimeoutMs = 30 * 60 * 1000;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The bytes host `host` has sent on its link (eth0 in /proc/net/dev, read inside the
// host: /proc/net is per network namespace); -1 when it cannot be read.
int64_t SentBytes(TestBed& bed, int host) {
  manta::testing::CommandResult r = bed.Exec(host, {"cat", "/proc/net/dev"}, {}, 10000);
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.substr(0, colon).find("eth0") == std::string::npos) continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t value = 0;
    for (int i = 0; i < 9 && fields >> value; ++i) {
    }
    return value;  // the 9th field: bytes transmitted
  }
  return -1;
}

int64_t SentBytesOfAll(TestBed& bed) {
  int64_t total = 0;
  for (int h = 0; h < bed.num_hosts(); ++h) total += std::max<int64_t>(SentBytes(bed, h), 0);
  return total;
}

// The stores' spilled and restored bytes, summed over the live nodes.
std::pair<int64_t, int64_t> StoreTotals(MultiHostCluster& cluster) {
  const nlohmann::json status = cluster.Status(0);
  int64_t spilled = 0, restored = 0;
  if (!status.contains("nodes")) return {0, 0};
  for (const auto& node : status["nodes"]) {
    if (node.value("state", "") != "ALIVE" || !node.contains("object_store")) continue;
    spilled += node["object_store"].value("spilled_bytes_total", int64_t{0});
    restored += node["object_store"].value("restored_bytes_total", int64_t{0});
  }
  return {spilled, restored};
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A value in kB from /proc/<pid>/status ("RssAnon:", ...), in bytes.
int64_t StatusBytes(const std::string& status, const std::string& key) {
  const size_t at = status.find(key);
  return at == std::string::npos ? 0 : std::atoll(status.c_str() + at + key.size()) * 1024;
}

// Samples each host's resident memory every 200 ms while it lives: the private
// (anonymous) resident memory of the host's processes plus the largest shared-memory
// residency among them (the store, which every process of the node maps). Cheap:
// /proc/<pid>/status holds counters, unlike smaps, which walks page tables.
class MemorySampler {
 public:
  explicit MemorySampler(const TestBed& bed) : peaks_(bed.num_hosts()) {
    for (int h = 0; h < bed.num_hosts(); ++h) {
      std::error_code ec;
      pid_namespaces_.push_back(fs::read_symlink("/proc/" + std::to_string(bed.InitPid(h)) + "/ns/pid", ec).string());
    }
    thread_ = std::thread([this] {
      while (!stop_) {
        Sample();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  ~MemorySampler() { Stop(); }
  std::vector<int64_t> Stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    return peaks_;
  }

 private:
  void Sample() {
    std::vector<int64_t> anon(peaks_.size(), 0), shared(peaks_.size(), 0);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
      const std::string pid = entry.path().filename().string();
      if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0]))) continue;
      const std::string ns = fs::read_symlink("/proc/" + pid + "/ns/pid", ec).string();
      auto host = std::find(pid_namespaces_.begin(), pid_namespaces_.end(), ns);
      if (ec || host == pid_namespaces_.end()) continue;
      const std::string status = Slurp("/proc/" + pid + "/status");
      const size_t h = static_cast<size_t>(host - pid_namespaces_.begin());
      anon[h] += StatusBytes(status, "RssAnon:");
      shared[h] = std::max(shared[h], StatusBytes(status, "RssShmem:"));
    }
    for (size_t h = 0; h < peaks_.size(); ++h) peaks_[h] = std::max(peaks_[h], anon[h] + shared[h]);
  }

  std::vector<std::string> pid_namespaces_;
  std::vector<int64_t> peaks_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::vector<std::string> SortArgs(const HostsRun& run, int sorts) {
  return {"sort", std::to_string(run.bytes), std::to_string(run.maps), std::to_string(run.reduces),
          std::to_string(sorts)};
}

// The last warnings and errors in the logs of each live host's Manta processes.
std::string HostWarnings(TestBed& bed) {
  std::string out;
  for (int h = 0; h < bed.num_hosts(); ++h) {
    manta::testing::CommandResult r = bed.Exec(
        h, {"sh", "-c", "grep -h -E '^[WEF][0-9]{8} ' /tmp/manta-*/sessions/*/logs/* 2>/dev/null | sort | tail -n 30"},
        {}, 20000);
    out += "--- host " + std::to_string(h) + " (" + bed.Ip(h) + "):\n" + r.output;
  }
  return out;
}

// The driver's result when every sort ran; null (with the output and the hosts'
// warnings on stderr) if not.
nlohmann::json ResultOf(const manta::testing::CommandResult& r, TestBed& bed) {
  nlohmann::json result = manta::testing::DriverResult(r.output);
  if (r.exit_code != 0 || !result.is_object()) {
    std::cerr << "sort_bench: the sort driver on host 0 failed (exit " << r.exit_code << "):\n"
              << r.output << "\nThe hosts' last warnings:\n" << HostWarnings(bed) << std::endl;
    return nullptr;
  }
  return result;
}

// The warm-up and the timed sorts, undisturbed.
bool Undisturbed(const HostsRun& run, MultiHostCluster& cluster, nlohmann::ordered_json* out) {
  const int64_t sent_before = SentBytesOfAll(cluster.bed());
  const auto [spilled_before, restored_before] = StoreTotals(cluster);
  MemorySampler sampler(cluster.bed());
  const nlohmann::json result = ResultOf(cluster.Driver(0, SortArgs(run, run.runs + 1), kDriverTimeoutMs), cluster.bed());
  const std::vector<int64_t> peaks = sampler.Stop();
  if (result.is_null()) return false;
  const int sorts = run.runs + 1;
  std::vector<double> seconds;
  double map_s = 0;
  for (size_t i = 1; i < result["runs"].size(); ++i) {
    seconds.push_back(result["runs"][i]["seconds"].get<double>());
    map_s += result["runs"][i]["map_s"].get<double>();
  }
  std::sort(seconds.begin(), seconds.end());
  const auto [spilled_after, restored_after] = StoreTotals(cluster);
  (*out)["cluster_s"] = seconds.empty() ? 0.0 : seconds[seconds.size() / 2];
  (*out)["cluster_map_phase_s"] = seconds.empty() ? 0.0 : map_s / static_cast<double>(seconds.size());
  (*out)["bytes_moved_between_hosts_per_sort"] = (SentBytesOfAll(cluster.bed()) - sent_before) / sorts;
  (*out)["spilled_bytes_per_sort"] = (spilled_after - spilled_before) / sorts;
  (*out)["restored_bytes_per_sort"] = (restored_after - restored_before) / sorts;
  (*out)["peak_rss_bytes_per_host"] = peaks;
  return result["right"].get<bool>();
}

// A warm-up sort, then one during which the last host is killed once the maps are done.
bool HostKilled(const HostsRun& run, MultiHostCluster& cluster, nlohmann::ordered_json* out) {
  TestBed& bed = cluster.bed();
  auto driver = cluster.SpawnDriver(0, SortArgs(run, 2));
  if (!driver.ok()) {
    std::cerr << "sort_bench: " << driver.status() << std::endl;
    return false;
  }
  const int victim = bed.num_hosts() - 1;
  const bool mid_sort = manta::testing::WaitFor(
      [&] {
        const std::string so_far = bed.OutputOf(*driver);
        return so_far.find("MAPS_DONE 1") != std::string::npos || so_far.find("RESULT") != std::string::npos ||
               so_far.find("ERROR") != std::string::npos;
      },
      kDriverTimeoutMs);
  const int64_t killed_ms = WallMs();
  const bool killed = mid_sort && bed.OutputOf(*driver).find("MAPS_DONE 1") != std::string::npos &&
                      bed.KillHost(victim).ok();
  const nlohmann::json result = ResultOf(bed.Wait(*driver, kDriverTimeoutMs), bed);
  int64_t dead_ms = 0;
  const std::string state = cluster.NodeState(bed.Ip(victim), &dead_ms);
  nlohmann::ordered_json killed_run;
  killed_run["host"] = victim;
  killed_run["killed_when"] = killed ? "the maps were done, the reduces running" : "not killed";
  killed_run["right"] = !result.is_null() && result["right"].get<bool>();
  killed_run["sort_s"] = result.is_null() ? 0.0 : result["runs"][1]["seconds"].get<double>();
  killed_run["declared_dead_after_s"] = state == "DEAD" ? static_cast<double>(dead_ms - killed_ms) / 1000 : -1.0;
  (*out)["host_killed"] = killed_run;
  return killed && killed_run["right"].get<bool>();
}

}  // namespace

bool SortOnHosts(const HostsRun& run, nlohmann::ordered_json* out) {
  manta::testing::MultiHostOptions options;
  options.num_hosts = run.hosts;
  options.cpus_per_host = run.cpus_per_host;
  options.object_store_bytes = static_cast<int64_t>(run.store_bytes_per_host);
  auto cluster = MultiHostCluster::Start(options);
  if (!cluster.ok()) {
    std::cerr << "sort_bench: cannot start the multi-host cluster: " << cluster.status() << std::endl;
    return false;
  }
  (*out)["hosts"] = run.hosts;
  (*out)["cpus_per_host"] = run.cpus_per_host;
  (*out)["store_bytes_per_host"] = run.store_bytes_per_host;
  bool right = Undisturbed(run, **cluster, out);
  if (run.kill_a_host) right &= HostKilled(run, **cluster, out);
  return right;
}

}  // namespace sort_bench
