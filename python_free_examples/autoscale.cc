// Demand the cluster does not have yet: run it against a cluster whose head runs the
// autoscaler (`manta start --head --autoscaler FILE`, see the README). Its tasks
// each ask for more CPUs than the head offers, so they wait until the autoscaler has
// brought up nodes that have them; once they are done, those nodes idle and go.
//
//   RAY_ADDRESS=<head>:6379 autoscale [--tasks N] [--cpus C] [--seconds S]
//       [--bytes B] [--hold-seconds H] [--spread-group K] [--actors A]
//
// --bytes: each task also returns B bytes (stored on the node that ran it: a primary
// copy that node must keep while this driver holds it); --hold-seconds: keep the
// results that long, then read them all back (the autoscaler must not remove a node
// that holds them); --spread-group: first reserve a STRICT_SPREAD placement group of
// K bundles of C CPUs (K nodes) and run the tasks in it; --actors: first create A
// actors of C CPUs each (their creations are demand too) and ask each where it runs.
//
// Prints which node ran how many tasks (MANTA_NODE_ID, which Manta's workers have in
// their environment) and how long it all took.
#include <ray/api.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

struct Result {
  std::string node;
  std::vector<uint8_t> bytes;
  MSGPACK_DEFINE(node, bytes);
};

Result SleepAndSayWhere(double seconds, int64_t bytes) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const char* node = std::getenv("MANTA_NODE_ID");
  return Result{node != nullptr ? node : "?", std::vector<uint8_t>(static_cast<size_t>(bytes), 7)};
}
// An actor that holds its CPUs for as long as it lives.
class Resident {
 public:
  static Resident* Create() { return new Resident(); }
  std::string Where() {
    const char* node = std::getenv("MANTA_NODE_ID");
    return node != nullptr ? node : "?";
  }
};

RAY_REMOTE(SleepAndSayWhere, Resident::Create, &Resident::Where);

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
  const auto bytes = static_cast<int64_t>(Flag(argc, argv, "--bytes", 0));
  const double hold = Flag(argc, argv, "--hold-seconds", 0);
  const int spread = static_cast<int>(Flag(argc, argv, "--spread-group", 0));
  const int actors = static_cast<int>(Flag(argc, argv, "--actors", 0));
  const auto start = std::chrono::steady_clock::now();

  std::vector<ray::ActorHandle<Resident>> residents;
  std::vector<ray::ObjectRef<std::string>> homes;
  for (int i = 0; i < actors; ++i) {
    residents.push_back(ray::Actor(Resident::Create).SetResource("CPU", cpus).Remote());
    homes.push_back(residents.back().Task(&Resident::Where).Remote());
  }
  std::map<std::string, int> actor_nodes;
  for (const auto& home : ray::Get(homes)) ++actor_nodes[*home];
  if (actors > 0) {
    std::cout << actors << " actors of " << cpus << " CPUs on " << actor_nodes.size() << " nodes" << std::endl;
  }

  ray::PlacementGroup group;
  if (spread > 0) {
    std::vector<std::unordered_map<std::string, double>> bundles(spread, {{"CPU", cpus}});
    group = ray::CreatePlacementGroup({"autoscale-demo", bundles, ray::PlacementStrategy::STRICT_SPREAD});
    if (!group.Wait(300)) {
      std::cerr << "the placement group was not placed within 5 minutes" << std::endl;
      return 1;
    }
    std::cout << "placement group of " << spread << " bundles placed" << std::endl;
  }
  std::vector<ray::ObjectRef<Result>> refs;
  for (int i = 0; i < tasks; ++i) {
    auto task = ray::Task(SleepAndSayWhere).SetResource("CPU", cpus);
    if (spread > 0) task.SetPlacementGroup(group, i % spread);
    refs.push_back(task.Remote(seconds, bytes));
  }
  if (!refs.empty()) ray::Wait(refs, static_cast<int>(refs.size()), -1);
  if (hold > 0) {
    std::cout << "holding the results for " << hold << " s" << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(hold));
  }
  std::map<std::string, int> per_node;
  for (const auto& result : ray::Get(refs)) {
    if (static_cast<int64_t>(result->bytes.size()) != bytes) {
      std::cerr << "a result holds " << result->bytes.size() << " bytes, not " << bytes << std::endl;
      return 1;
    }
    ++per_node[result->node];
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [node, n] : per_node) std::cout << "node " << node << ": " << n << " tasks" << std::endl;
  std::cout << tasks << " tasks of " << cpus << " CPUs on " << per_node.size() << " nodes in " << took << " s"
            << std::endl;
  ray::Shutdown();
  return 0;
}
