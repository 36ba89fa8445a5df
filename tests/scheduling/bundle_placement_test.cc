// Tests of bundle placement (src/scheduling/bundle_placement.h): every strategy placed
// now, not now and infeasible, rescheduling with bundles already placed, fixed-point
// fractions, custom resources, ties and determinism, and STRICT_SPREAD's matching
// checked against brute force.
#include "src/scheduling/bundle_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace manta::scheduling {
namespace {

using ::testing::HasSubstr;
using Outcome = BundlePlacement::Outcome;

// Node ids that sort like `n`, so that tests can name the tie-break winner.
NodeID Id(uint8_t n) { return NodeID::FromBinary(std::string(NodeID::Size(), static_cast<char>(n))); }

const NodeID kA = Id(1);
const NodeID kB = Id(2);
const NodeID kC = Id(3);

class BundlePlacementTest : public ::testing::Test {
 protected:
  // Adds a node with `total` resources, all of them available unless `available` is given.
  void AddNode(const NodeID& id, const ResourceMap& total, std::optional<ResourceMap> available = std::nullopt) {
    nodes_.push_back(BundleNode{id, total, available ? *available : total});
  }

  // Places `bundles`, none placed before unless `placed` is given.
  BundlePlacement Place(const std::vector<ResourceMap>& bundles, rpc::PlacementStrategy strategy,
                        std::vector<NodeID> placed = {}) const {
    if (placed.empty()) placed.resize(bundles.size());
    return PlaceBundles(bundles, placed, strategy, nodes_);
  }

  std::vector<BundleNode> nodes_;
};

std::vector<ResourceMap> Repeat(const ResourceMap& bundle, size_t n) { return std::vector<ResourceMap>(n, bundle); }

// ---- PACK ----

TEST_F(BundlePlacementTest, PackPutsAllBundlesOnTheLeastUtilisedNodeThatHoldsThem) {
  AddNode(kA, {{"CPU", 8}}, ResourceMap{{"CPU", 4}});  // half used
  AddNode(kB, {{"CPU", 8}});                           // idle
  AddNode(kC, {{"CPU", 2}});                           // idle, too small for both
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 2), rpc::PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kB}));
  EXPECT_TRUE(p.reason.empty());
}

TEST_F(BundlePlacementTest, PackTieGoesToTheSmallerNodeIdWhateverTheListOrder) {
  AddNode(kB, {{"CPU", 4}});
  AddNode(kA, {{"CPU", 4}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kA, kA}));
}

TEST_F(BundlePlacementTest, PackFillsNodesInTurnLargestBundlesFirstWhenNoNodeHoldsAll) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}});
  // 8 CPUs in all: A takes the 3, skips both 2s, and takes the 1; B the two 2s. In
  // bundle order A would take 2 + 1 and leave 3 + 2 for B, which cannot hold them.
  BundlePlacement p = Place({{{"CPU", 2}}, {{"CPU", 1}}, {{"CPU", 3}}, {{"CPU", 2}}}, rpc::PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kA, kA, kB}));
}

TEST_F(BundlePlacementTest, PackIsNotNowWhenOnlyTheTotalsHoldIt) {
  AddNode(kA, {{"CPU", 4}}, ResourceMap{{"CPU", 1}});
  BundlePlacement p = Place({{{"CPU", 2}}}, rpc::PACK);
  EXPECT_EQ(p.outcome, Outcome::kNotNow);
  EXPECT_TRUE(p.nodes.empty());
  EXPECT_EQ(p.reason, "bundle 0 {CPU: 2} fits in no node's available resources");
}

