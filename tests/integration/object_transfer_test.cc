// The object store on real raylets: objects created through one node's store are
// pulled by another node byte for byte; clients that die or send garbage cost the
// raylet nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <thread>

#include "cluster_harness.h"
#include "protos/node_manager.grpc.pb.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/util.h"
#include "src/object_store/store_client.h"

namespace manta::testing {
namespace object_transfer_test {
namespace {

using object_store::ObjectStoreClient;

constexpr char kStoreBytes[] = "268435456";  // 256 MiB per node

std::string AddressOf(const rpc::NodeInfo& n) {
  return n.node_manager_address() + ":" + std::to_string(n.node_manager_port());
}

std::unique_ptr<rpc::NodeManagerService::Stub> Raylet(const rpc::NodeInfo& n) {
  return rpc::NodeManagerService::NewStub(rpc::MakeChannel(AddressOf(n), 64 << 20));
}

grpc::Status Fetch(const rpc::NodeInfo& at, const ObjectID& id, const std::vector<std::string>& locations) {
  rpc::FetchObjectsRequest req;
  req.add_object_ids(id.Binary());
  for (const auto& l : locations) req.add_locations(l);
  rpc::FetchObjectsReply reply;
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Status s = Raylet(at)->FetchObjects(&ctx, req, &reply);
  // The call is OK when well formed; an object that could not be fetched is listed.
  if (!s.ok() || reply.failures().empty()) return s;
  return grpc::Status(static_cast<grpc::StatusCode>(reply.failures(0).code()), reply.failures(0).message());
}

rpc::ObjectStoreStats StoreStats(const rpc::NodeInfo& n) {
  rpc::GetNodeStatsReply reply;
  grpc::ClientContext ctx;
  rpc::AttachClusterToken(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EXPECT_TRUE(Raylet(n)->GetNodeStats(&ctx, rpc::GetNodeStatsRequest(), &reply).ok());
  return reply.usage().object_store();
}

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 12));
  return v;
}

ObjectID PutPinned(ObjectStoreClient& client, const std::vector<uint8_t>& bytes) {
  ObjectID id = ObjectID::FromRandom();
  auto buf = client.Create(id, static_cast<int64_t>(bytes.size()), 0, /*pin_on_seal=*/true);
  EXPECT_TRUE(buf.ok()) << buf.status();
  if (!buf.ok()) return id;
  std::memcpy(*buf, bytes.data(), bytes.size());
  EXPECT_TRUE(client.Seal(id, true, /*wait=*/true).ok());
  return id;
}

class ObjectTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_.StartHead({"--object-store-memory", kStoreBytes});
    cluster_.StartNode({"--object-store-memory", kStoreBytes});
    nodes_ = cluster_.AliveNodes();
    ASSERT_EQ(nodes_.size(), 2u);
    for (const auto& n : nodes_) {
      auto c = ObjectStoreClient::Connect(n.object_store_socket());
      ASSERT_TRUE(c.ok()) << c.status();
      clients_.push_back(std::move(*c));
    }
  }

  ClusterHarness cluster_;
  std::vector<rpc::NodeInfo> nodes_;
  std::vector<std::unique_ptr<ObjectStoreClient>> clients_;
};

