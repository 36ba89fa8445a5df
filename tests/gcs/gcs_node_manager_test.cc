// GcsNodeManager over an in-memory store and a real GcsPublisher: every change is
// written to the "nodes" table before it is answered, published on
// GCS_NODE_INFO_CHANNEL and reported to listeners; a restarted manager rebuilds the
// table from the stored rows.
#include "src/gcs/gcs_node_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/gcs/in_memory_store_client.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// An in-memory store whose writes can be made to fail, for the error paths.
class FlakyStore : public InMemoryStoreClient {
 public:
  explicit FlakyStore(EventLoop& loop) : InMemoryStoreClient(loop), loop_(loop) {}
  void AsyncPut(const std::string& table, const std::string& key, const std::string& value, bool overwrite,
                ResultCallback<bool> callback) override {
    if (fail_writes) {
      loop_.Post("FlakyStore.Put", [callback = std::move(callback)]() mutable {
        callback(absl::UnavailableError("injected store failure"));
      });
      return;
    }
    InMemoryStoreClient::AsyncPut(table, key, value, overwrite, std::move(callback));
  }
  bool fail_writes = false;

 private:
  EventLoop& loop_;
};

rpc::NodeInfo MakeNode(const NodeID& id, int port = 7000) {
  rpc::NodeInfo info;
  info.set_node_id(id.Binary());
  info.set_node_manager_address("10.0.0.1");
  info.set_node_manager_port(port);
  (*info.mutable_resources_total())["CPU"] = 4;
  return info;
}

class GcsNodeManagerTest : public ::testing::Test {
 protected:
  GcsNodeManagerTest()
      : store_(loop_),
        publisher_(GcsPublisher::Options(), clock_.AsFunction()),
        published_(publisher_, {rpc::GCS_NODE_INFO_CHANNEL, rpc::RESOURCE_USAGE_CHANNEL}),
        manager_(MakeManager()) {}

  // A manager over the shared store, with listeners recording into added_/removed_.
  std::unique_ptr<GcsNodeManager> MakeManager() {
    auto manager = std::make_unique<GcsNodeManager>(store_, publisher_, cluster_id_, clock_.AsFunction());
    manager->AddNodeAddedListener([this](const rpc::NodeInfo& info) { added_.push_back(info.node_id()); });
    manager->AddNodeRemovedListener([this](const rpc::NodeInfo& info) { removed_.push_back(info.node_id()); });
    return manager;
  }

  absl::Status Register(const rpc::NodeInfo& info, rpc::RegisterNodeReply* reply = nullptr) {
    rpc::RegisterNodeRequest request;
    *request.mutable_node_info() = info;
    rpc::RegisterNodeReply ignored;
    return CallHandler(loop_, *manager_, &GcsNodeManager::HandleRegisterNode, request, reply ? reply : &ignored);
  }
  absl::Status Unregister(const std::string& node_id, const std::string& reason = "") {
    rpc::UnregisterNodeRequest request;
    request.set_node_id(node_id);
    request.set_reason(reason);
    rpc::UnregisterNodeReply reply;
    return CallHandler(loop_, *manager_, &GcsNodeManager::HandleUnregisterNode, request, &reply);
  }
  absl::Status Drain(const std::string& node_id, rpc::DrainNodeReply* reply) {
    rpc::DrainNodeRequest request;
    request.set_node_id(node_id);
    return CallHandler(loop_, *manager_, &GcsNodeManager::HandleDrainNode, request, reply);
  }
  absl::Status ReportUsage(const std::string& node_id, double cpu_available) {
    rpc::ReportResourceUsageRequest request;
    request.mutable_usage()->set_node_id(node_id);
    (*request.mutable_usage()->mutable_resources_available())["CPU"] = cpu_available;
    rpc::ReportResourceUsageReply reply;
    return CallHandler(loop_, *manager_, &GcsNodeManager::HandleReportResourceUsage, request, &reply);
  }
  rpc::GetAllNodeInfoReply GetAll() {
    rpc::GetAllNodeInfoReply reply;
    EXPECT_THAT(CallHandler(loop_, *manager_, &GcsNodeManager::HandleGetAllNodeInfo, rpc::GetAllNodeInfoRequest(),
                            &reply),
                IsOk());
    return reply;
  }
  std::optional<rpc::NodeInfo> Stored(const NodeID& id) {
    auto row = ReadRow(loop_, store_, kNodeTable, id.Binary());
    if (!row.has_value()) return std::nullopt;
    rpc::NodeInfo info;
    EXPECT_TRUE(info.ParseFromString(*row));
    return info;
  }

