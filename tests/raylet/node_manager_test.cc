// Tests of the raylet's NodeManager (src/raylet/node_manager.h) against a scriptable
// fake GCS client. The test drives the loop (RunUntilIdle) and owns the clock, so
// "the GCS has been unreachable for N seconds" takes no real time.
#include "src/raylet/node_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <optional>

#include "src/gcs/fake_gcs_client.h"
#include "src/object_store/arena.h"
#include "src/object_store/object_store.h"
#include "test_util/test_util.h"
#include "tests/raylet/fake_worker_launcher.h"

namespace manta::raylet {
namespace {

using ::manta::testing::WaitFor;
using ::testing::HasSubstr;

using gcs::FakeGcsClient;

rpc::RegisterNodeReply RegisterReply(const ClusterID& cluster_id) {
  rpc::RegisterNodeReply reply;
  reply.set_cluster_id(cluster_id.Binary());
  return reply;
}

rpc::PubMessage NodeMessage(const NodeID& id, rpc::NodeInfo::State state, int64_t sequence_id,
                            const std::string& death_reason = "") {
  rpc::PubMessage message;
  message.set_channel_type(rpc::GCS_NODE_INFO_CHANNEL);
  message.set_key_id(id.Binary());
  message.set_sequence_id(sequence_id);
  rpc::NodeInfo* info = message.mutable_node_info_message();
  info->set_node_id(id.Binary());
  info->set_state(state);
  info->set_death_reason(death_reason);
  (*info->mutable_resources_total())["CPU"] = 1;
  return message;
}

class NodeManagerTest : public ::testing::Test {
 protected:
  NodeManagerTest() {
    options_.node_id = NodeID::FromRandom();
    options_.node_ip_address = "10.1.2.3";
    options_.node_name = "node-a";
    options_.resources = {{"CPU", 2}, {"special", 1}};
    options_.session_dir = "/tmp/session_x";
    options_.is_head = true;
    // Timers the tests do not exercise are pushed far out.
    config_.raylet_gcs_check_period_ms = 1000000;
    config_.resource_report_ms = 1000000;
    config_.gcs_rpc_server_reconnect_timeout_s = 1;
  }

  // The node's parts (a small object store, the worker pool and lease manager), then
  // the node manager.
  void MakeManager() {
    auto arena = object_store::Arena::Create(kStoreBytes);
    ASSERT_TRUE(arena.ok()) << arena.status();
    arena_ = std::move(*arena);
    store_ = std::make_unique<object_store::ObjectStore>(loop_, arena_->capacity(), object_store::ObjectStoreOptions(),
                                                         nullptr, arena_->base());
    object_manager_ = std::make_unique<ObjectManager>(loop_, *store_, ObjectManagerOptions());
    WorkerPoolOptions pool_options;
    pool_options.node_id = options_.node_id;
    pool_ = std::make_unique<WorkerPool>(loop_, pool_options, config_, launcher_,
                                         [this](const JobID& job) { manager_->FetchJobConfig(job); });
    leases_ = std::make_unique<LeaseManager>(loop_, LeaseManagerOptions{options_.node_id, options_.resources}, config_,
                                             view_, *pool_, [](size_t) { return 0; });
    NodeManagerParts parts{config_, view_, gcs_, gcs_, *pool_, *leases_, *store_, *object_manager_, *arena_,
                           "/tmp/session_x/store.sock"};
    manager_ = std::make_unique<NodeManager>(
        loop_, options_, std::move(parts), [this] { return now_ms_; },
        [this](const std::string& reason) { fatal_reasons_.push_back(reason); });
    manager_->SetPort(7001);
  }

  // Creates the manager, starts it and answers its registration with OK.
  void StartRegistered() {
    MakeManager();
    manager_->Start([this](absl::Status s) { registered_ = s; });
    loop_.RunUntilIdle();
    gcs_.register_node.ReplyNext(loop_, absl::OkStatus(), RegisterReply(cluster_id_));
    loop_.RunUntilIdle();
    ASSERT_TRUE(registered_.has_value());
    ASSERT_TRUE(registered_->ok()) << *registered_;
  }

  // Answers the subscriber's subscription, so that it starts polling.
  void AnswerSubscribe() {
    gcs_.subscribe.ReplyNext(loop_, absl::OkStatus());
    loop_.RunUntilIdle();
    ASSERT_EQ(gcs_.poll.pending(), 1u);
  }