TEST_F(BundlePlacementTest, PackSplitNowThatOneNodeCouldHoldLaterSaysSo) {
  // One CPU of each 2-CPU node in use (work finishing, leases about to come back).
  AddNode(kA, {{"CPU", 2}}, ResourceMap{{"CPU", 1}});
  AddNode(kB, {{"CPU", 2}}, ResourceMap{{"CPU", 1}});
  AddNode(kC, {{"CPU", 2}}, ResourceMap{{"CPU", 1}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 2), rpc::PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_NE(p.nodes[0], p.nodes[1]);
  EXPECT_TRUE(p.better_once_freed);
  EXPECT_EQ(p.reason, "PACK fits on 2 nodes now, on 1 node once resources in use are given back");
  // A split the totals could not avoid either is simply placed.
  nodes_.clear();
  AddNode(kA, {{"CPU", 1}});
  AddNode(kB, {{"CPU", 1}});
  p = Place(Repeat({{"CPU", 1}}, 2), rpc::PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_FALSE(p.better_once_freed);
  EXPECT_TRUE(p.reason.empty());
}

TEST_F(BundlePlacementTest, SpreadOnFewerNodesNowThanLaterSaysSo) {
  AddNode(kA, {{"CPU", 2}});
  AddNode(kB, {{"CPU", 2}}, ResourceMap{{"CPU", 0}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 2), rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kA}));
  EXPECT_TRUE(p.better_once_freed);
  EXPECT_THAT(p.reason, HasSubstr("on 2 nodes once"));
  // Strict strategies never say so: they are placed as they must be, or not at all.
  p = Place(Repeat({{"CPU", 1}}, 2), rpc::STRICT_PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_FALSE(p.better_once_freed);
}

TEST_F(BundlePlacementTest, PackIsInfeasibleForABundleNoNodeCouldHold) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}});
  BundlePlacement p = Place({{{"CPU", 1}}, {{"CPU", 8}}}, rpc::PACK);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_TRUE(p.nodes.empty());
  EXPECT_EQ(p.reason, "bundle 1 {CPU: 8} fits in no node's total resources");
}

TEST_F(BundlePlacementTest, PackIsInfeasibleWhenTheBundlesFitOnlyAlone) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}});
  BundlePlacement p = Place(Repeat({{"CPU", 3}}, 3), rpc::PACK);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "bundle 2 {CPU: 3} fits in no node's total resources beside the group's other bundles");
}

TEST_F(BundlePlacementTest, PackReschedulingJoinsThePlacedBundlesNode) {
  AddNode(kA, {{"CPU", 8}});                           // idle
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});  // bundle 0 took 2
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::PACK, {kB, NodeID::Nil(), NodeID::Nil()});
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kB, kB}));
}

TEST_F(BundlePlacementTest, PackReschedulingMovesTheRestToOneNodeWhenThePlacedNodeIsFull) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});  // bundle 0 took 2
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 3), rpc::PACK, {kB, NodeID::Nil(), NodeID::Nil()});
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kA, kA}));
}

TEST_F(BundlePlacementTest, PackReschedulingFillsThePlacedBundlesNodeFirst) {
  AddNode(kA, {{"CPU", 3}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});  // bundle 0 took 2
  // 5 CPUs to place, no node has them: B (the group's) is filled before the idle A.
  BundlePlacement p = Place({{{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 1}}}, rpc::PACK,
                            {kB, NodeID::Nil(), NodeID::Nil(), NodeID::Nil()});
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kB, kA, kA}));
}

TEST_F(BundlePlacementTest, PackReschedulingIsNotNowWhileTheNodesAreBusy) {
  AddNode(kA, {{"CPU", 4}}, ResourceMap{{"CPU", 0}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 0}});  // bundle 0 and other work
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 2), rpc::PACK, {kB, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kNotNow);
  EXPECT_EQ(p.reason, "bundle 1 {CPU: 2} fits in no node's available resources");
}

// ---- SPREAD ----

TEST_F(BundlePlacementTest, SpreadPutsEachBundleOnANodeOfItsOwn) {
  AddNode(kC, {{"CPU", 4}});
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kB, kC}));
}

TEST_F(BundlePlacementTest, SpreadPrefersAnUnusedNodeEvenWhenItIsBusier) {
  AddNode(kA, {{"CPU", 8}});
  AddNode(kB, {{"CPU", 8}}, ResourceMap{{"CPU", 2}});  // 75% used
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 2), rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kB}));
}

TEST_F(BundlePlacementTest, SpreadReusesTheLeastUsedNodesWhenBundlesOutnumberNodes) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 5), rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kB, kA, kB, kA}));
}

