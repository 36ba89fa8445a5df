// GcsActorManager + GcsActorScheduler over an in-memory store, a real publisher and
// node manager, and fake raylets and task channels: the state machine, leases and
// creation pushes, restarts, kills, deaths of owners, jobs and nodes, names and
// namespaces, and a GCS restart that reloads the table.
#include "src/gcs/gcs_actor_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/task_channel/fake_task_channel.h"
#include "src/gcs/in_memory_store_client.h"
#include "src/raylet/fake_raylet_client.h"
#include "src/common/task_resources.h"
#include "tests/gcs/gcs_cluster_fixture.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::HasSubstr;
using Actor = rpc::ActorTableData;

constexpr char kOwnerRaylet[] = "10.0.0.1:7000";
constexpr char kOtherRaylet[] = "10.0.0.2:7001";

class GcsActorManagerTest : public GcsClusterFixture {
 protected:
  GcsActorManagerTest()
      : GcsClusterFixture({rpc::GCS_ACTOR_CHANNEL}),
        channels_([this](const std::string& key) {
          std::string address = core::TaskChannelAddress(key);
          auto channel = std::make_shared<core::FakeTaskChannel>(address, loop_);
          channel_by_address_[address] = channel.get();
          return channel;
        }),
        scheduler_(loop_, nodes_, raylets_, channels_, /*retry_delay_ms=*/1) {
    owner_node_ = RegisterNode("10.0.0.1", 7000);
    other_node_ = RegisterNode("10.0.0.2", 7001);
    manager_ = MakeManager();
  }

  std::unique_ptr<GcsActorManager> MakeManager() {
    return std::make_unique<GcsActorManager>(store_, publisher_, scheduler_, clock_.AsFunction());
  }

  rpc::TaskSpec CreationSpec(const std::string& name = "", const std::string& ns = "ns", int max_restarts = 0,
                             bool detached = false) {
    ActorID id = ActorID::Of(job_, TaskID::ForDriver(job_), next_actor_++);
    rpc::TaskSpec spec;
    spec.set_type(rpc::ACTOR_CREATION_TASK);
    spec.set_task_id(TaskID::ForActorTask(id, TaskID::ForDriver(job_), 0).Binary());
    spec.set_job_id(job_.Binary());
    spec.set_function_name("CreateCounter");
    spec.set_num_returns(1);
    rpc::Address* owner = spec.mutable_caller_address();
    owner->set_node_id(owner_node_.Binary());
    owner->set_ip_address("10.0.0.1");
    owner->set_port(5000);
    owner->set_worker_id(owner_worker_.Binary());
    rpc::ActorCreationSpec* creation = spec.mutable_actor_creation();
    creation->set_actor_id(id.Binary());
    creation->set_max_restarts(max_restarts);
    creation->set_max_concurrency(1);
    creation->set_name(name);
    creation->set_ray_namespace(ns);
    creation->set_detached(detached);
    creation->set_class_name("Counter");
    return spec;
  }

  absl::Status Register(const rpc::TaskSpec& spec) {
    rpc::RegisterActorRequest request;
    *request.mutable_creation_spec() = spec;
    rpc::RegisterActorReply reply;
    return CallHandler(loop_, *manager_, &GcsActorManager::HandleRegisterActor, request, &reply);
  }
  absl::Status Create(const rpc::TaskSpec& spec) {
    rpc::CreateActorRequest request;
    *request.mutable_creation_spec() = spec;
    rpc::CreateActorReply reply;
    return CallHandler(loop_, *manager_, &GcsActorManager::HandleCreateActor, request, &reply);
  }
  absl::Status Kill(const ActorID& id, bool no_restart) {
    rpc::KillActorRequest request;
    request.set_actor_id(id.Binary());
    request.set_no_restart(no_restart);
    rpc::KillActorReply reply;
    return CallHandler(loop_, *manager_, &GcsActorManager::HandleKillActor, request, &reply);
  }
  static ActorID IdOf(const rpc::TaskSpec& spec) { return ActorID::FromBinary(spec.actor_creation().actor_id()); }

