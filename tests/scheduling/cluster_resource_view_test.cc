// Tests of the raylet's picture of the cluster (src/scheduling/cluster_resource_view.h).
#include "src/scheduling/cluster_resource_view.h"

#include <gtest/gtest.h>

namespace manta::scheduling {
namespace {

using Resources = std::map<std::string, double>;

rpc::NodeInfo Node(const NodeID& id, const Resources& total, rpc::NodeInfo::State state = rpc::NodeInfo::ALIVE) {
  rpc::NodeInfo info;
  info.set_node_id(id.Binary());
  info.set_node_manager_address("10.0.0.1");
  info.set_node_manager_port(7000);
  info.set_state(state);
  for (const auto& [name, value] : total) (*info.mutable_resources_total())[name] = value;
  return info;
}

rpc::ResourceUsage Usage(const NodeID& id, const Resources& available) {
  rpc::ResourceUsage usage;
  usage.set_node_id(id.Binary());
  for (const auto& [name, value] : available) (*usage.mutable_resources_available())[name] = value;
  return usage;
}

TEST(ClusterResourceViewTest, StartsEmpty) {
  ClusterResourceView view;
  EXPECT_EQ(view.NumNodes(), 0u);
  EXPECT_EQ(view.Get(NodeID::FromRandom()), nullptr);
}

TEST(ClusterResourceViewTest, AliveNodeIsAddedWithTotalAsAvailable) {
  ClusterResourceView view;
  NodeID id = NodeID::FromRandom();
  view.OnNodeInfo(Node(id, {{"CPU", 4}}));
  ASSERT_TRUE(view.Contains(id));
  const auto* node = view.Get(id);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->total, (Resources{{"CPU", 4}}));
  EXPECT_EQ(node->available, (Resources{{"CPU", 4}}));
  EXPECT_EQ(node->address, "10.0.0.1");
  EXPECT_EQ(node->port, 7000);
}

TEST(ClusterResourceViewTest, RepeatedAliveKeepsKnownAvailability) {
  ClusterResourceView view;
  NodeID id = NodeID::FromRandom();
  view.OnNodeInfo(Node(id, {{"CPU", 4}}));
  view.OnResourceUsage(Usage(id, {{"CPU", 1}}));
  view.OnNodeInfo(Node(id, {{"CPU", 8}}));
  const auto* node = view.Get(id);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->total, (Resources{{"CPU", 8}}));
  EXPECT_EQ(node->available, (Resources{{"CPU", 1}}));
  EXPECT_EQ(view.NumNodes(), 1u);
}

TEST(ClusterResourceViewTest, DeadNodeIsRemoved) {
  ClusterResourceView view;
  NodeID a = NodeID::FromRandom();
  NodeID b = NodeID::FromRandom();
  view.OnNodeInfo(Node(a, {{"CPU", 1}}));
  view.OnNodeInfo(Node(b, {{"CPU", 2}}));
  view.OnNodeInfo(Node(a, {}, rpc::NodeInfo::DEAD));
  EXPECT_FALSE(view.Contains(a));
  EXPECT_TRUE(view.Contains(b));
  EXPECT_EQ(view.NumNodes(), 1u);
  // Death of a node never seen is harmless.
  view.OnNodeInfo(Node(NodeID::FromRandom(), {}, rpc::NodeInfo::DEAD));
  EXPECT_EQ(view.NumNodes(), 1u);
}

TEST(ClusterResourceViewTest, UsageOfKnownNodeUpdatesAvailability) {
  ClusterResourceView view;
  NodeID id = NodeID::FromRandom();
  view.OnNodeInfo(Node(id, {{"CPU", 4}, {"GPU", 1}}));
  view.OnResourceUsage(Usage(id, {{"CPU", 2.5}, {"GPU", 0}}));
  const auto* node = view.Get(id);
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->available, (Resources{{"CPU", 2.5}, {"GPU", 0}}));
  EXPECT_EQ(node->total, (Resources{{"CPU", 4}, {"GPU", 1}}));
}

TEST(ClusterResourceViewTest, UsageOfUnknownNodeIsIgnored) {
  ClusterResourceView view;
  NodeID unknown = NodeID::FromRandom();
  view.OnResourceUsage(Usage(unknown, {{"CPU", 2}}));
  EXPECT_FALSE(view.Contains(unknown));
  EXPECT_EQ(view.NumNodes(), 0u);
}

TEST(ClusterResourceViewTest, MalformedNodeIdsAreIgnored) {
  ClusterResourceView view;
  rpc::NodeInfo info = Node(NodeID::FromRandom(), {{"CPU", 1}});
  info.set_node_id("short");
  view.OnNodeInfo(info);
  rpc::ResourceUsage usage;
  usage.set_node_id("short");
  view.OnResourceUsage(usage);
  EXPECT_EQ(view.NumNodes(), 0u);
}

TEST(ClusterResourceViewTest, SnapshotReplacesTheWholeView) {
  ClusterResourceView view;
  NodeID stale = NodeID::FromRandom();
  view.OnNodeInfo(Node(stale, {{"CPU", 1}}));

  NodeID a = NodeID::FromRandom();
  NodeID b = NodeID::FromRandom();
  NodeID dead = NodeID::FromRandom();
  rpc::GetAllNodeInfoReply snapshot;
  *snapshot.add_node_info_list() = Node(a, {{"CPU", 4}});
  *snapshot.add_node_info_list() = Node(b, {{"CPU", 2}});
  *snapshot.add_node_info_list() = Node(dead, {{"CPU", 8}}, rpc::NodeInfo::DEAD);
  *snapshot.add_resource_usage() = Usage(a, {{"CPU", 3}});
  *snapshot.add_resource_usage() = Usage(dead, {{"CPU", 8}});  // dead: ignored
  view.ResetFromSnapshot(snapshot);

  EXPECT_FALSE(view.Contains(stale));
  EXPECT_FALSE(view.Contains(dead));
  EXPECT_EQ(view.NumNodes(), 2u);
  ASSERT_NE(view.Get(a), nullptr);
  EXPECT_EQ(view.Get(a)->available, (Resources{{"CPU", 3}}));
  ASSERT_NE(view.Get(b), nullptr);
  EXPECT_EQ(view.Get(b)->available, (Resources{{"CPU", 2}}));  // no usage: total

  view.ResetFromSnapshot(rpc::GetAllNodeInfoReply());
  EXPECT_EQ(view.NumNodes(), 0u);
}

}  // namespace
}  // namespace manta::scheduling
