// Draining a node loses no object (ARCHITECTURE.md §4): results stored on a second
// node, owned by this driver and never read yet, are moved by their owner once
// `manta drain-node` marks the node draining; the node then holds no primary copy,
// dies, and every result still reads back whole, no task having run again. An object
// freed before the drain is not moved. This binary is its own worker.
#include <ray/api.h>
#include <signal.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "src/common/id.h"
#include "src/common/util.h"

namespace drain_test {
namespace {

constexpr size_t kBlockBytes = 1 << 20;

// 1 MiB of `fill` (stored in the node's shared-memory store); notes its run in `log`.
std::vector<uint8_t> MakeBlock(int fill, std::string log) {
  std::ofstream(log, std::ios::app) << fill << "\n";
  return std::vector<uint8_t>(kBlockBytes, static_cast<uint8_t>(fill));
}
RAY_REMOTE(MakeBlock);

int LinesOf(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

class DrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new manta::testing::ClusterHarness();
    harness_->StartHead({"--num-cpus=1", "--system-config",
                         R"({"health_check_period_ms": 200, "health_check_timeout_ms": 1000,)"
                         R"( "health_check_failure_threshold": 5, "health_check_initial_delay_ms": 0})"});
    harness_->StartNode({"--num-cpus=2", "--resources={\"far\": 2}"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }
  // The second node's entry in `manta status --json`.
  static nlohmann::json FarNode(const std::string& node_hex) {
    const nlohmann::json status = harness_->Status();
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      if (n.value("node_id", "") == node_hex) return n;
    }
    return nlohmann::json::object();
  }
  static int64_t PinnedOn(const std::string& node_hex) {
    return FarNode(node_hex).value("object_store", nlohmann::json::object()).value("num_pinned", int64_t{-1});
  }
  static nlohmann::json HeadStore() {
    const nlohmann::json status = harness_->Status();
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      if (n.value("is_head", false)) return n.value("object_store", nlohmann::json::object());
    }
    return nlohmann::json::object();
  }
  // How many objects this driver owns whose primary copy is on `node_hex`, as
  // `manta list objects` shows them.
  static int PinnedAt(const std::string& node_hex) {
    auto r = harness_->Manta({"list", "objects", "--format", "json", "--filter", "pinned_at=" + node_hex,
                              "--address", harness_->gcs_address()},
                             {}, 30000);
    auto rows = nlohmann::json::parse(r.output, nullptr, false);
    return r.exit_code == 0 && rows.is_array() ? static_cast<int>(rows.size()) : -1;
  }
  static manta::testing::ClusterHarness* harness_;
};
manta::testing::ClusterHarness* DrainTest::harness_ = nullptr;

TEST_F(DrainTest, ADrainedNodesPrimaryCopiesMoveAndOutliveIt) {
  std::string far_hex, head_hex;
  pid_t far_raylet = 0;
  for (const manta::rpc::NodeInfo& node : harness_->AliveNodes()) {
    if (node.is_head_node()) {
      head_hex = manta::BinaryHex(node.node_id());
    } else {
      far_hex = manta::BinaryHex(node.node_id());
      far_raylet = node.raylet_pid();
    }
  }
  ASSERT_GT(far_raylet, 0);
  manta::testing::TempDir dir;
  const std::string log = dir.path() + "/runs";
  constexpr int kBlocks = 20;
  std::vector<ray::ObjectRef<std::vector<uint8_t>>> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(ray::Task(MakeBlock).SetResource("far", 1).SetMaxRetries(0).Remote(i, log));
  }
  // One more, freed before the drain: nothing to move.
  (void)ray::Task(MakeBlock).SetResource("far", 1).SetMaxRetries(0).Remote(99, log);
  // Stored, but never read here (a Get or Wait would fetch copies to this node): the
  // only copies are the primaries on the far node.
  ASSERT_TRUE(manta::testing::WaitFor([&] { return LinesOf(log) == kBlocks + 1; }, 60000));
  ASSERT_TRUE(manta::testing::WaitFor([&] { return PinnedAt(far_hex) == kBlocks; }, 30000));
  ASSERT_TRUE(manta::testing::WaitFor([&] { return PinnedOn(far_hex) == kBlocks; }, 30000))
      << FarNode(far_hex).dump(2);
  const int64_t pulled_before = HeadStore().value("pulled_bytes_total", int64_t{0});

  auto drained = harness_->Manta({"drain-node", far_hex, "--address", harness_->gcs_address()});
  ASSERT_EQ(drained.exit_code, 0) << drained.output;
  EXPECT_TRUE(manta::testing::WaitFor([&] { return PinnedOn(far_hex) == 0; }, 30000)) << FarNode(far_hex).dump(2);
  // On the head now, pulled from the far node, as primary copies of this driver.
  EXPECT_TRUE(manta::testing::WaitFor([&] { return PinnedAt(head_hex) == kBlocks; }, 30000));
  EXPECT_GE(HeadStore().value("pulled_bytes_total", int64_t{0}) - pulled_before, int64_t{kBlocks} * kBlockBytes);
  EXPECT_GE(HeadStore().value("num_pinned", 0), kBlocks);

  ASSERT_EQ(kill(far_raylet, SIGKILL), 0);
  ASSERT_TRUE(manta::testing::WaitFor([&] { return harness_->CountNodes("ALIVE") == 1; }, 30000));
  for (int i = 0; i < kBlocks; ++i) {
    std::shared_ptr<std::vector<uint8_t>> block = blocks[i].Get();
    ASSERT_EQ(block->size(), kBlockBytes);
    EXPECT_EQ((*block)[0], i);
    EXPECT_EQ((*block)[kBlockBytes - 1], i);
  }
  EXPECT_EQ(LinesOf(log), kBlocks + 1) << "a task ran again: an object was lost";
}

}  // namespace
}  // namespace drain_test