  core::FakeTaskChannel& Channel(int port) { return *channel_by_address_.at("127.0.0.1:" + std::to_string(port)); }

  // Grants the oldest lease request at `raylet` with a worker on `port` and lets the
  // factory succeed. Returns the worker's id.
  WorkerID GrantAndCreate(const std::string& raylet, int port) {
    WorkerID worker = WorkerID::FromRandom();
    EXPECT_TRUE(DriveUntil([&] { return !Raylet(raylet).leases.empty(); }));
    Raylet(raylet).Grant(port, worker);
    loop_.RunUntilIdle();
    EXPECT_EQ(Channel(port).pushes.size(), 1u);
    Channel(port).ReplyOk();
    loop_.RunUntilIdle();
    return worker;
  }

  Actor::ActorState State(const ActorID& id) { return manager_->GetActor(id)->state(); }

  // The states published for `id`, in order (drains the subscriber).
  std::vector<Actor::ActorState> PublishedStates(const ActorID& id) {
    std::vector<Actor::ActorState> states;
    for (const rpc::PubMessage& m : published_.TakeNew()) {
      if (m.key_id() == id.Binary()) states.push_back(m.actor_message().state());
    }
    return states;
  }

  std::map<std::string, core::FakeTaskChannel*> channel_by_address_;
  core::TaskChannelPool channels_;
  GcsActorScheduler scheduler_;
  std::unique_ptr<GcsActorManager> manager_;
  JobID job_ = JobID::FromInt(7);
  WorkerID owner_worker_ = WorkerID::FromRandom();
  NodeID owner_node_;
  NodeID other_node_;
  uint64_t next_actor_ = 0;
};

TEST_F(GcsActorManagerTest, CreationLeasesAWorkerOnTheOwnersNodeAndRunsTheFactory) {
  rpc::TaskSpec spec = CreationSpec();
  ASSERT_THAT(Register(spec), IsOk());
  EXPECT_EQ(State(IdOf(spec)), Actor::DEPENDENCIES_UNREADY);
  ASSERT_THAT(Create(spec), IsOk());
  EXPECT_EQ(State(IdOf(spec)), Actor::PENDING_CREATION);

  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  const rpc::RequestWorkerLeaseRequest& lease = Raylet(kOwnerRaylet).leases.front().request;
  // No resources given: none asked for, to place it or while it lives (Ray's C++ API).
  EXPECT_EQ(lease.required_resources().size(), 1);
  EXPECT_EQ(lease.required_resources().at("CPU"), 0);
  EXPECT_FALSE(lease.actor().placement_only());
  EXPECT_EQ(lease.actor().actor_id(), IdOf(spec).Binary());
  EXPECT_EQ(lease.owner_address().worker_id(), owner_worker_.Binary());

  WorkerID worker = WorkerID::FromRandom();
  Raylet(kOwnerRaylet).Grant(3000, worker);
  loop_.RunUntilIdle();
  ASSERT_EQ(Channel(3000).pushes.size(), 1u);
  const rpc::PushTaskRequest& push = Channel(3000).pushes.front().request;
  EXPECT_EQ(push.intended_worker_id(), worker.Binary());
  ASSERT_EQ(push.tasks_size(), 1);
  EXPECT_EQ(push.tasks(0).type(), rpc::ACTOR_CREATION_TASK);
  EXPECT_EQ(push.tasks(0).actor_creation().num_restarts(), 0);
  EXPECT_EQ(State(IdOf(spec)), Actor::PENDING_CREATION);

  Channel(3000).ReplyOk();
  loop_.RunUntilIdle();
  const Actor* actor = manager_->GetActor(IdOf(spec));
  EXPECT_EQ(actor->state(), Actor::ALIVE);
  EXPECT_EQ(actor->address().worker_id(), worker.Binary());
  EXPECT_EQ(actor->address().task_port(), 3000);
  EXPECT_EQ(PublishedStates(IdOf(spec)),
            (std::vector<Actor::ActorState>{Actor::DEPENDENCIES_UNREADY, Actor::PENDING_CREATION, Actor::ALIVE}));
  // Written before it was published.
  rpc::ActorTableData stored;
  ASSERT_TRUE(stored.ParseFromString(*ReadRow(loop_, store_, kActorTable, IdOf(spec).Binary())));
  EXPECT_EQ(stored.state(), Actor::ALIVE);
  EXPECT_EQ(stored.creation_spec().function_name(), "CreateCounter");
}

