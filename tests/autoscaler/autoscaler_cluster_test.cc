// The autoscaler on a real cluster with the command provider: the head (1 CPU) runs
// `manta start --head --autoscaler`, whose launch command starts a 2-CPU node on
// this machine (`manta start --address` in a temp root of its own) and whose
// terminate command stops it. A Ray-style driver (python_free_examples/autoscale)
// makes the demand: tasks of 2 CPUs bring nodes up (at most max_workers = 2) and
// run on them; the nodes go once idle; a node holding primary copies the driver
// still holds is kept until they are freed; a STRICT_SPREAD placement group of two
// 2-CPU bundles brings up two nodes and is placed; so do two 2-CPU actors; stopping
// the head terminates the nodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "nlohmann/json.hpp"
#include "src/common/http/http_get.h"
#include "src/common/process.h"
#include "src/common/session_processes.h"
#include "src/common/util.h"
#include "tests/integration/cluster_harness.h"
#include "tests/test_util/test_util.h"

namespace manta::testing {
namespace {

namespace fs = std::filesystem;

class AutoscalerClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new ClusterHarness();
    const std::string root = harness_->temp_root();
    const std::string manta = BinaryPath("manta");
    WriteScript(root + "/launch.sh",
                "set -e\ndir=\"" + root + "/nodes/$MANTA_INSTANCE_ID\"\nmkdir -p \"$dir\"\n"
                "MANTA_TEMP_DIR=\"$dir\" \"" + manta + "\" start --address \"$MANTA_HEAD_ADDRESS\" "
                "--token-file \"$MANTA_CLUSTER_TOKEN_FILE\" --node-type \"$MANTA_NODE_TYPE\" "
                "--instance-id \"$MANTA_INSTANCE_ID\" --num-cpus 2 --object-store-memory 100000000\n");
    WriteScript(root + "/terminate.sh",
                "dir=\"" + root + "/nodes/$MANTA_INSTANCE_ID\"\n[ -d \"$dir\" ] || exit 0\n"
                "MANTA_TEMP_DIR=\"$dir\" \"" + manta + "\" stop\n");
    nlohmann::json config = {
        {"available_node_types", {{"cpu2", {{"resources", {{"CPU", 2}}}, {"min_workers", 0}, {"max_workers", 2}}}}},
        {"idle_timeout_minutes", 0.05},  // 3 s
        {"update_interval_s", 0.3},
        {"launch_timeout_s", 60},
        {"provider", {{"type", "command"}, {"launch", "sh " + root + "/launch.sh"},
                      {"terminate", "sh " + root + "/terminate.sh"}, {"timeout_s", 60}}}};
    ASSERT_TRUE(WriteFileAtomic(root + "/autoscaler.json", config.dump(2)).ok());
    harness_->StartHead({"--num-cpus", "1", "--object-store-memory", "200000000", "--autoscaler",
                         root + "/autoscaler.json"});
  }
  static void TearDownTestSuite() {
    // Whatever nodes are left (a failed test), stopped by their own temp roots.
    std::error_code ec;
    for (const auto& node : fs::directory_iterator(harness_->temp_root() + "/nodes", ec)) {
      RunCommand({BinaryPath("manta"), "stop", "--force"}, {{"MANTA_TEMP_DIR", node.path().string()}}, 30000);
    }
    delete harness_;
    harness_ = nullptr;
  }
  static void WriteScript(const std::string& path, const std::string& body) {
    ASSERT_TRUE(WriteFileAtomic(path, "#!/bin/sh\n" + body, 0755).ok());
  }

  // Starts the autoscale example as a driver of the cluster; its output goes to `out`.
  static pid_t StartDriver(const std::vector<std::string>& args, const std::string& out) {
    ProcessOptions p;
    p.argv = {std::string(MANTA_BUILD_DIR) + "/python_free_examples/autoscale"};
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    p.env = {{"RAY_ADDRESS", harness_->gcs_address()}, {"MANTA_CLUSTER_TOKEN", harness_->token()}};
    p.output_file = out;
    auto pid = StartProcess(p);
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }
  // The driver's exit code (-1: still running after `timeout_ms`) and its output.
  static int WaitDriver(pid_t pid, int64_t timeout_ms) {
    auto code = WaitForChildExit(pid, timeout_ms);
    if (!code.ok()) {
      (void)SignalProcess(pid, SIGKILL);
      (void)WaitForChildExit(pid, 5000);
      return -1;
    }
    return *code;
  }

