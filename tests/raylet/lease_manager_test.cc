// Tests of the raylet's LeaseManager (src/raylet/lease_manager.h) over a real
// WorkerPool with a fake launcher and a hand-fed cluster view. The test registers the
// "workers" the pool starts and drives the loop; no sockets, no sleeps.
#include "src/raylet/lease_manager.h"

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <limits>
#include <string>
#include <vector>

#include "tests/raylet/lease_manager_fixture.h"

namespace manta::raylet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(LeaseManagerTest, GrantsALocalWorker) {
  LeaseCallPtr call = Request({{"CPU", 1}});
  EXPECT_FALSE(call->done());  // waiting for its worker
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_EQ(launcher_.starts[0].env.at("MANTA_JOB_ID"), job_.Hex());
  RegisterStarted();
  ASSERT_TRUE(call->granted());
  EXPECT_TRUE(call->status->ok());
  EXPECT_EQ(call->reply.worker_address().ip_address(), "10.0.0.1");
  EXPECT_EQ(call->reply.worker_address().port(), 20000);
  EXPECT_EQ(call->reply.worker_pid(), launcher_.starts[0].pid);
  EXPECT_FALSE(call->reply.rejected());
  EXPECT_FALSE(call->reply.has_retry_at_raylet_address());
  EXPECT_EQ(Cpu(), 1);
  EXPECT_EQ(lease_manager_->num_leases(), 1u);
}

TEST_F(LeaseManagerTest, EmptyResourceMapMeansOneCpu) {
  Lease({});
  EXPECT_EQ(Cpu(), 1);
}

TEST_F(LeaseManagerTest, QueuesWhenBusyThenGrantsOnReturn) {
  LeaseCallPtr a = Lease({{"CPU", 1}});
  LeaseCallPtr b = Lease({{"CPU", 1}});
  EXPECT_EQ(Cpu(), 0);
  LeaseCallPtr c = Request({{"CPU", 1}});
  EXPECT_FALSE(c->done());
  EXPECT_EQ(lease_manager_->num_queued(), 1u);
  EXPECT_EQ(launcher_.starts.size(), 2u);  // no worker started for a request that waits

  Return(a);
  ASSERT_TRUE(c->granted());
  EXPECT_EQ(c->reply.worker_address().worker_id(), a->reply.worker_address().worker_id());  // reused
  EXPECT_EQ(launcher_.starts.size(), 2u);
  EXPECT_EQ(Cpu(), 0);
  Return(b);
  Return(c);
  EXPECT_EQ(Cpu(), 2);
  EXPECT_EQ(pool_->num_idle(), 2u);
  // A second return of the same lease is harmless.
  Return(c);
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, DisconnectOnReturnKillsTheWorker) {
  LeaseCallPtr a = Lease({{"CPU", 1}});
  Return(a, /*disconnect=*/true);
  EXPECT_THAT(launcher_.SignalsTo(PidOf(a)), ElementsAre(SIGKILL));
  EXPECT_EQ(pool_->num_workers(), 0u);
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, SpillsBackToTheNodeThatHasACustomResource) {
  NodeID special = AddNode({{"CPU", 1}, {"special", 1}}, {{"CPU", 1}, {"special", 1}}, "10.0.0.9");
  LeaseCallPtr call = Request({{"special", 1}});
  ASSERT_TRUE(call->done());
  ASSERT_TRUE(call->status->ok());
  EXPECT_FALSE(call->granted());
  EXPECT_FALSE(call->reply.rejected());
  EXPECT_EQ(call->reply.retry_at_raylet_address().node_id(), special.Binary());
  EXPECT_EQ(call->reply.retry_at_raylet_address().ip_address(), "10.0.0.9");
  EXPECT_EQ(call->reply.retry_at_raylet_address().port(), 7777);
  EXPECT_TRUE(launcher_.starts.empty());
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, GrantOrRejectIsNeverSpilledAgain) {
  AddNode({{"CPU", 4}, {"special", 1}}, {{"CPU", 4}, {"special", 1}}, "10.0.0.9");
  rpc::RequestWorkerLeaseRequest special = MakeRequest({{"special", 1}});
  special.set_grant_or_reject(true);
  LeaseCallPtr rejected = Send(special);
  ASSERT_TRUE(rejected->done());
  EXPECT_TRUE(rejected->reply.rejected());
  EXPECT_THAT(rejected->reply.failure_message(), HasSubstr("special"));
  EXPECT_FALSE(rejected->reply.has_retry_at_raylet_address());

  // Locally feasible but busy, and nobody else has room: it waits here.
  Lease({{"CPU", 2}});
  rpc::RequestWorkerLeaseRequest cpu = MakeRequest({{"CPU", 1}});
  cpu.set_grant_or_reject(true);
  LeaseCallPtr waiting = Send(cpu);
  EXPECT_FALSE(waiting->done());
  EXPECT_EQ(lease_manager_->num_queued(), 1u);
}

