// Placement groups on 3-node clusters on this machine, through the public API: each
// strategy places its bundles as it says, tasks and actors run only in their bundle,
// a group no node can hold waits (and is shown as infeasible), removal kills its
// actors and fails its tasks, bad input gets a clear error, the death of a node
// holding bundles places them again, a GCS restart keeps every group, and a prepare
// that fails leaves nothing reserved. After each, the cluster's resources are exact.
// This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "cluster_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/common/id.h"
#include "src/common/process.h"
#include "src/common/util.h"

namespace placement_group_test {
namespace {

using ::testing::HasSubstr;

const char kFastHealth[] =
    R"({"health_check_period_ms": 200, "health_check_timeout_ms": 200, "health_check_failure_threshold": 3,)"
    R"( "health_check_initial_delay_ms": 0})";

std::string NodeOfThisProcess() {
  const char* node = std::getenv("MANTA_NODE_ID");
  return node == nullptr ? "" : node;
}
std::string NapThenNode(int ms) {
  usleep(static_cast<useconds_t>(ms) * 1000);
  return NodeOfThisProcess();
}
RAY_REMOTE(NodeOfThisProcess, NapThenNode);

class Pinned {
 public:
  static Pinned* Create() { return new Pinned(); }
  std::string Node() { return NodeOfThisProcess(); }
  int Pid() { return getpid(); }
};
RAY_REMOTE(Pinned::Create, &Pinned::Node, &Pinned::Pid);

ray::PlacementGroup MakeGroup(const std::string& name, std::vector<std::unordered_map<std::string, double>> bundles,
                              ray::PlacementStrategy strategy) {
  ray::PlacementGroupCreationOptions options{name, std::move(bundles), strategy};
  return ray::CreatePlacementGroup(options);
}

std::string HexOf(const std::string& binary) { return manta::PlacementGroupID::FromBinary(binary).Hex(); }

// The group as `manta list placement-groups --json` shows it; empty when missing.
nlohmann::json Listed(manta::testing::ClusterHarness& harness, const ray::PlacementGroup& group) {
  auto r = harness.Manta({"list", "placement-groups", "--json", "--address", harness.gcs_address()}, {}, 20000);
  if (r.exit_code != 0) return {};
  auto all = nlohmann::json::parse(r.output, nullptr, false);
  if (all.is_discarded()) return {};
  for (const auto& g : all) {
    if (g["placement_group_id"] == HexOf(group.GetID())) return g;
  }
  return {};
}

// The node (hex) of every bundle of the group, per the CLI.
std::vector<std::string> BundleNodes(manta::testing::ClusterHarness& harness, const ray::PlacementGroup& group) {
  std::vector<std::string> nodes;
  nlohmann::json g = Listed(harness, group);
  if (g.is_null()) return nodes;
  for (const auto& b : g["bundles"]) nodes.push_back(b["node_id"].get<std::string>());
  return nodes;
}

// Every alive node offers all its CPUs and no bundle resources are left anywhere.
bool ResourcesAtRest(manta::testing::ClusterHarness& harness) {
  nlohmann::json status = harness.Status();
  if (!status.contains("nodes")) return false;
  for (const auto& node : status["nodes"]) {
    if (node["state"] != "ALIVE") continue;
    for (const auto& [name, quantity] : node["resources_available"].items()) {
      if (name.find("_group_") != std::string::npos) return false;
    }
    if (node["resources_available"].value("CPU", -1.0) != node["resources_total"].value("CPU", -2.0)) return false;
  }
  return true;
}

// What `get` threw, if it threw E; otherwise says what happened instead.
template <typename E, typename F>
std::string ErrorOf(F get) {
  try {
    get();
    return "<it returned>";
  } catch (const ray::internal::RayTimeoutException&) {
    return "<still waiting>";
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<another exception: ") + e.what() + ">";
  }
}

class PlacementGroupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    // One resource naming each node, so that a test can put a task on each.
    harness_->StartHead({"--num-cpus=2", R"(--resources={"host0": 1})"});
    harness_->StartNode({"--num-cpus=2", R"(--resources={"host1": 1})"});
    harness_->StartNode({"--num-cpus=2", R"(--resources={"host2": 1})"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  void TearDown() override {
    for (const ray::PlacementGroup& group : ray::GetAllPlacementGroups()) {
      if (group.GetState() != ray::PlacementGroupState::REMOVED) ray::RemovePlacementGroup(group.GetID());
    }
    EXPECT_TRUE(manta::testing::WaitFor([] { return ResourcesAtRest(*harness_); }, 20000))
        << harness_->Status().dump(2);
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* PlacementGroupTest::harness_ = nullptr;

TEST_F(PlacementGroupTest, StrictSpreadPutsEveryBundleOnANodeOfItsOwn) {
  auto group = MakeGroup("spread3", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::STRICT_SPREAD);
  ASSERT_TRUE(group.Wait(30));
  std::vector<std::string> nodes = BundleNodes(*harness_, group);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()).size(), 3u);
  // A task in bundle i runs on bundle i's node.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(*ray::Task(NodeOfThisProcess).SetPlacementGroup(group, i).Remote().Get(30000), nodes[i]) << i;
  }
}

TEST_F(PlacementGroupTest, StrictPackPutsEveryBundleOnOneNode) {
  auto group = MakeGroup("", {{{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::STRICT_PACK);
  ASSERT_TRUE(group.Wait(30));
  std::vector<std::string> nodes = BundleNodes(*harness_, group);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0], nodes[1]);
  EXPECT_EQ(*ray::Task(NodeOfThisProcess).SetPlacementGroup(group, -1).Remote().Get(30000), nodes[0]);
}

TEST_F(PlacementGroupTest, PackAndSpreadAreBestEffort) {
  // PACK: three CPUs do not fit on one 2-CPU node, so two nodes are used.
  auto packed = MakeGroup("", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::PACK);
  ASSERT_TRUE(packed.Wait(30));
  std::vector<std::string> nodes = BundleNodes(*harness_, packed);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()).size(), 2u);
  ray::RemovePlacementGroup(packed.GetID());
  ASSERT_TRUE(manta::testing::WaitFor([] { return ResourcesAtRest(*harness_); }, 20000));
  // SPREAD: four bundles on three nodes (one node gets two).
  auto spread = MakeGroup("", {{{"CPU", 0.5}}, {{"CPU", 0.5}}, {{"CPU", 0.5}}, {{"CPU", 0.25}}},
                          ray::PlacementStrategy::SPREAD);
  ASSERT_TRUE(spread.Wait(30));
  nodes = BundleNodes(*harness_, spread);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()).size(), 3u);
}