TEST_F(ObjectTransferTest, PulledObjectIsIdenticalByteForByte) {
  auto bytes = Pattern(40 << 20, 3);  // several chunks
  ObjectID id = PutPinned(*clients_[0], bytes);
  ASSERT_TRUE(Fetch(nodes_[1], id, {AddressOf(nodes_[0])}).ok());
  auto got = clients_[1]->Get({id}, 1000);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE((*got)[0].has_value());
  ASSERT_EQ((*got)[0]->data_size, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(std::memcmp((*got)[0]->data, bytes.data(), bytes.size()), 0);
  ASSERT_TRUE(clients_[1]->Release(id, true).ok());
  EXPECT_GE(StoreStats(nodes_[1]).pulled_bytes_total(), static_cast<int64_t>(bytes.size()));
  EXPECT_GE(StoreStats(nodes_[0]).served_bytes_total(), static_cast<int64_t>(bytes.size()));
}

TEST_F(ObjectTransferTest, ANodeWhoseDataChannelRefusesThisOneIsPulledFromOverGrpc) {
  // Strangers on this machine hold every handshake slot node 0's object data channel
  // gives one host: node 1 (on the same host) is refused there.
  const int data_port = nodes_[0].object_manager_port();
  ASSERT_NE(data_port, nodes_[0].node_manager_port()) << "node 0 serves no data channel";
  std::vector<int> strangers;
  for (int i = 0; i < 8; ++i) {
    int fd = ConnectTcp("127.0.0.1", data_port);
    ASSERT_GE(fd, 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char nonce[32];
    ASSERT_EQ(recv(fd, nonce, sizeof(nonce), MSG_WAITALL), static_cast<ssize_t>(sizeof(nonce))) << i;
    strangers.push_back(fd);
  }
  auto bytes = Pattern(6 << 20, 9);
  ObjectID id = PutPinned(*clients_[0], bytes);
  // The pull goes over gRPC instead, well before the strangers' handshakes expire.
  const int64_t start = MonotonicMs();
  grpc::Status fetched = Fetch(nodes_[1], id, {AddressOf(nodes_[0])});
  EXPECT_TRUE(fetched.ok()) << fetched.error_message();
  EXPECT_LT(MonotonicMs() - start, 4000);
  auto got = clients_[1]->Get({id}, 1000);
  ASSERT_TRUE(got.ok() && (*got)[0].has_value());
  EXPECT_EQ(std::memcmp((*got)[0]->data, bytes.data(), bytes.size()), 0);
  ASSERT_TRUE(clients_[1]->Release(id, true).ok());
  for (int fd : strangers) close(fd);
}

TEST_F(ObjectTransferTest, ConcurrentPullsOfOneObjectAreMerged) {
  auto bytes = Pattern(24 << 20, 9);
  ObjectID id = PutPinned(*clients_[0], bytes);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      grpc::Status s = Fetch(nodes_[1], id, {AddressOf(nodes_[0])});
      EXPECT_TRUE(s.ok()) << s.error_message();
      ok += s.ok() ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 4);
  // Merged: the bytes crossed once, not four times.
  EXPECT_LT(StoreStats(nodes_[1]).pulled_bytes_total(), 2 * static_cast<int64_t>(bytes.size()));
}

TEST_F(ObjectTransferTest, PullTriesTheNextLocationAndFailsClearlyWhenNoneHasIt) {
  auto bytes = Pattern(1 << 20, 5);
  ObjectID id = PutPinned(*clients_[0], bytes);
  int dead_port = *PickFreePort();
  // First location refuses connections; the second has the object.
  EXPECT_TRUE(Fetch(nodes_[1], id, {"127.0.0.1:" + std::to_string(dead_port), AddressOf(nodes_[0])}).ok());

  ObjectID missing = ObjectID::FromRandom();
  grpc::Status s = Fetch(nodes_[1], missing, {AddressOf(nodes_[0])});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error_message().find(missing.Hex()), std::string::npos) << s.error_message();
}