// An actor with no resources of its own in a placement group's bundle is placed with
// one of the bundle's CPUs, which locates the bundle, and holds none while it lives.
TEST_F(GcsActorManagerTest, AnActorWithoutResourcesInABundleIsPlacedWithOneOfItsCpus) {
  rpc::TaskSpec spec = CreationSpec();
  spec.mutable_placement()->set_placement_group_id(PlacementGroupID::FromRandom().Binary());
  spec.mutable_placement()->set_bundle_index(0);
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  const rpc::RequestWorkerLeaseRequest& lease = Raylet(kOwnerRaylet).leases.front().request;
  EXPECT_EQ(lease.required_resources().at("CPU"), 1);
  EXPECT_TRUE(lease.actor().placement_only());
}

TEST_F(GcsActorManagerTest, ExplicitResourcesAreHeldAndSpillbackIsFollowed) {
  rpc::TaskSpec spec = CreationSpec();
  SetRequiredResource(&spec, "special", 1);
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  EXPECT_FALSE(Raylet(kOwnerRaylet).leases.front().request.actor().placement_only());
  Raylet(kOwnerRaylet).SpillTo("10.0.0.2", 7001, other_node_);
  ASSERT_TRUE(DriveUntil([&] { return raylet_by_address_.count(kOtherRaylet) && !Raylet(kOtherRaylet).leases.empty(); }));
  EXPECT_TRUE(Raylet(kOtherRaylet).leases.front().request.grant_or_reject());
  GrantAndCreate(kOtherRaylet, 3001);
  EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
  EXPECT_EQ(manager_->GetActor(IdOf(spec))->raylet_address(), kOtherRaylet);
}

// Spilled back to a node where it waited (another actor holds its CPUs), then sent
// back because a node with room joined: asked again at the owner's node at once, and
// spilled on from there.
TEST_F(GcsActorManagerTest, ALeaseSentBackToBePlacedAgainStartsAgainAtTheOwnersNode) {
  rpc::TaskSpec spec = CreationSpec();
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  Raylet(kOwnerRaylet).SpillTo("10.0.0.2", 7001, other_node_);
  ASSERT_TRUE(DriveUntil(
      [&] { return raylet_by_address_.count(kOtherRaylet) > 0 && !Raylet(kOtherRaylet).leases.empty(); }));
  Raylet(kOtherRaylet).PlaceAgain();
  loop_.RunUntilIdle();  // no retry delay: asked again before any timer fires
  ASSERT_EQ(Raylet(kOwnerRaylet).leases.size(), 1u);
  EXPECT_FALSE(Raylet(kOwnerRaylet).leases.front().request.grant_or_reject());
  GrantAndCreate(kOwnerRaylet, 3000);
  EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
}

TEST_F(GcsActorManagerTest, RejectedLeasesAndWorkersDyingDuringCreationAreRetried) {
  rpc::TaskSpec spec = CreationSpec();
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  Raylet(kOwnerRaylet).Reject("busy");
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  Raylet(kOwnerRaylet).Grant(3000);
  loop_.RunUntilIdle();
  Channel(3000).Fail();  // the worker died while the factory ran
  loop_.RunUntilIdle();
  EXPECT_EQ(State(IdOf(spec)), Actor::PENDING_CREATION);
  ASSERT_EQ(Raylet(kOwnerRaylet).returns.size(), 1u);
  EXPECT_TRUE(Raylet(kOwnerRaylet).returns[0].disconnect_worker());
  GrantAndCreate(kOwnerRaylet, 3001);
  EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
  EXPECT_EQ(manager_->GetActor(IdOf(spec))->num_restarts(), 0);  // never ran: not a restart
}