// A spilled-back request waiting behind a lease held for long (an actor's) while a
// node with room joins: sent back to its owner to be placed again, not spilled on.
// One free CPU there sends back one request of the two.
TEST_F(LeaseManagerTest, WaitingGrantOrRejectIsPlacedAgainWhenAnotherNodeHasRoom) {
  Lease({{"CPU", 2}});
  std::vector<LeaseCallPtr> calls;
  for (int i = 0; i < 2; ++i) {
    rpc::RequestWorkerLeaseRequest cpu = MakeRequest({{"CPU", 1}});
    cpu.set_grant_or_reject(true);
    calls.push_back(Send(cpu));
  }
  LeaseCallPtr first = calls[0], second = calls[1];
  lease_manager_->OnClusterViewChanged();
  loop_.RunUntilIdle();
  EXPECT_FALSE(first->done());

  NodeID joined = AddNode({{"CPU", 1}}, {{"CPU", 1}}, "10.0.0.9");
  lease_manager_->OnClusterViewChanged();
  loop_.RunUntilIdle();
  ASSERT_TRUE(first->done());
  EXPECT_TRUE(first->reply.rejected());
  EXPECT_TRUE(first->reply.place_again());
  EXPECT_FALSE(first->reply.has_retry_at_raylet_address());
  EXPECT_THAT(first->reply.failure_message(), HasSubstr(joined.Hex()));
  EXPECT_FALSE(second->done());
  EXPECT_EQ(lease_manager_->num_queued(), 1u);
  EXPECT_EQ(view_.Get(joined)->available.at("CPU"), 0);  // counted as taken there
}

TEST_F(LeaseManagerTest, QueuedRequestSpillsWhenAnotherNodeFreesUp) {
  NodeID other = AddNode({{"CPU", 2}}, {{"CPU", 0}}, "10.0.0.9");
  Lease({{"CPU", 2}});
  LeaseCallPtr waiting = Request({{"CPU", 1}});
  EXPECT_FALSE(waiting->done());  // nobody can run it now: it waits here
  SetAvailable(other, {{"CPU", 1}});
  lease_manager_->OnClusterViewChanged();
  loop_.RunUntilIdle();
  ASSERT_TRUE(waiting->done());
  EXPECT_EQ(waiting->reply.retry_at_raylet_address().node_id(), other.Binary());
  // What was sent there counts as taken until the node reports again.
  EXPECT_EQ(view_.Get(other)->available.at("CPU"), 0);
}

TEST_F(LeaseManagerTest, InfeasibleRequestIsKeptListedAndPlacedWhenANodeJoins) {
  LeaseCallPtr a = Request({{"GPU", 1}});
  LeaseCallPtr b = Request({{"GPU", 1}});
  EXPECT_FALSE(a->done());
  EXPECT_FALSE(b->done());
  EXPECT_EQ(lease_manager_->num_infeasible(), 2u);
  EXPECT_THAT(lease_manager_->InfeasibleShapes(), ElementsAre("GPU: 1"));  // one entry per shape
  lease_manager_->OnClusterViewChanged();  // nothing new: still waiting
  loop_.RunUntilIdle();
  EXPECT_FALSE(a->done());

  NodeID gpu_node = AddNode({{"CPU", 4}, {"GPU", 2}}, {{"CPU", 4}, {"GPU", 2}}, "10.0.0.8");
  lease_manager_->OnClusterViewChanged();
  loop_.RunUntilIdle();
  ASSERT_TRUE(a->done());
  ASSERT_TRUE(b->done());
  EXPECT_EQ(a->reply.retry_at_raylet_address().node_id(), gpu_node.Binary());
  EXPECT_EQ(b->reply.retry_at_raylet_address().node_id(), gpu_node.Binary());
  EXPECT_THAT(lease_manager_->InfeasibleShapes(), IsEmpty());
}

