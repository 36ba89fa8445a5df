// GcsPlacementGroupManager + GcsPlacementGroupScheduler over an in-memory store, a
// real publisher and node manager, and fake raylets: validation and names, the
// two-phase commit (prepare everywhere, then commit; a refused prepare returns every
// bundle of the attempt), infeasible and waiting groups, Wait, removal, node death
// with rescheduling, the end of the creating job, and a GCS restart that reloads the
// table and releases reservations it does not know.
#include "src/gcs/gcs_placement_group_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "src/gcs/in_memory_store_client.h"
#include "src/raylet/fake_raylet_client.h"
#include "tests/gcs/gcs_cluster_fixture.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Group = rpc::PlacementGroupTableData;

class GcsPlacementGroupManagerTest : public GcsClusterFixture {
 protected:
  GcsPlacementGroupManagerTest()
      : GcsClusterFixture({rpc::GCS_PLACEMENT_GROUP_CHANNEL}), scheduler_(loop_, nodes_, raylets_) {
    for (int i = 0; i < 3; ++i) node_ids_.push_back(RegisterNode(i, {{"CPU", 2}}));
    manager_ = MakeManager();
    manager_->Start();
    loop_.RunUntilIdle();
  }

  std::unique_ptr<GcsPlacementGroupManager> MakeManager() {
    return std::make_unique<GcsPlacementGroupManager>(
        loop_, store_, publisher_, scheduler_, clock_.AsFunction(),
        [this](const PlacementGroupID& id, const std::string& why) { removed_.emplace_back(id, why); },
        /*retry_period_ms=*/1);
  }

  static std::string Address(int i) { return "10.0.0." + std::to_string(i + 1) + ":7000"; }

  NodeID RegisterNode(int i, const std::map<std::string, double>& resources) {
    return GcsClusterFixture::RegisterNode("10.0.0." + std::to_string(i + 1), 7000, resources);
  }

  Group MakeGroup(std::vector<std::map<std::string, double>> bundles, rpc::PlacementStrategy strategy,
                  const std::string& name = "") {
    Group group;
    group.set_placement_group_id(PlacementGroupID::FromRandom().Binary());
    group.set_name(name);
    group.set_ray_namespace("ns");
    group.set_strategy(strategy);
    group.set_creator_job_id(job_.Binary());
    for (const auto& resources : bundles) {
      rpc::Bundle* bundle = group.add_bundles();
      for (const auto& [k, v] : resources) (*bundle->mutable_unit_resources())[k] = v;
    }
    return group;
  }

  // Creates `group`, then drives the loop until `done` holds (by default: until the
  // manager has nothing in flight).
  absl::Status Create(const Group& group, const std::function<bool()>& done = nullptr) {
    rpc::CreatePlacementGroupRequest request;
    *request.mutable_placement_group() = group;
    rpc::CreatePlacementGroupReply reply;
    absl::Status s = CallHandler(loop_, *manager_, &GcsPlacementGroupManager::HandleCreatePlacementGroup, request,
                                 &reply);
    if (done) {
      EXPECT_TRUE(DriveUntil(done));
    } else {
      Drive();
    }
    return s;
  }
  absl::Status Remove(const Group& group) {
    rpc::RemovePlacementGroupRequest request;
    request.set_placement_group_id(group.placement_group_id());
    rpc::RemovePlacementGroupReply reply;
    absl::Status s =
        CallHandler(loop_, *manager_, &GcsPlacementGroupManager::HandleRemovePlacementGroup, request, &reply);
    Drive();
    return s;
  }

  // Starts a Wait for `group`, answered into `reply` / `recorder`.
  void StartWait(const Group& group, int64_t timeout_ms, rpc::WaitPlacementGroupUntilReadyReply* reply,
                 ReplyRecorder& recorder) {
    rpc::WaitPlacementGroupUntilReadyRequest wait;
    wait.set_placement_group_id(group.placement_group_id());
    wait.set_timeout_ms(timeout_ms);
    manager_->HandleWaitPlacementGroupUntilReady(wait, reply, recorder.Sender());
  }

  // Runs the loop until the manager has no attempt in flight and no pass due.
  void Drive() {
    EXPECT_TRUE(DriveUntil([this] { return manager_->Settled() && scheduler_.NumScheduling() == 0; }));
  }

