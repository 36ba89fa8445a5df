// Bad input to `manta` and the daemons: one clear line, a non-zero exit, and no
// stray processes.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "protos/gcs.grpc.pb.h"
#include "src/common/id.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/util.h"

namespace manta::testing {
namespace cli_errors_test {
namespace {

// The error is one line that mentions `needle`.
void ExpectOneLineError(const CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  std::string trimmed = r.output;
  while (!trimmed.empty() && trimmed.back() == '\n') trimmed.pop_back();
  EXPECT_EQ(trimmed.find('\n'), std::string::npos) << "expected one line, got:\n" << r.output;
}

TEST(CliErrorsTest, UnknownFlag) {
  ClusterHarness cluster;
  ExpectOneLineError(cluster.Manta({"start", "--head", "--no-such-flag"}), "--no-such-flag");
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(CliErrorsTest, MalformedResourcesJson) {
  ClusterHarness cluster;
  ExpectOneLineError(cluster.Manta({"start", "--head", "--port", "0", "--resources", "{\"a\": "}), "--resources");
  ExpectOneLineError(cluster.Manta({"start", "--head", "--port", "0", "--resources", "[1,2]"}), "--resources");
  ExpectOneLineError(cluster.Manta({"start", "--head", "--port", "0", "--resources", R"({"x": -1})"}),
                     "non-negative");
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(CliErrorsTest, BadAutoscalerOptions) {
  ClusterHarness cluster;
  const std::string bad = cluster.temp_root() + "/bad.json";
  ASSERT_TRUE(WriteFileAtomic(bad, R"({"available_node_types": {"a": {"resources": {"CPU": 1}}}, "max_worker": 2,
      "provider": {"type": "command", "launch": "x", "terminate": "y"}})").ok());
  ExpectOneLineError(cluster.Manta({"start", "--head", "--port", "0", "--autoscaler", bad}),
                     "unknown key \"max_worker\"");
  ExpectOneLineError(cluster.Manta({"start", "--address", "127.0.0.1:1", "--autoscaler", bad}), "--head");
  ExpectOneLineError(cluster.Manta({"start", "--head", "--port", "0", "--node-type", "a"}), "--node-type");
  EXPECT_TRUE(cluster.LivePids().empty()) << "nothing is left running";
}

TEST(CliErrorsTest, UnreachableRedis) {
  ClusterHarness cluster;
  int port = *PickFreePort();
  ExpectOneLineError(
      cluster.Manta({"start", "--head", "--port", "0", "--redis-address", "127.0.0.1:" + std::to_string(port)}),
      "Redis");
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(CliErrorsTest, WrongRedisPassword) {
  ClusterHarness cluster;
  cluster.StartHead({"--redis-password", "s3cret"});
  ClusterHarness other;
  ExpectOneLineError(other.Manta({"start", "--head", "--port", "0", "--redis-address", cluster.RedisAddress(),
                                  "--redis-password", "wrong"}),
                     "Redis");
  EXPECT_TRUE(other.LivePids().empty());
}

TEST(CliErrorsTest, SecondHeadOnSamePortFails) {
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead();
  ClusterHarness second;
  ExpectOneLineError(second.Manta({"start", "--head", "--port", std::to_string(ParseHostPort(gcs)->port)}),
                     "in use");
  EXPECT_TRUE(second.LivePids().empty());
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 1);
}

TEST(CliErrorsTest, PortInUseByAnotherProgram) {
  ClusterHarness cluster;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ExpectOneLineError(cluster.Manta({"start", "--head", "--port", std::to_string(ntohs(addr.sin_port))}), "in use");
  close(fd);
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(CliErrorsTest, JoinUnreachableGcs) {
  ClusterHarness cluster;
  int port = *PickFreePort();
  ExpectOneLineError(cluster.Manta({"start", "--address", "127.0.0.1:" + std::to_string(port)}), "GCS");
  ExpectOneLineError(cluster.Manta({"start", "--address", "not-an-address"}), "--address");
  EXPECT_TRUE(cluster.LivePids().empty());
}

TEST(CliErrorsTest, StatusWithoutCluster) {
  ClusterHarness cluster;
  ExpectOneLineError(cluster.Manta({"status"}), "no running Manta cluster");
  CommandResult stop = cluster.Manta({"stop"});
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
}

// A word the CLI does not know is named, with what it accepts there; so is a
// command given without the word it needs, and an unknown --format. None needs a
// cluster: the CLI answers before it looks for one.
TEST(CliErrorsTest, UnknownWordsAreNamedWithWhatIsAccepted) {
  ClusterHarness cluster;
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {{"list", "frogs"}, {"'frogs'", "nodes, jobs, workers, actors, tasks, objects, placement-groups"}},
      {{"list", "frogs", "--limit", "3"}, {"'frogs'", "placement-groups"}},
      {{"frogs"}, {"unknown command 'frogs'", "start, stop, status", "list", "health-check"}},
      {{"get", "frog", "abc"}, {"'frog'", "task, actor, node, job, worker, object, placement-group"}},
      {{"summary", "frogs"}, {"'frogs'", "tasks, actors, objects"}},
      {{"list"}, {"manta list", "one of nodes, jobs"}},
      {{}, {"name a command", "start"}},
      {{"get", "task", std::string(48, 'a'), "--format", "xml"}, {"unknown --format 'xml'", "yaml, json"}},
      {{"summary", "tasks", "--format", "xml"}, {"unknown --format 'xml'", "table, json, yaml"}},
  };
  for (const Case& c : cases) {
    CommandResult r = cluster.Manta(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    for (const std::string& says : c.says) ExpectOneLineError(r, says);
  }
  // Words that are right still reach their command (here: no cluster to ask).
  ExpectOneLineError(cluster.Manta({"list", "tasks"}), "no running Manta cluster");
  CommandResult help = cluster.Manta({"list", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_NE(help.output.find("placement-groups"), std::string::npos) << help.output;
}

// `manta drain-node`: a malformed id is named (exit 2, before any cluster is asked), an
// id no alive node has gets the GCS's NOT_FOUND (exit 1), and a node's own id marks it
// draining in `manta status`, the node staying alive.
TEST(CliErrorsTest, DrainNode) {
  ClusterHarness cluster;
  ExpectOneLineError(cluster.Manta({"drain-node", "abc123"}), "'abc123'");
  EXPECT_EQ(cluster.Manta({"drain-node", "abc123"}).exit_code, 2);
  std::string gcs = cluster.StartHead();
  cluster.StartNode({"--num-cpus", "1"});
  const std::string non_hex(56, 'z');
  CommandResult bad = cluster.Manta({"drain-node", non_hex, "--address", gcs});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  ExpectOneLineError(bad, "'" + non_hex + "'");
  CommandResult short_id = cluster.Manta({"drain-node", "abc123", "--address", gcs});
  EXPECT_EQ(short_id.exit_code, 2) << short_id.output;
  ExpectOneLineError(short_id, "'abc123'");

  const std::string unknown(56, 'a');
  CommandResult missing = cluster.Manta({"drain-node", unknown, "--address", gcs});
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  ExpectOneLineError(missing, "no alive node " + unknown);

  std::string worker_hex;
  for (const rpc::NodeInfo& n : cluster.AliveNodes()) {
    if (!n.is_head_node()) worker_hex = BinaryHex(n.node_id());
  }
  ASSERT_EQ(worker_hex.size(), 56u) << "the joined node is alive";
  const nlohmann::json before = cluster.Status();
  for (const auto& n : before["nodes"]) EXPECT_FALSE(n["draining"].get<bool>()) << n.dump();
  CommandResult drained = cluster.Manta({"drain-node", worker_hex, "--address", gcs});
  EXPECT_EQ(drained.exit_code, 0) << drained.output;
  EXPECT_EQ(drained.output, "node " + worker_hex +
                                " is draining: it takes no new work, and its objects' owners move their primary "
                                "copies off it\n");
  nlohmann::json status = cluster.Status();
  ASSERT_EQ(status["nodes"].size(), 2u) << status.dump();
  for (const auto& n : status["nodes"]) {
    EXPECT_EQ(n["state"], "ALIVE") << n.dump();
    EXPECT_EQ(n["draining"].get<bool>(), n["node_id"] == worker_hex) << n.dump();
  }
  CommandResult table = cluster.Manta({"status", "--address", gcs});
  EXPECT_NE(table.output.find(worker_hex), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("(draining)"), std::string::npos) << table.output;
}

// Writes raw garbage to a TCP port a few times.
void SendGarbage(int port) {
  for (int i = 0; i < 3; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    std::string junk(4096, static_cast<char>(0xAB));
    ASSERT_GT(write(fd, junk.data(), junk.size()), 0);
    close(fd);
  }
}

TEST(CliErrorsTest, GcsAndRayletSurviveGarbageAndBadRequests) {
  ClusterHarness cluster;
  std::string gcs = cluster.StartHead();
  SendGarbage(ParseHostPort(gcs)->port);
  std::string raylet = cluster.Status()["nodes"][0]["address"];
  SendGarbage(ParseHostPort(raylet)->port);
  // Well-formed RPCs with invalid content get error replies.
  auto stub = rpc::NodeInfoGcsService::NewStub(rpc::MakeChannel(gcs, 64 << 20));
  {
    grpc::ClientContext ctx;
    rpc::AttachClusterToken(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    rpc::RegisterNodeRequest req;
    req.mutable_node_info()->set_node_id("short");
    rpc::RegisterNodeReply reply;
    grpc::Status s = stub->RegisterNode(&ctx, req, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {
    // A message over the size limit is refused by gRPC, not by a crash.
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    auto big_stub = rpc::InternalKVGcsService::NewStub(
        grpc::CreateCustomChannel(gcs, grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    ctx.AddMetadata(rpc::kClusterTokenMetadataKey, cluster.token());
    rpc::InternalKVPutRequest req;
    req.set_key("big");
    req.set_value(std::string(600 * 1024 * 1024, 'x'));
    rpc::InternalKVPutReply reply;
    grpc::Status s = big_stub->InternalKVPut(&ctx, req, &reply);
    EXPECT_FALSE(s.ok());
  }
  EXPECT_EQ(cluster.CountNodes("ALIVE"), 1);
  EXPECT_EQ(cluster.Pids("gcs").size(), 1u);
  EXPECT_EQ(cluster.Pids("raylet").size(), 1u);
}

}  // namespace
}  // namespace cli_errors_test
}  // namespace manta::testing
