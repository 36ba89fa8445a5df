// Tests of the LeaseManager's placement group bundles (src/raylet/lease_manager.h):
// prepare and commit, requests naming a bundle, returning and releasing bundles, and
// the removal of a group, over the fixture of lease_manager_fixture.h (a real
// WorkerPool with a fake launcher; no sockets, no sleeps).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "src/raylet/lease_manager.h"
#include "src/scheduling/bundle_resources.h"
#include "tests/raylet/lease_manager_fixture.h"

namespace manta::raylet {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

rpc::Bundle MakeBundle(const PlacementGroupID& group, int index, const scheduling::ResourceMap& resources) {
  rpc::Bundle bundle;
  bundle.set_placement_group_id(group.Binary());
  bundle.set_bundle_index(index);
  for (const auto& [k, v] : resources) (*bundle.mutable_unit_resources())[k] = v;
  return bundle;
}

class LeaseManagerBundleTest : public LeaseManagerTest {
 protected:
  void SetUp() override { Make({{"CPU", 4}, {"GPU", 1}}); }

  // Prepares and commits bundles of `group_`, as the GCS does.
  void Reserve(const std::vector<rpc::Bundle>& bundles) {
    ASSERT_TRUE(lease_manager_->PrepareBundles(bundles));
    ASSERT_TRUE(lease_manager_->CommitBundles(bundles).ok());
    loop_.RunUntilIdle();
  }
  rpc::RequestWorkerLeaseRequest InBundle(const scheduling::ResourceMap& resources, int index) {
    rpc::RequestWorkerLeaseRequest request = MakeRequest(resources);
    request.mutable_placement()->set_placement_group_id(group_.Binary());
    request.mutable_placement()->set_bundle_index(index);
    return request;
  }
  double Available(const std::string& name) const {
    auto it = lease_manager_->available().find(name);
    return it == lease_manager_->available().end() ? 0 : it->second;
  }
  double Total(const std::string& name) const {
    auto it = lease_manager_->total().find(name);
    return it == lease_manager_->total().end() ? 0 : it->second;
  }
  std::string Name(const std::string& resource, int index) const {
    return scheduling::BundleResourceName(resource, group_, index);
  }

  PlacementGroupID group_ = PlacementGroupID::FromRandom();
};

TEST_F(LeaseManagerBundleTest, PrepareIsAllOrNothingAndCommitAddsBundleResources) {
  // 3 + 2 CPUs do not fit in 4: nothing is taken.
  EXPECT_FALSE(lease_manager_->PrepareBundles({MakeBundle(group_, 0, {{"CPU", 3}}),
                                               MakeBundle(group_, 1, {{"CPU", 2}})}));
  EXPECT_EQ(Cpu(), 4);
  std::vector<rpc::Bundle> bundles{MakeBundle(group_, 0, {{"CPU", 1.5}}),
                                   MakeBundle(group_, 1, {{"CPU", 1}, {"GPU", 1}})};
  ASSERT_TRUE(lease_manager_->PrepareBundles(bundles));
  EXPECT_EQ(Cpu(), 1.5);
  EXPECT_EQ(Available("GPU"), 0);
  // A repeated prepare takes nothing more.
  ASSERT_TRUE(lease_manager_->PrepareBundles(bundles));
  EXPECT_EQ(Cpu(), 1.5);
  ASSERT_TRUE(lease_manager_->CommitBundles(bundles).ok());
  ASSERT_TRUE(lease_manager_->CommitBundles(bundles).ok());  // repeated: no change
  EXPECT_EQ(Total(Name("CPU", 0)), 1.5);
  EXPECT_EQ(Total(Name("CPU", 1)), 1);
  EXPECT_EQ(Total(Name("CPU", -1)), 2.5);
  EXPECT_EQ(Total(Name("GPU", 1)), 1);
  EXPECT_EQ(Total(scheduling::BundleMarkerName(group_, -1)), 2000);
  EXPECT_EQ(Available(Name("CPU", -1)), 2.5);
  EXPECT_EQ(Total("CPU"), 4);  // the node's own total does not change
  EXPECT_EQ(lease_manager_->num_bundles(), 2u);
}

TEST_F(LeaseManagerBundleTest, CommitOfABundleNotPreparedFails) {
  absl::Status s = lease_manager_->CommitBundles({MakeBundle(group_, 0, {{"CPU", 1}})});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("was not prepared"));
}

