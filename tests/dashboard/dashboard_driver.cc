// The driver dashboard_test.py runs against a cluster (RAY_ADDRESS): `work` runs
// tasks (some failing on purpose), keeps an actor alive and records a metric, writes
// --marker, and waits for --release; `tasks N` runs N small tasks in batches.
#include <ray/api.h>
#include <ray/api/metric.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

int Square(int x) { return x * x; }
int Fail(int code) { throw std::runtime_error("failed on purpose with code " + std::to_string(code)); }

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  int Add(int x) {
    std::cout << "Counter adds " << x << std::endl;
    return total_ += x;
  }

 private:
  int total_ = 0;
};

RAY_REMOTE(Square, Fail, Counter::Create, &Counter::Add);

std::string Flag(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  }
  return "";
}

int Work(const std::string& marker, const std::string& release) {
  std::vector<ray::ObjectRef<int>> squares;
  for (int i = 0; i < 20; ++i) squares.push_back(ray::Task(Square).Remote(i));
  for (auto& s : squares) s.Get();
  for (int i = 0; i < 3; ++i) {
    try {
      ray::Task(Fail).SetMaxRetries(0).Remote(i).Get();
    } catch (const ray::internal::RayException&) {
      // expected
    }
  }
  auto counter = ray::Actor(Counter::Create).SetName("dashboard-counter").Remote();
  counter.Task(&Counter::Add).Remote(5).Get();
  ray::Gauge gauge("dashboard_test_gauge", "a gauge the dashboard plots", "units", {"where"});
  std::ofstream(marker) << "ready\n";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  for (int i = 0; access(release.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline; ++i) {
    gauge.Set(i % 10, {{"where", "driver"}});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

int Tasks(long n) {
  for (long done = 0; done < n;) {
    std::vector<ray::ObjectRef<int>> batch;
    for (int i = 0; i < 10000 && done + i < n; ++i) batch.push_back(ray::Task(Square).Remote(i));
    ray::Get(batch);
    done += static_cast<long>(batch.size());
  }
  std::cout << "ran " << n << " tasks" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Worker processes re-run main(): ray::Init() serves tasks and never returns.
  if (std::getenv("MANTA_WORKER_MODE") != nullptr) ray::Init();
  if (argc < 2) {
    std::cerr << "usage: dashboard_driver work --marker=F --release=F | tasks N" << std::endl;
    return 2;
  }
  ray::Init();
  const std::string mode = argv[1];
  int code = mode == "work" ? Work(Flag(argc, argv, "--marker"), Flag(argc, argv, "--release"))
                            : Tasks(argc > 2 ? std::atol(argv[2]) : 0);
  ray::Shutdown();
  return code;
}