  // Answers the pending poll with `messages`.
  void Publish(std::vector<rpc::PubMessage> messages) {
    rpc::GcsSubscriberPollReply reply;
    reply.set_publisher_id("publisher-1");
    for (auto& m : messages) reply.add_pub_messages(m.SerializeAsString());
    gcs_.poll.ReplyNext(loop_, absl::OkStatus(), std::move(reply));
    loop_.RunUntilIdle();
  }

  // Drives the loop (timers included) until `condition` holds; false after 5 s.
  bool RunUntil(const std::function<bool()>& condition) {
    return WaitFor(
        [&] {
          loop_.RunUntilIdle();
          return condition();
        },
        5000);
  }

  static constexpr int64_t kStoreBytes = 4 << 20;
  EventLoop loop_;
  FakeGcsClient gcs_;
  Config config_;
  scheduling::ClusterResourceView view_;
  std::unique_ptr<object_store::Arena> arena_;
  std::unique_ptr<object_store::ObjectStore> store_;
  std::unique_ptr<ObjectManager> object_manager_;
  FakeWorkerLauncher launcher_{loop_};
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<LeaseManager> leases_;
  int64_t now_ms_ = 50000;
  std::vector<std::string> fatal_reasons_;
  std::optional<absl::Status> registered_;
  ClusterID cluster_id_ = ClusterID::FromRandom();
  NodeManagerOptions options_;
  std::unique_ptr<NodeManager> manager_;
};

TEST_F(NodeManagerTest, StartRegistersThisNode) {
  MakeManager();
  manager_->Start([this](absl::Status s) { registered_ = s; });
  loop_.RunUntilIdle();
  ASSERT_EQ(gcs_.register_node.pending(), 1u);
  EXPECT_FALSE(registered_.has_value());

  const rpc::NodeInfo& info = gcs_.register_node.Next();
  EXPECT_EQ(info.node_id(), options_.node_id.Binary());
  EXPECT_EQ(info.node_manager_address(), "10.1.2.3");
  EXPECT_EQ(info.node_manager_port(), 7001);
  EXPECT_EQ(info.state(), rpc::NodeInfo::ALIVE);
  EXPECT_EQ(info.node_name(), "node-a");
  EXPECT_EQ(info.session_dir(), "/tmp/session_x");
  EXPECT_TRUE(info.is_head_node());
  EXPECT_EQ(info.raylet_pid(), getpid());
  std::map<std::string, double> total(info.resources_total().begin(), info.resources_total().end());
  EXPECT_EQ(total, (std::map<std::string, double>{{"CPU", 2}, {"special", 1}}));

  gcs_.register_node.ReplyNext(loop_, absl::OkStatus(), RegisterReply(cluster_id_));
  loop_.RunUntilIdle();
  ASSERT_TRUE(registered_.has_value());
  EXPECT_TRUE(registered_->ok()) << *registered_;
  EXPECT_EQ(manager_->cluster_id(), cluster_id_);
  EXPECT_TRUE(fatal_reasons_.empty());
}

TEST_F(NodeManagerTest, RegistrationSubscribesAndLoadsTheNodeTable) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_EQ(gcs_.subscribe.pending(), 1u);
  std::vector<rpc::ChannelType> channels;
  const rpc::GcsSubscriberCommandBatchRequest subscribe = gcs_.subscribe.Next();
  for (const auto& c : subscribe.commands()) channels.push_back(c.channel_type());
  EXPECT_THAT(channels, ::testing::UnorderedElementsAre(rpc::GCS_NODE_INFO_CHANNEL, rpc::RESOURCE_USAGE_CHANNEL,
                                                       rpc::GCS_JOB_CHANNEL, rpc::GCS_WORKER_DELTA_CHANNEL,
                                                       rpc::GCS_PLACEMENT_GROUP_CHANNEL));
  EXPECT_EQ(gcs_.get_all_node_info.pending(), 1u);

  NodeID other = NodeID::FromRandom();
  rpc::GetAllNodeInfoReply snapshot;
  *snapshot.add_node_info_list() = NodeMessage(other, rpc::NodeInfo::ALIVE, 0).node_info_message();
  *snapshot.add_node_info_list() = manager_->MakeNodeInfo();
  gcs_.get_all_node_info.ReplyNext(loop_, absl::OkStatus(), snapshot);
  loop_.RunUntilIdle();
  EXPECT_EQ(manager_->view().NumNodes(), 2u);
  EXPECT_TRUE(manager_->view().Contains(other));