TEST_F(LeaseManagerBundleTest, RequestsNamingABundleUseOnlyIt) {
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}}), MakeBundle(group_, 1, {{"CPU", 2}})});
  LeaseCallPtr in_zero = Send(InBundle({{"CPU", 1}}, 0));
  RegisterStarted();
  ASSERT_TRUE(in_zero->granted());
  EXPECT_EQ(Available(Name("CPU", 0)), 0);
  EXPECT_EQ(Available(Name("CPU", -1)), 2);
  // Bundle 0 is full: the next request for it waits, although the node has a CPU.
  LeaseCallPtr waiting = Send(InBundle({{"CPU", 1}}, 0));
  RegisterStarted();
  EXPECT_FALSE(waiting->done());
  EXPECT_EQ(Cpu(), 1);
  // Any bundle (-1) takes from the group's CPUs.
  LeaseCallPtr any = Send(InBundle({{"CPU", 2}}, -1));
  RegisterStarted();
  ASSERT_TRUE(any->granted());
  EXPECT_EQ(Available(Name("CPU", -1)), 0);
  // A task outside the group never uses a bundle.
  LeaseCallPtr plain = Lease({{"CPU", 1}});
  EXPECT_EQ(Cpu(), 0);
  Return(in_zero);
  EXPECT_TRUE(waiting->granted());
  // Bundle requests do not count as infeasible.
  EXPECT_THAT(lease_manager_->InfeasibleShapes(), IsEmpty());
}

TEST_F(LeaseManagerBundleTest, ARequestForABundleNotPlacedWaitsUntilItIsCommitted) {
  LeaseCallPtr call = Send(InBundle({{"CPU", 1}}, 0));
  EXPECT_FALSE(call->done());
  EXPECT_EQ(lease_manager_->num_infeasible(), 1u);
  EXPECT_THAT(lease_manager_->InfeasibleShapes(), IsEmpty());
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}})});
  RegisterStarted();
  EXPECT_TRUE(call->granted());
}

TEST_F(LeaseManagerBundleTest, ReturningABundleKillsItsWorkersAndGivesEverythingBack) {
  const scheduling::ResourceMap before = lease_manager_->available();
  const scheduling::ResourceMap total_before = lease_manager_->total();
  Reserve({MakeBundle(group_, 0, {{"CPU", 0.3}}), MakeBundle(group_, 1, {{"CPU", 0.7}})});
  LeaseCallPtr in_zero = Send(InBundle({{"CPU", 0.1}}, 0));
  RegisterStarted();
  ASSERT_TRUE(in_zero->granted());
  LeaseCallPtr in_one = Send(InBundle({{"CPU", 0.7}}, 1));
  RegisterStarted();
  ASSERT_TRUE(in_one->granted());
  LeaseCallPtr plain = Lease({{"CPU", 1}});
  lease_manager_->ReturnBundle(group_, 0);
  loop_.RunUntilIdle();
  EXPECT_THAT(launcher_.SignalsTo(PidOf(in_zero)), ::testing::Contains(SIGKILL));
  EXPECT_THAT(launcher_.SignalsTo(PidOf(in_one)), IsEmpty());
  EXPECT_EQ(Total(Name("CPU", 0)), 0);
  EXPECT_EQ(Total(Name("CPU", -1)), 0.7);
  lease_manager_->ReturnBundle(group_, 1);
  lease_manager_->ReturnBundle(group_, 1);  // unknown now: ignored
  loop_.RunUntilIdle();
  Return(plain);
  // Exact: no bundle resource left behind, every CPU back.
  EXPECT_EQ(lease_manager_->available(), before);
  EXPECT_EQ(lease_manager_->total(), total_before);
  EXPECT_EQ(lease_manager_->num_bundles(), 0u);
}