TEST_F(PlacementGroupTest, PackRightAfterTasksRanOnEveryNodeStillPacks) {
  // A task on each node, then, as soon as they are done, a PACK group that any one
  // node can hold: it goes on one node. (Leases the driver still holds, and
  // availability the GCS has not heard of yet, showed one CPU free on each node.)
  for (int round = 0; round < 3; ++round) {
    std::vector<ray::ObjectRef<std::string>> refs;
    for (int i = 0; i < 3; ++i) {
      refs.push_back(
          ray::Task(NapThenNode).SetResource("CPU", 1).SetResource("host" + std::to_string(i), 1).Remote(300));
    }
    for (auto& ref : refs) ref.Get(30000);
    auto group = MakeGroup("", {{{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::PACK);
    ASSERT_TRUE(group.Wait(30));
    std::vector<std::string> nodes = BundleNodes(*harness_, group);
    ASSERT_EQ(nodes.size(), 2u);
    EXPECT_EQ(nodes[0], nodes[1]) << "round " << round << ": PACK split its bundles";
    ray::RemovePlacementGroup(group.GetID());
    ASSERT_TRUE(manta::testing::WaitFor([] { return ResourcesAtRest(*harness_); }, 20000));
  }
}

TEST_F(PlacementGroupTest, TasksAndActorsUseOnlyTheirBundle) {
  auto group = MakeGroup("one", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK);
  ASSERT_TRUE(group.Wait(30));
  std::string node = BundleNodes(*harness_, group).at(0);
  auto actor = ray::Actor(Pinned::Create).SetPlacementGroup(group, 0).SetResource("CPU", 1).Remote();
  EXPECT_EQ(*actor.Task(&Pinned::Node).Remote().Get(30000), node);
  // The actor holds the bundle's only CPU: a task for the bundle waits, others run.
  auto waiting = ray::Task(NodeOfThisProcess).SetPlacementGroup(group, 0).Remote();
  EXPECT_TRUE(ray::Wait(std::vector<ray::ObjectRef<std::string>>{waiting}, 1, 500).ready.empty());
  EXPECT_FALSE(ray::Task(NodeOfThisProcess).Remote().Get(30000)->empty());
  actor.Kill();
  EXPECT_EQ(*waiting.Get(30000), node);
}

TEST_F(PlacementGroupTest, GroupsAreFoundByIdAndByNameAndListed) {
  auto group = MakeGroup("findme", {{{"CPU", 0.5}}}, ray::PlacementStrategy::SPREAD);
  ASSERT_TRUE(group.Wait(30));
  auto by_id = ray::GetPlacementGroupById(group.GetID());
  EXPECT_EQ(by_id.GetID(), group.GetID());
  EXPECT_EQ(by_id.GetName(), "findme");
  EXPECT_EQ(by_id.GetState(), ray::PlacementGroupState::CREATED);
  EXPECT_EQ(by_id.GetStrategy(), ray::PlacementStrategy::SPREAD);
  ASSERT_EQ(by_id.GetBundles().size(), 1u);
  EXPECT_EQ(by_id.GetBundles()[0].at("CPU"), 0.5);
  EXPECT_EQ(ray::GetPlacementGroup("findme").GetID(), group.GetID());
  EXPECT_TRUE(ray::GetPlacementGroup("no-such-group").GetID().empty());
  EXPECT_THROW(MakeGroup("findme", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK), ray::internal::RayException);
  bool listed = false;
  for (const auto& g : ray::GetAllPlacementGroups()) listed |= g.GetID() == group.GetID();
  EXPECT_TRUE(listed);
  auto r = harness_->Manta({"list", "placement-groups", "--address", harness_->gcs_address()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("findme"));
  EXPECT_THAT(r.output, HasSubstr("CREATED"));
}

TEST_F(PlacementGroupTest, AGroupNoNodeCanHoldWaitsAndIsShownInfeasible) {
  auto group = MakeGroup("huge", {{{"CPU", 100}}}, ray::PlacementStrategy::PACK);
  EXPECT_FALSE(group.Wait(1));
  EXPECT_EQ(ray::GetPlacementGroupById(group.GetID()).GetState(), ray::PlacementGroupState::PENDING);
  // More STRICT_SPREAD bundles than nodes: infeasible too.
  auto too_spread = MakeGroup("", {{{"CPU", 0.1}}, {{"CPU", 0.1}}, {{"CPU", 0.1}}, {{"CPU", 0.1}}},
                              ray::PlacementStrategy::STRICT_SPREAD);
  EXPECT_FALSE(too_spread.Wait(1));
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        auto r = harness_->Manta({"status", "--address", harness_->gcs_address()});
        return r.output.find("'huge'") != std::string::npos && r.output.find("infeasible") != std::string::npos;
      },
      10000));
  nlohmann::json status = harness_->Status();
  ASSERT_EQ(status["waiting_placement_groups"].size(), 2u) << status.dump(2);
  EXPECT_TRUE(status["waiting_placement_groups"][0]["infeasible"].get<bool>());
  EXPECT_THAT(Listed(*harness_, too_spread)["pending_reason"].get<std::string>(), HasSubstr("STRICT_SPREAD"));
  // Removing it works, and Wait then throws.
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(group.GetID()).GetState(), ray::PlacementGroupState::REMOVED);
  EXPECT_THROW(group.Wait(1), ray::internal::RayException);
  ray::RemovePlacementGroup(group.GetID());  // twice: fine
}

