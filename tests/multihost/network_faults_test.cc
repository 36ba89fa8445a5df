// Partial and asymmetric partitions, and slow links, on a four-host cluster:
//   - a host that reaches the GCS but not one peer: its pulls fail over to another
//     copy within the configured pull timeout;
//   - the GCS's host cut off from everyone for less than the GCS-unreachable
//     timeout: work goes on meanwhile, no node is declared dead, nothing is lost;
//   - a 100 Mbit/s link (tc tbf): a transfer over it runs at close to that rate,
//     and calls over the same link stay responsive meanwhile;
//   - delayed RPCs (testing_rpc_failure): work still completes.
#include <gtest/gtest.h>

#include <regex>

#include "src/common/util.h"
#include "tests/multihost/multihost_cluster.h"

namespace manta::testing {
namespace {

constexpr char kConfig[] =
    R"({"health_check_period_ms": 500, "health_check_timeout_ms": 500, "health_check_failure_threshold": 4,
        "health_check_initial_delay_ms": 500, "object_manager_pull_timeout_ms": 3000})";
constexpr int64_t kPullTimeoutMs = 3000;

class NetworkFaultsTest : public ::testing::Test {
 protected:
  void Start(const std::string& system_config = kConfig) {
    MultiHostOptions options;
    options.system_config = system_config;
    auto started = MultiHostCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  int AliveNodes() {
    int alive = 0;
    nlohmann::json status = cluster_->Status(0);
    for (const auto& node : status["nodes"]) alive += node["state"] == "ALIVE" ? 1 : 0;
    return alive;
  }
  std::unique_ptr<MultiHostCluster> cluster_;
};

TEST_F(NetworkFaultsTest, APullFailsOverToAnotherCopyWhenThePeerHoldingOneIsUnreachable) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // Host 1 and host 2 cannot reach each other; both still reach the head.
  ASSERT_TRUE(cluster_->bed().Partition(1, {2}).ok());
  CommandResult r = cluster_->Driver(0, {"pull-failover", "2", "1", std::to_string(8 << 20)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json result = DriverResult(r.output);
  ASSERT_TRUE(result.is_object()) << r.output;
  EXPECT_EQ(result["made_at"], cluster_->bed().Ip(2));
  EXPECT_EQ(result["read_at"], cluster_->bed().Ip(1));
  EXPECT_EQ(result["read"], "right");
  // At worst one pull timeout on the unreachable copy, then the other copy.
  EXPECT_LT(result["read_s"].get<double>() * 1000, kPullTimeoutMs + 5000) << result.dump();
  EXPECT_EQ(AliveNodes(), 4) << "a partial partition must not cost a node";
}

TEST_F(NetworkFaultsTest, TheGcsHostCutOffBrieflyLosesNothing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto driver = cluster_->SpawnDriver(1, {"keep-working", "20"});
  ASSERT_TRUE(driver.ok());
  ASSERT_TRUE(WaitFor([&] { return cluster_->bed().OutputOf(*driver).find("WORKING 3") != std::string::npos; },
                      60000))
      << cluster_->bed().OutputOf(*driver);
  // Cut the head (GCS, Redis, its raylet) off for 8 s: twice the health-check
  // window, far less than the 60 s after which raylets give up on the GCS.
  const int64_t cut_ms = NowMs();
  ASSERT_TRUE(cluster_->bed().Partition(0).ok());
  const int64_t healed_ms = cut_ms + 8000;
  ASSERT_TRUE(WaitFor([&] { return NowMs() >= healed_ms; }, 20000));
  ASSERT_TRUE(cluster_->bed().Heal(0).ok());
  CommandResult done = cluster_->bed().Wait(*driver, 120000);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  nlohmann::json result = DriverResult(done.output);
  ASSERT_TRUE(result.is_object()) << done.output;
  EXPECT_EQ(result["error"], "");
  int during = 0;
  for (const auto& at : result["tasks_done_ms"]) during += at.get<int64_t>() > cut_ms && at.get<int64_t>() < healed_ms;
  EXPECT_GT(during, 0) << "no task finished while the GCS was cut off: " << result.dump();
  EXPECT_EQ(AliveNodes(), 4) << "nodes were declared dead while the GCS was the one cut off: "
                             << cluster_->Status(0).dump();
}

TEST_F(NetworkFaultsTest, ATransferOverA100MbitLinkRunsAtItsRateAndCallsStayResponsive) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(cluster_->bed().Shape(2, "100mbit").ok());
  CommandResult r = cluster_->Driver(0, {"slow-link", "2", "1", std::to_string(24 << 20)}, 180000);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json result = DriverResult(r.output);
  ASSERT_TRUE(result.is_object()) << r.output;
  EXPECT_EQ(result["read"], "right");
  const double mbit = result["mbit_per_s"].get<double>();
  // Most of the link: alone it measures ~90 Mbit/s; beside other tests on two cores
  // it has measured 70 (a bound of 70 failed so). A transfer stalled on the link's
  // queue, or one chunk in flight at a time, falls far below 50.
  EXPECT_GT(mbit, 50) << result.dump();
  EXPECT_LT(mbit, 110) << "faster than the link: the shaping did not apply " << result.dump();
  EXPECT_GT(result["calls"].get<int>(), 10) << result.dump();
  EXPECT_LT(result["slowest_call_s"].get<double>(), 1.0) << result.dump();
  std::cout << "100 Mbit/s link: " << result.dump() << std::endl;
}

TEST_F(NetworkFaultsTest, WorkCompletesWhenEveryLeaseRequestIsDelayed) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // Every lease request the driver sends (to its raylet, then where it spills) goes
  // out 300 ms late.
  CommandResult r =
      cluster_->Driver(3, {"spread", "12"}, 120000, {{"MANTA_testing_rpc_failure", "RequestWorkerLease=delay:300"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json result = DriverResult(r.output);
  ASSERT_TRUE(result.is_object()) << r.output;
  int total = 0;
  for (const auto& [host, n] : result["hosts"].items()) total += n.get<int>();
  EXPECT_EQ(total, 12);
}

}  // namespace
}  // namespace manta::testing