TEST_F(LeaseManagerBundleTest, ARemovedGroupsRequestsAreRejectedForGood) {
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}})});
  LeaseCallPtr running = Send(InBundle({{"CPU", 1}}, 0));
  RegisterStarted();
  ASSERT_TRUE(running->granted());
  LeaseCallPtr queued = Send(InBundle({{"CPU", 1}}, 0));
  lease_manager_->OnPlacementGroupRemoved(group_);
  loop_.RunUntilIdle();
  ASSERT_TRUE(queued->done());
  EXPECT_TRUE(queued->reply.rejected());
  EXPECT_TRUE(queued->reply.placement_group_removed());
  EXPECT_THAT(queued->reply.failure_message(), HasSubstr(group_.Hex()));
  EXPECT_THAT(launcher_.SignalsTo(PidOf(running)), ::testing::Contains(SIGKILL));
  LeaseCallPtr later = Send(InBundle({{"CPU", 1}}, 0));
  ASSERT_TRUE(later->done());
  EXPECT_TRUE(later->reply.placement_group_removed());
  lease_manager_->ReturnBundle(group_, 0);
  loop_.RunUntilIdle();
  EXPECT_EQ(Cpu(), 4);
}

TEST_F(LeaseManagerBundleTest, ReleaseUnusedBundlesKeepsOnlyThoseInUse) {
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}}), MakeBundle(group_, 1, {{"CPU", 1}})});
  ASSERT_TRUE(lease_manager_->PrepareBundles({MakeBundle(group_, 2, {{"CPU", 1}})}));  // never committed
  lease_manager_->ReleaseUnusedBundles({MakeBundle(group_, 1, {{"CPU", 1}})});
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_bundles(), 1u);
  EXPECT_EQ(Cpu(), 3);
  EXPECT_EQ(Total(Name("CPU", 1)), 1);
  EXPECT_EQ(Total(Name("CPU", 0)), 0);
}

TEST_F(LeaseManagerBundleTest, ABlockedWorkerGivesItsBundleCpuBack) {
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}})});
  LeaseCallPtr parent = Send(InBundle({{"CPU", 1}}, 0));
  RegisterStarted();
  ASSERT_TRUE(parent->granted());
  Block(parent, true);
  // Its child in the same bundle can run while it waits.
  LeaseCallPtr child = Send(InBundle({{"CPU", 1}}, 0));
  RegisterStarted();
  EXPECT_TRUE(child->granted());
  Return(child);
  Block(parent, false);
  Return(parent);
  EXPECT_EQ(Available(Name("CPU", 0)), 1);
}

TEST_F(LeaseManagerBundleTest, AnActorWithoutResourcesNeedsOnlyTheBundle) {
  Reserve({MakeBundle(group_, 0, {{"GPU", 1}})});
  rpc::RequestWorkerLeaseRequest request = InBundle({{"CPU", 1}}, 0);
  request.mutable_actor()->set_actor_id(std::string(16, 'a'));
  request.mutable_actor()->set_placement_only(true);
  LeaseCallPtr actor = Send(request);
  RegisterStarted();
  ASSERT_TRUE(actor->granted());
  EXPECT_EQ(Available(Name("GPU", 0)), 1);  // holds nothing while it lives
}

TEST_F(LeaseManagerBundleTest, MalformedPlacementIsRejected) {
  rpc::RequestWorkerLeaseRequest request = InBundle({{"CPU", 1}}, -2);
  LeaseCallPtr call = Send(request);
  ASSERT_TRUE(call->done());
  EXPECT_TRUE(call->reply.rejected());
  EXPECT_THAT(call->reply.failure_message(), HasSubstr("bundle index -2"));
  request.mutable_placement()->set_placement_group_id("short");
  request.mutable_placement()->set_bundle_index(0);
  call = Send(request);
  EXPECT_TRUE(call->reply.rejected());
}

TEST_F(LeaseManagerBundleTest, ALateCancelOfAnAbandonedAttemptLeavesTheNewerAttemptsBundle) {
  std::vector<rpc::Bundle> bundles{MakeBundle(group_, 0, {{"CPU", 1}})};
  ASSERT_TRUE(lease_manager_->PrepareBundles(bundles, "old"));
  // The GCS gave up on "old" and placed the group again here with "new".
  ASSERT_TRUE(lease_manager_->PrepareBundles(bundles, "new"));
  ASSERT_TRUE(lease_manager_->CommitBundles(bundles).ok());
  lease_manager_->ReturnBundle(group_, 0, "old");  // the abandoned attempt's cancel, late
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_bundles(), 1u);
  EXPECT_EQ(Total(Name("CPU", 0)), 1);
  EXPECT_EQ(Cpu(), 3);
  lease_manager_->ReturnBundle(group_, 0, "new");
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_bundles(), 0u);
  EXPECT_EQ(Cpu(), 4);
}

