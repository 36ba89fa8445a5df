// GcsServer over a real redis-server, reached through real gRPC clients on port 0:
// a GCS started after the previous one is gone serves the same cluster (same id,
// same nodes, jobs and KV), which is what a GCS restart relies on (ARCHITECTURE §10).
#include "src/gcs/gcs_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "protos/gcs.grpc.pb.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/security.h"
#include "src/gcs/redis_store_client.h"
#include "tests/gcs/gcs_test_helpers.h"

namespace manta::gcs::testing {
namespace {

using manta::testing::RedisServer;

constexpr int64_t kDeadlineMs = 10000;

// Sends one RPC through `client` and drives the loop until its reply (with a deadline).
template <typename Reply, typename Service, typename Request>
absl::StatusOr<Reply> Rpc(EventLoop& loop, rpc::GrpcClient<Service>& client,
                          typename rpc::GrpcClient<Service>::template AsyncMethod<Request, Reply> method,
                          const char* name, const Request& request) {
  auto result = std::make_shared<std::optional<absl::StatusOr<Reply>>>();
  client.Call(method, name, request,
              std::function<void(const absl::Status&, Reply&&)>([result](const absl::Status& s, Reply&& reply) {
                if (s.ok()) {
                  *result = std::move(reply);
                } else {
                  *result = s;
                }
              }));
  if (!RunLoopUntil(loop, [&] { return result->has_value(); }, kDeadlineMs)) {
    return absl::DeadlineExceededError(std::string(name) + " got no reply");
  }
  return std::move(**result);
}

class GcsServerTest : public ::testing::Test {
 protected:
  GcsServerTest() { rpc::SetProcessCredentials(rpc::TokenCredentials(NewClusterToken())); }

  RedisStoreClient::Options StoreOptions(const std::string& key_prefix = "manta:test:") const {
    RedisStoreClient::Options o;
    o.port = redis_.port();
    o.key_prefix = key_prefix;
    return o;
  }

  // Builds a GcsServer over the shared Redis and starts it on a free port.
  std::unique_ptr<GcsServer> StartGcs(const std::string& key_prefix = "manta:test:") {
    auto store = RedisStoreClient::Connect(loop_, StoreOptions(key_prefix));
    EXPECT_THAT(store, IsOk());
    if (!store.ok()) return nullptr;
    GcsServerOptions options;
    options.port = 0;
    // No raylet answers health checks here; keep them from declaring nodes dead.
    options.config.health_check_initial_delay_ms = 10 * 60 * 1000;
    auto server = std::make_unique<GcsServer>(loop_, options, std::move(*store));
    std::optional<absl::Status> started;
    server->Start([&](absl::Status s) { started = s; });
    EXPECT_TRUE(RunLoopUntil(loop_, [&] { return started.has_value(); }, kDeadlineMs));
    EXPECT_THAT(started.value_or(absl::DeadlineExceededError("not started")), IsOk());
    EXPECT_GT(server->port(), 0);
    return server;
  }

  // Stops and destroys `server` the way a GCS process exits.
  void StopGcs(std::unique_ptr<GcsServer>& server) {
    server->Stop();
    loop_.RunUntilIdle();
    server.reset();
    loop_.RunUntilIdle();
  }

  template <typename Service>
  std::unique_ptr<rpc::GrpcClient<Service>> Client(const GcsServer& server) {
    rpc::ClientOptions options;
    options.deadline_ms = kDeadlineMs;
    options.max_attempts = 1;
    return std::make_unique<rpc::GrpcClient<Service>>(loop_, "127.0.0.1:" + std::to_string(server.port()),
                                                      options);
  }

  static rpc::RegisterNodeRequest RegisterRequest(const NodeID& id) {
    rpc::RegisterNodeRequest request;
    request.mutable_node_info()->set_node_id(id.Binary());
    request.mutable_node_info()->set_node_manager_address("127.0.0.1");
    request.mutable_node_info()->set_node_manager_port(1);
    return request;
  }

