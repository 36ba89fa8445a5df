// Demand the cluster does not have yet: run it against a cluster whose head runs the
// autoscaler (`manta start --head --autoscaler FILE`, see the README). Its tasks
// each ask for more CPUs than the head offers, so they wait until the autoscaler has
// brought up nodes that have them; once they are done, those nodes idle and go.
//
//   RAY_ADDRESS=<head>:6379 autoscale [--tasks N] [--cpus C] [--seconds S]
//
// Prints which node ran how many tasks (MANTA_NODE_ID, which Manta's workers have in
// their environment) and how long it all took.
#include <ray/api.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

std::string SleepAndSayWhere(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const char* node = std::getenv("MANTA_NODE_ID");
  return node != nullptr ? node : "?";
}
RAY_REMOTE(SleepAndSayWhere);

namespace {

double Flag(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  ray::RayConfig config;
  ray::Init(config, argc, argv);
  const int tasks = static_cast<int>(Flag(argc, argv, "--tasks", 4));
  const double cpus = Flag(argc, argv, "--cpus", 2);
  const double seconds = Flag(argc, argv, "--seconds", 2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<ray::ObjectRef<std::string>> refs;
  for (int i = 0; i < tasks; ++i) {
    refs.push_back(ray::Task(SleepAndSayWhere).SetResource("CPU", cpus).Remote(seconds));
  }
  std::map<std::string, int> per_node;
  for (const auto& where : ray::Get(refs)) ++per_node[*where];
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [node, n] : per_node) std::cout << "node " << node << ": " << n << " tasks" << std::endl;
  std::cout << tasks << " tasks of " << cpus << " CPUs on " << per_node.size() << " nodes in " << took << " s"
            << std::endl;
  ray::Shutdown();
  return 0;
}