TEST_F(BundlePlacementTest, SpreadSharesANodeWhenOnlyAUsedNodeFits) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 1}});
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 2), rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kA}));
}

TEST_F(BundlePlacementTest, SpreadPlacesTheLargestBundleFirst) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 2}});
  // The 3 fits only on A, so the 1, though first in bundle order and tied between the
  // idle nodes, goes to B.
  BundlePlacement p = Place({{{"CPU", 1}}, {{"CPU", 3}}}, rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kA}));
}

TEST_F(BundlePlacementTest, SpreadIsNotNowWhenOnlyTheTotalsHoldIt) {
  AddNode(kA, {{"CPU", 4}}, ResourceMap{{"CPU", 1}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 3}});
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 3), rpc::SPREAD);
  EXPECT_EQ(p.outcome, Outcome::kNotNow);
  EXPECT_EQ(p.reason, "bundle 1 {CPU: 2} fits in no node's available resources beside the group's other bundles");
}

TEST_F(BundlePlacementTest, SpreadIsInfeasibleForAResourceNoNodeHas) {
  AddNode(kA, {{"CPU", 4}});
  BundlePlacement p = Place({{{"CPU", 1}}, {{"GPU", 1}}}, rpc::SPREAD);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "bundle 1 {GPU: 1} fits in no node's total resources");
}

TEST_F(BundlePlacementTest, SpreadReschedulingCountsTheNodesOfPlacedBundlesAsUsed) {
  AddNode(kA, {{"CPU", 4}}, ResourceMap{{"CPU", 3}});  // bundle 0: the least utilised node
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});
  AddNode(kC, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::SPREAD, {kA, NodeID::Nil(), NodeID::Nil()});
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kB, kC}));
}

// ---- STRICT_PACK ----

TEST_F(BundlePlacementTest, StrictPackPutsEveryBundleOnOneNode) {
  AddNode(kA, {{"CPU", 2}});                           // too small
  AddNode(kB, {{"CPU", 4}});                           // idle
  AddNode(kC, {{"CPU", 8}}, ResourceMap{{"CPU", 4}});  // holds them, but busier
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::STRICT_PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kB, kB}));
}

TEST_F(BundlePlacementTest, StrictPackIsNotNowWhenOnlyANodesTotalHoldsThem) {
  AddNode(kA, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});  // 4 CPUs free, but not on one node
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 2), rpc::STRICT_PACK);
  EXPECT_EQ(p.outcome, Outcome::kNotNow);
  EXPECT_TRUE(p.nodes.empty());
  EXPECT_EQ(p.reason, "no node's available resources can hold STRICT_PACK bundles 0-1 {CPU: 4}");
}

TEST_F(BundlePlacementTest, StrictPackIsInfeasibleWhenNoNodeHoldsTheSum) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}});
  BundlePlacement p = Place(Repeat({{"CPU", 3}}, 2), rpc::STRICT_PACK);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "no node's total resources can hold STRICT_PACK bundles 0-1 {CPU: 6}");
}

TEST_F(BundlePlacementTest, StrictPackIsInfeasibleForABundleNoNodeCouldHold) {
  AddNode(kA, {{"CPU", 4}});
  BundlePlacement p = Place({{{"CPU", 1}}, {{"CPU", 1}, {"GPU", 1}}}, rpc::STRICT_PACK);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "bundle 1 {CPU: 1, GPU: 1} fits in no node's total resources");
}

TEST_F(BundlePlacementTest, StrictPackReschedulingJoinsThePlacedBundlesNode) {
  AddNode(kA, {{"CPU", 8}});                           // idle and larger
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});  // bundle 0 took 2
  BundlePlacement p = Place({{{"CPU", 2}}, {{"CPU", 1}}, {{"CPU", 1}}}, rpc::STRICT_PACK,
                            {kB, NodeID::Nil(), NodeID::Nil()});
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kB, kB}));
}