  // The snapshot makes the node report its own availability.
  ASSERT_EQ(gcs_.report_usage.pending(), 1u);
  const rpc::ResourceUsage& usage = gcs_.report_usage.Next();
  EXPECT_EQ(usage.node_id(), options_.node_id.Binary());
  EXPECT_EQ(usage.resources_available().at("CPU"), 2);
  EXPECT_EQ(usage.resources_total().at("special"), 1);
}

TEST_F(NodeManagerTest, RegistrationFailureIsReported) {
  MakeManager();
  manager_->Start([this](absl::Status s) { registered_ = s; });
  loop_.RunUntilIdle();
  gcs_.register_node.ReplyNext(loop_, absl::UnavailableError("RegisterNode to 127.0.0.1:1: connection refused"));
  loop_.RunUntilIdle();
  ASSERT_TRUE(registered_.has_value());
  EXPECT_EQ(registered_->code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(registered_->message()), HasSubstr("connection refused"));
  // Nothing else was started.
  EXPECT_EQ(gcs_.subscribe.total(), 0);
  EXPECT_EQ(gcs_.get_all_node_info.total(), 0);
  EXPECT_TRUE(fatal_reasons_.empty());
}

TEST_F(NodeManagerTest, PubsubUpdatesTheView) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  NodeID other = NodeID::FromRandom();
  Publish({NodeMessage(other, rpc::NodeInfo::ALIVE, 1)});
  EXPECT_TRUE(manager_->view().Contains(other));

  rpc::PubMessage usage;
  usage.set_channel_type(rpc::RESOURCE_USAGE_CHANNEL);
  usage.set_sequence_id(2);
  usage.mutable_resource_usage_message()->set_node_id(other.Binary());
  (*usage.mutable_resource_usage_message()->mutable_resources_available())["CPU"] = 0.5;
  Publish({usage});
  ASSERT_NE(manager_->view().Get(other), nullptr);
  EXPECT_EQ(manager_->view().Get(other)->available.at("CPU"), 0.5);

  Publish({NodeMessage(other, rpc::NodeInfo::DEAD, 3, "killed")});
  EXPECT_FALSE(manager_->view().Contains(other));
  EXPECT_TRUE(fatal_reasons_.empty());  // another node's death is not ours
}

// Resource reports come apart from other news, after news published later: the
// subscriber applies them all the same and acknowledges them by answer.
TEST_F(NodeManagerTest, AReportBelowTheNewsAlreadyProcessedIsAppliedAndAcknowledgedByAnswer) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  NodeID other = NodeID::FromRandom();
  Publish({NodeMessage(other, rpc::NodeInfo::ALIVE, 5)});
  rpc::PubMessage usage;
  usage.set_channel_type(rpc::RESOURCE_USAGE_CHANNEL);
  usage.set_sequence_id(3);
  usage.mutable_resource_usage_message()->set_node_id(other.Binary());
  (*usage.mutable_resource_usage_message()->mutable_resources_available())["CPU"] = 0.25;
  rpc::GcsSubscriberPollReply reply;
  reply.set_publisher_id("publisher-1");
  reply.set_answer_id(7);
  reply.add_pub_messages(usage.SerializeAsString());
  gcs_.poll.ReplyNext(loop_, absl::OkStatus(), std::move(reply));
  loop_.RunUntilIdle();
  ASSERT_NE(manager_->view().Get(other), nullptr);
  EXPECT_EQ(manager_->view().Get(other)->available.at("CPU"), 0.25);
  ASSERT_EQ(gcs_.poll.pending(), 1u);
  EXPECT_EQ(gcs_.poll.Next().max_processed_sequence_id(), 5);
  EXPECT_EQ(gcs_.poll.Next().last_answer_id(), 7);
}

TEST_F(NodeManagerTest, BeingDeclaredDeadIsFatal) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  Publish({NodeMessage(options_.node_id, rpc::NodeInfo::DEAD, 1, "health checks failed")});
  ASSERT_EQ(fatal_reasons_.size(), 1u);
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("dead"));
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("health checks failed"));
}

TEST_F(NodeManagerTest, ReRegistrationRefusedAfterGcsRestartIsFatal) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  // Answer the registration Start() made to resync.
  gcs_.register_node.ReplyNext(loop_, absl::OkStatus(), RegisterReply(cluster_id_));
  loop_.RunUntilIdle();
  // The restarted GCS does not know the subscriber: the node resyncs and registers again.
  gcs_.poll.ReplyNext(loop_, absl::NotFoundError("unknown subscriber"));
  loop_.RunUntilIdle();
  ASSERT_EQ(gcs_.register_node.pending(), 1u);
  EXPECT_TRUE(fatal_reasons_.empty());
  gcs_.register_node.ReplyNext(loop_, absl::FailedPreconditionError("node is dead"));
  loop_.RunUntilIdle();
  ASSERT_EQ(fatal_reasons_.size(), 1u);
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("node is dead"));
}