  EventLoop loop_;
  FakeClock clock_;
  FlakyStore store_;
  GcsPublisher publisher_;
  PublishedMessages published_;
  const ClusterID cluster_id_ = ClusterID::FromRandom();
  std::vector<std::string> added_;
  std::vector<std::string> removed_;
  std::unique_ptr<GcsNodeManager> manager_;
  const NodeID node_ = NodeID::FromRandom();
};

TEST_F(GcsNodeManagerTest, RegisterPersistsPublishesAndNotifies) {
  rpc::RegisterNodeRequest request;
  *request.mutable_node_info() = MakeNode(node_);
  rpc::RegisterNodeReply reply;
  ReplyRecorder recorder;
  manager_->HandleRegisterNode(request, &reply, recorder.Sender());
  EXPECT_FALSE(recorder.replied()) << "answered before the store acknowledged the write";
  loop_.RunUntilIdle();
  ASSERT_EQ(recorder.calls(), 1);
  ASSERT_THAT(recorder.status(), IsOk());
  EXPECT_FALSE(reply.already_registered());
  EXPECT_EQ(reply.cluster_id(), cluster_id_.Binary());

  auto stored = Stored(node_);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->state(), rpc::NodeInfo::ALIVE);
  EXPECT_EQ(stored->node_manager_port(), 7000);
  EXPECT_EQ(stored->start_time_ms(), clock_.now_ms()) << "start time filled in when absent";

  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_EQ(messages[0].channel_type(), rpc::GCS_NODE_INFO_CHANNEL);
  EXPECT_EQ(messages[0].key_id(), node_.Binary());
  EXPECT_EQ(messages[0].node_info_message().state(), rpc::NodeInfo::ALIVE);

  EXPECT_THAT(added_, ElementsAre(node_.Binary()));
  ASSERT_NE(manager_->GetNode(node_), nullptr);
  EXPECT_THAT(manager_->AliveNodes(), SizeIs(1));
}

TEST_F(GcsNodeManagerTest, RegisteringTheSameIdAgainReportsAlreadyRegistered) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  published_.TakeNew();

  rpc::RegisterNodeReply reply;
  ASSERT_THAT(Register(MakeNode(node_, /*port=*/9999), &reply), IsOk());
  EXPECT_TRUE(reply.already_registered());
  EXPECT_EQ(reply.cluster_id(), cluster_id_.Binary());
  EXPECT_EQ(manager_->GetNode(node_)->node_manager_port(), 7000) << "the existing entry is kept";
  EXPECT_THAT(published_.TakeNew(), IsEmpty());
  EXPECT_THAT(added_, SizeIs(1));
}

TEST_F(GcsNodeManagerTest, RegisteringADeadIdIsFailedPrecondition) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  ASSERT_THAT(Unregister(node_.Binary()), IsOk());
  EXPECT_THAT(Register(MakeNode(node_)), StatusIs(absl::StatusCode::kFailedPrecondition, "DEAD"));
  EXPECT_EQ(manager_->GetNode(node_)->state(), rpc::NodeInfo::DEAD);
}

