// What the API benchmarks (task_bench, actor_bench) share: their common flags, the
// timing loops, and the JSON they print.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "src/common/crash_stack.h"

namespace manta::bench {

using Clock = std::chrono::steady_clock;

// Starts `clients` copies of `program` with `args`, their standard output piped here
// (a null entry: one could not be started).
inline std::vector<std::FILE*> StartClients(int clients, const std::string& program, const std::string& args) {
  std::vector<std::FILE*> children;
  const std::string cmd = "'" + program + "' " + args;
  for (int c = 0; c < clients; ++c) children.push_back(popen(cmd.c_str(), "r"));
  return children;
}

// Runs `clients` copies of `program` with `args` at once (extra drivers joining the
// cluster) and returns the sum of the rates they print.
inline double SumOfClientRates(int clients, const std::string& program, const std::string& args) {
  std::vector<std::FILE*> children = StartClients(clients, program, args);
  double total = 0;
  for (std::FILE* f : children) {
    double rate = 0;
    if (f && std::fscanf(f, "%lf", &rate) == 1) total += rate;
    if (f) pclose(f);
  }
  return total;
}
inline double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The steady clock in ns. On Linux it is CLOCK_MONOTONIC, one clock for every process
// of the machine, so the times clients print can be compared.
inline int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// A client's side of a barrier of ClientsTogetherRate: marks itself at `stage` in
// `dir`, then waits until `clients` are (false after `timeout_s`). It sleeps on inotify
// meanwhile, so a client that waits takes no CPU from one still measuring.
inline bool AwaitClients(const std::string& dir, const std::string& stage, int clients, double timeout_s = 60) {
  const std::string prefix = stage + ".";
  const int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  std::ofstream(dir + "/" + prefix + std::to_string(getpid())).put('\n');
  const auto t0 = Clock::now();
  bool all = false;
  while (!all && Since(t0) < timeout_s) {
    int at_stage = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      at_stage += entry.path().filename().string().rfind(prefix, 0) == 0;
    }
    all = at_stage >= clients;
    if (all) break;
    // Until the next file is made (watched since before the count), or 100 ms.
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char events[4096];
      (void)!read(fd, events, sizeof(events));
    }
  }
  close(fd);
  return all;
}

// Ray's multi-client rate: `clients` copies of `program` with `args` join the cluster
// at once; each gets ready (connects, warms up), waits at a barrier ("ready") until
// all are, runs `ops_per_client` operations, prints the SteadyNs() times it began and
// ended them, and waits at a second barrier ("done") before it shuts down, so that no
// client's shutdown falls in another's measurement (as in Ray's, whose clients are
// actors that stay). Returns all their operations over the time from the first start
// to the last end (0 if a client printed nothing). Clients get --barrier-dir and
// --clients.
inline double ClientsTogetherRate(int clients, const std::string& program, const std::string& args,
                                  long ops_per_client) {
  std::string dir = (std::filesystem::temp_directory_path() / "manta_bench_barrier_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 0;
  std::vector<std::FILE*> children =
      StartClients(clients, program, args + " --barrier-dir=" + dir + " --clients=" + std::to_string(clients));
  long long first_start = INT64_MAX, last_end = 0;
  bool all = true;
  for (std::FILE* f : children) {
    long long start = 0, end = 0;
    all &= f != nullptr && std::fscanf(f, "%lld %lld", &start, &end) == 2 && end > start;
    first_start = std::min(first_start, start);
    last_end = std::max(last_end, end);
    if (f) pclose(f);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!all) return 0;
  return static_cast<double>(clients) * static_cast<double>(ops_per_client) / ((last_end - first_start) * 1e-9);
}

// --seconds S, --only a,b, --clients N, and any other "--name value" / "--name=value"
// flags the benchmark reads with Value().
struct BenchFlags {
  double seconds = 2.0;
  std::set<std::string> only;
  int clients = 2;
  std::vector<std::pair<std::string, std::string>> others;

  static BenchFlags Parse(int argc, char** argv) {
    // A benchmark that crashes before its ray::Init says where, too.
    InstallCrashStackTraces();
    BenchFlags flags;
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg.rfind("--", 0) != 0) continue;
      std::string name = arg, value;
      if (size_t eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      }
      if (name == "--seconds") {
        flags.seconds = std::stod(value);
      } else if (name == "--only") {
        size_t start = 0;
        while (start <= value.size()) {
          size_t end = value.find(',', start);
          if (end == std::string::npos) end = value.size();
          flags.only.insert(value.substr(start, end - start));
          start = end + 1;
        }
      } else if (name == "--clients") {
        flags.clients = std::stoi(value);
      } else {
        flags.others.emplace_back(name, value);
      }
    }
    return flags;
  }
  bool Want(const std::string& name) const { return only.empty() || only.count(name) > 0; }
  // The value of flag `name` ("--x"), or `fallback`.
  std::string Value(const std::string& name, const std::string& fallback = "") const {
    for (const auto& [n, v] : others) {
      if (n == name) return v;
    }
    return fallback;
  }
};

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

// The best rate `batch` returns over about `seconds`, after a warm-up run.
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

// Prints {"name": value, ...} in order.
inline void PrintJson(const std::vector<std::pair<std::string, double>>& results) {
  std::cout << "{";
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("%s\n  \"%s\": %.6g", i ? "," : "", results[i].first.c_str(), results[i].second);
  }
  std::cout << "\n}" << std::endl;
}

}  // namespace manta::bench