TEST_F(NodeManagerTest, GcsServingAnotherClusterIsFatal) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  gcs_.register_node.ReplyNext(loop_, absl::OkStatus(), RegisterReply(ClusterID::FromRandom()));
  loop_.RunUntilIdle();
  ASSERT_EQ(fatal_reasons_.size(), 1u);
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("another cluster"));
}

TEST_F(NodeManagerTest, GcsUnreachableLongerThanTheTimeoutIsFatal) {
  config_.raylet_gcs_check_period_ms = 1;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());  // the GCS answered at now_ms_
  const int64_t registered_at = now_ms_;

  // Each check asks the GCS for the cluster id; failed answers do not count as contact.
  ASSERT_TRUE(RunUntil([&] { return gcs_.get_cluster_id.pending() == 1; }));
  EXPECT_EQ(gcs_.get_cluster_id.Next(), 1);  // bounded by the check period
  gcs_.get_cluster_id.ReplyNext(loop_, absl::UnavailableError("down"));

  // Exactly the timeout (1 s) later: not yet fatal; the next check is sent.
  now_ms_ = registered_at + 1000;
  ASSERT_TRUE(RunUntil([&] { return gcs_.get_cluster_id.total() == 2; }));
  EXPECT_TRUE(fatal_reasons_.empty());
  gcs_.get_cluster_id.ReplyNext(loop_, absl::UnavailableError("down"));

  now_ms_ = registered_at + 1001;
  ASSERT_TRUE(RunUntil([&] { return !fatal_reasons_.empty(); }));
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("unreachable"));
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("1 s"));
}

TEST_F(NodeManagerTest, AnsweredGcsChecksKeepTheNodeAlive) {
  config_.raylet_gcs_check_period_ms = 1;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  const int64_t registered_at = now_ms_;

  now_ms_ = registered_at + 900;
  ASSERT_TRUE(RunUntil([&] { return gcs_.get_cluster_id.pending() == 1; }));
  rpc::GetClusterIdReply reply;
  reply.set_cluster_id(cluster_id_.Binary());
  gcs_.get_cluster_id.ReplyNext(loop_, absl::OkStatus(), reply);  // contact at +900

  // Past the timeout counted from registration, but not from the last answer.
  now_ms_ = registered_at + 1500;
  int checks = gcs_.get_cluster_id.total();
  ASSERT_TRUE(RunUntil([&] { return gcs_.get_cluster_id.total() > checks; }));
  EXPECT_TRUE(fatal_reasons_.empty());
}

TEST_F(NodeManagerTest, GcsCheckReportingAnotherClusterIsFatal) {
  config_.raylet_gcs_check_period_ms = 1;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_TRUE(RunUntil([&] { return gcs_.get_cluster_id.pending() == 1; }));
  rpc::GetClusterIdReply reply;
  reply.set_cluster_id(ClusterID::FromRandom().Binary());
  gcs_.get_cluster_id.ReplyNext(loop_, absl::OkStatus(), reply);
  loop_.RunUntilIdle();
  ASSERT_EQ(fatal_reasons_.size(), 1u);
  EXPECT_THAT(fatal_reasons_[0], HasSubstr("another cluster"));
}

TEST_F(NodeManagerTest, HeadSystemConfigAppliesBeforeTimersStart) {
  MakeManager();
  manager_->Start([this](absl::Status s) { registered_ = s; });
  loop_.RunUntilIdle();
  rpc::RegisterNodeReply reply = RegisterReply(cluster_id_);
  reply.set_system_config(R"({"raylet_gcs_check_period_ms": 1})");
  gcs_.register_node.ReplyNext(loop_, absl::OkStatus(), reply);
  // The fixture's check period is 1000 s; the head's 1 ms makes the check run now.
  ASSERT_TRUE(RunUntil([&] { return gcs_.get_cluster_id.total() >= 1; }));
  EXPECT_EQ(gcs_.get_cluster_id.Next(), 1);
}