  static nlohmann::json Autoscaler() { return harness_->Status().value("autoscaler", nlohmann::json::object()); }
  static std::vector<std::string> InstanceStates() {
    std::vector<std::string> states;
    for (const auto& i : Autoscaler().value("instances", nlohmann::json::array())) {
      states.push_back(i.value("state", ""));
    }
    return states;
  }
  // Every node the autoscaler launched is gone: terminated, its raylet dead.
  static bool AllScaledDown() {
    nlohmann::json status = harness_->Status();
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      if (n.value("state", "") == "ALIVE" && !n.value("is_head", false)) return false;
    }
    return status.value("autoscaler", nlohmann::json::object()).value("instances", nlohmann::json::array()).empty();
  }
  static std::string Read(const std::string& path) { return ReadFile(path).value_or(""); }
  // For a driver that failed or hung: its output, then the cluster as `manta status`
  // sees it (nodes, the autoscaler's instances and pending demand).
  static std::string DriverReport(const std::string& out) {
    return "driver output:\n" + Read(out) + "\ncluster status:\n" + harness_->Status().dump(2);
  }

  static ClusterHarness* harness_;
};
ClusterHarness* AutoscalerClusterTest::harness_ = nullptr;

TEST_F(AutoscalerClusterTest, TasksWithNoCapacityBringNodesUpAndTheyGoOnceIdle) {
  const std::string out = harness_->temp_root() + "/driver1.out";
  // 12 s of work for one node: the second has time to join even on a loaded machine.
  pid_t driver = StartDriver({"--tasks", "6", "--cpus", "2", "--seconds", "2"}, out);
  // The demand shows on the head (waiting requests), and nodes are launched for it.
  bool demand_seen = false, launched_seen = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        nlohmann::json status = harness_->Status();
        for (const auto& n : status.value("nodes", nlohmann::json::array())) {
          demand_seen = demand_seen || !n.value("pending_demand", nlohmann::json::array()).empty();
        }
        for (const auto& s : InstanceStates()) launched_seen = launched_seen || s == "launching" || s == "running";
        return launched_seen && demand_seen;
      },
      60000))
      << harness_->Status().dump(2);
  // The dashboard shows the same: its /api/autoscaler, with the cluster token.
  auto port = ReadFile(harness_->HeadSessionDir() + "/dashboard.ready");
  ASSERT_TRUE(port.ok()) << port.status();
  http::HttpGetOptions get;
  get.bearer_token = harness_->token();
  auto page = http::HttpGet("127.0.0.1", std::atoi(port->c_str()), "/api/autoscaler", get);
  EXPECT_TRUE(page.ok()) << page.status();
  if (!page.ok()) page = std::string("{}");
  nlohmann::json shown = nlohmann::json::parse(*page, nullptr, false);
  EXPECT_TRUE(shown.value("enabled", false)) << *page;
  EXPECT_TRUE(shown.contains("node_types") && shown["node_types"].contains("cpu2")) << *page;
  EXPECT_EQ(WaitDriver(driver, 120000), 0) << DriverReport(out);
  const std::string output = Read(out);
  EXPECT_NE(output.find("6 tasks of 2 CPUs on 2 nodes"), std::string::npos) << output;
  // Never more than max_workers.
  int launches = 0;
  for (const auto& e : Autoscaler().value("events", nlohmann::json::array())) {
    launches += e.value("message", "").rfind("launching", 0) == 0;
  }
  EXPECT_LE(launches, 2) << Autoscaler().dump(2);
  // Idle for 3 s: drained, terminated, their raylets gone.
  EXPECT_TRUE(WaitFor(AllScaledDown, 60000)) << harness_->Status().dump(2);
  std::string events = Autoscaler().value("events", nlohmann::json::array()).dump();
  EXPECT_NE(events.find("drained"), std::string::npos) << events;
}

