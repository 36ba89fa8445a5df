// Monte Carlo estimate of pi, with tasks.
//
// Throw random points into the unit square: the fraction that lands inside the
// quarter circle x*x + y*y <= 1 tends to pi/4. Each Sample task throws its own
// points with its own seed (so the tasks draw different points and every run gives
// the same answer); the driver adds up the hits.
//
// As in every Manta program, the raylet starts workers by running this same binary;
// in a worker ray::Init() serves tasks and never returns, so main() does nothing
// before it that a worker should not do.
#include <ray/api.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <numbers>
#include <random>
#include <vector>

// How many of `samples` random points land inside the quarter circle.
int64_t Sample(uint64_t seed, int64_t samples) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> coordinate(0.0, 1.0);
  int64_t inside = 0;
  for (int64_t i = 0; i < samples; ++i) {
    double x = coordinate(random);
    double y = coordinate(random);
    if (x * x + y * y <= 1.0) ++inside;
  }
  return inside;
}

RAY_REMOTE(Sample);

int main(int argc, char** argv) {
  ray::RayConfig config;
  ray::Init(config, argc, argv);  // in a worker: serves tasks, never returns

  constexpr int kTasks = 8;
  constexpr int64_t kSamplesPerTask = 1'000'000;

  // Start every task first, then wait: they run in parallel on the cluster's CPUs.
  std::vector<ray::ObjectRef<int64_t>> hits;
  for (int i = 0; i < kTasks; ++i) {
    hits.push_back(ray::Task(Sample).Remote(static_cast<uint64_t>(1000 + i), kSamplesPerTask));
  }

  // Reduce: ray::Get of a list waits for all of them and returns their values in order.
  int64_t inside = 0;
  for (const auto& value : ray::Get(hits)) inside += *value;

  const int64_t total = kTasks * kSamplesPerTask;
  const double estimate = 4.0 * static_cast<double>(inside) / static_cast<double>(total);
  const double error = std::abs(estimate - std::numbers::pi);
  std::cout << std::fixed << std::setprecision(6) << "pi ~= " << estimate << " from " << total << " samples in "
            << kTasks << " tasks (error " << error << ")" << std::endl;

  ray::Shutdown();
  // The standard error of the estimate is about 0.0006 here: 0.01 means a bug.
  return error < 0.01 ? 0 : 1;
}