TEST_F(NodeManagerTest, MalformedHeadSystemConfigIsIgnoredWhole) {
  MakeManager();
  manager_->Start([this](absl::Status s) { registered_ = s; });
  loop_.RunUntilIdle();
  rpc::RegisterNodeReply reply = RegisterReply(cluster_id_);
  // The first entry is fine, the second is not: neither may be applied.
  reply.set_system_config(R"({"raylet_gcs_check_period_ms": 1, "resource_report_ms": "soon"})");
  gcs_.register_node.ReplyNext(loop_, absl::OkStatus(), reply);
  loop_.RunUntilIdle();
  ASSERT_TRUE(registered_.has_value());
  EXPECT_TRUE(registered_->ok()) << *registered_;
  bool sentinel = false;
  loop_.PostAfter("test.Sentinel", 20, [&] { sentinel = true; });
  ASSERT_TRUE(RunUntil([&] { return sentinel; }));
  EXPECT_EQ(gcs_.get_cluster_id.total(), 0);  // still the 1000 s check period
  EXPECT_EQ(gcs_.report_usage.total(), 0);    // and the 1000 s report period
}

TEST_F(NodeManagerTest, HealthCheckReplyCarriesTheNodeId) {
  MakeManager();
  rpc::HealthCheckReply reply;
  std::optional<absl::Status> sent;
  manager_->HandleHealthCheck(rpc::HealthCheckRequest(), &reply,
                              rpc::SendReply([&](absl::Status s) { sent = s; }));
  ASSERT_TRUE(sent.has_value());
  EXPECT_TRUE(sent->ok()) << *sent;
  EXPECT_EQ(reply.node_id(), options_.node_id.Binary());
}

TEST_F(NodeManagerTest, GetNodeStatsDescribesThisNode) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  rpc::GetAllNodeInfoReply snapshot;
  *snapshot.add_node_info_list() = manager_->MakeNodeInfo();
  gcs_.get_all_node_info.ReplyNext(loop_, absl::OkStatus(), snapshot);
  loop_.RunUntilIdle();

  rpc::GetNodeStatsReply reply;
  std::optional<absl::Status> sent;
  manager_->HandleGetNodeStats(rpc::GetNodeStatsRequest(), &reply,
                               rpc::SendReply([&](absl::Status s) { sent = s; }));
  ASSERT_TRUE(sent.has_value());
  EXPECT_TRUE(sent->ok()) << *sent;
  EXPECT_EQ(reply.node_info().node_id(), options_.node_id.Binary());
  EXPECT_EQ(reply.usage().resources_total().at("CPU"), 2);
  EXPECT_EQ(reply.num_alive_nodes_in_view(), 1);
}

TEST_F(NodeManagerTest, ShutdownUnregistersThenCallsDone) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  bool done = false;
  manager_->Shutdown([&] { done = true; });
  loop_.RunUntilIdle();
  ASSERT_EQ(gcs_.unregister_node.pending(), 1u);
  EXPECT_EQ(gcs_.unregister_node.Next().node_id, options_.node_id.Binary());
  EXPECT_FALSE(gcs_.unregister_node.Next().reason.empty());
  EXPECT_FALSE(done);
  gcs_.unregister_node.ReplyNext(loop_, absl::OkStatus());
  loop_.RunUntilIdle();
  EXPECT_TRUE(done);
}

TEST_F(NodeManagerTest, ShutdownCallsDoneEvenWhenUnregisterFails) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  bool done = false;
  manager_->Shutdown([&] { done = true; });
  loop_.RunUntilIdle();
  gcs_.unregister_node.ReplyNext(loop_, absl::DeadlineExceededError("GCS gone"));
  loop_.RunUntilIdle();
  EXPECT_TRUE(done);
}

TEST_F(NodeManagerTest, OwnDeathAfterShutdownIsNotFatal) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  manager_->Shutdown([] {});
  loop_.RunUntilIdle();
  // Unregistering makes the GCS publish this node's death: expected, not fatal.
  Publish({NodeMessage(options_.node_id, rpc::NodeInfo::DEAD, 1, "raylet stopped")});
  EXPECT_TRUE(fatal_reasons_.empty());
}

TEST_F(NodeManagerTest, ShutdownStopsTheGcsCheck) {
  config_.raylet_gcs_check_period_ms = 1;
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  manager_->Shutdown([] {});
  loop_.RunUntilIdle();
  const int checks = gcs_.get_cluster_id.total();
  // Long past the timeout, with the check timer gone, nothing is fatal.
  now_ms_ += 100000;
  bool sentinel = false;
  loop_.PostAfter("test.Sentinel", 20, [&] { sentinel = true; });
  ASSERT_TRUE(RunUntil([&] { return sentinel; }));
  EXPECT_TRUE(fatal_reasons_.empty());
  EXPECT_EQ(gcs_.get_cluster_id.total(), checks);
}