TEST_F(PlacementGroupTest, RemovalKillsItsActorsAndFailsItsTasks) {
  auto group = MakeGroup("doomed", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK);
  ASSERT_TRUE(group.Wait(30));
  auto actor = ray::Actor(Pinned::Create).SetPlacementGroup(group, 0).SetMaxRestarts(3).Remote();
  int pid = *actor.Task(&Pinned::Pid).Remote().Get(30000);
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_TRUE(manta::testing::WaitFor([&] { return kill(pid, 0) != 0; }, 20000));
  // Not restarted: its calls fail.
  EXPECT_THROW(actor.Task(&Pinned::Pid).Remote().Get(20000), ray::internal::RayActorException);
  // A task or actor naming the removed group fails with a clear error.
  EXPECT_THAT(ErrorOf<ray::internal::RayException>(
                  [&] { ray::Task(NodeOfThisProcess).SetPlacementGroup(group, 0).Remote().Get(20000); }),
              HasSubstr("removed"));
  // So does one naming a group that never existed (an id made up by the program).
  ray::PlacementGroup made_up(manta::PlacementGroupID::FromRandom().Binary(),
                              ray::PlacementGroupCreationOptions{"", {{{"CPU", 1}}}, ray::PlacementStrategy::PACK});
  EXPECT_THAT(ErrorOf<ray::internal::RayException>(
                  [&] { ray::Task(NodeOfThisProcess).SetPlacementGroup(made_up, 0).Remote().Get(20000); }),
              HasSubstr("never created"));
  auto late = ray::Actor(Pinned::Create).SetPlacementGroup(group, 0).Remote();
  EXPECT_THAT(ErrorOf<ray::internal::RayActorException>([&] { late.Task(&Pinned::Pid).Remote().Get(20000); }),
              HasSubstr("removed"));
}