TEST_F(GcsNodeManagerTest, MalformedNodeIdIsInvalidArgument) {
  const std::string bad = "too short";
  rpc::NodeInfo info = MakeNode(node_);
  info.set_node_id(bad);
  EXPECT_THAT(Register(info), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Unregister(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  rpc::DrainNodeReply drain_reply;
  EXPECT_THAT(Drain(bad, &drain_reply), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ReportUsage(bad, 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ReadTable(loop_, store_, kNodeTable), IsEmpty());
  EXPECT_THAT(published_.TakeNew(), IsEmpty());
}

TEST_F(GcsNodeManagerTest, FailedStoreWriteFailsRegistrationAndKeepsNothing) {
  store_.fail_writes = true;
  EXPECT_THAT(Register(MakeNode(node_)), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(manager_->GetNode(node_), nullptr);
  EXPECT_THAT(added_, IsEmpty());
  EXPECT_THAT(published_.TakeNew(), IsEmpty());

  // The raylet retries once the store is back: a fresh registration.
  store_.fail_writes = false;
  rpc::RegisterNodeReply reply;
  ASSERT_THAT(Register(MakeNode(node_), &reply), IsOk());
  EXPECT_FALSE(reply.already_registered());
  EXPECT_THAT(added_, SizeIs(1));
}

TEST_F(GcsNodeManagerTest, RepeatedRegistrationDuringAFailingWriteGetsTheFailure) {
  store_.fail_writes = true;
  rpc::RegisterNodeRequest request;
  *request.mutable_node_info() = MakeNode(node_);
  rpc::RegisterNodeReply first_reply, second_reply;
  ReplyRecorder first, second;
  manager_->HandleRegisterNode(request, &first_reply, first.Sender());
  // A retry arrives while the first write is still in flight.
  manager_->HandleRegisterNode(request, &second_reply, second.Sender());
  EXPECT_FALSE(second.replied()) << "answered before the first write finished";
  loop_.RunUntilIdle();
  EXPECT_THAT(first.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(second.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(second_reply.already_registered());
  EXPECT_EQ(manager_->GetNode(node_), nullptr);
}

TEST_F(GcsNodeManagerTest, RepeatedRegistrationDuringASuccessfulWriteIsAlreadyRegistered) {
  rpc::RegisterNodeRequest request;
  *request.mutable_node_info() = MakeNode(node_);
  rpc::RegisterNodeReply first_reply, second_reply;
  ReplyRecorder first, second;
  manager_->HandleRegisterNode(request, &first_reply, first.Sender());
  manager_->HandleRegisterNode(request, &second_reply, second.Sender());
  loop_.RunUntilIdle();
  EXPECT_THAT(first.status(), IsOk());
  EXPECT_THAT(second.status(), IsOk());
  EXPECT_TRUE(second_reply.already_registered());
  EXPECT_THAT(added_, SizeIs(1));
}

TEST_F(GcsNodeManagerTest, UnregisterMarksDeadWithReasonPersistsAndPublishes) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  published_.TakeNew();
  clock_.Advance(5000);

  ASSERT_THAT(Unregister(node_.Binary(), "shutting down"), IsOk());
  auto stored = Stored(node_);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->state(), rpc::NodeInfo::DEAD);
  EXPECT_EQ(stored->death_reason(), "shutting down");
  EXPECT_EQ(stored->end_time_ms(), clock_.now_ms());

  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_EQ(messages[0].node_info_message().state(), rpc::NodeInfo::DEAD);
  EXPECT_EQ(messages[0].node_info_message().death_reason(), "shutting down");
  EXPECT_THAT(removed_, ElementsAre(node_.Binary()));
  EXPECT_THAT(manager_->AliveNodes(), IsEmpty());

  // Dead nodes stay listed.
  auto all = GetAll();
  ASSERT_EQ(all.node_info_list_size(), 1);
  EXPECT_EQ(all.node_info_list(0).state(), rpc::NodeInfo::DEAD);
}

TEST_F(GcsNodeManagerTest, UnregisterWithoutReasonGetsADefaultReason) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  ASSERT_THAT(Unregister(node_.Binary()), IsOk());
  EXPECT_FALSE(manager_->GetNode(node_)->death_reason().empty());
}

TEST_F(GcsNodeManagerTest, MarkNodeDeadPersistsPublishesAndNotifiesOnce) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  published_.TakeNew();

  manager_->MarkNodeDead(node_, "missed 5 health checks");
  loop_.RunUntilIdle();
  auto stored = Stored(node_);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->state(), rpc::NodeInfo::DEAD);
  EXPECT_EQ(stored->death_reason(), "missed 5 health checks");
  EXPECT_THAT(published_.TakeNew(), SizeIs(1));
  EXPECT_THAT(removed_, ElementsAre(node_.Binary()));

  // Already dead, or never known: nothing happens.
  manager_->MarkNodeDead(node_, "again");
  manager_->MarkNodeDead(NodeID::FromRandom(), "unknown");
  loop_.RunUntilIdle();
  EXPECT_EQ(Stored(node_)->death_reason(), "missed 5 health checks");
  EXPECT_THAT(published_.TakeNew(), IsEmpty());
  EXPECT_THAT(removed_, SizeIs(1));
}

TEST_F(GcsNodeManagerTest, GetAllNodeInfoListsNodesInStartOrderWithUsageOfAliveOnes) {
  NodeID first = NodeID::FromRandom(), second = NodeID::FromRandom();
  ASSERT_THAT(Register(MakeNode(first)), IsOk());
  clock_.Advance(10);
  ASSERT_THAT(Register(MakeNode(second)), IsOk());
  ASSERT_THAT(ReportUsage(first.Binary(), 1.5), IsOk());
  ASSERT_THAT(ReportUsage(second.Binary(), 2.5), IsOk());

  auto all = GetAll();
  ASSERT_EQ(all.node_info_list_size(), 2);
  EXPECT_EQ(all.node_info_list(0).node_id(), first.Binary());
  EXPECT_EQ(all.node_info_list(1).node_id(), second.Binary());
  ASSERT_EQ(all.resource_usage_size(), 2);
  EXPECT_EQ(all.resource_usage(0).resources_available().at("CPU"), 1.5);

  ASSERT_THAT(Unregister(first.Binary()), IsOk());
  all = GetAll();
  EXPECT_EQ(all.node_info_list_size(), 2);
  ASSERT_EQ(all.resource_usage_size(), 1) << "a dead node's usage is forgotten";
  EXPECT_EQ(all.resource_usage(0).node_id(), second.Binary());
}

TEST_F(GcsNodeManagerTest, ResourceUsageIsPublishedAndOnlyAcceptedFromAliveNodes) {
  EXPECT_THAT(ReportUsage(node_.Binary(), 1), StatusIs(absl::StatusCode::kNotFound));

  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  published_.TakeNew();
  ASSERT_THAT(ReportUsage(node_.Binary(), 3), IsOk());
  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_EQ(messages[0].channel_type(), rpc::RESOURCE_USAGE_CHANNEL);
  EXPECT_EQ(messages[0].resource_usage_message().resources_available().at("CPU"), 3);

  ASSERT_THAT(Unregister(node_.Binary()), IsOk());
  EXPECT_THAT(ReportUsage(node_.Binary(), 1), StatusIs(absl::StatusCode::kNotFound));
}

// Every node hears every node's reports: only availability and totals; the rest (the
// store's statistics, demand) stays in the GCS.
TEST_F(GcsNodeManagerTest, ReportsArePublishedWithOnlyWhatTheViewsUse) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  published_.TakeNew();
  rpc::ReportResourceUsageRequest request;
  request.mutable_usage()->set_node_id(node_.Binary());
  (*request.mutable_usage()->mutable_resources_available())["CPU"] = 2;
  (*request.mutable_usage()->mutable_resources_total())["CPU"] = 4;
  request.mutable_usage()->mutable_object_store()->set_used_bytes(100);
  request.mutable_usage()->set_num_leases(3);
  rpc::ReportResourceUsageReply reply;
  ASSERT_THAT(CallHandler(loop_, *manager_, &GcsNodeManager::HandleReportResourceUsage, request, &reply), IsOk());
  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  const rpc::ResourceUsage& news = messages[0].resource_usage_message();
  EXPECT_EQ(news.node_id(), node_.Binary());
  EXPECT_EQ(news.resources_available().at("CPU"), 2);
  EXPECT_EQ(news.resources_total().at("CPU"), 4);
  EXPECT_FALSE(news.has_object_store());
  EXPECT_EQ(news.num_leases(), 0);
  // The GCS keeps the whole report.
  EXPECT_EQ(manager_->GetUsage(node_)->object_store().used_bytes(), 100);
  EXPECT_EQ(manager_->GetUsage(node_)->num_leases(), 3);
}