// Usage reports carry the lease manager's view of this node
// and cluster events reach it.
class NodeManagerWithWorkersTest : public NodeManagerTest {
 protected:
  struct Call {
    rpc::RequestWorkerLeaseReply reply;
    bool sent = false;
  };
  std::shared_ptr<Call> RequestLease(const std::map<std::string, double>& resources,
                                     const WorkerID& owner = WorkerID::Nil()) {
    rpc::RequestWorkerLeaseRequest request;
    if (!owner.IsNil()) request.mutable_owner_address()->set_worker_id(owner.Binary());
    request.set_lease_request_id(LeaseID::FromRandom().Binary());
    request.set_job_id(JobID::FromInt(3).Binary());
    for (const auto& [k, v] : resources) (*request.mutable_required_resources())[k] = v;
    auto call = std::make_shared<Call>();
    leases_->HandleRequestWorkerLease(request, &call->reply, rpc::SendReply([call](absl::Status) { call->sent = true; }));
    loop_.RunUntilIdle();
    // The pool asks the GCS how job 3 starts its workers: it registered "/bin/driver".
    while (gcs_.get_all_jobs.pending() > 0) {
      gcs_.get_all_jobs.ReplyNext(loop_, absl::OkStatus(), JobsReply({{JobID::FromInt(3), "/bin/driver"}}));
      loop_.RunUntilIdle();
    }
    return call;
  }
  static rpc::GetAllJobInfoReply JobsReply(const std::vector<std::pair<JobID, std::string>>& jobs) {
    rpc::GetAllJobInfoReply reply;
    for (const auto& [id, command] : jobs) {
      rpc::JobInfo* job = reply.add_job_info_list();
      job->set_job_id(id.Binary());
      job->mutable_config()->add_worker_command(command);
    }
    return reply;
  }

  // Registers the worker of the `index`-th start; returns its id.
  WorkerID RegisterStarted(size_t index) {
    const FakeWorkerLauncher::StartRecord& start = launcher_.starts.at(index);
    WorkerID worker_id = *WorkerID::FromHex(start.env.at("MANTA_WORKER_ID"));
    rpc::RegisterWorkerRequest request;
    request.set_worker_type(rpc::WORKER);
    request.set_startup_token(start.secrets.at("MANTA_WORKER_STARTUP_TOKEN"));
    request.set_worker_id(worker_id.Binary());
    request.set_pid(start.pid);
    request.mutable_address()->set_ip_address("10.0.0.1");
    request.mutable_address()->set_port(20000 + static_cast<int>(index));
    rpc::RegisterWorkerReply reply;
    pool_->HandleRegisterWorker(request, &reply, rpc::SendReply([](absl::Status s) { ASSERT_TRUE(s.ok()) << s; }));
    loop_.RunUntilIdle();
    return worker_id;
  }

  rpc::ResourceUsage Usage() {
    rpc::GetNodeStatsReply reply;
    manager_->HandleGetNodeStats(rpc::GetNodeStatsRequest(), &reply, rpc::SendReply([](absl::Status) {}));
    return reply.usage();
  }

};

TEST_F(NodeManagerWithWorkersTest, UsageListsInfeasibleRequestsUntilANodeCanRunThem) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  std::shared_ptr<Call> gpu = RequestLease({{"GPU", 1}});
  std::shared_ptr<Call> cpu = RequestLease({{"CPU", 1}});
  EXPECT_FALSE(gpu->sent);
  rpc::ResourceUsage usage = Usage();
  EXPECT_THAT(usage.infeasible_shapes(), ::testing::ElementsAre("GPU: 1"));
  EXPECT_EQ(usage.resources_available().at("CPU"), 1);  // one CPU held for the starting worker

  NodeID gpu_node = NodeID::FromRandom();
  rpc::PubMessage joined = NodeMessage(gpu_node, rpc::NodeInfo::ALIVE, 1);
  (*joined.mutable_node_info_message()->mutable_resources_total())["GPU"] = 1;
  joined.mutable_node_info_message()->set_node_manager_address("10.9.9.9");
  Publish({joined});
  ASSERT_TRUE(gpu->sent);
  EXPECT_EQ(gpu->reply.retry_at_raylet_address().node_id(), gpu_node.Binary());
  EXPECT_EQ(gpu->reply.retry_at_raylet_address().ip_address(), "10.9.9.9");
  EXPECT_EQ(Usage().infeasible_shapes_size(), 0);
}