TEST_F(PlacementGroupTest, BadInputGetsAClearError) {
  EXPECT_THROW(MakeGroup("", {}, ray::PlacementStrategy::PACK), ray::internal::RayException);
  EXPECT_THROW(MakeGroup("", {{{"CPU", -1}}}, ray::PlacementStrategy::PACK), ray::internal::RayException);
  EXPECT_THROW(MakeGroup("", {{}}, ray::PlacementStrategy::PACK), ray::internal::RayException);
  auto group = MakeGroup("", {{{"CPU", 0.5}}}, ray::PlacementStrategy::PACK);
  EXPECT_THROW(ray::Task(NodeOfThisProcess).SetPlacementGroup(group, 1).Remote(), ray::internal::RayException);
  EXPECT_THROW(ray::Task(NodeOfThisProcess).SetPlacementGroup(group, -2).Remote(), ray::internal::RayException);
  EXPECT_THROW(ray::Actor(Pinned::Create).SetPlacementGroup(ray::PlacementGroup(), 0).Remote(),
               ray::internal::RayException);
  EXPECT_THROW(ray::RemovePlacementGroup("not an id"), ray::internal::RayException);
}

// ---- Failures: each on a cluster of its own ----------------------------------------

TEST(PlacementGroupFailureTest, ANodeDeathPlacesItsBundlesAgain) {
  manta::testing::ClusterHarness harness;
  harness.StartHead({"--num-cpus=1", "--system-config", kFastHealth});
  harness.StartNode({"--num-cpus=1"});
  harness.StartNode({"--num-cpus=1"});
  ray::RayConfig config;
  config.address = harness.gcs_address();
  ray::Init(config);
  auto group = MakeGroup("survivor", {{{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::STRICT_SPREAD);
  ASSERT_TRUE(group.Wait(30));
  std::vector<std::string> before = BundleNodes(harness, group);
  // Kill the raylet of a bundle's node that is not the head (the driver lives there).
  std::string head = manta::NodeID::FromBinary(harness.AliveNodes().at(0).node_id()).Hex();
  int lost_bundle = before[0] == head ? 1 : 0;
  pid_t raylet = 0;
  for (const auto& node : harness.AliveNodes()) {
    if (manta::NodeID::FromBinary(node.node_id()).Hex() == before[lost_bundle]) raylet = node.raylet_pid();
  }
  ASSERT_GT(raylet, 0);
  auto actor = ray::Actor(Pinned::Create).SetPlacementGroup(group, lost_bundle).SetMaxRestarts(2).Remote();
  EXPECT_EQ(*actor.Task(&Pinned::Node).Remote().Get(30000), before[lost_bundle]);
  ASSERT_EQ(kill(raylet, SIGKILL), 0);
  // The lost bundle goes to the third node; the other stays.
  std::vector<std::string> after;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        after = BundleNodes(harness, group);
        return after.size() == 2 && !after[lost_bundle].empty() && after[lost_bundle] != before[lost_bundle] &&
               ray::GetPlacementGroupById(group.GetID()).GetState() == ray::PlacementGroupState::CREATED;
      },
      30000))
      << Listed(harness, group).dump(2);
  EXPECT_EQ(after[1 - lost_bundle], before[1 - lost_bundle]);
  // Its actor restarts in the bundle, on the new node.
  std::string node;
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        try {
          node = *actor.Task(&Pinned::Node).Remote().Get(5000);
          return node == after[lost_bundle];
        } catch (const ray::internal::RayException&) {
          return false;
        }
      },
      30000));
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_TRUE(manta::testing::WaitFor([&] { return ResourcesAtRest(harness); }, 20000)) << harness.Status().dump(2);
  ray::Shutdown();
}