TEST_F(GcsNodeManagerTest, DrainNodeIsPersistedAndPublished) {
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  published_.TakeNew();

  rpc::DrainNodeReply reply;
  ASSERT_THAT(Drain(node_.Binary(), &reply), IsOk());
  EXPECT_TRUE(reply.accepted());
  EXPECT_TRUE(Stored(node_)->draining());
  EXPECT_EQ(Stored(node_)->state(), rpc::NodeInfo::ALIVE);
  auto messages = published_.TakeNew();
  ASSERT_THAT(messages, SizeIs(1));
  EXPECT_TRUE(messages[0].node_info_message().draining());
}

TEST_F(GcsNodeManagerTest, DrainOfUnknownOrDeadNodeIsNotFound) {
  rpc::DrainNodeReply reply;
  EXPECT_THAT(Drain(node_.Binary(), &reply), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(Register(MakeNode(node_)), IsOk());
  ASSERT_THAT(Unregister(node_.Binary()), IsOk());
  EXPECT_THAT(Drain(node_.Binary(), &reply), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_FALSE(reply.accepted());
}

TEST_F(GcsNodeManagerTest, RestartedManagerRestoresNodesFromTheStore) {
  NodeID alive = NodeID::FromRandom(), dead = NodeID::FromRandom();
  ASSERT_THAT(Register(MakeNode(alive)), IsOk());
  ASSERT_THAT(Register(MakeNode(dead)), IsOk());
  ASSERT_THAT(Unregister(dead.Binary(), "gone"), IsOk());
  added_.clear();

  // A new GCS: a fresh manager loading the same table.
  manager_ = MakeManager();
  manager_->Initialize(ReadTable(loop_, store_, kNodeTable));

  EXPECT_THAT(added_, ElementsAre(alive.Binary())) << "listeners hear of alive nodes only";
  ASSERT_NE(manager_->GetNode(alive), nullptr);
  EXPECT_EQ(manager_->GetNode(alive)->state(), rpc::NodeInfo::ALIVE);
  ASSERT_NE(manager_->GetNode(dead), nullptr);
  EXPECT_EQ(manager_->GetNode(dead)->death_reason(), "gone");
  EXPECT_EQ(GetAll().node_info_list_size(), 2);

  // The raylet reconnects; the dead node cannot come back.
  rpc::RegisterNodeReply reply;
  ASSERT_THAT(Register(MakeNode(alive), &reply), IsOk());
  EXPECT_TRUE(reply.already_registered());
  EXPECT_THAT(Register(MakeNode(dead)), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(GcsNodeManagerTest, InitializeSkipsMalformedRows) {
  NodeID good = NodeID::FromRandom(), empty = NodeID::FromRandom(), garbage = NodeID::FromRandom(),
         mismatched = NodeID::FromRandom();
  absl::flat_hash_map<std::string, std::string> rows;
  rows[good.Binary()] = MakeNode(good).SerializeAsString();
  rows["short key"] = MakeNode(NodeID::FromRandom()).SerializeAsString();
  rows[garbage.Binary()] = std::string("\x0a\xff\xff", 3);  // truncated length-delimited field
  // An empty value parses as an empty NodeInfo: no node id, state ALIVE.
  rows[empty.Binary()] = "";
  // A row whose value describes another node.
  rows[mismatched.Binary()] = MakeNode(NodeID::FromRandom()).SerializeAsString();

  manager_->Initialize(rows);
  EXPECT_THAT(added_, ElementsAre(good.Binary()));
  EXPECT_NE(manager_->GetNode(good), nullptr);
  EXPECT_EQ(manager_->GetNode(garbage), nullptr);
  EXPECT_EQ(manager_->GetNode(empty), nullptr);
  EXPECT_EQ(manager_->GetNode(mismatched), nullptr);
  EXPECT_THAT(manager_->AliveNodes(), SizeIs(1));
}

}  // namespace
}  // namespace manta::gcs::testing