TEST_F(GcsActorManagerTest, AFactoryThatThrowsMakesTheActorDeadWithItsError) {
  rpc::TaskSpec spec = CreationSpec("counter");
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  Raylet(kOwnerRaylet).Grant(3000);
  loop_.RunUntilIdle();
  rpc::PushTaskReply reply;
  rpc::TaskResult* result = reply.add_results();
  result->set_task_id(spec.task_id());
  rpc::ReturnObject* ret = result->add_returns();
  ret->mutable_error()->set_type(rpc::TASK_EXECUTION_EXCEPTION);
  ret->mutable_error()->set_message("CreateCounter raised std::invalid_argument: creation error");
  reply.set_done(true);
  Channel(3000).Reply(reply);
  loop_.RunUntilIdle();
  const Actor* actor = manager_->GetActor(IdOf(spec));
  EXPECT_EQ(actor->state(), Actor::DEAD);
  EXPECT_EQ(actor->death_cause().type(), rpc::ACTOR_DIED);
  EXPECT_THAT(actor->death_cause().message(), HasSubstr("creation error"));
  EXPECT_THAT(actor->death_cause().message(), HasSubstr(IdOf(spec).Hex()));
  ASSERT_EQ(Raylet(kOwnerRaylet).returns.size(), 1u);  // its worker is killed
  EXPECT_TRUE(Raylet(kOwnerRaylet).returns[0].disconnect_worker());
  // Its name is free again.
  EXPECT_THAT(Register(CreationSpec("counter")), IsOk());
}

TEST_F(GcsActorManagerTest, TheLeaseCarriesTheRuntimeEnvAndAnEnvThatCannotBeAppliedMakesItDead) {
  rpc::TaskSpec spec = CreationSpec("", "ns", /*max_restarts=*/-1);
  spec.set_runtime_env(R"({"working_dir":"/missing"})");
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  EXPECT_EQ(Raylet(kOwnerRaylet).leases.front().request.runtime_env(), R"({"working_dir":"/missing"})");
  Raylet(kOwnerRaylet).Reject("runtime_env working_dir /missing cannot be used", /*runtime_env_setup_failed=*/true);
  loop_.RunUntilIdle();
  // Final, restarts or not: not retried, DEAD with a runtime env cause.
  const Actor* actor = manager_->GetActor(IdOf(spec));
  EXPECT_EQ(actor->state(), Actor::DEAD);
  EXPECT_EQ(actor->death_cause().type(), rpc::RUNTIME_ENV_SETUP_FAILED);
  EXPECT_THAT(actor->death_cause().message(), HasSubstr("/missing"));
  EXPECT_EQ(scheduler_.NumScheduling(), 0u);  // no retry pending
  EXPECT_TRUE(Raylet(kOwnerRaylet).leases.empty());
}

TEST_F(GcsActorManagerTest, AnEnvFailureWhileRestartingMakesItDeadToo) {
  rpc::TaskSpec spec = CreationSpec("", "ns", /*max_restarts=*/1);
  spec.set_runtime_env(R"({"env_vars":{"A":"1"}})");
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  WorkerID first = GrantAndCreate(kOwnerRaylet, 3000);
  manager_->OnWorkerDead(first, "killed by signal 9");
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  // The restart asks for a worker of the same env.
  EXPECT_EQ(Raylet(kOwnerRaylet).leases.front().request.runtime_env(), R"({"env_vars":{"A":"1"}})");
  Raylet(kOwnerRaylet).Reject("the env cannot be applied here", /*runtime_env_setup_failed=*/true);
  loop_.RunUntilIdle();
  EXPECT_EQ(State(IdOf(spec)), Actor::DEAD);
  EXPECT_EQ(manager_->GetActor(IdOf(spec))->death_cause().type(), rpc::RUNTIME_ENV_SETUP_FAILED);
}

