// Actors on a 3-node cluster on this machine, through the public API, with the
// failures Ray promises to survive: the raylet of an actor's node killed (the actor
// restarts on another node that has its custom resource), its owner driver killed
// (its actors die, their resources come back), a driver that ends (its detached
// actor lives on and is found by name from another driver; its non-detached named
// one dies), and the GCS killed and restarted (actors keep serving, names survive).
// This binary is its own worker, and its own second driver (child modes in main).
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "driver_main.h"
#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "src/common/id.h"
#include "src/common/process.h"
#include "src/common/util.h"

namespace actor_cluster_test {
namespace {

// Dead nodes are found within about 2 s, yet a live one is not declared dead when a
// loaded 2-core machine (the suite runs two tests at once) is slow to answer: with a
// 200 ms deadline and 3 misses, a restarted GCS sometimes declared a node dead and
// took the actors on it with it (ActorsKeepServingThroughAGcsRestart).
const char kFastHealth[] =
    R"({"health_check_period_ms": 200, "health_check_timeout_ms": 1000, "health_check_failure_threshold": 5,)"
    R"( "health_check_initial_delay_ms": 0})";

class KvStore {
 public:
  static KvStore* Create() { return new KvStore(); }
  void Put(std::string key, std::string value) { data_[key] = value; }
  std::string Get(std::string key) {
    auto it = data_.find(key);
    return it == data_.end() ? "" : it->second;
  }
  int Pid() { return getpid(); }
  std::string Node() {
    const char* node = std::getenv("MANTA_NODE_ID");
    return node == nullptr ? "" : node;
  }

 private:
  std::map<std::string, std::string> data_;
};

RAY_REMOTE(KvStore::Create, &KvStore::Put, &KvStore::Get, &KvStore::Pid, &KvStore::Node);

bool ProcessAlive(int pid) { return kill(pid, 0) == 0; }

// Actors in `state` per `manta list actors --json`; -1 if the listing failed.
int CountActors(manta::testing::ClusterHarness& harness, const std::string& state) {
  auto r = harness.Manta({"list", "actors", "--json", "--address", harness.gcs_address()}, {}, 20000);
  if (r.exit_code != 0) return -1;
  auto actors = nlohmann::json::parse(r.output, nullptr, false);
  if (actors.is_discarded()) return -1;
  int n = 0;
  for (const auto& a : actors) n += a["state"] == state ? 1 : 0;
  return n;
}


// Starts this binary as another driver of the cluster, in `mode`.
absl::StatusOr<pid_t> StartChildDriver(const std::string& mode, const std::string& gcs, const std::string& arg = "") {
  manta::ProcessOptions child;
  child.argv = {manta::SelfExecutablePath(), "--child=" + mode, "--gcs=" + gcs, "--arg=" + arg};
  child.env["MANTA_CLUSTER_TOKEN"] = std::getenv("MANTA_CLUSTER_TOKEN");  // never inherited
  return manta::StartProcess(child);
}

class ActorClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=2", "--system-config", kFastHealth});
    harness_->StartNode({"--num-cpus=1", "--resources={\"special\": 1}"});
    harness_->StartNode({"--num-cpus=1", "--resources={\"special\": 1}"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* ActorClusterTest::harness_ = nullptr;

TEST_F(ActorClusterTest, AnActorRestartsOnAnotherNodeWhenItsRayletIsKilled) {
  auto kv = ray::Actor(KvStore::Create).SetResource("special", 1).SetMaxRestarts(1).Remote();
  kv.Task(&KvStore::Put).Remote(std::string("k"), std::string("v")).Get();
  const std::string first_node = *kv.Task(&KvStore::Node).Remote().Get();
  ASSERT_FALSE(first_node.empty());
  pid_t raylet = 0;
  for (const manta::rpc::NodeInfo& node : harness_->AliveNodes()) {
    if (manta::NodeID::FromBinary(node.node_id()).Hex() == first_node) raylet = node.raylet_pid();
  }
  ASSERT_GT(raylet, 0) << "no alive node " << first_node;
  ASSERT_EQ(kill(raylet, SIGKILL), 0);
  // Declared dead, the actor runs again on the other node with the resource. Calls
  // racing with the death may still reach the old worker or fail with it.
  std::string second_node;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        try {
          second_node = *kv.Task(&KvStore::Node).Remote().Get(5000);
          return second_node != first_node;
        } catch (const ray::internal::RayActorException&) {
          return false;
        }
      },
      30000))
      << "the actor never ran on another node";
  EXPECT_EQ(*kv.Task(&KvStore::Get).Remote(std::string("k")).Get(), "");  // state starts over
  kv.Kill();
}

TEST_F(ActorClusterTest, ADetachedActorOutlivesItsDriverAndIsFoundFromAnother) {
  auto child = StartChildDriver("create-detached", harness_->gcs_address());
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(manta::WaitForExit(*child, 60000));
  // The child's job has ended; its detached actor lives on with its state, found by
  // name in its namespace; its non-detached named actor died with the job.
  auto kv = ray::GetActor<KvStore>("kv", "kv-ns");
  ASSERT_TRUE(kv);
  EXPECT_EQ(*kv->Task(&KvStore::Get).Remote(std::string("written-by")).Get(), "the first driver");
  EXPECT_FALSE(ray::GetActor<KvStore>("kv"));  // not in this job's namespace
  EXPECT_TRUE(manta::testing::WaitFor([] { return !ray::GetActor<KvStore>("scratch", "kv-ns"); }, 20000));
  kv->Kill();
  EXPECT_TRUE(manta::testing::WaitFor([] { return !ray::GetActor<KvStore>("kv", "kv-ns"); }, 20000));
}

TEST_F(ActorClusterTest, ActorsDieWithTheirOwnerDriverAndTheirResourcesComeBack) {
  ASSERT_TRUE(manta::testing::WaitFor([] { return harness_->AvailableCpus() >= 3; }, 20000));
  const double cpus = harness_->AvailableCpus();
  const int dead_before = CountActors(*harness_, "DEAD");
  std::string pid_file = harness_->temp_root() + "/owned_actor.pid";
  auto child = StartChildDriver("create-owned", harness_->gcs_address(), pid_file);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(manta::testing::WaitFor([&] { return manta::ReadFile(pid_file).ok(); }, 60000));
  int actor_pid = std::stoi(*manta::ReadFile(pid_file));
  EXPECT_TRUE(ProcessAlive(actor_pid));
  EXPECT_TRUE(manta::testing::WaitFor([&] { return harness_->AvailableCpus() == cpus - 1; }, 20000));
  ASSERT_TRUE(manta::SignalProcess(*child, SIGKILL).ok());
  manta::WaitForExit(*child, 5000);
  EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(actor_pid); }, 20000));
  EXPECT_TRUE(manta::testing::WaitFor([&] { return CountActors(*harness_, "DEAD") == dead_before + 1; }, 20000));
  EXPECT_TRUE(manta::testing::WaitFor([&] { return harness_->AvailableCpus() == cpus; }, 20000))
      << harness_->AvailableCpus() << " CPUs available, " << cpus << " before";
}

