// Tests of the raylet's LeaseManager (src/raylet/lease_manager.h) over a real
// WorkerPool with a fake launcher and a hand-fed cluster view. The test registers the
// "workers" the pool starts and drives the loop; no sockets, no sleeps.
#include "src/raylet/lease_manager.h"

#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "src/scheduling/bundle_resources.h"
#include "tests/raylet/fake_worker_launcher.h"

namespace manta::raylet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct LeaseCall {
  rpc::RequestWorkerLeaseReply reply;
  std::optional<absl::Status> status;
  bool done() const { return status.has_value(); }
  bool granted() const { return done() && !reply.lease_id().empty(); }
};
using LeaseCallPtr = std::shared_ptr<LeaseCall>;

class LeaseManagerTest : public ::testing::Test {
 protected:
  LeaseManagerTest() {
    config_.worker_register_timeout_ms = 1000000;
    config_.idle_worker_killing_time_ms = 1000000;
    config_.worker_maximum_startup_concurrency = 10;
    config_.num_workers_soft_limit = 10;
    config_.driver_liveness_check_ms = 1000000;
    pool_options_.node_id = local_id_;
    pool_options_.node_ip_address = "10.0.0.1";
    pool_options_.raylet_port = 7000;
    pool_options_.session_dir = "/tmp/session_l";
    pool_options_.num_cpus = 2;
    job_config_.add_worker_command("/bin/driver");
    owner_.set_node_id(local_id_.Binary());
    owner_.set_ip_address("10.0.0.1");
    owner_.set_port(30000);
    owner_.set_worker_id(WorkerID::FromRandom().Binary());
  }

  void SetUp() override { Make({{"CPU", 2}}); }

  void Make(scheduling::ResourceMap total) {
    lease_manager_.reset();
    pool_ = std::make_unique<WorkerPool>(loop_, pool_options_, config_, launcher_);
    pool_->SetJobConfig(job_, job_config_);  // the job's registration with the GCS
    lease_manager_ = std::make_unique<LeaseManager>(loop_, LeaseManagerOptions{local_id_, std::move(total)}, config_,
                                                    view_, *pool_, [](size_t) { return 0; });
  }

  rpc::RequestWorkerLeaseRequest MakeRequest(const scheduling::ResourceMap& resources) {
    rpc::RequestWorkerLeaseRequest request;
    request.set_lease_request_id(LeaseID::FromRandom().Binary());
    request.set_job_id(job_.Binary());
    *request.mutable_owner_address() = owner_;
    for (const auto& [k, v] : resources) (*request.mutable_required_resources())[k] = v;
    request.set_function_name("Plus");
    return request;
  }

  LeaseCallPtr Send(const rpc::RequestWorkerLeaseRequest& request) {
    auto call = std::make_shared<LeaseCall>();
    lease_manager_->HandleRequestWorkerLease(request, &call->reply,
                                             rpc::SendReply([call](absl::Status s) { call->status = s; }));
    loop_.RunUntilIdle();
    return call;
  }
  LeaseCallPtr Request(const scheduling::ResourceMap& resources) { return Send(MakeRequest(resources)); }