TEST_F(NodeManagerWithWorkersTest, WorkersStartOnlyAsTheJobRegisteredWithTheGcs) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  RequestLease({{"CPU", 1}});
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_EQ(launcher_.starts[0].argv, std::vector<std::string>{"/bin/driver"});
  // A job the GCS does not know gets no worker: its requests are rejected.
  rpc::RequestWorkerLeaseRequest request;
  request.set_lease_request_id(LeaseID::FromRandom().Binary());
  request.set_job_id(JobID::FromInt(99).Binary());
  auto call = std::make_shared<Call>();
  leases_->HandleRequestWorkerLease(request, &call->reply, rpc::SendReply([call](absl::Status) { call->sent = true; }));
  loop_.RunUntilIdle();
  ASSERT_EQ(gcs_.get_all_jobs.pending(), 1u);
  gcs_.get_all_jobs.ReplyNext(loop_, absl::OkStatus(), JobsReply({{JobID::FromInt(3), "/bin/driver"}}));
  ASSERT_TRUE(RunUntil([&] { return call->sent; }));
  EXPECT_TRUE(call->reply.rejected());
  EXPECT_THAT(call->reply.failure_message(), HasSubstr("not registered with the GCS"));
  EXPECT_EQ(launcher_.starts.size(), 1u);
  RegisterStarted(0);  // frees the (single) startup slot
  // A job's config published later is taken too.
  rpc::PubMessage job;
  job.set_channel_type(rpc::GCS_JOB_CHANNEL);
  job.set_sequence_id(1);
  job.mutable_job_message()->set_job_id(JobID::FromInt(7).Binary());
  job.mutable_job_message()->mutable_config()->add_worker_command("/bin/seven");
  Publish({job});
  rpc::RequestWorkerLeaseRequest seven = request;
  seven.set_lease_request_id(LeaseID::FromRandom().Binary());
  seven.set_job_id(JobID::FromInt(7).Binary());
  auto seven_call = std::make_shared<Call>();
  leases_->HandleRequestWorkerLease(seven, &seven_call->reply, rpc::SendReply([](absl::Status) {}));
  loop_.RunUntilIdle();
  EXPECT_EQ(gcs_.get_all_jobs.pending(), 0u);  // known already: no question to the GCS
  ASSERT_EQ(launcher_.starts.size(), 2u);
  EXPECT_EQ(launcher_.starts[1].argv, std::vector<std::string>{"/bin/seven"});
}

TEST_F(NodeManagerWithWorkersTest, PublishedJobEndDropsItsRequestsAndWorkers) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  std::shared_ptr<Call> call = RequestLease({{"CPU", 1}});
  ASSERT_EQ(launcher_.starts.size(), 1u);
  EXPECT_FALSE(call->sent);

  rpc::PubMessage job;
  job.set_channel_type(rpc::GCS_JOB_CHANNEL);
  job.set_sequence_id(1);
  job.mutable_job_message()->set_job_id(JobID::FromInt(3).Binary());
  job.mutable_job_message()->set_is_dead(true);
  Publish({job});
  ASSERT_TRUE(call->sent);
  EXPECT_TRUE(call->reply.canceled());
  EXPECT_EQ(pool_->num_workers(), 0u);
  EXPECT_EQ(Usage().resources_available().at("CPU"), 2);
}

rpc::PubMessage WorkerDeath(const WorkerID& worker, const NodeID& node, int64_t sequence_id) {
  rpc::PubMessage message;
  message.set_channel_type(rpc::GCS_WORKER_DELTA_CHANNEL);
  message.set_sequence_id(sequence_id);
  message.mutable_worker_delta_message()->set_worker_id(worker.Binary());
  message.mutable_worker_delta_message()->set_node_id(node.Binary());
  message.mutable_worker_delta_message()->set_exit_reason("SIGKILL");
  return message;
}

TEST_F(NodeManagerWithWorkersTest, PublishedDeathOfARemoteOwnerDropsItsRequests) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  WorkerID owner = WorkerID::FromRandom();
  RequestLease({{"CPU", 2}});  // takes both CPUs while its worker starts
  std::shared_ptr<Call> queued = RequestLease({{"CPU", 1}}, owner);
  EXPECT_FALSE(queued->sent);
  // Reported by this node's own raylet: already handled here, ignored.
  Publish({WorkerDeath(owner, options_.node_id, 1)});
  EXPECT_FALSE(queued->sent);
  Publish({WorkerDeath(owner, NodeID::FromRandom(), 2)});
  ASSERT_TRUE(queued->sent);
  EXPECT_TRUE(queued->reply.canceled());
}

