// Owner death across nodes on a 3-node cluster on this machine: a worker on node B
// that owns a task running on node C is killed (SIGKILL) while both nodes live on.
// B's raylet reports the exit to the GCS, which publishes it on
// GCS_WORKER_DELTA_CHANNEL, and C's raylet releases the lease the dead worker held
// there (killing the leased worker), so C's CPU comes back long before the job ends.
// This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cluster_harness.h"
#include "gtest/gtest.h"

namespace owner_death_test {
namespace {

int OwnerSleepLong(int seconds) {
  sleep(static_cast<unsigned>(seconds));
  return seconds;
}

// Runs on B: submits a long task to C and does not wait for it, so this worker owns
// the task's result and keeps the lease on C while the task runs.
int SubmitLongToC() {
  ray::Task(OwnerSleepLong).SetResource("c", 1).SetResource("CPU", 1).Remote(600);
  return getpid();
}

RAY_REMOTE(OwnerSleepLong, SubmitLongToC);

// CPUs available on the node offering `resource`, per `manta status --json`; -1 if
// unknown.
double AvailableCpusOnNodeWith(manta::testing::ClusterHarness& harness, const std::string& resource) {
  nlohmann::json status = harness.Status();
  if (!status.contains("nodes")) return -1;
  for (const auto& node : status["nodes"]) {
    if (node["state"] == "ALIVE" && node["resources_total"].contains(resource)) {
      return node["resources_available"].value("CPU", 0.0);
    }
  }
  return -1;
}

class OwnerDeathTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=1"});
    harness_->StartNode({"--num-cpus=1", "--resources={\"b\": 1}"});
    harness_->StartNode({"--num-cpus=1", "--resources={\"c\": 1}"});
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
manta::testing::ClusterHarness* OwnerDeathTest::harness_ = nullptr;

TEST_F(OwnerDeathTest, LeaseOnAnotherNodeComesBackWhenItsOwnerWorkerIsKilled) {
  ASSERT_TRUE(manta::testing::WaitFor([] { return AvailableCpusOnNodeWith(*harness_, "c") == 1; }, 20000))
      << "node C never reported its CPU: " << AvailableCpusOnNodeWith(*harness_, "c");
  const int owner_pid = *ray::Task(SubmitLongToC).SetResource("b", 1).Remote().Get();
  ASSERT_GT(owner_pid, 0);
  ASSERT_TRUE(manta::testing::WaitFor([] { return AvailableCpusOnNodeWith(*harness_, "c") == 0; }, 20000))
      << "the long task never took node C's CPU: " << AvailableCpusOnNodeWith(*harness_, "c");

  ASSERT_EQ(kill(owner_pid, SIGKILL), 0);
  EXPECT_TRUE(manta::testing::WaitFor([] { return AvailableCpusOnNodeWith(*harness_, "c") == 1; }, 20000))
      << "the lease of the dead owner (pid " << owner_pid << ") on node C was not returned: "
      << AvailableCpusOnNodeWith(*harness_, "c") << " CPU available there";
}

}  // namespace
}  // namespace owner_death_test