TEST(PlacementGroupFailureTest, AnInfeasibleGroupIsCreatedWhenANodeThatCanHoldItJoins) {
  manta::testing::ClusterHarness harness;
  harness.StartHead({"--num-cpus=1"});
  ray::RayConfig config;
  config.address = harness.gcs_address();
  ray::Init(config);
  auto group = MakeGroup("pair", {{{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::STRICT_SPREAD);
  EXPECT_FALSE(group.Wait(1));
  EXPECT_TRUE(Listed(harness, group)["infeasible"].get<bool>()) << Listed(harness, group).dump(2);
  harness.StartNode({"--num-cpus=1"});
  EXPECT_TRUE(group.Wait(30));
  std::vector<std::string> nodes = BundleNodes(harness, group);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_NE(nodes[0], nodes[1]);
  EXPECT_EQ(*ray::Task(NodeOfThisProcess).SetPlacementGroup(group, 1).Remote().Get(30000), nodes[1]);
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_TRUE(manta::testing::WaitFor([&] { return ResourcesAtRest(harness); }, 20000)) << harness.Status().dump(2);
  ray::Shutdown();
}

TEST(PlacementGroupFailureTest, AGcsRestartKeepsEveryGroupAndItsReservations) {
  manta::testing::ClusterHarness harness;
  harness.StartHead({"--num-cpus=2", "--system-config", kFastHealth});
  harness.StartNode({"--num-cpus=2"});
  ray::RayConfig config;
  config.address = harness.gcs_address();
  ray::Init(config);
  auto group = MakeGroup("kept", {{{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::STRICT_SPREAD);
  ASSERT_TRUE(group.Wait(30));
  std::vector<std::string> before = BundleNodes(harness, group);
  auto pending = MakeGroup("pending", {{{"CPU", 8}}}, ray::PlacementStrategy::PACK);

  auto restarted = harness.RestartGcs(kFastHealth);
  ASSERT_TRUE(restarted.ok()) << restarted.status();

  // Same group, same nodes, and its bundles still serve tasks.
  EXPECT_EQ(ray::GetPlacementGroup("kept").GetState(), ray::PlacementGroupState::CREATED);
  EXPECT_EQ(BundleNodes(harness, group), before);
  EXPECT_EQ(*ray::Task(NodeOfThisProcess).SetPlacementGroup(group, 1).Remote().Get(30000), before[1]);
  EXPECT_EQ(ray::GetPlacementGroup("pending").GetState(), ray::PlacementGroupState::PENDING);
  ray::RemovePlacementGroup(group.GetID());
  ray::RemovePlacementGroup(pending.GetID());
  EXPECT_TRUE(manta::testing::WaitFor([&] { return ResourcesAtRest(harness); }, 20000)) << harness.Status().dump(2);
  ray::Shutdown();
}

TEST(PlacementGroupFailureTest, APrepareThatFailsLeavesNothingReserved) {
  // Every prepare reaches its raylet, but its reply is lost: the GCS sees failures,
  // cancels every attempt, and no reservation may stay behind.
  manta::testing::ClusterHarness harness;
  harness.StartHead({"--num-cpus=2", "--system-config", R"({"testing_rpc_failure": "PrepareBundleResources=drop_reply"})"});
  harness.StartNode({"--num-cpus=2"});
  harness.StartNode({"--num-cpus=2"});
  ray::RayConfig config;
  config.address = harness.gcs_address();
  ray::Init(config);
  auto group = MakeGroup("unlucky", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, ray::PlacementStrategy::STRICT_SPREAD);
  EXPECT_FALSE(group.Wait(3));
  ASSERT_TRUE(manta::testing::WaitFor(
      [&] {
        nlohmann::json g = Listed(harness, group);
        return !g.is_null() && g["pending_reason"].get<std::string>().find("prepare") != std::string::npos;
      },
      30000))
      << Listed(harness, group).dump(2);
  // Removed mid-attempt: what that attempt prepared is handed back too.
  ray::RemovePlacementGroup(group.GetID());
  EXPECT_EQ(ray::GetPlacementGroupById(group.GetID()).GetState(), ray::PlacementGroupState::REMOVED);
  EXPECT_TRUE(manta::testing::WaitFor([&] { return ResourcesAtRest(harness); }, 20000)) << harness.Status().dump(2);
  ray::Shutdown();
}

}  // namespace
}  // namespace placement_group_test
