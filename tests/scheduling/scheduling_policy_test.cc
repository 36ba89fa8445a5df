// Tests of the hybrid scheduling policy (src/scheduling/scheduling_policy.h).
#include "src/scheduling/scheduling_policy.h"

#include <gtest/gtest.h>

#include <set>

namespace manta::scheduling {
namespace {

using Kind = SchedulingDecision::Kind;

class SchedulingPolicyTest : public ::testing::Test {
 protected:
  // Adds a node to the view with `total` resources and `available` now.
  NodeID AddNode(const ResourceMap& total, const ResourceMap& available, bool draining = false) {
    NodeID id = NodeID::FromRandom();
    rpc::NodeInfo info;
    info.set_node_id(id.Binary());
    info.set_state(rpc::NodeInfo::ALIVE);
    info.set_node_manager_address("10.0.0." + std::to_string(view_.NumNodes() + 2));
    info.set_node_manager_port(7000);
    info.set_draining(draining);
    for (const auto& [k, v] : total) (*info.mutable_resources_total())[k] = v;
    view_.OnNodeInfo(info);
    rpc::ResourceUsage usage;
    usage.set_node_id(id.Binary());
    for (const auto& [k, v] : available) (*usage.mutable_resources_available())[k] = v;
    view_.OnResourceUsage(usage);
    return id;
  }

  SchedulingDecision Schedule(const ResourceMap& request) {
    LocalNodeState local{local_id_, &local_total_, &local_available_, local_draining_};
    return ScheduleLease(request, local, view_, options_, [this](size_t n) {
      random_calls_.push_back(n);
      return next_random_ % n;
    });
  }