// Counts WARNING lines that mention "infeasible".
class InfeasibleWarnings : public google::LogSink {
 public:
  InfeasibleWarnings() { google::AddLogSink(this); }
  ~InfeasibleWarnings() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char*, const char*, int, const google::LogMessageTime&,
            const char* message, size_t length) override {
    std::string text(message, length);
    if (severity == google::GLOG_WARNING && text.find("infeasible") != std::string::npos) lines.push_back(text);
  }
  std::vector<std::string> lines;
};

TEST_F(LeaseManagerTest, InfeasibleShapeIsWarnedAboutOnce) {
  InfeasibleWarnings warnings;
  Request({{"GPU", 1}});
  Request({{"GPU", 1}});
  lease_manager_->OnClusterViewChanged();
  loop_.RunUntilIdle();
  Request({{"GPU", 2}});
  ASSERT_EQ(warnings.lines.size(), 2u);
  EXPECT_THAT(warnings.lines[0], HasSubstr("GPU: 1"));
  EXPECT_THAT(warnings.lines[1], HasSubstr("GPU: 2"));
  EXPECT_THAT(lease_manager_->InfeasibleShapes(), ElementsAre("GPU: 1", "GPU: 2"));
}

TEST_F(LeaseManagerTest, CancelAnswersTheQueuedRequest) {
  Lease({{"CPU", 2}});
  rpc::RequestWorkerLeaseRequest request = MakeRequest({{"CPU", 1}});
  LeaseCallPtr waiting = Send(request);
  ASSERT_FALSE(waiting->done());
  EXPECT_TRUE(Cancel(request));
  ASSERT_TRUE(waiting->done());
  EXPECT_TRUE(waiting->reply.canceled());
  EXPECT_FALSE(waiting->granted());
  EXPECT_EQ(lease_manager_->num_queued(), 0u);
  EXPECT_FALSE(Cancel(request));  // already gone

  // Infeasible requests can be cancelled too.
  rpc::RequestWorkerLeaseRequest gpu = MakeRequest({{"GPU", 1}});
  LeaseCallPtr infeasible = Send(gpu);
  EXPECT_TRUE(Cancel(gpu));
  EXPECT_TRUE(infeasible->reply.canceled());
  EXPECT_THAT(lease_manager_->InfeasibleShapes(), IsEmpty());
}

TEST_F(LeaseManagerTest, CancelWhileTheWorkerStartsGivesResourcesBack) {
  rpc::RequestWorkerLeaseRequest request = MakeRequest({{"CPU", 1}});
  LeaseCallPtr call = Send(request);
  EXPECT_EQ(Cpu(), 1);  // held for the worker that is starting
  EXPECT_TRUE(Cancel(request));
  EXPECT_TRUE(call->reply.canceled());
  EXPECT_EQ(Cpu(), 2);
  RegisterStarted();  // the worker arrives late: it goes idle, no lease
  EXPECT_EQ(pool_->num_idle(), 1u);
  EXPECT_EQ(lease_manager_->num_leases(), 0u);
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, BlockedWorkerLendsItsCpu) {
  Make({{"CPU", 1}});
  LeaseCallPtr outer = Lease({{"CPU", 1}});
  LeaseCallPtr inner = Request({{"CPU", 1}});
  EXPECT_FALSE(inner->done());

  Block(outer, true);  // outer waits on inner: its CPU is lent
  RegisterStarted();
  ASSERT_TRUE(inner->granted());
  EXPECT_EQ(Cpu(), 0);
  Block(outer, true);  // repeated: no double credit
  EXPECT_EQ(Cpu(), 0);

  Block(outer, false);  // takes it back: oversubscribed for a while
  EXPECT_EQ(Cpu(), -1);
  Return(inner);
  EXPECT_EQ(Cpu(), 0);
  Return(outer);
  EXPECT_EQ(Cpu(), 1);

  // Returned while blocked: the lent CPU is not counted twice.
  LeaseCallPtr again = Lease({{"CPU", 1}});
  Block(again, true);
  EXPECT_EQ(Cpu(), 1);
  Return(again);
  EXPECT_EQ(Cpu(), 1);
}