TEST_F(ActorClusterTest, HandlesGoingOutOfScopeGiveTheResourcesBack) {
  ASSERT_TRUE(manta::testing::WaitFor([] { return harness_->AvailableCpus() >= 3; }, 20000));
  const double cpus = harness_->AvailableCpus();
  std::vector<int> pids;
  {
    std::vector<ray::ActorHandle<KvStore>> actors;
    for (int i = 0; i < 2; ++i) actors.push_back(ray::Actor(KvStore::Create).SetResource("CPU", 1).Remote());
    for (auto& a : actors) pids.push_back(*a.Task(&KvStore::Pid).Remote().Get());
    EXPECT_TRUE(manta::testing::WaitFor([&] { return harness_->AvailableCpus() == cpus - 2; }, 20000));
  }
  for (int pid : pids) EXPECT_TRUE(manta::testing::WaitFor([&] { return !ProcessAlive(pid); }, 20000));
  EXPECT_TRUE(manta::testing::WaitFor([&] { return harness_->AvailableCpus() == cpus; }, 20000));
}

TEST_F(ActorClusterTest, ActorsKeepServingThroughAGcsRestart) {
  auto kv = ray::Actor(KvStore::Create).SetName("survivor").SetMaxRestarts(1).Remote();
  kv.Task(&KvStore::Put).Remote(std::string("before"), std::string("1")).Get();
  std::vector<pid_t> gcs = harness_->Pids("gcs");
  ASSERT_EQ(gcs.size(), 1u);
  ASSERT_EQ(kill(gcs[0], SIGKILL), 0);
  ASSERT_TRUE(manta::WaitForExit(gcs[0], 5000));
  // Calls go straight to the actor: the GCS is not on their path.
  kv.Task(&KvStore::Put).Remote(std::string("during"), std::string("2")).Get(10000);
  EXPECT_EQ(*kv.Task(&KvStore::Get).Remote(std::string("before")).Get(10000), "1");

  auto restarted = harness_->RestartGcs(kFastHealth);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  // The reloaded table still knows it, by name too, and it still has its state.
  auto found = ray::GetActor<KvStore>("survivor");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found->Task(&KvStore::Get).Remote(std::string("during")).Get(), "2");
  EXPECT_EQ(CountActors(*harness_, "ALIVE") >= 1, true);
  kv.Kill();
  EXPECT_TRUE(manta::testing::WaitFor([] { return !ray::GetActor<KvStore>("survivor"); }, 20000));
}

std::string FlagValue(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  }
  return "";
}

// The second driver's modes.
int RunChild(const std::string& mode, const std::string& gcs, const std::string& arg, int argc, char** argv) {
  ray::RayConfig config;
  config.address = gcs;
  if (mode == "create-detached") {
    config.ray_namespace = "kv-ns";
    config.default_actor_lifetime = ray::ActorLifetime::DETACHED;
    ray::Init(config, argc, argv);
    auto kv = ray::Actor(KvStore::Create).SetName("kv").Remote();
    kv.Task(&KvStore::Put).Remote(std::string("written-by"), std::string("the first driver")).Get();
    ray::Shutdown();
    // A non-detached named actor of a job that ends dies with it.
    config.default_actor_lifetime = ray::ActorLifetime::NON_DETACHED;
    ray::Init(config, argc, argv);
    auto scratch = ray::Actor(KvStore::Create).SetName("scratch").Remote();
    scratch.Task(&KvStore::Pid).Remote().Get();
    ray::Shutdown();
    return 0;
  }
  if (mode == "create-owned") {
    ray::Init(config, argc, argv);
    auto kv = ray::Actor(KvStore::Create).SetResource("CPU", 1).Remote();
    int pid = *kv.Task(&KvStore::Pid).Remote().Get();
    (void)manta::WriteFileAtomic(arg, std::to_string(pid));
    while (true) pause();
  }
  return 2;
}


// A child driver of these tests: --child=<mode> --gcs=<address> [--arg=<value>].
const bool kChildMode = manta::testing::AddChildMode([](int argc, char** argv) -> std::optional<int> {
  std::string mode = FlagValue(argc, argv, "--child");
  if (mode.empty()) return std::nullopt;
  return RunChild(mode, FlagValue(argc, argv, "--gcs"), FlagValue(argc, argv, "--arg"), argc, argv);
});

}  // namespace
}  // namespace actor_cluster_test