// A worker does not wait for its seal of a task's result before replying: its caller
// may ask for the result while its seal is still on the way.
TEST_F(ObjectTransferTest, AnObjectStillBeingWrittenIsWaitedForNotReportedMissing) {
  auto bytes = Pattern(2 << 20, 4);
  ObjectID id = ObjectID::FromRandom();
  auto buf = clients_[0]->Create(id, static_cast<int64_t>(bytes.size()), 0, /*pin_on_seal=*/true);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::memcpy(*buf, bytes.data(), bytes.size());
  auto fetched = std::async(std::launch::async, [&] { return Fetch(nodes_[1], id, {AddressOf(nodes_[0])}); });
  // An object that is not there fails at once (above); this one is waited for.
  EXPECT_EQ(fetched.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  ASSERT_TRUE(clients_[0]->Seal(id, /*release=*/true, /*wait=*/true).ok());
  grpc::Status s = fetched.get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto got = clients_[1]->Get({id}, 1000);
  ASSERT_TRUE(got.ok() && (*got)[0].has_value());
  EXPECT_EQ(std::memcmp((*got)[0]->data, bytes.data(), bytes.size()), 0);
  ASSERT_TRUE(clients_[1]->Release(id, true).ok());
}

// A copy pulled for a reader stays until the reader's Get takes it, however much the
// node creates meanwhile (without the hold, it is the least recently used object and
// the first evicted).
TEST_F(ObjectTransferTest, APulledCopyIsKeptForItsReaderUntilItsGet) {
  auto bytes = Pattern(40 << 20, 7);
  ObjectID id = PutPinned(*clients_[0], bytes);
  ASSERT_TRUE(Fetch(nodes_[1], id, {AddressOf(nodes_[0])}).ok());
  // 240 MiB of other objects through node 1's 256 MiB store, none referenced.
  for (int i = 0; i < 6; ++i) {
    ObjectID other = ObjectID::FromRandom();
    auto buf = clients_[1]->Create(other, 40 << 20, 0, /*pin_on_seal=*/false);
    ASSERT_TRUE(buf.ok()) << buf.status();
    ASSERT_TRUE(clients_[1]->Seal(other, /*release=*/true, /*wait=*/true).ok());
  }
  EXPECT_GT(StoreStats(nodes_[1]).evicted_bytes_total(), 0);
  auto got = clients_[1]->Get({id}, 0);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*got)[0].has_value()) << "the pulled copy was evicted before its reader's Get";
  EXPECT_EQ(std::memcmp((*got)[0]->data, bytes.data(), bytes.size()), 0);
  ASSERT_TRUE(clients_[1]->Release(id, true).ok());
}

TEST_F(ObjectTransferTest, ClientKilledMidCreateLeaksNothing) {
  std::string socket = nodes_[0].object_store_socket();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = ObjectStoreClient::Connect(socket);
    if (!c.ok()) _exit(2);
    auto buf = (*c)->Create(ObjectID::FromRandom(), 8 << 20);
    if (!buf.ok()) _exit(3);
    std::memset(*buf, 1, 4 << 20);
    char x = 'r';
    if (write(ready[1], &x, 1) != 1) _exit(4);
    pause();  // killed here, mid-create
    _exit(0);
  }
  close(ready[1]);
  char x;
  ASSERT_EQ(read(ready[0], &x, 1), 1);
  close(ready[0]);
  EXPECT_GE(StoreStats(nodes_[0]).used_bytes(), 8 << 20);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(WaitFor([&] { return StoreStats(nodes_[0]).used_bytes() == 0; }, 10000));
}

TEST_F(ObjectTransferTest, GarbageOnTheStoreSocketDoesNotHurtOtherClients) {
  auto bytes = Pattern(1 << 20, 1);
  ObjectID id = PutPinned(*clients_[0], bytes);
  for (const std::string& junk : {std::string(64, '\xff'), std::string("\x05\x00\x00\x00hello", 9),
                                  std::string(1 << 16, 'A')}) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, nodes_[0].object_store_socket().c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    (void)!write(fd, junk.data(), junk.size());
    close(fd);
  }
  auto got = clients_[0]->Get({id}, 1000);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE((*got)[0].has_value());
  EXPECT_EQ(std::memcmp((*got)[0]->data, bytes.data(), bytes.size()), 0);
  ASSERT_TRUE(clients_[0]->Release(id, true).ok());
  EXPECT_EQ(cluster_.Pids("raylet").size(), 2u);
}

TEST_F(ObjectTransferTest, StatusShowsObjectStoreUsage) {
  auto bytes = Pattern(3 << 20, 2);
  PutPinned(*clients_[0], bytes);
  EXPECT_TRUE(WaitFor(
      [&] {
        nlohmann::json status = cluster_.Status();  // keep the temporary alive
        for (const auto& n : status["nodes"]) {
          if (n.contains("object_store") && n["object_store"]["used_bytes"].get<int64_t>() >= (3 << 20) &&
              n["object_store"]["num_pinned"].get<int64_t>() == 1) {
            return true;
          }
        }
        return false;
      },
      10000))
      << cluster_.Status().dump(2);
  CommandResult text = cluster_.Manta({"status"});
  EXPECT_NE(text.output.find("objects:"), std::string::npos) << text.output;
}

}  // namespace
}  // namespace object_transfer_test
}  // namespace manta::testing