// While the node's memory is short, a blocked worker keeps its CPU: the tasks it
// would let in need memory the node does not have.
TEST_F(LeaseManagerTest, ABlockedWorkerLendsNoCpuWhileMemoryIsShort) {
  Make({{"CPU", 1}});
  bool short_of_memory = true;
  lease_manager_->SetMemoryPressure([&] { return short_of_memory; });
  LeaseCallPtr outer = Lease({{"CPU", 1}});
  LeaseCallPtr inner = Request({{"CPU", 1}});
  Block(outer, true);
  EXPECT_EQ(Cpu(), 0);
  EXPECT_FALSE(inner->done());
  Block(outer, false);
  EXPECT_EQ(Cpu(), 0) << "nothing was lent, nothing is taken back";
  short_of_memory = false;
  Block(outer, true);
  RegisterStarted();
  EXPECT_TRUE(inner->granted());
}

TEST_F(LeaseManagerTest, NestedBlockingDeeperThanTheCpuCountDoesNotDeadlock) {
  Make({{"CPU", 1}});
  std::vector<LeaseCallPtr> chain{Lease({{"CPU", 1}})};
  for (int depth = 1; depth < 5; ++depth) {
    Block(chain.back(), true);
    LeaseCallPtr next = Request({{"CPU", 1}});
    RegisterStarted();
    ASSERT_TRUE(next->granted()) << "depth " << depth;
    chain.push_back(next);
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    Block(*it, false);
    Return(*it);
  }
  EXPECT_EQ(Cpu(), 1);
}

TEST_F(LeaseManagerTest, MalformedRequestsAreRejected) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const scheduling::ResourceMap& bad :
       std::vector<scheduling::ResourceMap>{{{"CPU", -1}}, {{"CPU", nan}}, {{"GPU", inf}}, {{"", 1}}}) {
    LeaseCallPtr call = Request(bad);
    ASSERT_TRUE(call->done());
    EXPECT_TRUE(call->status->ok());
    EXPECT_TRUE(call->reply.rejected());
    EXPECT_THAT(call->reply.failure_message(), HasSubstr("malformed"));
  }
  rpc::RequestWorkerLeaseRequest bad_job = MakeRequest({{"CPU", 1}});
  bad_job.set_job_id("x");
  LeaseCallPtr call = Send(bad_job);
  EXPECT_TRUE(call->reply.rejected());
  EXPECT_EQ(lease_manager_->num_queued() + lease_manager_->num_infeasible() + lease_manager_->num_leases(), 0u);
  EXPECT_TRUE(launcher_.starts.empty());
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, WorkerThatCannotStartRejectsTheLease) {
  launcher_.FailNextStart(absl::NotFoundError("cannot execute /bin/driver"));
  LeaseCallPtr call = Request({{"CPU", 1}});
  ASSERT_TRUE(call->done());
  EXPECT_TRUE(call->reply.rejected());
  EXPECT_THAT(call->reply.failure_message(), HasSubstr("cannot execute"));
  EXPECT_FALSE(call->reply.runtime_env_setup_failed());  // not the env's fault: not final
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, TheWorkerGrantedWasStartedForTheRequestsRuntimeEnv) {
  rpc::RequestWorkerLeaseRequest with_env = MakeRequest({{"CPU", 1}});
  // Another spelling of the env: the raylet keys workers by the canonical text.
  with_env.set_runtime_env(R"({ "env_vars": {"B": "2", "A": "1"} })");
  LeaseCallPtr call = Send(with_env);
  RegisterStarted();
  ASSERT_TRUE(call->granted()) << call->reply.DebugString();
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_EQ(launcher_.starts[0].env.at("A"), "1");
  EXPECT_EQ(launcher_.starts[0].env.at("MANTA_RUNTIME_ENV"), R"({"env_vars":{"A":"1","B":"2"}})");
  Return(call);
  // Its idle worker is not granted to a request without that env.
  LeaseCallPtr plain = Request({{"CPU", 1}});
  RegisterStarted();
  ASSERT_TRUE(plain->granted());
  EXPECT_EQ(launcher_.starts.size(), 2u);
  EXPECT_NE(plain->reply.worker_address().worker_id(), call->reply.worker_address().worker_id());
}