TEST_F(AutoscalerClusterTest, ANodeHoldingPrimaryCopiesIsKeptUntilTheyAreFreed) {
  const std::string out = harness_->temp_root() + "/driver2.out";
  // Two results of 2 MB each, stored on the nodes that ran them, held 10 s (the idle
  // timeout is 3 s), then read back.
  pid_t driver = StartDriver({"--tasks", "2", "--cpus", "2", "--seconds", "0.2", "--bytes", "2000000",
                              "--hold-seconds", "10"},
                             out);
  ASSERT_TRUE(WaitFor([&] { return Read(out).find("holding the results") != std::string::npos; }, 90000)) << Read(out);
  // While the driver holds them, past the idle timeout: no node holding them is
  // drained (a node that ran nothing may go).
  int holders_seen = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(7);
  while (std::chrono::steady_clock::now() < until) {
    nlohmann::json status = harness_->Status();
    std::map<std::string, std::string> state_of_node;
    const nlohmann::json instances =
        status.value("autoscaler", nlohmann::json::object()).value("instances", nlohmann::json::array());
    for (const auto& i : instances) {
      state_of_node[i.value("node_id", "")] = i.value("state", "");
    }
    holders_seen = 0;
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      if (n.value("is_head", false) || n.value("state", "") != "ALIVE") continue;
      if (n.value("object_store", nlohmann::json::object()).value("num_pinned", 0) == 0) continue;
      ++holders_seen;
      ASSERT_EQ(state_of_node[n.value("node_id", "")], "running")
          << "a node holding primary copies: " << status.dump(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_GE(holders_seen, 1) << "the results are on the nodes that ran them";
  EXPECT_EQ(WaitDriver(driver, 60000), 0) << DriverReport(out);
  // Read back whole (the driver checks every result's size).
  EXPECT_NE(Read(out).find("2 tasks of 2 CPUs"), std::string::npos) << Read(out);
  // The driver is gone, its objects freed: now the nodes go.
  EXPECT_TRUE(WaitFor(AllScaledDown, 60000)) << harness_->Status().dump(2);
}

TEST_F(AutoscalerClusterTest, APendingPlacementGroupBringsUpItsNodes) {
  const std::string out = harness_->temp_root() + "/driver3.out";
  pid_t driver = StartDriver({"--spread-group", "2", "--tasks", "2", "--cpus", "2", "--seconds", "0.2"}, out);
  EXPECT_EQ(WaitDriver(driver, 120000), 0) << DriverReport(out);
  EXPECT_NE(Read(out).find("placement group of 2 bundles placed"), std::string::npos) << Read(out);
  EXPECT_NE(Read(out).find("on 2 nodes"), std::string::npos) << Read(out);
  EXPECT_TRUE(WaitFor(AllScaledDown, 60000)) << harness_->Status().dump(2);
}

TEST_F(AutoscalerClusterTest, ActorCreationsBringUpTheirNodes) {
  const std::string out = harness_->temp_root() + "/driver5.out";
  // Two actors holding 2 CPUs each: two nodes (the head has 1 CPU).
  pid_t driver = StartDriver({"--actors", "2", "--tasks", "0", "--cpus", "2"}, out);
  EXPECT_EQ(WaitDriver(driver, 120000), 0) << DriverReport(out);
  EXPECT_NE(Read(out).find("2 actors of 2 CPUs on 2 nodes"), std::string::npos) << Read(out);
  // The driver is gone, and its actors with it: the nodes go.
  EXPECT_TRUE(WaitFor(AllScaledDown, 60000)) << harness_->Status().dump(2);
}

// Last: it stops the head.
TEST_F(AutoscalerClusterTest, StoppingTheHeadTerminatesTheNodesItLaunched) {
  const std::string out = harness_->temp_root() + "/driver4.out";
  pid_t driver = StartDriver({"--tasks", "2", "--cpus", "2", "--seconds", "0.2", "--bytes", "2000000",
                              "--hold-seconds", "60"},
                             out);
  ASSERT_TRUE(WaitFor([&] { return Read(out).find("holding the results") != std::string::npos; }, 90000)) << Read(out);
  std::vector<std::string> roots;
  std::error_code ec;
  for (const auto& node : fs::directory_iterator(harness_->temp_root() + "/nodes", ec)) {
    if (AnyRecordedProcessRunning(node.path().string())) roots.push_back(node.path().string());
  }
  ASSERT_FALSE(roots.empty()) << "nodes run for the held results";
  CommandResult stopped = harness_->Manta({"stop"}, {}, 120000);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  for (const std::string& root : roots) EXPECT_FALSE(AnyRecordedProcessRunning(root)) << root << " still runs";
  (void)SignalProcess(driver, SIGKILL);
  (void)WaitForChildExit(driver, 10000);
}

}  // namespace
}  // namespace manta::testing