TEST_F(GcsActorManagerTest, NamesAreUniquePerNamespaceAmongLiveActors) {
  ASSERT_THAT(Register(CreationSpec("kv", "a")), IsOk());
  EXPECT_THAT(Register(CreationSpec("kv", "a")), StatusIs(absl::StatusCode::kAlreadyExists, "'kv'"));
  EXPECT_THAT(Register(CreationSpec("kv", "b")), IsOk());

  rpc::GetNamedActorInfoRequest request;
  request.set_name("kv");
  request.set_ray_namespace("b");
  rpc::GetNamedActorInfoReply reply;
  ASSERT_THAT(CallHandler(loop_, *manager_, &GcsActorManager::HandleGetNamedActorInfo, request, &reply), IsOk());
  EXPECT_TRUE(reply.found());
  EXPECT_FALSE(reply.actor().has_creation_spec());  // readers get the public view
  request.set_ray_namespace("c");
  reply.Clear();
  ASSERT_THAT(CallHandler(loop_, *manager_, &GcsActorManager::HandleGetNamedActorInfo, request, &reply), IsOk());
  EXPECT_FALSE(reply.found());
  request.set_name("");
  EXPECT_THAT(CallHandler(loop_, *manager_, &GcsActorManager::HandleGetNamedActorInfo, request, &reply),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(GcsActorManagerTest, AWorkerDeathRestartsTheActorWhileRestartsRemain) {
  rpc::TaskSpec spec = CreationSpec("", "ns", /*max_restarts=*/1);
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  WorkerID first = GrantAndCreate(kOwnerRaylet, 3000);
  published_.TakeNew();

  manager_->OnWorkerDead(first, "killed by signal 9");
  EXPECT_EQ(State(IdOf(spec)), Actor::RESTARTING);
  EXPECT_EQ(manager_->GetActor(IdOf(spec))->num_restarts(), 1);
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  Raylet(kOwnerRaylet).Grant(3001);
  loop_.RunUntilIdle();
  // The factory runs again and can tell it is a restart.
  EXPECT_EQ(Channel(3001).pushes.front().request.tasks(0).actor_creation().num_restarts(), 1);
  Channel(3001).ReplyOk();
  loop_.RunUntilIdle();
  EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
  EXPECT_EQ(PublishedStates(IdOf(spec)), (std::vector<Actor::ActorState>{Actor::RESTARTING, Actor::ALIVE}));

  // No restarts left: DEAD, and the cause says why.
  WorkerID second = WorkerID::FromBinary(manager_->GetActor(IdOf(spec))->address().worker_id());
  manager_->OnWorkerDead(first, "a late report of the first worker");  // ignored
  EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
  manager_->OnWorkerDead(second, "killed by signal 9");
  EXPECT_EQ(State(IdOf(spec)), Actor::DEAD);
  EXPECT_THAT(manager_->GetActor(IdOf(spec))->death_cause().message(), HasSubstr("no restarts left"));
}

TEST_F(GcsActorManagerTest, UnlimitedRestartsAndNodeDeath) {
  rpc::TaskSpec spec = CreationSpec("", "ns", /*max_restarts=*/-1);
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  GrantAndCreate(kOwnerRaylet, 3000);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(manager_->GetActor(IdOf(spec))->node_id(), Raylet(kOwnerRaylet).node_id.Binary());
    manager_->OnNodeDead(NodeID::FromRandom(), "another node");  // not its node
    EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
    manager_->OnNodeDead(Raylet(kOwnerRaylet).node_id, "health checks failed");
    EXPECT_EQ(State(IdOf(spec)), Actor::RESTARTING);
    GrantAndCreate(kOwnerRaylet, 3000 + i);
    EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
    EXPECT_EQ(manager_->GetActor(IdOf(spec))->num_restarts(), i);
  }
}

TEST_F(GcsActorManagerTest, KillWithoutRestartMakesItDeadAndKillsItsWorker) {
  rpc::TaskSpec spec = CreationSpec("svc", "ns", /*max_restarts=*/5);
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  GrantAndCreate(kOwnerRaylet, 3000);
  ASSERT_THAT(Kill(IdOf(spec), /*no_restart=*/true), IsOk());
  EXPECT_EQ(State(IdOf(spec)), Actor::DEAD);
  EXPECT_THAT(manager_->GetActor(IdOf(spec))->death_cause().message(), HasSubstr("Kill"));
  ASSERT_EQ(Raylet(kOwnerRaylet).returns.size(), 1u);
  EXPECT_TRUE(Raylet(kOwnerRaylet).returns[0].disconnect_worker());
  EXPECT_THAT(Kill(IdOf(spec), true), IsOk());  // again: no effect
  EXPECT_THAT(Kill(ActorID::FromRandom(), true), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Register(CreationSpec("svc", "ns")), IsOk());  // the name is free
}

TEST_F(GcsActorManagerTest, KillAllowingRestartRestartsIt) {
  rpc::TaskSpec spec = CreationSpec("", "ns", /*max_restarts=*/1);
  ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(spec), IsOk());
  GrantAndCreate(kOwnerRaylet, 3000);
  ASSERT_THAT(Kill(IdOf(spec), /*no_restart=*/false), IsOk());
  EXPECT_EQ(State(IdOf(spec)), Actor::RESTARTING);
  ASSERT_EQ(Raylet(kOwnerRaylet).returns.size(), 1u);
  GrantAndCreate(kOwnerRaylet, 3001);
  EXPECT_EQ(State(IdOf(spec)), Actor::ALIVE);
  ASSERT_THAT(Kill(IdOf(spec), /*no_restart=*/false), IsOk());  // none left now
  EXPECT_EQ(State(IdOf(spec)), Actor::DEAD);
}