TEST_F(LeaseManagerTest, AnEnvThatCannotBeAppliedRejectsTheLeaseForGood) {
  rpc::RequestWorkerLeaseRequest request = MakeRequest({{"CPU", 1}});
  request.set_runtime_env(R"({"working_dir": "/nonexistent/manta-lease-test"})");
  LeaseCallPtr missing_dir = Send(request);
  ASSERT_TRUE(missing_dir->done());
  EXPECT_TRUE(missing_dir->reply.rejected());
  EXPECT_TRUE(missing_dir->reply.runtime_env_setup_failed());
  EXPECT_THAT(missing_dir->reply.failure_message(), HasSubstr("/nonexistent/manta-lease-test"));
  EXPECT_TRUE(launcher_.starts.empty());
  EXPECT_EQ(Cpu(), 2);

  request.set_lease_request_id(LeaseID::FromRandom().Binary());
  request.set_runtime_env("[not an object]");
  LeaseCallPtr malformed = Send(request);
  EXPECT_TRUE(malformed->reply.rejected());
  EXPECT_TRUE(malformed->reply.runtime_env_setup_failed());

  request.set_lease_request_id(LeaseID::FromRandom().Binary());
  request.set_runtime_env(R"({"env_vars": {"A": ")" + std::string(70 * 1024, 'x') + R"("}})");
  LeaseCallPtr huge = Send(request);
  EXPECT_TRUE(huge->reply.rejected());
  EXPECT_TRUE(huge->reply.runtime_env_setup_failed());
  EXPECT_THAT(huge->reply.failure_message(), HasSubstr("bytes"));
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, WorkerExitWhileLeasedReturnsItsResources) {
  LeaseCallPtr a = Lease({{"CPU", 2}});
  LeaseCallPtr waiting = Request({{"CPU", 1}});
  EXPECT_EQ(Cpu(), 0);
  pool_->OnProcessExit(PidOf(a), SIGKILL);
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 0u);
  RegisterStarted();  // the waiting request got a new worker
  EXPECT_TRUE(waiting->granted());
  EXPECT_EQ(Cpu(), 1);
  Return(a);  // the owner's late return is harmless
  EXPECT_EQ(Cpu(), 1);
}

TEST_F(LeaseManagerTest, OwnerDeathReturnsItsLeasesAndDropsItsRequests) {
  LeaseCallPtr parent = Lease({{"CPU", 1}});
  // The parent's worker owns a nested lease and a queued request.
  owner_ = parent->reply.worker_address();
  LeaseCallPtr child = Lease({{"CPU", 1}});
  LeaseCallPtr queued = Request({{"CPU", 1}});
  EXPECT_FALSE(queued->done());
  EXPECT_EQ(Cpu(), 0);

  pool_->OnProcessExit(PidOf(parent), SIGKILL);
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 0u);
  EXPECT_THAT(launcher_.SignalsTo(PidOf(child)), ElementsAre(SIGKILL));  // its tasks' owner is gone
  ASSERT_TRUE(queued->done());
  EXPECT_TRUE(queued->reply.canceled());
  EXPECT_EQ(Cpu(), 2);
}

TEST_F(LeaseManagerTest, DriverDeathReturnsItsLeases) {
  WorkerID driver = WorkerID::FromRandom();
  rpc::RegisterWorkerRequest reg;
  reg.set_worker_type(rpc::DRIVER);
  reg.set_worker_id(driver.Binary());
  reg.set_job_id(job_.Binary());
  reg.set_pid(5555);
  rpc::RegisterWorkerReply reg_reply;
  pool_->HandleRegisterWorker(reg, &reg_reply, rpc::SendReply([](absl::Status s) { ASSERT_TRUE(s.ok()); }));
  pool_->OnStoreClientConnected(driver.Hex());
  owner_.set_worker_id(driver.Binary());
  LeaseCallPtr a = Lease({{"CPU", 1}});
  LeaseCallPtr b = Lease({{"CPU", 1}});
  EXPECT_EQ(Cpu(), 0);

  pool_->OnStoreClientClosed(driver.Hex());
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 0u);
  EXPECT_EQ(Cpu(), 2);
  EXPECT_EQ(pool_->num_workers(), 0u);
}

