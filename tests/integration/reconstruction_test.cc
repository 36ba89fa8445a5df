// Lineage reconstruction through the public API (ARCHITECTURE.md §5 step 7, §15): on
// a cluster of a head and nodes offering a "special" resource, a 400 KB task result
// lives only in the store of the node that made it; that node's raylet is killed
// with SIGKILL, and the owner rebuilds the object by running its task again
// elsewhere — when the driver reads it, when another task needs it as an argument,
// when the intermediate object of a chain was already freed, and when a small argument
// (inline, so its task left no record) was already freed. Once every ref is
// gone, the owner keeps no lineage and no objects. This binary is its own worker.
#include <ray/api.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "big_array.h"
#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "src/api/native_runtime.h"
#include "src/common/process.h"
#include "src/core_worker/core_worker.h"

namespace reconstruction_test {
namespace {

using manta::testing::Big;
Big LineageMakeBig(int seed) { return manta::testing::MakeBig(seed); }
long long LineageSumBig(Big b) { return manta::testing::SumBig(b); }
Big AddOne(Big b) {
  for (int& v : b) ++v;
  return b;
}
int Thirteen() { return 13; }
// Three large returns of one task.
ray::Returns<Big> ThreeBigs(int seed) {
  return {LineageMakeBig(seed), LineageMakeBig(seed + 1), LineageMakeBig(seed + 2)};
}
RAY_REMOTE(LineageMakeBig, LineageSumBig, AddOne, Thirteen, ThreeBigs);

manta::core::CoreWorker& Core() { return *ray::internal::GetCoreWorkerForTesting(); }

class ReconstructionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    // Dead nodes are noticed within about a second.
    harness_->StartHead({"--num-cpus=1", "--system-config",
                         R"({"health_check_period_ms": 200, "health_check_timeout_ms": 200,
                             "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 200})"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  // Each test kills a node: it starts with two fresh "special" nodes.
  void SetUp() override {
    harness_->StartNode({"--num-cpus=1", "--resources={\"special\": 1}"});
    harness_->StartNode({"--num-cpus=1", "--resources={\"special\": 1}"});
  }
  void TearDown() override {
    EXPECT_TRUE(manta::testing::WaitFor([] { return Core().reference_counter().NumObjects() == 0; }, 10000))
        << Core().reference_counter().NumObjects() << " objects left in the ownership table";
  }

  // Waits until `ref` is ready without reading it (no copy reaches this node) and
  // returns the node holding its primary copy.
  template <typename T>
  static manta::NodeID PrimaryNode(const ray::ObjectRef<T>& ref) {
    ray::WaitResult<T> ready = ray::Wait(std::vector<ray::ObjectRef<T>>{ref}, 1, 30000, /*fetch_local=*/false);
    EXPECT_EQ(ready.ready.size(), 1u);
    auto id = manta::ObjectID::FromBinary(ref.ID());
    return Core().reference_counter().GetPinnedAt(id).value_or(manta::NodeID::Nil());
  }
  // SIGKILLs the raylet of `node` (its store, and the workers on it, go with it).
  static void KillNode(const manta::NodeID& node) {
    for (const auto& info : harness_->AliveNodes()) {
      if (info.node_id() != node.Binary()) continue;
      ASSERT_TRUE(manta::SignalProcess(info.raylet_pid(), SIGKILL).ok());
      manta::WaitForExit(info.raylet_pid(), 5000);
      return;
    }
    FAIL() << "no alive node " << node.Hex();
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* ReconstructionTest::harness_ = nullptr;

TEST_F(ReconstructionTest, LostResultIsRebuiltWhenTheOwnerReadsIt) {
  auto big = ray::Task(LineageMakeBig).SetResource("special", 1).Remote(5);
  manta::NodeID first = PrimaryNode(big);
  ASSERT_FALSE(first.IsNil());
  KillNode(first);
  EXPECT_EQ(*big.Get(), LineageMakeBig(5));
  // Made again on the other special node.
  auto again = Core().reference_counter().GetPinnedAt(manta::ObjectID::FromBinary(big.ID()));
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(*again, first);
}

TEST_F(ReconstructionTest, LostArgumentIsRebuiltForTheTaskThatNeedsIt) {
  auto big = ray::Task(LineageMakeBig).SetResource("special", 1).Remote(7);
  manta::NodeID first = PrimaryNode(big);
  ASSERT_FALSE(first.IsNil());
  KillNode(first);
  // The worker running LineageSumBig borrows `big`, cannot fetch it, and tells the owner,
  // which rebuilds it.
  EXPECT_EQ(*ray::Task(LineageSumBig).Remote(big).Get(), LineageSumBig(LineageMakeBig(7)));
}

TEST_F(ReconstructionTest, ChainIsRebuiltThroughAnIntermediateAlreadyFreed) {
  ray::ObjectRef<Big> last;
  {
    auto first = ray::Task(LineageMakeBig).SetResource("special", 1).Remote(11);
    last = ray::Task(AddOne).SetResource("special", 1).Remote(first);
  }  // `first` is out of scope: its value is freed, its task's record is kept
  manta::NodeID node = PrimaryNode(last);
  ASSERT_FALSE(node.IsNil());
  KillNode(node);
  // AddOne runs again, which needs LineageMakeBig to run again first.
  EXPECT_EQ(*last.Get(), AddOne(LineageMakeBig(11)));
}

TEST_F(ReconstructionTest, ABigResultIsRebuiltFromASmallArgumentAlreadyFreed) {
  ray::ObjectRef<Big> big;
  manta::NodeID node;
  {
    auto seed = ray::Task(Thirteen).Remote();
    big = ray::Task(LineageMakeBig).SetResource("special", 1).Remote(seed);
    node = PrimaryNode(big);
  }  // `seed` came back inline: its task keeps no record, and now its value is freed
  ASSERT_FALSE(node.IsNil());
  EXPECT_TRUE(manta::testing::WaitFor([] { return Core().reference_counter().NumObjects() == 1; }, 10000))
      << Core().reference_counter().NumObjects() << " objects in the ownership table";
  EXPECT_EQ(Core().NumLineage(), 1u);  // LineageMakeBig's, with 13 inlined in its spec
  KillNode(node);
  EXPECT_EQ(*big.Get(), LineageMakeBig(13));
}

TEST_F(ReconstructionTest, SeveralReturnsAreRebuiltTogether) {
  std::vector<ray::ObjectRef<Big>> bigs = ray::Task(ThreeBigs).SetResource("special", 1).SetNumReturns(3).Remote(20);
  manta::NodeID node = PrimaryNode(bigs[0]);
  ASSERT_FALSE(node.IsNil());
  EXPECT_EQ(PrimaryNode(bigs[2]), node);
  bigs.erase(bigs.begin() + 1);  // one of them is freed before the node dies
  KillNode(node);
  // Owned by the caller, not by the worker that made them: the task runs again.
  EXPECT_EQ(*ray::Task(LineageSumBig).Remote(bigs[1]).Get(), LineageSumBig(LineageMakeBig(22)));
  EXPECT_EQ(*bigs[0].Get(), LineageMakeBig(20));
  auto again = Core().reference_counter().GetPinnedAt(manta::ObjectID::FromBinary(bigs[0].ID()));
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(*again, node);
}

// Not about rebuilding, but this cluster has what it needs: an object made on
// another node than the driver's.
TEST_F(ReconstructionTest, WaitWithFetchLocalPullsACopyHere) {
  auto big = ray::Task(LineageMakeBig).SetResource("special", 1).Remote(30);
  const manta::ObjectID id = manta::ObjectID::FromBinary(big.ID());
  const manta::NodeID here = manta::NodeID::FromBinary(Core().address().node_id());
  const std::vector<ray::ObjectRef<Big>> refs{big};
  // fetch_local = false: ready once made; no copy comes here.
  ASSERT_EQ(ray::Wait(refs, 1, 30000, /*fetch_local=*/false).ready.size(), 1u);
  std::vector<manta::NodeID> where = Core().reference_counter().GetLocations(id);
  ASSERT_EQ(where.size(), 1u);
  EXPECT_NE(where[0], here);
  // fetch_local = true (the default): ready once a copy is on this node.
  ASSERT_EQ(ray::Wait(refs, 1, 30000).ready.size(), 1u);
  where = Core().reference_counter().GetLocations(id);
  EXPECT_NE(std::find(where.begin(), where.end(), here), where.end()) << where.size() << " locations";
  EXPECT_EQ(*big.Get(), LineageMakeBig(30));
}

TEST_F(ReconstructionTest, NoLineageIsLeftOnceEveryRefIsGone) {
  {
    auto first = ray::Task(LineageMakeBig).SetResource("special", 1).Remote(2);
    auto second = ray::Task(AddOne).Remote(first);
    EXPECT_EQ((*second.Get())[0], 3);
    EXPECT_GE(Core().NumLineage(), 1u);
  }
  EXPECT_TRUE(manta::testing::WaitFor([] { return Core().NumLineage() == 0; }, 10000))
      << Core().NumLineage() << " task records still kept";
}

}  // namespace
}  // namespace reconstruction_test