TEST_F(BundlePlacementTest, StrictPackReschedulingWaitsForThePlacedBundlesNode) {
  AddNode(kA, {{"CPU", 8}});                           // could hold bundle 1, but not with bundle 0
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 0}});  // bundle 0 and other work
  BundlePlacement p = Place(Repeat({{"CPU", 2}}, 2), rpc::STRICT_PACK, {kB, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kNotNow);
  EXPECT_EQ(p.reason, "node " + kB.Hex() +
                          "'s available resources cannot hold STRICT_PACK bundle 1 {CPU: 2} beside bundle 0");
}

TEST_F(BundlePlacementTest, StrictPackReschedulingIsInfeasibleWhenThePlacedBundlesLeaveTooLittle) {
  AddNode(kA, {{"CPU", 8}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 1}});  // bundle 0 holds 3 of 4 for good
  BundlePlacement p = Place({{{"CPU", 3}}, {{"CPU", 2}}}, rpc::STRICT_PACK, {kB, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "node " + kB.Hex() +
                          "'s total resources cannot hold STRICT_PACK bundle 1 {CPU: 2} beside bundle 0");
}

TEST_F(BundlePlacementTest, StrictPackReschedulingIsInfeasibleWhenThePlacedBundlesNodeIsNotGiven) {
  AddNode(kA, {{"CPU", 8}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 2), rpc::STRICT_PACK, {kB, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_THAT(p.reason, HasSubstr("bundle 1 {CPU: 1} must join bundle 0 on node " + kB.Hex()));
}

// ---- STRICT_SPREAD ----

TEST_F(BundlePlacementTest, StrictSpreadPutsEveryBundleOnItsOwnNodeLeastUtilisedFirst) {
  AddNode(kA, {{"CPU", 4}}, ResourceMap{{"CPU", 1}});
  AddNode(kB, {{"CPU", 4}});
  AddNode(kC, {{"CPU", 4}}, ResourceMap{{"CPU", 3}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::STRICT_SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kC, kA}));
}

TEST_F(BundlePlacementTest, StrictSpreadIsNotNowWhenTooFewNodesHaveRoomNow) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 0}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 2), rpc::STRICT_SPREAD);
  EXPECT_EQ(p.outcome, Outcome::kNotNow);
  EXPECT_EQ(p.reason,
            "STRICT_SPREAD needs 2 nodes for bundles 0-1, only 1 can each hold one of them in their available "
            "resources");
}

TEST_F(BundlePlacementTest, StrictSpreadIsInfeasibleWithMoreBundlesThanNodes) {
  AddNode(kA, {{"CPU", 16}});
  AddNode(kB, {{"CPU", 16}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::STRICT_SPREAD);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "STRICT_SPREAD needs 3 nodes for bundles 0-2, there are 2");
}

TEST_F(BundlePlacementTest, StrictSpreadIsInfeasibleWhenTooFewNodesCouldEverHoldTheBundles) {
  AddNode(kA, {{"CPU", 4}, {"GPU", 1}});
  AddNode(kB, {{"CPU", 4}});
  AddNode(kC, {{"CPU", 4}});
  BundlePlacement p = Place({{{"GPU", 1}}, {{"CPU", 1}}, {{"GPU", 1}}}, rpc::STRICT_SPREAD);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason,
            "STRICT_SPREAD needs 3 nodes for bundles 0-2, only 2 can each hold one of them in their total resources");
}

TEST_F(BundlePlacementTest, StrictSpreadMatchesWhereAGreedyChoiceWouldFail) {
  // The bundles are as large (half of the CPUs, half of the GPUs), so bundle 0 goes
  // first, to A (idle, smaller id); greedily, the GPU bundle would then find no node.
  // The matching moves bundle 0 to B.
  AddNode(kA, {{"CPU", 2}, {"GPU", 1}});
  AddNode(kB, {{"CPU", 2}});
  BundlePlacement p = Place({{{"CPU", 2}}, {{"GPU", 0.5}}}, rpc::STRICT_SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kA}));
}