TEST_F(LeaseManagerTest, LeasesOwnedFromADeadNodeAreReleased) {
  NodeID remote = AddNode({{"CPU", 2}}, {{"CPU", 0}}, "10.0.0.9");  // busy: leases stay here
  owner_.set_node_id(remote.Binary());
  owner_.set_worker_id(WorkerID::FromRandom().Binary());
  LeaseCallPtr a = Lease({{"CPU", 1}});
  owner_.set_node_id(local_id_.Binary());
  LeaseCallPtr mine = Lease({{"CPU", 1}});
  lease_manager_->OnNodeDead(remote);
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 1u);
  EXPECT_THAT(launcher_.SignalsTo(PidOf(a)), ElementsAre(SIGKILL));
  EXPECT_TRUE(launcher_.SignalsTo(PidOf(mine)).empty());
  EXPECT_EQ(Cpu(), 1);
}

TEST_F(LeaseManagerTest, LeasesOfARemoteOwnerThatDiedAreReleased) {
  NodeID remote = AddNode({{"CPU", 2}}, {{"CPU", 0}}, "10.0.0.9");  // busy: requests stay here
  WorkerID dead = WorkerID::FromRandom();
  owner_.set_node_id(remote.Binary());
  owner_.set_worker_id(dead.Binary());
  LeaseCallPtr a = Lease({{"CPU", 1}});
  owner_.set_worker_id(WorkerID::FromRandom().Binary());  // another owner on that node
  LeaseCallPtr other = Lease({{"CPU", 1}});
  owner_.set_worker_id(dead.Binary());
  LeaseCallPtr queued = Request({{"CPU", 1}});
  EXPECT_FALSE(queued->done());

  lease_manager_->OnRemoteOwnerGone(dead, "SIGKILL");
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 1u);
  EXPECT_THAT(launcher_.SignalsTo(PidOf(a)), ElementsAre(SIGKILL));
  EXPECT_TRUE(launcher_.SignalsTo(PidOf(other)).empty());
  ASSERT_TRUE(queued->done());
  EXPECT_TRUE(queued->reply.canceled());
  EXPECT_EQ(Cpu(), 1);
  // A nil id (a malformed report) matches nothing.
  lease_manager_->OnRemoteOwnerGone(WorkerID::Nil(), "bad report");
  EXPECT_EQ(lease_manager_->num_leases(), 1u);
}

TEST_F(LeaseManagerTest, FinishedJobReleasesEverything) {
  LeaseCallPtr a = Lease({{"CPU", 2}});
  LeaseCallPtr queued = Request({{"CPU", 1}});
  lease_manager_->OnJobFinished(job_);
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 0u);
  ASSERT_TRUE(queued->done());
  EXPECT_TRUE(queued->reply.canceled());
  EXPECT_EQ(Cpu(), 2);
  EXPECT_EQ(pool_->num_workers(), 0u);
}

TEST_F(LeaseManagerTest, AnActorWithoutResourcesIsPlacedWithACpuAndHoldsNone) {
  rpc::RequestWorkerLeaseRequest request = MakeRequest({{"CPU", 1}});
  request.mutable_actor()->set_actor_id(std::string(16, 'a'));
  request.mutable_actor()->set_placement_only(true);
  LeaseCallPtr actor = Send(request);
  RegisterStarted();
  ASSERT_TRUE(actor->granted());
  EXPECT_EQ(Cpu(), 2);  // its CPU came back
  // So more actors than CPUs fit, as in Ray.
  for (int i = 0; i < 3; ++i) {
    rpc::RequestWorkerLeaseRequest more = MakeRequest({{"CPU", 1}});
    more.mutable_actor()->set_placement_only(true);
    LeaseCallPtr call = Send(more);
    RegisterStarted();
    EXPECT_TRUE(call->granted());
  }
  EXPECT_EQ(Cpu(), 2);
  EXPECT_EQ(lease_manager_->num_leases(), 4u);
  Return(actor, /*disconnect=*/true);
  EXPECT_EQ(Cpu(), 2);  // nothing more to give back
  // An actor with explicit resources holds them for its life.
  LeaseCallPtr holding = Send(MakeRequest({{"CPU", 1}}));
  RegisterStarted();
  ASSERT_TRUE(holding->granted());
  EXPECT_EQ(Cpu(), 1);
}

