// A driver thread waiting in the object store must not stall the driver's event
// loop. Here a user thread's ray::Put waits for memory (another client's unsealed
// object fills the node's store) while the driver drops a reference, so its loop
// frees that object through the store; the loop must go on serving: a task's lease
// reply, and a worker's request to this driver (the owner) for a borrowed value.
// Ordered, not timed: both complete while the Put provably still waits (the memory
// it needs is released only afterwards). This binary is its own worker.
#include <ray/api.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "src/object_store/store_client.h"

namespace loop_stall_test {
namespace {

constexpr int64_t kStoreBytes = 64 << 20;

int StallPlus(int a, int b) { return a + b; }
// Reads a value this driver owns: the worker asks the driver for it.
int StallDeref(std::vector<ray::ObjectRef<int>> refs) { return *refs.at(0).Get() + 1; }

RAY_REMOTE(StallPlus, StallDeref);

class LoopStallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=2", "--object-store-memory", std::to_string(kStoreBytes)});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  static int64_t PendingCreates() {
    nlohmann::json status = harness_->Status();
    if (!status.contains("nodes") || status["nodes"].empty()) return -1;
    return status["nodes"][0]["object_store"].value("num_pending_creates", int64_t{-1});
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* LoopStallTest::harness_ = nullptr;

TEST_F(LoopStallTest, PutWaitingForMemoryDoesNotStallTheLoop) {
  ASSERT_EQ(*ray::Task(StallPlus).Remote(1, 2).Get(), 3);  // the workers are up
  // A 1 MiB object in the store, whose free will go through the driver's loop.
  auto dropped = std::make_unique<ray::ObjectRef<std::vector<char>>>(ray::Put(std::vector<char>(1 << 20, 'x')));
  ray::ObjectRef<int> owned = ray::Put(41);

  auto nodes = harness_->AliveNodes();
  ASSERT_EQ(nodes.size(), 1u);
  auto blocker_client = manta::object_store::ObjectStoreClient::Connect(nodes[0].object_store_socket());
  ASSERT_TRUE(blocker_client.ok()) << blocker_client.status();
  const manta::ObjectID blocker = manta::ObjectID::FromRandom();
  const int64_t free_bytes = kStoreBytes - (1 << 20);
  ASSERT_TRUE((*blocker_client)->Create(blocker, free_bytes - (4 << 20)).ok());

  // Needs 16 MiB: waits until the blocker goes (the store waits up to 10 s).
  auto put = std::async(std::launch::async, [] { return ray::Put(std::vector<char>(16 << 20, 'y')).ID(); });
  ASSERT_TRUE(manta::testing::WaitFor([] { return PendingCreates() == 1; }, 20000))
      << "the Put never waited for memory: " << PendingCreates() << " creates pending";

  dropped.reset();  // the loop now deletes the 1 MiB object from the store
  auto sum = ray::Task(StallPlus).Remote(2, 3);
  auto deref = ray::Task(StallDeref).Remote(std::vector<ray::ObjectRef<int>>{owned});
  std::vector<ray::ObjectRef<int>> results{sum, deref};
  ray::WaitResult<int> ready = ray::Wait(results, 2, 5000);
  const bool put_still_waiting = put.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  ASSERT_TRUE((*blocker_client)->Abort(blocker).ok());

  EXPECT_EQ(ready.ready.size(), 2u) << "the driver's loop stalled while a thread waited in the object store";
  EXPECT_TRUE(put_still_waiting) << "the Put did not wait for the blocker, so this test shows nothing";
  ASSERT_EQ(put.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_FALSE(put.get().empty());
  EXPECT_EQ(*sum.Get(), 5);
  EXPECT_EQ(*deref.Get(), 42);
}

}  // namespace
}  // namespace loop_stall_test