  const Group& Get(const Group& group) {
    return *manager_->GetGroup(PlacementGroupID::FromBinary(group.placement_group_id()));
  }
  raylet::FakeRayletClient& Raylet(int i) { return GcsClusterFixture::Raylet(Address(i)); }
  bool HasRaylet(int i) const { return GcsClusterFixture::HasRaylet(Address(i)); }
  // Bundles prepared (and committed) at raylet `i`, over all calls.
  int Prepared(int i) {
    if (!HasRaylet(i)) return 0;
    int n = 0;
    for (const auto& p : Raylet(i).prepares) n += p.bundles_size();
    return n;
  }
  int Committed(int i) {
    if (!HasRaylet(i)) return 0;
    int n = 0;
    for (const auto& c : Raylet(i).commits) n += c.bundles_size();
    return n;
  }
  int Cancelled(int i) { return HasRaylet(i) ? static_cast<int>(Raylet(i).bundle_cancels.size()) : 0; }
  int NodeIndexOf(const std::string& node_id) {
    for (int i = 0; i < static_cast<int>(node_ids_.size()); ++i) {
      if (node_ids_[i].Binary() == node_id) return i;
    }
    return -1;
  }

  GcsPlacementGroupScheduler scheduler_;
  std::unique_ptr<GcsPlacementGroupManager> manager_;
  std::vector<NodeID> node_ids_;
  std::vector<std::pair<PlacementGroupID, std::string>> removed_;
  JobID job_ = JobID::FromInt(3);
};