  RedisServer redis_;
  EventLoop loop_;
};

using NodeService = rpc::NodeInfoGcsService;
using JobService = rpc::JobInfoGcsService;
using KVService = rpc::InternalKVGcsService;

TEST_F(GcsServerTest, RestartedGcsServesTheSameClusterFromRedis) {
  const NodeID node = NodeID::FromRandom();
  ClusterID cluster_id;
  {
    auto gcs = StartGcs();
    ASSERT_NE(gcs, nullptr);
    cluster_id = gcs->cluster_id();
    EXPECT_FALSE(cluster_id.IsNil());
    auto nodes = Client<NodeService>(*gcs);
    auto jobs = Client<JobService>(*gcs);
    auto kv = Client<KVService>(*gcs);

    auto registered = Rpc<rpc::RegisterNodeReply>(loop_, *nodes, &NodeService::Stub::async::RegisterNode,
                                                  "RegisterNode", RegisterRequest(node));
    ASSERT_THAT(registered, IsOk());
    EXPECT_FALSE(registered->already_registered());
    EXPECT_EQ(registered->cluster_id(), cluster_id.Binary());

    auto job_id = Rpc<rpc::GetNextJobIDReply>(loop_, *jobs, &JobService::Stub::async::GetNextJobID,
                                              "GetNextJobID", rpc::GetNextJobIDRequest());
    ASSERT_THAT(job_id, IsOk());
    EXPECT_EQ(job_id->job_id(), JobID::FromInt(1).Binary());

    rpc::InternalKVPutRequest put;
    put.set_namespace_("ns");
    put.set_key("k");
    put.set_value("v");
    put.set_overwrite(true);
    ASSERT_THAT(Rpc<rpc::InternalKVPutReply>(loop_, *kv, &KVService::Stub::async::InternalKVPut, "InternalKVPut",
                                             put),
                IsOk());
    StopGcs(gcs);
  }

  auto gcs = StartGcs();
  ASSERT_NE(gcs, nullptr);
  EXPECT_EQ(gcs->cluster_id(), cluster_id);
  const rpc::NodeInfo* restored = gcs->node_manager().GetNode(node);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(restored->state(), rpc::NodeInfo::ALIVE);

  auto nodes = Client<NodeService>(*gcs);
  auto cluster = Rpc<rpc::GetClusterIdReply>(loop_, *nodes, &NodeService::Stub::async::GetClusterId,
                                             "GetClusterId", rpc::GetClusterIdRequest());
  ASSERT_THAT(cluster, IsOk());
  EXPECT_EQ(cluster->cluster_id(), cluster_id.Binary());

  auto all = Rpc<rpc::GetAllNodeInfoReply>(loop_, *nodes, &NodeService::Stub::async::GetAllNodeInfo,
                                           "GetAllNodeInfo", rpc::GetAllNodeInfoRequest());
  ASSERT_THAT(all, IsOk());
  ASSERT_EQ(all->node_info_list_size(), 1);
  EXPECT_EQ(all->node_info_list(0).node_id(), node.Binary());

  // The raylet reconnecting to the new GCS is recognised.
  auto again = Rpc<rpc::RegisterNodeReply>(loop_, *nodes, &NodeService::Stub::async::RegisterNode, "RegisterNode",
                                           RegisterRequest(node));
  ASSERT_THAT(again, IsOk());
  EXPECT_TRUE(again->already_registered());
  EXPECT_EQ(again->cluster_id(), cluster_id.Binary());

  auto jobs = Client<JobService>(*gcs);
  auto job_id = Rpc<rpc::GetNextJobIDReply>(loop_, *jobs, &JobService::Stub::async::GetNextJobID, "GetNextJobID",
                                            rpc::GetNextJobIDRequest());
  ASSERT_THAT(job_id, IsOk());
  EXPECT_EQ(job_id->job_id(), JobID::FromInt(2).Binary()) << "job ids are never reused";

  auto kv = Client<KVService>(*gcs);
  rpc::InternalKVGetRequest get;
  get.set_namespace_("ns");
  get.set_key("k");
  auto value = Rpc<rpc::InternalKVGetReply>(loop_, *kv, &KVService::Stub::async::InternalKVGet, "InternalKVGet", get);
  ASSERT_THAT(value, IsOk());
  EXPECT_TRUE(value->found());
  EXPECT_EQ(value->value(), "v");
  StopGcs(gcs);
}

TEST_F(GcsServerTest, AnotherClusterOnTheSameRedisHasItsOwnIdAndNodes) {
  auto first = StartGcs("manta:one:");
  ASSERT_NE(first, nullptr);
  auto nodes = Client<NodeService>(*first);
  ASSERT_THAT(Rpc<rpc::RegisterNodeReply>(loop_, *nodes, &NodeService::Stub::async::RegisterNode, "RegisterNode",
                                          RegisterRequest(NodeID::FromRandom())),
              IsOk());
  auto second = StartGcs("manta:two:");
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first->cluster_id(), second->cluster_id());
  EXPECT_THAT(second->node_manager().AliveNodes(), ::testing::IsEmpty());
  StopGcs(second);
  StopGcs(first);
}

TEST_F(GcsServerTest, MalformedNodeRowInRedisDoesNotStopTheGcs) {
  // A row a GCS cannot use (here: an empty value under a valid node id) is skipped
  // at start-up rather than taken for a node.
  auto raw = RedisStoreClient::RunOnce(StoreOptions(),
                                       {"HSET", "manta:test:nodes", NodeID::FromRandom().Binary(), ""});
  ASSERT_THAT(raw, IsOk());

  auto gcs = StartGcs();
  ASSERT_NE(gcs, nullptr);
  EXPECT_THAT(gcs->node_manager().AliveNodes(), ::testing::IsEmpty());
  StopGcs(gcs);
}

}  // namespace
}  // namespace manta::gcs::testing