TEST_F(GcsActorManagerTest, NonDetachedActorsDieWithTheirOwnerAndJobDetachedOnesDoNot) {
  rpc::TaskSpec plain = CreationSpec("", "ns", /*max_restarts=*/3);
  rpc::TaskSpec detached = CreationSpec("daemon", "ns", 3, /*detached=*/true);
  for (const auto& spec : {plain, detached}) {
    ASSERT_THAT(Register(spec), IsOk());
    ASSERT_THAT(Create(spec), IsOk());
  }
  GrantAndCreate(kOwnerRaylet, 3000);
  GrantAndCreate(kOwnerRaylet, 3001);
  // A detached actor's lease belongs to no process.
  manager_->OnWorkerDead(owner_worker_, "the driver exited");
  EXPECT_EQ(State(IdOf(plain)), Actor::DEAD);
  EXPECT_THAT(manager_->GetActor(IdOf(plain))->death_cause().message(), HasSubstr("owner"));
  EXPECT_EQ(State(IdOf(detached)), Actor::ALIVE);
  manager_->OnJobFinished(job_);
  EXPECT_EQ(State(IdOf(detached)), Actor::ALIVE);
  // A new non-detached actor of the finished job is refused.
  EXPECT_THAT(Register(CreationSpec()), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(GcsActorManagerTest, JobEndKillsItsActorsEvenMidCreation) {
  rpc::TaskSpec alive = CreationSpec();
  rpc::TaskSpec pending = CreationSpec();
  for (const auto& spec : {alive, pending}) {
    ASSERT_THAT(Register(spec), IsOk());
    ASSERT_THAT(Create(spec), IsOk());
  }
  GrantAndCreate(kOwnerRaylet, 3000);
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  manager_->OnJobFinished(job_);
  EXPECT_EQ(State(IdOf(alive)), Actor::DEAD);
  EXPECT_EQ(State(IdOf(pending)), Actor::DEAD);
  EXPECT_EQ(Raylet(kOwnerRaylet).cancels.size(), 1u);  // its lease request is withdrawn
  EXPECT_EQ(scheduler_.NumScheduling(), 0u);
}

TEST_F(GcsActorManagerTest, OutOfScopeKillsOnlyUnnamedNonDetachedActors) {
  rpc::TaskSpec unnamed = CreationSpec();
  rpc::TaskSpec named = CreationSpec("kept");
  for (const auto& spec : {unnamed, named}) {
    ASSERT_THAT(Register(spec), IsOk());
    ASSERT_THAT(Create(spec), IsOk());
    GrantAndCreate(kOwnerRaylet, spec.actor_creation().name().empty() ? 3000 : 3001);
    rpc::ReportActorOutOfScopeRequest request;
    request.set_actor_id(IdOf(spec).Binary());
    rpc::ReportActorOutOfScopeReply reply;
    ASSERT_THAT(CallHandler(loop_, *manager_, &GcsActorManager::HandleReportActorOutOfScope, request, &reply), IsOk());
  }
  EXPECT_EQ(State(IdOf(unnamed)), Actor::DEAD);
  EXPECT_THAT(manager_->GetActor(IdOf(unnamed))->death_cause().message(), HasSubstr("out of scope"));
  EXPECT_EQ(State(IdOf(named)), Actor::ALIVE);
}

TEST_F(GcsActorManagerTest, ARestartedGcsReloadsEveryActorAndKeepsServingThem) {
  rpc::TaskSpec alive = CreationSpec("svc", "ns", /*max_restarts=*/1);
  rpc::TaskSpec pending = CreationSpec();
  rpc::TaskSpec unready = CreationSpec("later");
  for (const auto& spec : {alive, pending, unready}) ASSERT_THAT(Register(spec), IsOk());
  ASSERT_THAT(Create(alive), IsOk());
  WorkerID worker = GrantAndCreate(kOwnerRaylet, 3000);
  ASSERT_THAT(Create(pending), IsOk());
  ASSERT_TRUE(DriveUntil([&] { return !Raylet(kOwnerRaylet).leases.empty(); }));
  Raylet(kOwnerRaylet).leases.clear();  // the old GCS's request dies with it

  // A new manager over the same store.
  manager_ = MakeManager();
  manager_->Initialize(ReadTable(loop_, store_, kActorTable));
  EXPECT_EQ(State(IdOf(alive)), Actor::ALIVE);
  EXPECT_EQ(State(IdOf(unready)), Actor::DEPENDENCIES_UNREADY);
  EXPECT_THAT(Register(CreationSpec("svc", "ns")), StatusIs(absl::StatusCode::kAlreadyExists));
  // The one being created is scheduled again.
  GrantAndCreate(kOwnerRaylet, 3001);
  EXPECT_EQ(State(IdOf(pending)), Actor::ALIVE);
  // Its worker is still known: its death restarts the actor.
  manager_->OnWorkerDead(worker, "killed");
  EXPECT_EQ(State(IdOf(alive)), Actor::RESTARTING);
  // The owner's CreateActor, retried after the restart, goes on from where it was.
  ASSERT_THAT(Create(unready), IsOk());
  EXPECT_EQ(State(IdOf(unready)), Actor::PENDING_CREATION);
}

TEST_F(GcsActorManagerTest, MalformedRequestsAreRefused) {
  rpc::TaskSpec spec = CreationSpec();
  spec.set_type(rpc::NORMAL_TASK);
  EXPECT_THAT(Register(spec), StatusIs(absl::StatusCode::kInvalidArgument));
  spec = CreationSpec();
  spec.mutable_actor_creation()->set_actor_id("short");
  EXPECT_THAT(Register(spec), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Create(CreationSpec()), StatusIs(absl::StatusCode::kNotFound));
  rpc::GetActorInfoRequest request;
  request.set_actor_id("x");
  rpc::GetActorInfoReply reply;
  EXPECT_THAT(CallHandler(loop_, *manager_, &GcsActorManager::HandleGetActorInfo, request, &reply),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace manta::gcs::testing