  // Registers every worker the pool started and that has not registered yet.
  void RegisterStarted() {
    for (; registered_ < launcher_.starts.size(); ++registered_) {
      const FakeWorkerLauncher::StartRecord& start = launcher_.starts[registered_];
      rpc::RegisterWorkerRequest request;
      request.set_worker_type(rpc::WORKER);
      request.set_startup_token(start.secrets.at("MANTA_WORKER_STARTUP_TOKEN"));
      request.set_worker_id(WorkerID::FromHex(start.env.at("MANTA_WORKER_ID"))->Binary());
      request.set_pid(start.pid);
      request.mutable_address()->set_ip_address("10.0.0.1");
      request.mutable_address()->set_port(20000 + static_cast<int>(registered_));
      rpc::RegisterWorkerReply reply;
      std::optional<absl::Status> sent;
      pool_->HandleRegisterWorker(request, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
      ASSERT_TRUE(sent.has_value() && sent->ok());
    }
    loop_.RunUntilIdle();
  }

  // Requests a lease and lets its worker register; the call must be granted.
  LeaseCallPtr Lease(const scheduling::ResourceMap& resources) {
    LeaseCallPtr call = Request(resources);
    RegisterStarted();
    EXPECT_TRUE(call->granted()) << call->reply.DebugString();
    return call;
  }

  void Return(const LeaseCallPtr& lease, bool disconnect = false) {
    rpc::ReturnWorkerRequest request;
    request.set_lease_id(lease->reply.lease_id());
    request.set_worker_id(lease->reply.worker_address().worker_id());
    request.set_disconnect_worker(disconnect);
    rpc::ReturnWorkerReply reply;
    std::optional<absl::Status> sent;
    lease_manager_->HandleReturnWorker(request, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
    ASSERT_TRUE(sent.has_value() && sent->ok());
    loop_.RunUntilIdle();
  }

  bool Cancel(const rpc::RequestWorkerLeaseRequest& request) {
    rpc::CancelWorkerLeaseRequest cancel;
    cancel.set_lease_request_id(request.lease_request_id());
    rpc::CancelWorkerLeaseReply reply;
    std::optional<absl::Status> sent;
    lease_manager_->HandleCancelWorkerLease(cancel, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
    EXPECT_TRUE(sent.has_value() && sent->ok());
    loop_.RunUntilIdle();
    return reply.success();
  }

  void Block(const LeaseCallPtr& lease, bool blocked) {
    rpc::NotifyWorkerBlockedRequest request;
    request.set_worker_id(lease->reply.worker_address().worker_id());
    request.set_blocked(blocked);
    rpc::NotifyWorkerBlockedReply reply;
    std::optional<absl::Status> sent;
    lease_manager_->HandleNotifyWorkerBlocked(request, &reply, rpc::SendReply([&](absl::Status s) { sent = s; }));
    ASSERT_TRUE(sent.has_value() && sent->ok());
    loop_.RunUntilIdle();
  }

  NodeID AddNode(const scheduling::ResourceMap& total, const scheduling::ResourceMap& available, const std::string& ip) {
    NodeID id = NodeID::FromRandom();
    rpc::NodeInfo info;
    info.set_node_id(id.Binary());
    info.set_node_manager_address(ip);
    info.set_node_manager_port(7777);
    for (const auto& [k, v] : total) (*info.mutable_resources_total())[k] = v;
    view_.OnNodeInfo(info);
    SetAvailable(id, available);
    return id;
  }
  void SetAvailable(const NodeID& id, const scheduling::ResourceMap& available) {
    rpc::ResourceUsage usage;
    usage.set_node_id(id.Binary());
    for (const auto& [k, v] : available) (*usage.mutable_resources_available())[k] = v;
    view_.OnResourceUsage(usage);
  }

  double Cpu() const { return lease_manager_->available().at("CPU"); }
  pid_t PidOf(const LeaseCallPtr& lease) const { return lease->reply.worker_pid(); }

  EventLoop loop_;
  Config config_;
  NodeID local_id_ = NodeID::FromRandom();
  WorkerPoolOptions pool_options_;
  FakeWorkerLauncher launcher_{loop_};
  scheduling::ClusterResourceView view_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<LeaseManager> lease_manager_;
  size_t registered_ = 0;
  JobID job_ = JobID::FromInt(7);
  rpc::JobConfig job_config_;
  rpc::Address owner_;
};

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

  // Locally feasible but busy: it waits here although the other node is idle.
  Lease({{"CPU", 2}});
  rpc::RequestWorkerLeaseRequest cpu = MakeRequest({{"CPU", 1}});
  cpu.set_grant_or_reject(true);
  LeaseCallPtr waiting = Send(cpu);
  EXPECT_FALSE(waiting->done());
  lease_manager_->OnClusterViewChanged();
  loop_.RunUntilIdle();
  EXPECT_FALSE(waiting->done());
  EXPECT_EQ(lease_manager_->num_queued(), 1u);
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
  for (const scheduling::ResourceMap& bad : std::vector<scheduling::ResourceMap>{{{"CPU", -1}}, {{"CPU", nan}}, {{"GPU", inf}}, {{"", 1}}}) {
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

// ---- Placement group bundles ---------------------------------------------------

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
  std::vector<rpc::Bundle> bundles{MakeBundle(group_, 0, {{"CPU", 1.5}}), MakeBundle(group_, 1, {{"CPU", 1}, {"GPU", 1}})};
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
