// What the API benchmarks (task_bench, actor_bench) share: their common flags, the
// timing loops, and the JSON they print.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace manta::bench {

using Clock = std::chrono::steady_clock;

// Runs `clients` copies of `program` with `args` at once (extra drivers joining the
// cluster) and returns the sum of the rates they print.
inline double SumOfClientRates(int clients, const std::string& program, const std::string& args) {
  std::vector<std::FILE*> children;
  for (int c = 0; c < clients; ++c) {
    const std::string cmd = "'" + program + "' " + args;
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
inline double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// --seconds S, --only a,b, --clients N, and any other "--name value" / "--name=value"
// flags the benchmark reads with Value().
struct BenchFlags {
  double seconds = 2.0;
  std::set<std::string> only;
  int clients = 2;
  std::vector<std::pair<std::string, std::string>> others;

  static BenchFlags Parse(int argc, char** argv) {
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
