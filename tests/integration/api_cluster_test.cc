// The public API on a 3-node cluster on this machine (three raylets with their own
// ports and session dirs): tasks needing a custom resource spill back to the node
// that has it, large results move between nodes, refs nested in values keep their
// objects alive through the borrower protocol, and a dead owner makes a borrower's
// Get fail clearly. This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "driver_main.h"
#include "cluster_harness.h"
#include "big_array.h"
#include "gtest/gtest.h"
#include "src/api/native_runtime.h"
#include "src/common/process.h"
#include "src/core_worker/core_worker.h"

namespace api_cluster_test {
namespace {

std::string WhereAmI() { return std::getenv("MANTA_NODE_ID"); }

using manta::testing::Big;
// Registered under these names in this binary.
Big ClusterMakeBig(int seed) { return manta::testing::MakeBig(seed); }
long long ClusterSumBig(Big b) { return manta::testing::SumBig(b); }

// A value carrying a ref owned by the worker that made it.
struct Holder {
  int pid = 0;
  ray::ObjectRef<int> ref;
  MSGPACK_DEFINE(pid, ref);
};
Holder MakeHolder(int v) { return Holder{getpid(), ray::Put(v)}; }
int ReadNested(ray::ObjectRef<ray::ObjectRef<int>> outer) { return *outer.Get()->Get(); }
ray::ObjectRef<int> Wrap(int v) { return ray::Put(v); }
int SleepLong(int seconds) {
  sleep(static_cast<unsigned>(seconds));
  return seconds;
}

RAY_REMOTE(WhereAmI, ClusterMakeBig, ClusterSumBig, MakeHolder, ReadNested, Wrap, SleepLong);

class ApiClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=1"});
    harness_->StartNode({"--num-cpus=1", "--resources={\"special\": 1}"});
    harness_->StartNode({"--num-cpus=1", "--resources={\"other\": 1}"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  // Hex node id of the node offering `resource`.
  static std::string NodeWith(const std::string& resource) {
    for (const auto& node : harness_->AliveNodes()) {
      if (node.resources_total().count(resource)) return manta::NodeID::FromBinary(node.node_id()).Hex();
    }
    return "";
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* ApiClusterTest::harness_ = nullptr;

TEST_F(ApiClusterTest, CustomResourceTasksSpillToTheNodeThatHasThem) {
  std::string special = NodeWith("special");
  std::string other = NodeWith("other");
  ASSERT_FALSE(special.empty());
  ASSERT_FALSE(other.empty());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(*ray::Task(WhereAmI).SetResource("special", 1).Remote().Get(), special);
    EXPECT_EQ(*ray::Task(WhereAmI).SetResource("other", 0.5).Remote().Get(), other);
  }
}

// Objects in every node's store, per `manta status --json`; -1 if unknown.
int64_t ObjectsInStores(manta::testing::ClusterHarness& harness) {
  nlohmann::json status = harness.Status();
  if (!status.contains("nodes")) return -1;
  int64_t n = 0;
  for (const auto& node : status["nodes"]) {
    if (node["state"] == "ALIVE") n += node["object_store"]["num_objects"].get<int64_t>();
  }
  return n;
}

TEST_F(ApiClusterTest, LargeResultsMoveBetweenNodes) {
  {
    // Made on the "special" node, read by the driver (head) and by a task on "other":
    // three nodes end up with a copy.
    auto big = ray::Task(ClusterMakeBig).SetResource("special", 1).Remote(3);
    long long expected = ClusterSumBig(ClusterMakeBig(3));
    EXPECT_EQ((*big.Get())[99999], 3 + 99999);
    EXPECT_EQ(*ray::Task(ClusterSumBig).SetResource("other", 1).Remote(big).Get(), expected);
    // (manta status reports store contents about once a second.)
    EXPECT_TRUE(manta::testing::WaitFor([] { return ObjectsInStores(*harness_) >= 3; }, 10000))
        << ObjectsInStores(*harness_) << " objects in the nodes' stores";
  }
  // Every copy goes with the last ref, not only the primary one.
  EXPECT_TRUE(manta::testing::WaitFor([] { return ObjectsInStores(*harness_) == 0; }, 10000))
      << ObjectsInStores(*harness_) << " objects left in the nodes' stores";
  EXPECT_TRUE(manta::testing::WaitFor(
      [] { return ray::internal::GetCoreWorkerForTesting()->reference_counter().NumObjects() == 0; }, 10000));
}

TEST_F(ApiClusterTest, NestedRefsKeepTheirObjectsAlive) {
  // A ref inside a struct, owned by the worker that made it.
  Holder holder = *ray::Task(MakeHolder).SetResource("special", 1).Remote(41).Get();
  EXPECT_EQ(*holder.ref.Get(), 41);
  // ObjectRef<ObjectRef<int>>: the outer value is a ref; passing it as a ref.
  ray::ObjectRef<ray::ObjectRef<int>> outer = ray::Task(Wrap).SetResource("other", 1).Remote(7);
  EXPECT_EQ(*outer.Get()->Get(), 7);
  EXPECT_EQ(*ray::Task(ReadNested).Remote(outer).Get(), 7);
}

TEST_F(ApiClusterTest, BorrowerGetThrowsWhenTheOwnerDied) {
  Holder holder = *ray::Task(MakeHolder).SetResource("special", 1).Remote(5).Get();
  ASSERT_GT(holder.pid, 0);
  ASSERT_EQ(kill(holder.pid, SIGKILL), 0);
  try {
    holder.ref.Get();
    FAIL() << "expected the owner's death to surface";
  } catch (const ray::internal::UnreconstructableException& e) {  // what Ray throws there
    std::string what = e.what();
    EXPECT_NE(what.find("owner"), std::string::npos) << what;
    EXPECT_NE(what.find("died"), std::string::npos) << what;
  }
}


TEST_F(ApiClusterTest, LeasesComeBackWhenTheOwnerDies) {
  ASSERT_TRUE(manta::testing::WaitFor([] { return harness_->AvailableCpus() == 3; }, 20000));
  // Another driver (this binary, in child mode) leases a CPU for a long task, then
  // is killed with SIGKILL: the raylet must return the CPU and stop its worker.
  manta::ProcessOptions child;
  child.argv = {manta::SelfExecutablePath(), "--child-driver=" + harness_->gcs_address()};
  child.env["MANTA_CLUSTER_TOKEN"] = harness_->token();  // never inherited
  auto pid = manta::StartProcess(child);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(manta::testing::WaitFor([] { return harness_->AvailableCpus() == 2; }, 20000))
      << "the child's task never took a CPU";
  ASSERT_TRUE(manta::SignalProcess(*pid, SIGKILL).ok());
  manta::WaitForExit(*pid, 5000);
  EXPECT_TRUE(manta::testing::WaitFor([] { return harness_->AvailableCpus() == 3; }, 20000))
      << "the dead owner's lease was not returned: " << harness_->AvailableCpus() << " CPUs available";
}


// Child-driver mode (LeasesComeBackWhenTheOwnerDies): submit a long task, block.
const bool kChildMode = manta::testing::AddChildMode([](int argc, char** argv) -> std::optional<int> {
  if (argc != 2 || std::string(argv[1]).rfind("--child-driver=", 0) != 0) return std::nullopt;
  ray::RayConfig config;
  config.address = std::string(argv[1]).substr(std::string("--child-driver=").size());
  ray::Init(config, argc, argv);
  ray::Task(SleepLong).Remote(600).Get();
  return 0;
});

}  // namespace
}  // namespace api_cluster_test
