// The autoscaler's decisions (autoscaler.h) from hand-made snapshots, with a fake
// ClusterActions that records what it is asked; and its config's parsing.
#include "src/autoscaler/autoscaler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace manta::autoscaler {
namespace {

class FakeActions : public ClusterActions {
 public:
  void Launch(const NodeTypeConfig& type, const std::string& instance_id) override {
    launched.push_back(type.name + ":" + instance_id);
  }
  void Terminate(const std::string& node_type, const std::string& instance_id) override {
    terminated.push_back(instance_id);
  }
  void Drain(const std::string& node_id) override { drained.push_back(node_id); }
  std::vector<std::string> launched, terminated, drained;
};

AutoscalerConfig TwoTypes(int max_small = 3) {
  auto config = AutoscalerConfig::Parse(R"({
    "available_node_types": {
      "small": {"resources": {"CPU": 2}, "max_workers": )" + std::to_string(max_small) + R"(},
      "big": {"resources": {"CPU": 8, "GPU": 1}, "max_workers": 1}
    },
    "idle_timeout_minutes": 1,
    "launch_timeout_s": 60,
    "provider": {"type": "command", "launch": "true", "terminate": "true"}
  })");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

NodeSnapshot Head(double cpus_available, std::vector<std::pair<scheduling::ResourceMap, int64_t>> demands = {}) {
  NodeSnapshot n;
  n.node_id = "head";
  n.is_head = true;
  n.total = {{"CPU", 1}};
  n.available = {{"CPU", cpus_available}};
  n.demands = std::move(demands);
  return n;
}

NodeSnapshot Worker(const std::string& instance, const std::string& type, double cpus, double available) {
  NodeSnapshot n;
  n.node_id = "node-" + instance;
  n.node_type = type;
  n.instance_id = instance;
  n.total = {{"CPU", cpus}};
  n.available = {{"CPU", available}};
  return n;
}

class AutoscalerTest : public ::testing::Test {
 protected:
  void Make(AutoscalerConfig config) {
    autoscaler_ = std::make_unique<Autoscaler>(std::move(config), actions_,
                                               [this] { return "i" + std::to_string(next_id_++); });
  }
  FakeActions actions_;
  std::unique_ptr<Autoscaler> autoscaler_;
  int next_id_ = 1;
};

TEST_F(AutoscalerTest, DemandBringsUpTheSmallestTypeThatHoldsIt) {
  Make(TwoTypes());
  ClusterSnapshot s;
  s.nodes = {Head(0, {{{{"CPU", 2}}, 3}})};
  autoscaler_->Update(s, 1000);
  // Three 2-CPU requests: three small nodes (each holds one), not the big one.
  EXPECT_EQ(actions_.launched, (std::vector<std::string>{"small:i1", "small:i2", "small:i3"}));
  // Each event says when (the update's time).
  const nlohmann::json first = autoscaler_->State()["events"][0];
  EXPECT_EQ(first.value("time_ms", int64_t{0}), 1000);
  EXPECT_EQ(first.value("message", ""), "launching i1 (small)");
  // The next update counts the launching nodes: no second round of launches.
  autoscaler_->Update(s, 2000);
  EXPECT_EQ(actions_.launched.size(), 3u);
  ASSERT_EQ(autoscaler_->unmet().size(), 1u);
  EXPECT_EQ(autoscaler_->unmet()[0].status, "launching");
}

TEST_F(AutoscalerTest, DemandBeyondMaxIsReportedNotRetried) {
  Make(TwoTypes(/*max_small=*/1));
  ClusterSnapshot s;
  s.nodes = {Head(0, {{{{"CPU", 2}}, 3}, {{{"TPU", 1}}, 2}})};
  autoscaler_->Update(s, 1000);
  // One small (its max); the big type (8 CPUs) holds the other two 2-CPU requests.
  // (Launched in the config's order of types: by name.)
  EXPECT_EQ(actions_.launched, (std::vector<std::string>{"big:i1", "small:i2"}));
  bool no_type = false;
  for (const auto& d : autoscaler_->unmet()) no_type = no_type || d.status == "no node type holds it";
  EXPECT_TRUE(no_type) << "the TPU requests are reported";
  for (int t = 2; t < 10; ++t) autoscaler_->Update(s, t * 1000);
  EXPECT_EQ(actions_.launched.size(), 2u) << "nothing more is launched while the same demand waits";
}

TEST_F(AutoscalerTest, AtMaxWorkersIsReported) {
  auto config = TwoTypes(/*max_small=*/1);
  config.node_types.erase(config.node_types.begin());  // only "small" (1 at most)
  ASSERT_EQ(config.node_types[0].name, "small");
  Make(config);
  ClusterSnapshot s;
  s.nodes = {Head(0, {{{{"CPU", 2}}, 2}})};
  autoscaler_->Update(s, 1000);
  EXPECT_EQ(actions_.launched.size(), 1u);
  bool at_max = false;
  for (const auto& d : autoscaler_->unmet()) at_max = at_max || d.status == "at max_workers";
  EXPECT_TRUE(at_max);
}

TEST_F(AutoscalerTest, PlacementGroupBundlesAreDemand) {
  Make(TwoTypes());
  ClusterSnapshot s;
  s.nodes = {Head(1)};
  s.pending_groups = {{"pg1", "STRICT_SPREAD", {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}}};
  autoscaler_->Update(s, 1000);
  // Three bundles on distinct nodes: the head takes one, two small nodes the others.
  EXPECT_EQ(actions_.launched.size(), 2u);
  // STRICT_PACK: the bundles together, on one node that holds their sum.
  FakeActions other;
  Autoscaler packed(TwoTypes(), other, [] { return std::string("p"); });
  ClusterSnapshot s2;
  s2.nodes = {Head(0)};
  s2.pending_groups = {{"pg2", "STRICT_PACK", {{{"CPU", 2}}, {{"CPU", 2}}}}};
  packed.Update(s2, 1000);
  EXPECT_EQ(other.launched, (std::vector<std::string>{"big:p"}));
}

TEST_F(AutoscalerTest, MinWorkersAreKept) {
  auto config = TwoTypes();
  config.node_types[1].min_workers = 1;  // "small" sorts after "big": index 1
  ASSERT_EQ(config.node_types[1].name, "small");
  Make(config);
  ClusterSnapshot s;
  s.nodes = {Head(1)};
  autoscaler_->Update(s, 1000);
  EXPECT_EQ(actions_.launched, (std::vector<std::string>{"small:i1"}));
  // Joined and idle for long: kept (it is the minimum).
  s.nodes.push_back(Worker("i1", "small", 2, 2));
  autoscaler_->Update(s, 2000);
  autoscaler_->Update(s, 2000 + 10 * 60 * 1000);
  EXPECT_TRUE(actions_.drained.empty());
}

TEST_F(AutoscalerTest, IdleNodeIsDrainedThenTerminatedOnceItsRayletSaysItIsEmpty) {
  Make(TwoTypes());
  ClusterSnapshot s;
  s.nodes = {Head(0, {{{{"CPU", 2}}, 1}})};
  autoscaler_->Update(s, 0);
  ASSERT_EQ(actions_.launched.size(), 1u);
  s.nodes = {Head(1), Worker("i1", "small", 2, 0)};
  s.nodes[1].num_leases = 1;
  autoscaler_->Update(s, 1000);
  EXPECT_EQ(autoscaler_->instances().at("i1").state, Autoscaler::InstanceState::kRunning);
  // Done, but it holds a primary object: not idle.
  s.nodes[1] = Worker("i1", "small", 2, 2);
  s.nodes[1].primary_objects = 1;
  autoscaler_->Update(s, 2000);
  autoscaler_->Update(s, 2000 + 120000);
  EXPECT_TRUE(actions_.drained.empty()) << "a node holding primary copies is not idle";
  // Freed: idle from now; drained after the idle timeout (1 minute).
  s.nodes[1].primary_objects = 0;
  autoscaler_->Update(s, 200000);
  autoscaler_->Update(s, 200000 + 59000);
  EXPECT_TRUE(actions_.drained.empty());
  autoscaler_->Update(s, 200000 + 61000);
  EXPECT_EQ(actions_.drained, (std::vector<std::string>{"node-i1"}));
  // Not terminated until the raylet itself, draining, says it holds nothing.
  autoscaler_->Update(s, 262000);
  EXPECT_TRUE(actions_.terminated.empty());
  s.nodes[1].draining = true;
  s.nodes[1].fresh = true;
  s.nodes[1].num_leases = 1;  // a lease granted just before the drain
  autoscaler_->Update(s, 263000);
  EXPECT_TRUE(actions_.terminated.empty());
  s.nodes[1].num_leases = 0;
  autoscaler_->Update(s, 264000);
  EXPECT_EQ(actions_.terminated, (std::vector<std::string>{"i1"}));
  // Its node leaves: forgotten.
  s.nodes.pop_back();
  autoscaler_->Update(s, 265000);
  EXPECT_TRUE(autoscaler_->instances().empty());
}

TEST_F(AutoscalerTest, LaunchThatNeverJoinsIsTerminatedAndAFailedOneForgotten) {
  Make(TwoTypes());
  ClusterSnapshot s;
  s.nodes = {Head(0, {{{{"CPU", 2}}, 2}})};
  autoscaler_->Update(s, 0);
  ASSERT_EQ(actions_.launched.size(), 2u);
  autoscaler_->OnLaunchFailed("i2", "the launch command exited with 1");
  EXPECT_EQ(autoscaler_->instances().size(), 1u);
  autoscaler_->Update(s, 61000);  // i1 never joined within launch_timeout_s (60)
  EXPECT_EQ(actions_.terminated, (std::vector<std::string>{"i1"}));
  auto state = autoscaler_->State();
  bool told = false;
  for (const auto& e : state["events"]) {
    told = told || e.value("message", "").find("exited with 1") != std::string::npos;
  }
  EXPECT_TRUE(told) << state.dump();
}

TEST_F(AutoscalerTest, NodesOfAProviderThatNamesThemAreAdopted) {
  Make(TwoTypes());
  ClusterSnapshot s;
  s.nodes = {Head(0, {{{{"CPU", 2}}, 1}})};
  autoscaler_->Update(s, 0);
  ASSERT_EQ(actions_.launched, (std::vector<std::string>{"small:i1"}));
  // The pod names itself: it takes the place of the launch.
  s.nodes = {Head(1), Worker("manta-worker-cpu2-7d9f", "small", 2, 2)};
  autoscaler_->Update(s, 1000);
  ASSERT_EQ(autoscaler_->instances().size(), 1u);
  EXPECT_EQ(autoscaler_->instances().begin()->first, "manta-worker-cpu2-7d9f");
  EXPECT_EQ(actions_.launched.size(), 1u);
}

TEST(AutoscalerConfigTest, BadConfigsNameTheProblem) {
  auto error = [](const std::string& json) {
    auto c = AutoscalerConfig::Parse(json);
    return c.ok() ? std::string("accepted") : std::string(c.status().message());
  };
  const std::string provider = R"("provider": {"type": "command", "launch": "a", "terminate": "b"})";
  EXPECT_NE(error("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error("{" + provider + "}").find("available_node_types"), std::string::npos);
  EXPECT_NE(error(R"({"available_node_types": {"a": {"resources": {"CPU": 1}}}, "max_worker": 3, )" + provider + "}")
                .find("unknown key \"max_worker\""),
            std::string::npos);
  EXPECT_NE(error(R"({"available_node_types": {"a": {"resources": {"CPU": 1}, "min_workers": 3, "max_workers": 1}}, )" +
                  provider + "}")
                .find("below its min_workers"),
            std::string::npos);
  EXPECT_NE(error(R"({"available_node_types": {"a": {"resources": {"CPU": -1}}}, )" + provider + "}").find("CPU"),
            std::string::npos);
  EXPECT_NE(error(R"({"available_node_types": {"a": {"resources": {"CPU": 1}}}, "provider": {"type": "ssh"}})")
                .find("unknown provider type"),
            std::string::npos);
  EXPECT_NE(error(R"({"available_node_types": {"a": {"resources": {"CPU": 1}}}, "provider": {"type": "command"}})")
                .find("needs \"launch\""),
            std::string::npos);
  EXPECT_NE(error(R"({"available_node_types": {"a": {"resources": {"CPU": 1}}},
                      "provider": {"type": "kubernetes", "deployments": {}}})")
                .find("has no Deployment"),
            std::string::npos);
  auto ok = AutoscalerConfig::Parse(R"({"available_node_types": {"a": {"resources": {"CPU": 1}, "max_workers": 4}},
      "idle_timeout_minutes": 0.5, "upscaling_speed": 2, )" + provider + "}");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->max_workers, 4) << "max_workers defaults to the sum of the types'";
  EXPECT_DOUBLE_EQ(ok->idle_timeout_s, 30);
}

}  // namespace
}  // namespace manta::autoscaler