TEST_F(GcsPlacementGroupManagerTest, CreatesWithPrepareThenCommitOnEveryChosenNode) {
  Group group = MakeGroup({{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, rpc::STRICT_SPREAD, "spread");
  ASSERT_THAT(Create(group), IsOk());
  EXPECT_EQ(Get(group).state(), Group::CREATED);
  std::set<std::string> nodes;
  for (const rpc::Bundle& bundle : Get(group).bundles()) nodes.insert(bundle.node_id());
  EXPECT_EQ(nodes.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Prepared(i), 1) << i;
    EXPECT_EQ(Committed(i), 1) << i;
    EXPECT_EQ(Cancelled(i), 0) << i;
  }
  // Stored, and published PENDING then CREATED.
  auto row = ReadRow(loop_, store_, kPlacementGroupTable, group.placement_group_id());
  ASSERT_TRUE(row.has_value());
  Group stored;
  ASSERT_TRUE(stored.ParseFromString(*row));
  EXPECT_EQ(stored.state(), Group::CREATED);
  std::vector<Group::PlacementGroupState> states;
  for (const rpc::PubMessage& m : published_.TakeNew()) states.push_back(m.placement_group_message().state());
  EXPECT_THAT(states, ::testing::ElementsAre(Group::PENDING, Group::CREATED));
}

TEST_F(GcsPlacementGroupManagerTest, BadGroupsAreRefusedWithTheReason) {
  EXPECT_THAT(Create(MakeGroup({}, rpc::PACK)), StatusIs(absl::StatusCode::kInvalidArgument, "at least one bundle"));
  EXPECT_THAT(Create(MakeGroup({{{"CPU", 1}}, {}}, rpc::PACK)),
              StatusIs(absl::StatusCode::kInvalidArgument, "bundle 1 reserves no resources"));
  EXPECT_THAT(Create(MakeGroup({{{"CPU", -1}}}, rpc::PACK)),
              StatusIs(absl::StatusCode::kInvalidArgument, "bundle 0: resource 'CPU'"));
  Group bad_strategy = MakeGroup({{{"CPU", 1}}}, rpc::PACK);
  bad_strategy.set_strategy(static_cast<rpc::PlacementStrategy>(9));
  EXPECT_THAT(Create(bad_strategy), StatusIs(absl::StatusCode::kInvalidArgument, "strategy"));
  Group bad_id = MakeGroup({{{"CPU", 1}}}, rpc::PACK);
  bad_id.set_placement_group_id("short");
  EXPECT_THAT(Create(bad_id), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(manager_->NumGroups(), 0u);
}

TEST_F(GcsPlacementGroupManagerTest, NamesAreUniquePerNamespaceUntilRemoved) {
  Group first = MakeGroup({{{"CPU", 1}}}, rpc::PACK, "pg");
  ASSERT_THAT(Create(first), IsOk());
  EXPECT_THAT(Create(first), IsOk());  // a retried create of the same id
  Group second = MakeGroup({{{"CPU", 1}}}, rpc::PACK, "pg");
  EXPECT_THAT(Create(second), StatusIs(absl::StatusCode::kAlreadyExists, "'pg'"));
  Group other_ns = MakeGroup({{{"CPU", 1}}}, rpc::PACK, "pg");
  other_ns.set_ray_namespace("other");
  EXPECT_THAT(Create(other_ns), IsOk());

  rpc::GetNamedPlacementGroupRequest named;
  named.set_name("pg");
  named.set_ray_namespace("ns");
  rpc::GetNamedPlacementGroupReply reply;
  ASSERT_THAT(CallHandler(loop_, *manager_, &GcsPlacementGroupManager::HandleGetNamedPlacementGroup, named, &reply),
              IsOk());
  ASSERT_TRUE(reply.found());
  EXPECT_EQ(reply.placement_group().placement_group_id(), first.placement_group_id());

  ASSERT_THAT(Remove(first), IsOk());
  reply.Clear();
  ASSERT_THAT(CallHandler(loop_, *manager_, &GcsPlacementGroupManager::HandleGetNamedPlacementGroup, named, &reply),
              IsOk());
  EXPECT_FALSE(reply.found());
  EXPECT_THAT(Create(second), IsOk());  // the name is free again
}

TEST_F(GcsPlacementGroupManagerTest, ARefusedPrepareReturnsEveryBundleOfTheAttemptAndRetries) {
  Group group = MakeGroup({{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}, rpc::STRICT_SPREAD);
  Raylet(2).prepare_success = false;
  ASSERT_THAT(Create(group, [&] { return !Get(group).pending_reason().empty(); }), IsOk());
  EXPECT_NE(Get(group).state(), Group::CREATED);
  EXPECT_THAT(Get(group).pending_reason(), HasSubstr("has not the resources now"));
  // Nothing was committed anywhere, and every prepared bundle was handed back.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Committed(i), 0) << i;
    EXPECT_EQ(Cancelled(i), Prepared(i)) << i;
    EXPECT_GE(Prepared(i), 1) << i;
  }
  // The node has room again: the next attempt creates the group.
  Raylet(2).prepare_success = true;
  manager_->OnResourcesChanged();
  Drive();
  EXPECT_EQ(Get(group).state(), Group::CREATED);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Committed(i), 1) << i;
}

TEST_F(GcsPlacementGroupManagerTest, AFailedCommitReturnsTheBundlesToo) {
  Group group = MakeGroup({{{"CPU", 2}}, {{"CPU", 2}}}, rpc::SPREAD);
  for (int i = 0; i < 3; ++i) Raylet(i).commit_status = absl::UnavailableError("raylet stopped");
  ASSERT_THAT(Create(group, [&] { return !Get(group).pending_reason().empty(); }), IsOk());
  EXPECT_THAT(Get(group).pending_reason(), HasSubstr("failed to commit"));
  EXPECT_NE(Get(group).state(), Group::CREATED);
  int prepared = 0, cancelled = 0;
  for (int i = 0; i < 3; ++i) {
    prepared += Prepared(i);
    cancelled += Cancelled(i);
  }
  EXPECT_GE(prepared, 2);
  EXPECT_EQ(cancelled, prepared);
}

TEST_F(GcsPlacementGroupManagerTest, AGroupNoNodeCanHoldIsInfeasibleUntilANodeJoins) {
  Group group = MakeGroup({{{"CPU", 8}}}, rpc::PACK, "big");
  ASSERT_THAT(Create(group), IsOk());
  EXPECT_EQ(Get(group).state(), Group::PENDING);
  EXPECT_TRUE(Get(group).infeasible());
  EXPECT_THAT(Get(group).pending_reason(), HasSubstr("CPU: 8"));
  // Wait with a timeout answers not ready.
  rpc::WaitPlacementGroupUntilReadyReply wait_reply;
  ReplyRecorder waited;
  StartWait(group, 5, &wait_reply, waited);
  ASSERT_TRUE(DriveUntil([&] { return waited.calls() == 1; }));
  EXPECT_TRUE(waited.status().ok());
  EXPECT_FALSE(wait_reply.ready());
  // A node big enough joins: the group is created and a held Wait answered.
  rpc::WaitPlacementGroupUntilReadyReply held_reply;
  ReplyRecorder held;
  StartWait(group, 100000, &held_reply, held);
  RegisterNode(3, {{"CPU", 16}});
  manager_->OnResourcesChanged();
  Drive();
  EXPECT_EQ(Get(group).state(), Group::CREATED);
  EXPECT_FALSE(Get(group).infeasible());
  EXPECT_FALSE(Get(group).bundles(0).node_id().empty());
  ASSERT_EQ(held.calls(), 1);
  EXPECT_TRUE(held_reply.ready());
}

TEST_F(GcsPlacementGroupManagerTest, RemovalReturnsBundlesKillsActorsAndAnswersWaits) {
  Group group = MakeGroup({{{"CPU", 1}}, {{"CPU", 1}}}, rpc::STRICT_PACK, "packed");
  ASSERT_THAT(Create(group), IsOk());
  ASSERT_EQ(Get(group).state(), Group::CREATED);
  int node = NodeIndexOf(Get(group).bundles(0).node_id());
  ASSERT_GE(node, 0);
  EXPECT_EQ(Get(group).bundles(1).node_id(), Get(group).bundles(0).node_id());
  ASSERT_THAT(Remove(group), IsOk());
  EXPECT_EQ(Get(group).state(), Group::REMOVED);
  EXPECT_EQ(Cancelled(node), 2);
  ASSERT_EQ(removed_.size(), 1u);
  EXPECT_THAT(removed_[0].second, HasSubstr("removed by ray::RemovePlacementGroup"));
  // A second removal is a no-op; a Wait on it is NOT_FOUND; an id never seen is NOT_FOUND.
  EXPECT_THAT(Remove(group), IsOk());
  EXPECT_EQ(Cancelled(node), 2);
  rpc::WaitPlacementGroupUntilReadyRequest wait;
  wait.set_placement_group_id(group.placement_group_id());
  wait.set_timeout_ms(1000);
  rpc::WaitPlacementGroupUntilReadyReply wait_reply;
  EXPECT_THAT(CallHandler(loop_, *manager_, &GcsPlacementGroupManager::HandleWaitPlacementGroupUntilReady, wait,
                          &wait_reply),
              StatusIs(absl::StatusCode::kNotFound, "was removed"));
  EXPECT_THAT(Remove(MakeGroup({{{"CPU", 1}}}, rpc::PACK)), StatusIs(absl::StatusCode::kNotFound));
  // Removed groups are still listed.
  rpc::GetAllPlacementGroupReply all;
  ASSERT_THAT(CallHandler(loop_, *manager_, &GcsPlacementGroupManager::HandleGetAllPlacementGroup,
                          rpc::GetAllPlacementGroupRequest(), &all),
              IsOk());
  ASSERT_EQ(all.placement_groups_size(), 1);
  EXPECT_EQ(all.placement_groups(0).state(), Group::REMOVED);
}

TEST_F(GcsPlacementGroupManagerTest, RemovingAGroupBeingWaitedForAnswersTheWaitNotFound) {
  Group group = MakeGroup({{{"CPU", 100}}}, rpc::PACK);
  ASSERT_THAT(Create(group), IsOk());
  rpc::WaitPlacementGroupUntilReadyReply reply;
  ReplyRecorder held;
  StartWait(group, 100000, &reply, held);
  ASSERT_THAT(Remove(group), IsOk());
  ASSERT_EQ(held.calls(), 1);
  EXPECT_EQ(held.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(GcsPlacementGroupManagerTest, ANodeDeathPlacesItsBundlesAgainKeepingTheOthers) {
  Group group = MakeGroup({{{"CPU", 1}}, {{"CPU", 1}}}, rpc::STRICT_SPREAD);
  ASSERT_THAT(Create(group), IsOk());
  ASSERT_EQ(Get(group).state(), Group::CREATED);
  std::string kept = Get(group).bundles(1).node_id();
  int lost = NodeIndexOf(Get(group).bundles(0).node_id());
  nodes_.MarkNodeDead(node_ids_[lost], "test");
  manager_->OnNodeDead(node_ids_[lost]);
  // RESCHEDULING is published, then CREATED again with bundle 0 on the third node.
  Drive();
  EXPECT_EQ(Get(group).state(), Group::CREATED);
  EXPECT_EQ(Get(group).bundles(1).node_id(), kept);
  EXPECT_NE(Get(group).bundles(0).node_id(), kept);
  EXPECT_NE(Get(group).bundles(0).node_id(), node_ids_[lost].Binary());
  std::vector<Group::PlacementGroupState> states;
  for (const rpc::PubMessage& m : published_.TakeNew()) states.push_back(m.placement_group_message().state());
  EXPECT_THAT(states, ::testing::ElementsAre(Group::PENDING, Group::CREATED, Group::RESCHEDULING, Group::CREATED));
}

TEST_F(GcsPlacementGroupManagerTest, TheEndOfTheCreatingJobRemovesItsGroups) {
  Group mine = MakeGroup({{{"CPU", 1}}}, rpc::PACK);
  Group other = MakeGroup({{{"CPU", 1}}}, rpc::PACK);
  other.set_creator_job_id(JobID::FromInt(99).Binary());
  ASSERT_THAT(Create(mine), IsOk());
  ASSERT_THAT(Create(other), IsOk());
  manager_->OnJobFinished(job_);
  Drive();
  EXPECT_EQ(Get(mine).state(), Group::REMOVED);
  EXPECT_EQ(Get(other).state(), Group::CREATED);
}

TEST_F(GcsPlacementGroupManagerTest, ARestartKeepsGroupsAndReleasesUnknownReservations) {
  Group created = MakeGroup({{{"CPU", 1}}}, rpc::PACK, "kept");
  Group waiting = MakeGroup({{{"CPU", 50}}}, rpc::PACK, "waiting");
  ASSERT_THAT(Create(created), IsOk());
  ASSERT_THAT(Create(waiting), IsOk());
  std::string node = Get(created).bundles(0).node_id();
  // A new manager over the same store, as after a GCS restart.
  manager_ = MakeManager();
  manager_->Initialize(ReadTable(loop_, store_, kPlacementGroupTable));
  manager_->Start();
  Drive();
  EXPECT_EQ(Get(created).state(), Group::CREATED);
  EXPECT_EQ(Get(created).bundles(0).node_id(), node);
  EXPECT_EQ(Get(waiting).state(), Group::PENDING);
  EXPECT_EQ(manager_->NumPending(), 1u);
  // Every node was told which bundles it keeps: only the created group's.
  int node_index = NodeIndexOf(node);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Raylet(i).releases.size(), 2u) << i;  // at each Start
    const auto& release = Raylet(i).releases.back();
    EXPECT_EQ(release.bundles_in_use_size(), i == node_index ? 1 : 0) << i;
  }
  // The name index came back.
  EXPECT_THAT(Create(MakeGroup({{{"CPU", 1}}}, rpc::PACK, "kept")), StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST_F(GcsPlacementGroupManagerTest, GroupsOfAJobThatEndedAreRemovedAfterARestartAndItCreatesNoMore) {
  Group group = MakeGroup({{{"CPU", 1}}}, rpc::PACK);
  ASSERT_THAT(Create(group), IsOk());
  ASSERT_EQ(Get(group).state(), Group::CREATED);
  // The GCS restarts; the job table (loaded first) says the job ended, but the
  // group's removal was never stored.
  manager_ = MakeManager();
  manager_->OnJobFinished(job_);
  manager_->Initialize(ReadTable(loop_, store_, kPlacementGroupTable));
  manager_->Start();
  Drive();
  EXPECT_EQ(Get(group).state(), Group::REMOVED);
  EXPECT_THAT(Create(MakeGroup({{{"CPU", 1}}}, rpc::PACK)),
              StatusIs(absl::StatusCode::kFailedPrecondition, "has ended"));
}

}  // namespace
}  // namespace manta::gcs::testing