TEST_F(BundlePlacementTest, StrictSpreadMatchesAlongALongerAugmentingPath) {
  // Node k holds s<k> and s<k-1>; node 0 holds s0 and t. Bundle k < 4 asks for s<k>
  // (nodes k and k+1) and takes node k; bundle 4 asks for t, on node 0 only, so every
  // earlier bundle moves one node along. All bundles are half of a resource's total,
  // so they are matched in bundle order.
  const int n = 5;
  std::vector<ResourceMap> bundles;
  for (int k = 0; k < n; ++k) {
    ResourceMap total{{"s" + std::to_string(k), 1}};
    total[k == 0 ? "t" : "s" + std::to_string(k - 1)] = k == 0 ? 2 : 1;
    AddNode(Id(static_cast<uint8_t>(k + 1)), total);
    bundles.push_back({{k < n - 1 ? "s" + std::to_string(k) : "t", 1}});
  }
  BundlePlacement p = Place(bundles, rpc::STRICT_SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{Id(2), Id(3), Id(4), Id(5), Id(1)}));
}

TEST_F(BundlePlacementTest, SpreadUsesTheMatchingToReachAsManyNodesAsStrictSpreadWould) {
  // The CPU bundle is the larger (4 of 8 CPUs against 1 of 2.5 GPUs) and goes first:
  // greedily to A (idle, smaller id), and the GPU bundle, fitting nowhere else, would
  // share A. The matching moves the CPU bundle to B.
  AddNode(kA, {{"CPU", 4}, {"GPU", 1}});
  AddNode(kB, {{"CPU", 4}, {"GPU", 0.5}});
  AddNode(kC, {{"GPU", 0.5}});
  AddNode(Id(4), {{"GPU", 0.5}});
  BundlePlacement p = Place({{{"CPU", 4}}, {{"GPU", 1}}}, rpc::SPREAD);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kB, kA}));
}

TEST_F(BundlePlacementTest, StrictSpreadReschedulingAvoidsTheNodesOfPlacedBundles) {
  AddNode(kA, {{"CPU", 8}}, ResourceMap{{"CPU", 7}});  // bundle 0; the least utilised
  AddNode(kB, {{"CPU", 4}}, ResourceMap{{"CPU", 2}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 2), rpc::STRICT_SPREAD, {kA, NodeID::Nil()});
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, (std::vector<NodeID>{kA, kB}));
}

TEST_F(BundlePlacementTest, StrictSpreadReschedulingIsInfeasibleWhenOnlyNodesOfPlacedBundlesRemain) {
  AddNode(kA, {{"CPU", 8}}, ResourceMap{{"CPU", 7}});
  AddNode(kB, {{"CPU", 8}}, ResourceMap{{"CPU", 7}});
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 3), rpc::STRICT_SPREAD, {kA, kB, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "STRICT_SPREAD needs 1 node for bundle 2 besides the 2 nodes of its placed bundles, there are 0");
}

TEST_F(BundlePlacementTest, StrictSpreadReschedulingNamesABundleThatFitsOnlyBesidePlacedOnes) {
  AddNode(kA, {{"CPU", 8}, {"GPU", 1}}, ResourceMap{{"CPU", 7}, {"GPU", 1}});  // bundle 0
  AddNode(kB, {{"CPU", 8}});
  BundlePlacement p = Place({{{"CPU", 1}}, {{"GPU", 1}}}, rpc::STRICT_SPREAD, {kA, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason,
            "bundle 1 {GPU: 1} fits in no node's total resources but those holding the group's other bundles");
}

// ---- Fractions, custom resources, edge cases ----

TEST_F(BundlePlacementTest, TenTenthsOfACpuFillOneCpuExactly) {
  AddNode(kA, {{"CPU", 1}});
  for (rpc::PlacementStrategy strategy : {rpc::PACK, rpc::SPREAD, rpc::STRICT_PACK}) {
    BundlePlacement p = Place(Repeat({{"CPU", 0.1}}, 10), strategy);
    ASSERT_EQ(p.outcome, Outcome::kPlaced) << rpc::PlacementStrategy_Name(strategy) << ": " << p.reason;
    EXPECT_EQ(p.nodes, std::vector<NodeID>(10, kA));
  }
  BundlePlacement p = Place(Repeat({{"CPU", 0.1}}, 11), rpc::STRICT_PACK);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "no node's total resources can hold STRICT_PACK bundles 0-10 {CPU: 1.10}");
}