  NodeID local_id_ = NodeID::FromRandom();
  ResourceMap local_total_{{"CPU", 4}};
  ResourceMap local_available_{{"CPU", 4}};
  bool local_draining_ = false;
  ClusterResourceView view_;
  SchedulingPolicyOptions options_;
  size_t next_random_ = 0;
  std::vector<size_t> random_calls_;
};

TEST_F(SchedulingPolicyTest, UtilisationIsTheBusiestRequestedKind) {
  ResourceMap total{{"CPU", 4}, {"GPU", 2}, {"memory", 100}};
  ResourceMap available{{"CPU", 1}, {"GPU", 2}, {"memory", 50}};
  EXPECT_DOUBLE_EQ(NodeUtilisation({{"CPU", 1}}, total, available), 0.75);
  EXPECT_DOUBLE_EQ(NodeUtilisation({{"GPU", 1}}, total, available), 0.0);
  EXPECT_DOUBLE_EQ(NodeUtilisation({{"GPU", 1}, {"memory", 1}}, total, available), 0.5);
  // A request naming nothing the node has: the CPU ratio.
  EXPECT_DOUBLE_EQ(NodeUtilisation({}, total, available), 0.75);
  EXPECT_DOUBLE_EQ(NodeUtilisation({{"custom", 1}}, total, available), 0.75);
}

TEST_F(SchedulingPolicyTest, LocalNodeIsPreferredBelowTheSpreadThreshold) {
  AddNode({{"CPU", 4}}, {{"CPU", 4}});  // an idle remote node
  local_available_ = {{"CPU", 3}};     // 25% busy
  SchedulingDecision d = Schedule({{"CPU", 1}});
  EXPECT_EQ(d.kind, Kind::kLocal);
  EXPECT_EQ(d.node_id, local_id_);
  EXPECT_TRUE(d.available_now);
  EXPECT_TRUE(random_calls_.empty());
}

TEST_F(SchedulingPolicyTest, AboveTheThresholdTheLeastLoadedNodeWins) {
  NodeID idle = AddNode({{"CPU", 4}}, {{"CPU", 4}});
  AddNode({{"CPU", 4}}, {{"CPU", 2}});
  local_available_ = {{"CPU", 2}};  // 50%: not below 0.5
  SchedulingDecision d = Schedule({{"CPU", 1}});
  EXPECT_EQ(d.kind, Kind::kRemote);
  EXPECT_EQ(d.node_id, idle);
  EXPECT_TRUE(d.available_now);
}

TEST_F(SchedulingPolicyTest, SingleNodeStaysLocalAboveTheThreshold) {
  local_available_ = {{"CPU", 1}};
  SchedulingDecision d = Schedule({{"CPU", 1}});
  EXPECT_EQ(d.kind, Kind::kLocal);
  EXPECT_TRUE(d.available_now);
}

TEST_F(SchedulingPolicyTest, PicksAtRandomAmongTheTopK) {
  options_.top_k_fraction = 0.5;  // 6 nodes (5 + local) -> k = 3
  local_available_ = {{"CPU", 0}};
  NodeID n0 = AddNode({{"CPU", 10}}, {{"CPU", 10}});  // 0% busy
  NodeID n1 = AddNode({{"CPU", 10}}, {{"CPU", 9}});   // 10%
  NodeID n2 = AddNode({{"CPU", 10}}, {{"CPU", 8}});   // 20%
  AddNode({{"CPU", 10}}, {{"CPU", 2}});               // 80%
  AddNode({{"CPU", 10}}, {{"CPU", 1}});               // 90%
  std::vector<NodeID> expected{n0, n1, n2};
  for (size_t r = 0; r < 3; ++r) {
    next_random_ = r;
    random_calls_.clear();
    SchedulingDecision d = Schedule({{"CPU", 1}});
    EXPECT_EQ(d.kind, Kind::kRemote);
    EXPECT_EQ(d.node_id, expected[r]) << "random index " << r;
    EXPECT_EQ(random_calls_, std::vector<size_t>{3});
  }
}

TEST_F(SchedulingPolicyTest, TopKIsAtLeastOne) {
  options_.top_k_fraction = 0.01;
  local_available_ = {{"CPU", 0}};
  NodeID best = AddNode({{"CPU", 10}}, {{"CPU", 10}});
  AddNode({{"CPU", 10}}, {{"CPU", 5}});
  SchedulingDecision d = Schedule({{"CPU", 1}});
  EXPECT_EQ(d.node_id, best);
  EXPECT_TRUE(random_calls_.empty());
}

TEST_F(SchedulingPolicyTest, CustomResourceGoesToTheNodeThatHasIt) {
  NodeID special = AddNode({{"CPU", 1}, {"special", 1}}, {{"CPU", 1}, {"special", 1}});
  SchedulingDecision d = Schedule({{"special", 1}});
  EXPECT_EQ(d.kind, Kind::kRemote);
  EXPECT_EQ(d.node_id, special);
}

TEST_F(SchedulingPolicyTest, BusyEverywhereQueuesLocallyIfLocalCouldRunIt) {
  local_available_ = {{"CPU", 0}};
  AddNode({{"CPU", 4}}, {{"CPU", 0}});
  SchedulingDecision d = Schedule({{"CPU", 2}});
  EXPECT_EQ(d.kind, Kind::kLocal);
  EXPECT_FALSE(d.available_now);
}

TEST_F(SchedulingPolicyTest, BusyEverywhereAndLocalCannotQueuesAtTheLeastLoadedFeasibleNode) {
  NodeID a = AddNode({{"CPU", 8}, {"GPU", 4}}, {{"CPU", 8}, {"GPU", 0}});
  NodeID b = AddNode({{"CPU", 8}, {"GPU", 4}}, {{"CPU", 8}, {"GPU", 0}});
  SchedulingDecision d = Schedule({{"GPU", 1}});
  EXPECT_EQ(d.kind, Kind::kRemote);
  EXPECT_FALSE(d.available_now);
  EXPECT_TRUE(d.node_id == a || d.node_id == b);
}

TEST_F(SchedulingPolicyTest, NoNodeCanEverRunItIsInfeasible) {
  AddNode({{"CPU", 8}}, {{"CPU", 8}});
  EXPECT_EQ(Schedule({{"GPU", 1}}).kind, Kind::kInfeasible);
  EXPECT_EQ(Schedule({{"CPU", 9}}).kind, Kind::kInfeasible);
  EXPECT_TRUE(Schedule({{"GPU", 1}}).node_id.IsNil());
}

TEST_F(SchedulingPolicyTest, DrainingNodesAreNeverChosen) {
  AddNode({{"CPU", 4}, {"special", 1}}, {{"CPU", 4}, {"special", 1}}, /*draining=*/true);
  EXPECT_EQ(Schedule({{"special", 1}}).kind, Kind::kInfeasible);
  local_draining_ = true;
  NodeID other = AddNode({{"CPU", 4}}, {{"CPU", 1}});
  SchedulingDecision d = Schedule({{"CPU", 1}});
  EXPECT_EQ(d.kind, Kind::kRemote);
  EXPECT_EQ(d.node_id, other);
}

TEST_F(SchedulingPolicyTest, TheViewsEntryForTheLocalNodeIsIgnored) {
  // The view's (stale) picture of this node says it is idle; the exact local state
  // says it is full.
  rpc::NodeInfo self;
  self.set_node_id(local_id_.Binary());
  (*self.mutable_resources_total())["CPU"] = 4;
  view_.OnNodeInfo(self);
  local_available_ = {{"CPU", 0}};
  NodeID other = AddNode({{"CPU", 4}}, {{"CPU", 4}});
  SchedulingDecision d = Schedule({{"CPU", 1}});
  EXPECT_EQ(d.kind, Kind::kRemote);
  EXPECT_EQ(d.node_id, other);
}

}  // namespace
}  // namespace manta::scheduling