TEST_F(LeaseManagerBundleTest, ReturningABundleKillsItsActorsAndTakesBackRequestsWaitingForAWorker) {
  const scheduling::ResourceMap before = lease_manager_->available();
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}})});
  // An actor that holds nothing while it lives, in bundle 0.
  rpc::RequestWorkerLeaseRequest actor_request = InBundle({}, 0);
  actor_request.mutable_actor()->set_actor_id(std::string(16, 'a'));
  actor_request.mutable_actor()->set_placement_only(true);
  LeaseCallPtr actor = Send(actor_request);
  RegisterStarted();
  ASSERT_TRUE(actor->granted());
  // A task whose worker is still starting when the bundle goes.
  LeaseCallPtr starting = Send(InBundle({{"CPU", 1}}, 0));
  ASSERT_FALSE(starting->done());
  lease_manager_->ReturnBundle(group_, 0);
  loop_.RunUntilIdle();
  EXPECT_THAT(launcher_.SignalsTo(PidOf(actor)), ::testing::Contains(SIGKILL));
  EXPECT_FALSE(starting->done());  // waits again: its bundle is not here any more
  RegisterStarted();               // the worker that was starting goes back to the pool
  EXPECT_FALSE(starting->done());
  EXPECT_EQ(lease_manager_->available(), before);
  EXPECT_EQ(lease_manager_->num_leases(), 0u);
}

TEST_F(LeaseManagerBundleTest, AGroupWhoseRequestsWaitIsAskedAboutOnceAndAgainOnDemand) {
  std::vector<PlacementGroupID> asked;
  lease_manager_->SetWaitingGroupListener([&](const PlacementGroupID& id) { asked.push_back(id); });
  LeaseCallPtr first = Send(InBundle({{"CPU", 1}}, 0));
  LeaseCallPtr second = Send(InBundle({{"CPU", 1}}, -1));
  EXPECT_EQ(asked, std::vector<PlacementGroupID>{group_});
  lease_manager_->AskAboutWaitingGroups();  // after a GCS restart
  EXPECT_EQ(asked, (std::vector<PlacementGroupID>{group_, group_}));
  // The answer: it does not exist. Both fail for good.
  lease_manager_->OnPlacementGroupRemoved(group_);
  loop_.RunUntilIdle();
  for (const LeaseCallPtr& call : {first, second}) {
    ASSERT_TRUE(call->done());
    EXPECT_TRUE(call->reply.placement_group_removed());
    EXPECT_THAT(call->reply.failure_message(), HasSubstr("never created"));
  }
}

TEST_F(LeaseManagerBundleTest, RequestsOfAWorkerKilledWithItsBundleAreDroppedNotPlacedAgain) {
  Reserve({MakeBundle(group_, 0, {{"CPU", 1}})});
  LeaseCallPtr parent = Send(InBundle({{"CPU", 1}}, 0));
  RegisterStarted();
  ASSERT_TRUE(parent->granted());
  // The parent task submitted a child into the same (full) bundle.
  rpc::RequestWorkerLeaseRequest child_request = InBundle({{"CPU", 1}}, 0);
  child_request.mutable_owner_address()->set_worker_id(parent->reply.worker_address().worker_id());
  LeaseCallPtr child = Send(child_request);
  ASSERT_FALSE(child->done());
  lease_manager_->ReturnBundle(group_, 0);
  loop_.RunUntilIdle();
  ASSERT_TRUE(child->done());
  EXPECT_TRUE(child->reply.canceled());  // its owner is gone
  EXPECT_EQ(lease_manager_->num_queued() + lease_manager_->num_infeasible(), 0u);
  EXPECT_EQ(Cpu(), 4);
}

}  // namespace
}  // namespace manta::raylet