TEST_F(BundlePlacementTest, FractionsAddUpExactlyAgainstAFractionalAvailable) {
  // In doubles 0.1 + 0.1 + 0.1 > 0.3: fixed point must still fit all three.
  AddNode(kA, {{"CPU", 1}}, ResourceMap{{"CPU", 0.3}});
  BundlePlacement p = Place(Repeat({{"CPU", 0.1}}, 3), rpc::STRICT_PACK);
  ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
  EXPECT_EQ(p.nodes, std::vector<NodeID>(3, kA));
  EXPECT_EQ(Place(Repeat({{"CPU", 0.1}}, 4), rpc::STRICT_PACK).outcome, Outcome::kNotNow);
}

TEST_F(BundlePlacementTest, CustomResourcesSteerBundlesToTheNodesThatHaveThem) {
  AddNode(kA, {{"CPU", 4}});
  AddNode(kB, {{"CPU", 4}, {"accel", 2}});
  std::vector<ResourceMap> bundles = Repeat({{"accel", 1}}, 2);
  BundlePlacement spread = Place(bundles, rpc::SPREAD);
  ASSERT_EQ(spread.outcome, Outcome::kPlaced) << spread.reason;
  EXPECT_EQ(spread.nodes, (std::vector<NodeID>{kB, kB}));
  BundlePlacement strict = Place(bundles, rpc::STRICT_SPREAD);
  EXPECT_EQ(strict.outcome, Outcome::kInfeasible);
  EXPECT_THAT(strict.reason, HasSubstr("only 1 can each hold one of them"));
  BundlePlacement unknown = Place({{{"CPU", 1}}, {{"accel", 1}, {"special", 0.5}}}, rpc::PACK);
  EXPECT_EQ(unknown.outcome, Outcome::kInfeasible);
  EXPECT_EQ(unknown.reason, "bundle 1 {accel: 1, special: 0.50} fits in no node's total resources");
}

TEST_F(BundlePlacementTest, NoNodesMakesEveryStrategyInfeasible) {
  std::vector<ResourceMap> bundles = Repeat({{"CPU", 1}}, 2);
  for (rpc::PlacementStrategy strategy : {rpc::PACK, rpc::SPREAD, rpc::STRICT_PACK}) {
    BundlePlacement p = Place(bundles, strategy);
    EXPECT_EQ(p.outcome, Outcome::kInfeasible) << rpc::PlacementStrategy_Name(strategy);
    EXPECT_EQ(p.reason, "bundle 0 {CPU: 1} fits in no node's total resources (there are no nodes)");
  }
  BundlePlacement p = Place(bundles, rpc::STRICT_SPREAD);
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "STRICT_SPREAD needs 2 nodes for bundles 0-1, there are 0");
}

TEST_F(BundlePlacementTest, NothingLeftToPlaceIsPlaced) {
  for (rpc::PlacementStrategy strategy : {rpc::PACK, rpc::SPREAD, rpc::STRICT_PACK, rpc::STRICT_SPREAD}) {
    BundlePlacement empty = Place({}, strategy);
    EXPECT_EQ(empty.outcome, Outcome::kPlaced);
    EXPECT_TRUE(empty.nodes.empty());
    // Every bundle already placed: kept, even with no node given.
    BundlePlacement kept = Place(Repeat({{"CPU", 1}}, 2), strategy, {kA, kB});
    EXPECT_EQ(kept.outcome, Outcome::kPlaced);
    EXPECT_EQ(kept.nodes, (std::vector<NodeID>{kA, kB}));
  }
}