TEST_F(NodeManagerWithWorkersTest, PublishedDeathOfARemoteOwnerReleasesItsLeases) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  WorkerID owner = WorkerID::FromRandom();
  std::shared_ptr<Call> dead_owners = RequestLease({{"CPU", 1}}, owner);
  RegisterStarted(0);
  ASSERT_TRUE(dead_owners->sent);
  ASSERT_FALSE(dead_owners->reply.lease_id().empty()) << dead_owners->reply.DebugString();
  std::shared_ptr<Call> live_owners = RequestLease({{"CPU", 1}}, WorkerID::FromRandom());
  RegisterStarted(1);
  ASSERT_TRUE(live_owners->sent);
  EXPECT_EQ(Usage().resources_available().at("CPU"), 0);

  Publish({WorkerDeath(owner, NodeID::FromRandom(), 1)});
  // The dead owner's worker is killed and its CPU comes back; the other lease stays.
  EXPECT_THAT(launcher_.signals, ::testing::ElementsAre(std::make_pair(launcher_.starts[0].pid, SIGKILL)));
  EXPECT_EQ(Usage().resources_available().at("CPU"), 1);
  EXPECT_EQ(leases_->num_leases(), 1u);
}

TEST_F(NodeManagerWithWorkersTest, ProcessesThatExitAreReportedToTheGcs) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  WorkerID driver = WorkerID::FromRandom();
  rpc::RegisterWorkerRequest reg;
  reg.set_worker_type(rpc::DRIVER);
  reg.set_worker_id(driver.Binary());
  reg.set_job_id(JobID::FromInt(3).Binary());
  reg.set_pid(4242);
  rpc::RegisterWorkerReply reg_reply;
  pool_->HandleRegisterWorker(reg, &reg_reply, rpc::SendReply([](absl::Status s) { ASSERT_TRUE(s.ok()); }));
  pool_->OnStoreClientConnected(driver.Hex());
  pool_->OnStoreClientClosed(driver.Hex());
  loop_.RunUntilIdle();
  ASSERT_EQ(gcs_.worker_failures.pending(), 1u);
  const rpc::WorkerDeltaData& failure = gcs_.worker_failures.Next();
  EXPECT_EQ(failure.worker_id(), driver.Binary());
  EXPECT_EQ(failure.node_id(), options_.node_id.Binary());
  EXPECT_EQ(failure.job_id(), JobID::FromInt(3).Binary());
  EXPECT_TRUE(failure.is_driver());
  // A driver's exit also ends its job.
  ASSERT_EQ(gcs_.mark_job_finished.pending(), 1u);
  EXPECT_EQ(gcs_.mark_job_finished.Next(), JobID::FromInt(3).Binary());
}

TEST_F(NodeManagerWithWorkersTest, RegisteredWorkersThatExitAreReportedToTheGcs) {
  ASSERT_NO_FATAL_FAILURE(StartRegistered());
  ASSERT_NO_FATAL_FAILURE(AnswerSubscribe());
  // Two workers start (one lease each); only the first registers.
  std::shared_ptr<Call> leased = RequestLease({{"CPU", 1}});
  ASSERT_EQ(launcher_.starts.size(), 1u);
  const WorkerID worker = RegisterStarted(0);
  ASSERT_TRUE(leased->sent);
  std::shared_ptr<Call> starting = RequestLease({{"CPU", 1}});
  ASSERT_EQ(launcher_.starts.size(), 2u);

  // Died while starting: it never ran anything, so it owns nothing to report.
  pool_->OnProcessExit(launcher_.starts[1].pid, /*status=*/9);
  loop_.RunUntilIdle();
  EXPECT_TRUE(starting->sent);  // its request fails with the start
  EXPECT_EQ(gcs_.worker_failures.pending(), 0u);

  pool_->OnProcessExit(launcher_.starts[0].pid, /*status=*/9);
  loop_.RunUntilIdle();
  ASSERT_EQ(gcs_.worker_failures.pending(), 1u);
  const rpc::WorkerDeltaData& failure = gcs_.worker_failures.Next();
  EXPECT_EQ(failure.worker_id(), worker.Binary());
  EXPECT_EQ(failure.node_id(), options_.node_id.Binary());
  EXPECT_EQ(failure.job_id(), JobID::FromInt(3).Binary());
  EXPECT_FALSE(failure.is_driver());
  EXPECT_THAT(failure.exit_reason(), HasSubstr("exited"));
  // A worker's exit does not end its job.
  EXPECT_EQ(gcs_.mark_job_finished.total(), 0);
}

}  // namespace
}  // namespace manta::raylet