TEST_F(LeaseManagerTest, ADetachedActorOutlivesItsJob) {
  rpc::RequestWorkerLeaseRequest request = MakeRequest({{"CPU", 1}});
  request.clear_owner_address();  // the GCS leases it for no process
  request.mutable_actor()->set_actor_id(std::string(16, 'd'));
  request.mutable_actor()->set_detached(true);
  LeaseCallPtr detached = Send(request);
  RegisterStarted();
  ASSERT_TRUE(detached->granted());
  LeaseCallPtr plain = Lease({{"CPU", 1}});
  lease_manager_->OnJobFinished(job_);
  loop_.RunUntilIdle();
  EXPECT_EQ(lease_manager_->num_leases(), 1u);
  EXPECT_EQ(pool_->num_workers(), 1u);
  EXPECT_THAT(launcher_.SignalsTo(PidOf(plain)), ::testing::Contains(SIGKILL));
  EXPECT_THAT(launcher_.SignalsTo(PidOf(detached)), IsEmpty());
  EXPECT_EQ(Cpu(), 1);
  // Killed when the GCS gives the lease back.
  Return(detached, /*disconnect=*/true);
  EXPECT_EQ(pool_->num_workers(), 0u);
  EXPECT_EQ(Cpu(), 2);
}

// The memory monitor's victim: the newest lease of a retriable task, before a newer
// one whose task cannot be retried; its owner learns why when it returns the lease.
TEST_F(LeaseManagerTest, TheMemoryMonitorKillsTheNewestRetriableTasksWorkerAndSaysWhy) {
  rpc::RequestWorkerLeaseRequest retriable = MakeRequest({{"CPU", 1}});
  retriable.set_retriable(true);
  LeaseCallPtr a = Send(retriable);
  RegisterStarted();
  LeaseCallPtr b = Lease({{"CPU", 1}});  // newer, not retriable
  ASSERT_TRUE(a->granted());
  EXPECT_EQ(lease_manager_->KillWorkerForMemory("9 GB of 10 GB (0.90) in node", 0.8), PidOf(a));
  EXPECT_THAT(launcher_.SignalsTo(PidOf(a)), ElementsAre(SIGKILL));
  EXPECT_TRUE(launcher_.SignalsTo(PidOf(b)).empty());
  EXPECT_EQ(lease_manager_->num_leases(), 1u);

  rpc::ReturnWorkerRequest request;
  request.set_lease_id(a->reply.lease_id());
  request.set_worker_id(a->reply.worker_address().worker_id());
  request.set_disconnect_worker(true);
  rpc::ReturnWorkerReply reply;
  lease_manager_->HandleReturnWorker(request, &reply, rpc::SendReply([](absl::Status) {}));
  ASSERT_TRUE(reply.has_failure());
  EXPECT_EQ(reply.failure().type(), rpc::OUT_OF_MEMORY);
  EXPECT_THAT(reply.failure().message(), HasSubstr("Plus"));
  EXPECT_THAT(reply.failure().message(), HasSubstr("9 GB of 10 GB (0.90) in node"));
  EXPECT_THAT(reply.failure().message(), HasSubstr("memory_usage_threshold 0.80"));
  // Said once.
  rpc::ReturnWorkerReply again;
  lease_manager_->HandleReturnWorker(request, &again, rpc::SendReply([](absl::Status) {}));
  EXPECT_FALSE(again.has_failure());

  // Then the other one; then there is nothing to kill.
  EXPECT_EQ(lease_manager_->KillWorkerForMemory("x", 0.8), PidOf(b));
  EXPECT_EQ(lease_manager_->KillWorkerForMemory("x", 0.8), 0);
  EXPECT_EQ(Cpu(), 2);
}

}  // namespace
}  // namespace manta::raylet