TEST_F(BundlePlacementTest, BundleRangesInReasonsAreShort) {
  AddNode(kA, {{"CPU", 4}});
  // Bundles 0, 1, 2 and 4 to place; 3 is placed on a node not given.
  BundlePlacement p = Place(Repeat({{"CPU", 1}}, 5), rpc::STRICT_SPREAD,
                            {NodeID::Nil(), NodeID::Nil(), NodeID::Nil(), kB, NodeID::Nil()});
  EXPECT_EQ(p.outcome, Outcome::kInfeasible);
  EXPECT_EQ(p.reason, "STRICT_SPREAD needs 4 nodes for bundles 0-2, 4, there are 1");
}

// ---- Ties and determinism ----

TEST_F(BundlePlacementTest, EqualUtilisationTiesGoToTheSmallerIdAlthoughTheDoublesDiffer) {
  // Both 30% used: (1 - 0.7) / 1 and (10 - 7) / 10 differ in the last bit as doubles.
  AddNode(kB, {{"CPU", 10}}, ResourceMap{{"CPU", 7}});
  AddNode(kA, {{"CPU", 1}}, ResourceMap{{"CPU", 0.7}});
  for (rpc::PlacementStrategy strategy : {rpc::PACK, rpc::SPREAD, rpc::STRICT_PACK, rpc::STRICT_SPREAD}) {
    BundlePlacement p = Place({{{"CPU", 0.1}}}, strategy);
    ASSERT_EQ(p.outcome, Outcome::kPlaced) << p.reason;
    EXPECT_EQ(p.nodes, std::vector<NodeID>{kA}) << rpc::PlacementStrategy_Name(strategy);
  }
}

TEST_F(BundlePlacementTest, TheOutcomeDoesNotDependOnTheOrderOfTheNodes) {
  for (uint8_t n = 1; n <= 6; ++n) {
    const double gpus = n % 2;
    AddNode(Id(n), {{"CPU", 2.0 * n}, {"GPU", gpus}}, ResourceMap{{"CPU", 1.5 * n}, {"GPU", gpus}});
  }
  std::vector<ResourceMap> bundles = {
      {{"CPU", 1}}, {{"CPU", 2.5}}, {{"GPU", 1}}, {{"CPU", 0.5}, {"GPU", 1}}, {{"CPU", 3}}};
  std::vector<std::vector<NodeID>> placed_cases = {
      std::vector<NodeID>(bundles.size()),
      {NodeID::Nil(), Id(6), NodeID::Nil(), NodeID::Nil(), NodeID::Nil()},
  };
  std::mt19937 rng(7);
  for (rpc::PlacementStrategy strategy : {rpc::PACK, rpc::SPREAD, rpc::STRICT_PACK, rpc::STRICT_SPREAD}) {
    for (const std::vector<NodeID>& placed : placed_cases) {
      std::vector<BundleNode> original = nodes_;
      BundlePlacement first = Place(bundles, strategy, placed);
      for (int round = 0; round < 10; ++round) {
        std::shuffle(nodes_.begin(), nodes_.end(), rng);
        BundlePlacement again = Place(bundles, strategy, placed);
        EXPECT_EQ(again.outcome, first.outcome) << rpc::PlacementStrategy_Name(strategy);
        EXPECT_EQ(again.nodes, first.nodes) << rpc::PlacementStrategy_Name(strategy);
        EXPECT_EQ(again.reason, first.reason) << rpc::PlacementStrategy_Name(strategy);
      }
      nodes_ = original;
    }
  }
}

// ---- Against brute force ----

// Whether `bundles` can go on distinct nodes (STRICT_SPREAD) or on one node
// (STRICT_PACK), trying every assignment, with each node's `capacity`.
bool BruteForceFits(const std::vector<ResourceMap>& bundles, const std::vector<ResourceMap>& capacity,
                    rpc::PlacementStrategy strategy) {
  if (strategy == rpc::STRICT_PACK) {
    ResourceMap sum;
    for (const ResourceMap& b : bundles) AddResources(sum, b);
    return std::any_of(capacity.begin(), capacity.end(), [&](const ResourceMap& c) { return ResourcesFit(sum, c); });
  }
  std::vector<bool> used(capacity.size(), false);
  std::function<bool(size_t)> assign = [&](size_t k) {
    if (k == bundles.size()) return true;
    for (size_t n = 0; n < capacity.size(); ++n) {
      if (used[n] || !ResourcesFit(bundles[k], capacity[n])) continue;
      used[n] = true;
      bool ok = assign(k + 1);
      used[n] = false;
      if (ok) return true;
    }
    return false;
  };
  return assign(0);
}

// Each node's bundles fit in its available resources, and the strict strategies hold.
void ExpectValidPlacement(const std::vector<ResourceMap>& bundles, const std::vector<BundleNode>& nodes,
                          rpc::PlacementStrategy strategy, const BundlePlacement& p) {
  ASSERT_EQ(p.nodes.size(), bundles.size());
  for (const BundleNode& node : nodes) {
    ResourceMap taken;
    for (size_t b = 0; b < bundles.size(); ++b) {
      if (p.nodes[b] == node.node_id) AddResources(taken, bundles[b]);
    }
    EXPECT_TRUE(ResourcesFit(taken, node.available)) << FormatResources(taken);
  }
  std::set<NodeID> distinct(p.nodes.begin(), p.nodes.end());
  if (strategy == rpc::STRICT_PACK) {
    EXPECT_EQ(distinct.size(), 1u);
  }
  if (strategy == rpc::STRICT_SPREAD) {
    EXPECT_EQ(distinct.size(), bundles.size());
  }
}

TEST_F(BundlePlacementTest, StrictStrategiesAgreeWithBruteForceOnRandomGroups) {
  std::mt19937 rng(12345);
  // A whole number in [0, n), as a quantity.
  auto below = [&rng](uint32_t n) { return static_cast<double>(rng() % n); };
  for (int round = 0; round < 500; ++round) {
    nodes_.clear();
    std::vector<ResourceMap> totals, availables;
    const int num_nodes = static_cast<int>(below(5));
    for (int n = 0; n < num_nodes; ++n) {
      ResourceMap total{{"CPU", below(4)}, {"GPU", below(2)}};
      ResourceMap available{{"CPU", below(static_cast<uint32_t>(ToSteps(total["CPU"]) / kResourceStepsPerUnit) + 1)},
                            {"GPU", below(2) * total["GPU"]}};
      AddNode(Id(static_cast<uint8_t>(n + 1)), total, available);
      totals.push_back(total);
      availables.push_back(available);
    }
    std::vector<ResourceMap> bundles(static_cast<size_t>(below(4)) + 1);
    for (ResourceMap& b : bundles) {
      b = {{"CPU", below(3) * 0.5}, {"GPU", below(2)}};
      if (ToSteps(b["CPU"]) == 0 && ToSteps(b["GPU"]) == 0) b["CPU"] = 0.5;
    }
    for (rpc::PlacementStrategy strategy : {rpc::STRICT_PACK, rpc::STRICT_SPREAD}) {
      SCOPED_TRACE("round " + std::to_string(round) + " " + rpc::PlacementStrategy_Name(strategy));
      BundlePlacement p = Place(bundles, strategy);
      Outcome expected = BruteForceFits(bundles, availables, strategy) ? Outcome::kPlaced
                         : BruteForceFits(bundles, totals, strategy)   ? Outcome::kNotNow
                                                                       : Outcome::kInfeasible;
      ASSERT_EQ(p.outcome, expected) << p.reason;
      if (p.outcome == Outcome::kPlaced) ExpectValidPlacement(bundles, nodes_, strategy, p);
    }
    for (rpc::PlacementStrategy strategy : {rpc::PACK, rpc::SPREAD}) {
      BundlePlacement p = Place(bundles, strategy);
      if (p.outcome == Outcome::kPlaced) ExpectValidPlacement(bundles, nodes_, strategy, p);
      // Best effort, but never worse than the strict strategies.
      if (BruteForceFits(bundles, availables, rpc::STRICT_PACK) ||
          BruteForceFits(bundles, availables, rpc::STRICT_SPREAD)) {
        EXPECT_EQ(p.outcome, Outcome::kPlaced) << "round " << round << " " << p.reason;
      }
    }
  }
}

}  // namespace
}  // namespace manta::scheduling
