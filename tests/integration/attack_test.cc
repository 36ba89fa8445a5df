// A real cluster attacked from outside, as another process on this machine without
// the cluster's token would: forged and unauthenticated calls to every gRPC service,
// oversized requests, half-sent frames, too many connections. Each is refused, no
// daemon dies or grows, and the cluster keeps serving (a task runs and the node table
// is unchanged after every attack). The session's files are private and no secret is
// on a command line. This binary is its own worker.
#include <ray/api.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <limits>
#include <mutex>
#include <filesystem>
#include <thread>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "cluster_harness.h"
#include "gtest/gtest.h"
#include "protos/core_worker.grpc.pb.h"
#include "protos/gcs.grpc.pb.h"
#include "protos/node_manager.grpc.pb.h"
#include "protos/object_manager.grpc.pb.h"
#include "src/api/native_runtime.h"
#include "src/common/id.h"
#include "src/common/rpc/auth.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/grpc_server.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "src/core_worker/core_worker.h"
#include "src/object_store/store_client.h"

namespace attack_test {
namespace {

namespace fs = std::filesystem;
using manta::testing::ClusterHarness;
using manta::testing::WaitFor;
using manta::testing::ConnectTcp;
using manta::testing::ExhaustDescriptors;
using manta::testing::OpenDescriptors;

// The worker running this task: where its gRPC service and task channel listen.
struct WorkerEndpoint {
  std::string grpc_address;
  std::string task_address;
  int pid = 0;
  MSGPACK_DEFINE(grpc_address, task_address, pid);
};
WorkerEndpoint AttackWhereAmI() {
  const manta::rpc::Address& a = ray::internal::GetCoreWorkerForTesting()->address();
  return {a.ip_address() + ":" + std::to_string(a.port()), a.ip_address() + ":" + std::to_string(a.task_port()),
          getpid()};
}
int AttackEcho(int x) { return x; }
RAY_REMOTE(AttackWhereAmI, AttackEcho);

// How a call without the cluster's token presents itself.
enum class Forgery { kNoToken, kWrongToken, kMalformedToken };
const Forgery kForgeries[] = {Forgery::kNoToken, Forgery::kWrongToken, Forgery::kMalformedToken};

std::unique_ptr<grpc::ClientContext> ForgedContext(Forgery forgery) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (forgery == Forgery::kWrongToken) context->AddMetadata(manta::rpc::kClusterTokenMetadataKey, manta::NewClusterToken());
  if (forgery == Forgery::kMalformedToken) context->AddMetadata(manta::rpc::kClusterTokenMetadataKey, "' OR 1=1 --");
  return context;
}

std::unique_ptr<grpc::ClientContext> AuthenticContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  manta::rpc::AttachClusterToken(context.get());
  return context;
}

void ExpectRefused(const grpc::Status& status, const std::string& what) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << what << ": " << status.error_message();
  EXPECT_NE(status.error_message().find("token"), std::string::npos) << what << ": " << status.error_message();
}

int64_t ResidentKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}


std::string ProcFile(pid_t pid, const std::string& name) {
  auto text = manta::ReadFile("/proc/" + std::to_string(pid) + "/" + name);
  return text.ok() ? *text : "";
}

// A TCP connection to host:port (blocking), or -1.

int ConnectUnix(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Whether the peer closed `fd` within `timeout_ms` (what it sent first is discarded).
bool ClosedByPeer(int fd, int64_t timeout_ms) {
  timeval tv{0, 100 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return WaitFor(
      [fd] {
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      },
      timeout_ms);
}

std::string Le32(uint32_t n) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

class AttackTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = new ClusterHarness();
    harness_->StartHead({"--num-cpus=1"});
    ray::RayConfig config;
    config.address = harness_->gcs_address();
    ray::Init(config);
  }
  static void TearDownTestSuite() {
    ray::Shutdown();
    delete harness_;
  }

  static manta::rpc::NodeInfo Head() {
    auto nodes = harness_->AliveNodes();
    EXPECT_EQ(nodes.size(), 1u);
    return nodes.empty() ? manta::rpc::NodeInfo() : nodes[0];
  }
  static std::string RayletAddress() {
    manta::rpc::NodeInfo head = Head();
    return head.node_manager_address() + ":" + std::to_string(head.node_manager_port());
  }
  static pid_t OnlyPid(const std::string& role) {
    auto pids = harness_->Pids(role);
    EXPECT_EQ(pids.size(), 1u) << role;
    return pids.empty() ? 0 : pids[0];
  }

  // The cluster is as it was: one alive node with its one CPU, and a task runs.
  static void ExpectClusterServes() {
    nlohmann::json status = harness_->Status();
    ASSERT_TRUE(status.contains("nodes")) << status.dump();
    int alive = 0;
    for (const auto& node : status["nodes"]) {
      if (node["state"] != "ALIVE") continue;
      ++alive;
      EXPECT_EQ(node["resources_total"].value("CPU", 0.0), 1.0) << status.dump();
    }
    EXPECT_EQ(alive, 1) << status.dump();
    static int n = 0;
    ++n;
    EXPECT_EQ(*ray::Task(AttackEcho).Remote(n).Get(), n);
  }

  static ClusterHarness* harness_;
};
ClusterHarness* AttackTest::harness_ = nullptr;

TEST_F(AttackTest, TheGcsRefusesEveryCallWithoutTheToken) {
  auto channel = manta::rpc::MakeChannel(harness_->gcs_address(), 64 << 20);
  auto nodes = manta::rpc::NodeInfoGcsService::NewStub(channel);
  auto kv = manta::rpc::InternalKVGcsService::NewStub(channel);
  auto jobs = manta::rpc::JobInfoGcsService::NewStub(channel);
  auto actors = manta::rpc::ActorInfoGcsService::NewStub(channel);
  auto pubsub = manta::rpc::InternalPubSubGcsService::NewStub(channel);
  manta::rpc::NodeInfo head = Head();
  for (Forgery forgery : kForgeries) {
    {
      // A node of 100,000 CPUs that does not exist.
      manta::rpc::RegisterNodeRequest request;
      manta::rpc::NodeInfo* fake = request.mutable_node_info();
      fake->set_node_id(manta::NodeID::FromRandom().Binary());
      fake->set_node_manager_address("127.0.0.1");
      fake->set_node_manager_port(1);
      (*fake->mutable_resources_total())["CPU"] = 100000;
      manta::rpc::RegisterNodeReply reply;
      ExpectRefused(nodes->RegisterNode(ForgedContext(forgery).get(), request, &reply), "RegisterNode");
    }
    {
      manta::rpc::UnregisterNodeRequest request;
      request.set_node_id(head.node_id());
      request.set_reason("attack");
      manta::rpc::UnregisterNodeReply reply;
      ExpectRefused(nodes->UnregisterNode(ForgedContext(forgery).get(), request, &reply), "UnregisterNode");
    }
    {
      manta::rpc::GetAllNodeInfoReply reply;
      ExpectRefused(nodes->GetAllNodeInfo(ForgedContext(forgery).get(), {}, &reply), "GetAllNodeInfo");
      EXPECT_EQ(reply.node_info_list_size(), 0);
    }
    {
      manta::rpc::InternalKVPutRequest request;
      request.set_key("attack");
      request.set_value(std::string(1024, 'x'));
      manta::rpc::InternalKVPutReply reply;
      ExpectRefused(kv->InternalKVPut(ForgedContext(forgery).get(), request, &reply), "InternalKVPut");
    }
    {
      manta::rpc::GetNextJobIDReply reply;
      ExpectRefused(jobs->GetNextJobID(ForgedContext(forgery).get(), {}, &reply), "GetNextJobID");
    }
    {
      manta::rpc::GetAllActorInfoReply reply;
      ExpectRefused(actors->GetAllActorInfo(ForgedContext(forgery).get(), {}, &reply), "GetAllActorInfo");
    }
    {
      manta::rpc::GcsSubscriberPollRequest request;
      request.set_subscriber_id(std::string(28, 's'));
      manta::rpc::GcsSubscriberPollReply reply;
      ExpectRefused(pubsub->GcsSubscriberPoll(ForgedContext(forgery).get(), request, &reply), "GcsSubscriberPoll");
    }
  }
  // Nothing changed: the key was never written, and the node table is as before.
  manta::rpc::InternalKVExistsRequest exists;
  exists.set_key("attack");
  manta::rpc::InternalKVExistsReply found;
  ASSERT_TRUE(kv->InternalKVExists(AuthenticContext().get(), exists, &found).ok());
  EXPECT_FALSE(found.exists());
  ExpectClusterServes();
}

TEST_F(AttackTest, TheRayletRefusesEveryCallWithoutTheToken) {
  auto channel = manta::rpc::MakeChannel(RayletAddress(), 64 << 20);
  auto workers = manta::rpc::NodeManagerWorkerService::NewStub(channel);
  auto node = manta::rpc::NodeManagerService::NewStub(channel);
  auto objects = manta::rpc::ObjectManagerService::NewStub(channel);
  auto logs = manta::rpc::LogService::NewStub(channel);
  ray::ObjectRef<std::string> secret = ray::Put(std::string(200 << 10, 's'));  // big enough for the store
  for (Forgery forgery : kForgeries) {
    {
      manta::rpc::RequestWorkerLeaseRequest request;
      request.set_lease_request_id(std::string(16, 'l'));
      request.set_job_id(manta::JobID::FromInt(1).Binary());
      (*request.mutable_required_resources())["CPU"] = 1;
      manta::rpc::RequestWorkerLeaseReply reply;
      ExpectRefused(workers->RequestWorkerLease(ForgedContext(forgery).get(), request, &reply), "RequestWorkerLease");
    }
    {
      manta::rpc::RegisterWorkerRequest request;
      request.set_worker_id(manta::WorkerID::FromRandom().Binary());
      request.set_startup_token(std::string(32, '0'));
      manta::rpc::RegisterWorkerReply reply;
      ExpectRefused(workers->RegisterWorker(ForgedContext(forgery).get(), request, &reply), "RegisterWorker");
    }
    {
      manta::rpc::GetNodeStatsReply reply;
      ExpectRefused(node->GetNodeStats(ForgedContext(forgery).get(), {}, &reply), "GetNodeStats");
    }
    {
      manta::rpc::FlushWorkerLogsRequest request;
      request.set_job_id(manta::JobID::FromInt(1).Binary());
      request.set_flush_id("forged");
      manta::rpc::FlushWorkerLogsReply reply;
      ExpectRefused(logs->FlushWorkerLogs(ForgedContext(forgery).get(), request, &reply), "FlushWorkerLogs");
    }
    {
      manta::rpc::FetchObjectsRequest request;
      request.add_object_ids(manta::ObjectID::FromRandom().Binary());
      request.add_locations("127.0.0.1:1");
      manta::rpc::FetchObjectsReply reply;
      ExpectRefused(node->FetchObjects(ForgedContext(forgery).get(), request, &reply), "FetchObjects");
    }
    {
      // Reading an object of the store out through object transfer.
      manta::rpc::PullObjectRequest request;
      request.set_object_id(secret.ID());
      auto context = ForgedContext(forgery);
      auto stream = objects->PullObject(context.get(), request);
      manta::rpc::ObjectChunk chunk;
      EXPECT_FALSE(stream->Read(&chunk)) << "a chunk of " << chunk.data().size() << " bytes was sent";
      ExpectRefused(stream->Finish(), "PullObject");
    }
  }
  EXPECT_EQ(*secret.Get(), std::string(200 << 10, 's'));
  ExpectClusterServes();
}

// A driver's request for its workers' last output, malformed: a clear error, and the
// raylet serves on.
TEST_F(AttackTest, AMalformedFlushOfWorkersOutputIsRefused) {
  auto logs = manta::rpc::LogService::NewStub(manta::rpc::MakeChannel(RayletAddress(), 64 << 20));
  struct Case {
    std::string job_id, flush_id, says;
  };
  const Case cases[] = {
      {"not a job", "f", "job_id is not a job id"},
      {manta::JobID::FromInt(1).Binary(), "", "flush_id must have 1 to 256 bytes"},
      {manta::JobID::FromInt(1).Binary(), std::string(100000, 'f'), "flush_id must have 1 to 256 bytes"},
  };
  for (const Case& c : cases) {
    manta::rpc::FlushWorkerLogsRequest request;
    request.set_job_id(c.job_id);
    request.set_flush_id(c.flush_id);
    manta::rpc::FlushWorkerLogsReply reply;
    grpc::Status s = logs->FlushWorkerLogs(AuthenticContext().get(), request, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos) << s.error_message();
  }
  // A job with no workers here printed nothing: no mark to wait for.
  manta::rpc::FlushWorkerLogsRequest request;
  request.set_job_id(manta::JobID::FromInt(0x7ffe).Binary());
  request.set_flush_id("a job with no workers");
  manta::rpc::FlushWorkerLogsReply reply;
  ASSERT_TRUE(logs->FlushWorkerLogs(AuthenticContext().get(), request, &reply).ok());
  EXPECT_FALSE(reply.marks());
  ExpectClusterServes();
}

TEST_F(AttackTest, WorkersAndDriversRefuseCallsWithoutTheToken) {
  WorkerEndpoint worker = *ray::Task(AttackWhereAmI).Remote().Get();
  const manta::rpc::Address& driver = ray::internal::GetCoreWorkerForTesting()->address();
  ray::ObjectRef<int> owned = ray::Put(5);
  for (const std::string& address : {worker.grpc_address, driver.ip_address() + ":" + std::to_string(driver.port())}) {
    auto stub = manta::rpc::CoreWorkerService::NewStub(manta::rpc::MakeChannel(address, 64 << 20));
    for (Forgery forgery : kForgeries) {
      manta::rpc::ExitRequest exit;
      exit.set_force(true);
      manta::rpc::ExitReply exit_reply;
      ExpectRefused(stub->Exit(ForgedContext(forgery).get(), exit, &exit_reply), "Exit at " + address);
      manta::rpc::GetObjectStatusRequest status;
      status.set_object_id(owned.ID());
      status.set_owner_worker_id(driver.worker_id());
      manta::rpc::GetObjectStatusReply status_reply;
      ExpectRefused(stub->GetObjectStatus(ForgedContext(forgery).get(), status, &status_reply),
                    "GetObjectStatus at " + address);
    }
  }
  EXPECT_EQ(kill(worker.pid, 0), 0) << "the worker died";
  EXPECT_EQ(*owned.Get(), 5);
  ExpectClusterServes();
}

TEST_F(AttackTest, OversizedRequestsAreRefusedAndTheGcsDoesNotGrow) {
  pid_t gcs = OnlyPid("gcs");
  pid_t redis = OnlyPid("redis");
  int64_t gcs_before = ResidentKb(gcs);
  int64_t redis_before = ResidentKb(redis);
  auto kv = manta::rpc::InternalKVGcsService::NewStub(manta::rpc::MakeChannel(harness_->gcs_address(), 512 << 20));
  // Over the KV value cap (16 MiB) but within a message: refused by the GCS.
  manta::rpc::InternalKVPutRequest request;
  request.set_key("big");
  request.set_value(std::string(20 << 20, 'v'));
  manta::rpc::InternalKVPutReply reply;
  grpc::Status s = kv->InternalKVPut(AuthenticContext().get(), request, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("bytes"), std::string::npos) << s.error_message();
  // Over the message cap (64 MiB): refused by gRPC, with the token or without it,
  // one at a time or four at once.
  request.set_value(std::string(400 << 20, 'v'));
  s = kv->InternalKVPut(AuthenticContext().get(), request, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  std::vector<std::thread> attackers;
  std::atomic<int> refused{0};
  for (int i = 0; i < 4; ++i) {
    attackers.emplace_back([&] {
      manta::rpc::InternalKVPutReply ignored;
      refused += kv->InternalKVPut(ForgedContext(Forgery::kNoToken).get(), request, &ignored).ok() ? 0 : 1;
    });
  }
  for (auto& t : attackers) t.join();
  EXPECT_EQ(refused.load(), 4);
  request.Clear();

  manta::rpc::InternalKVExistsRequest exists;
  exists.set_key("big");
  manta::rpc::InternalKVExistsReply found;
  ASSERT_TRUE(kv->InternalKVExists(AuthenticContext().get(), exists, &found).ok());
  EXPECT_FALSE(found.exists());
  // Neither kept the bytes (a 400 MiB put used to grow both by 400 MiB). gRPC reads
  // a message whole before it checks its size; the server's quota (twice the 64 MiB
  // cap, a soft bound) limits what it buffers, whatever the attackers send.
  // 2 GB were sent; without the quota the GCS grew by as much as arrived at once.
  EXPECT_LT(ResidentKb(gcs) - gcs_before, 512 << 10) << "GCS resident kB before " << gcs_before;
  EXPECT_LT(ResidentKb(redis) - redis_before, 16 << 10) << "Redis resident kB before " << redis_before;
  ExpectClusterServes();
}

// An object location that streams whatever chunks it is given: what a compromised
// member of the cluster could send a raylet that pulls from it.
class FakeObjectLocation final : public manta::rpc::ObjectManagerService::Service {
 public:
  void Send(std::vector<manta::rpc::ObjectChunk> chunks) {
    std::lock_guard<std::mutex> lock(mu_);
    chunks_ = std::move(chunks);
  }
  grpc::Status PullObject(grpc::ServerContext*, const manta::rpc::PullObjectRequest*,
                          grpc::ServerWriter<manta::rpc::ObjectChunk>* writer) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& chunk : chunks_) writer->Write(chunk);
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::vector<manta::rpc::ObjectChunk> chunks_;
};

manta::rpc::ObjectChunk Chunk(int64_t data_size, int64_t metadata_size, int64_t offset, std::string data) {
  manta::rpc::ObjectChunk chunk;
  chunk.set_data_size(data_size);
  chunk.set_metadata_size(metadata_size);
  chunk.set_offset(offset);
  chunk.set_data(std::move(data));
  return chunk;
}

TEST_F(AttackTest, ImpossibleObjectChunksFailThePullAndNotTheRaylet) {
  FakeObjectLocation fake;
  manta::rpc::GrpcServer server("fake_location", "127.0.0.1", 0, 64 << 20);
  server.RegisterService(&fake);
  ASSERT_TRUE(server.Start().ok());
  std::string location = "127.0.0.1:" + std::to_string(server.port());
  auto raylet = manta::rpc::NodeManagerService::NewStub(manta::rpc::MakeChannel(RayletAddress(), 64 << 20));
  auto store = manta::object_store::ObjectStoreClient::Connect(harness_->HeadSessionDir() + "/store.sock");
  ASSERT_TRUE(store.ok()) << store.status();
  pid_t raylet_pid = OnlyPid("raylet");
  auto fetch = [&](const manta::ObjectID& id) {
    manta::rpc::FetchObjectsRequest request;
    request.add_object_ids(id.Binary());
    request.add_locations(location);
    manta::rpc::FetchObjectsReply reply;
    grpc::Status s = raylet->FetchObjects(AuthenticContext().get(), request, &reply);
    // The call is OK when well formed; an object that could not be fetched is listed.
    if (!s.ok() || reply.failures().empty()) return s;
    return grpc::Status(static_cast<grpc::StatusCode>(reply.failures(0).code()), reply.failures(0).message());
  };
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::pair<std::string, std::vector<manta::rpc::ObjectChunk>>> attacks = {
      {"sizes whose sum overflows", {Chunk(kMax, 1, 0, "x")}},
      {"a size no store holds", {Chunk(kMax - 62, 0, 0, "x")}},
      {"negative sizes", {Chunk(-5, -1, 0, "")}},
      {"an offset whose end overflows", {Chunk(1000, 0, kMax - 10, std::string(100, 'y'))}},
      {"a chunk past the end", {Chunk(1000, 0, 900, std::string(200, 'y'))}},
      {"a negative offset", {Chunk(1000, 0, -100, std::string(100, 'y'))}},
      {"a later chunk past the end", {Chunk(10, 0, 0, "01234"), Chunk(0, 0, 8, "56789")}},
      {"a later chunk at an offset whose end overflows", {Chunk(10, 0, 0, "01234"), Chunk(0, 0, kMax - 2, "567")}},
      {"a stream that ends early", {Chunk(1000, 0, 0, std::string(10, 'z'))}},
  };
  for (const auto& [what, chunks] : attacks) {
    fake.Send(chunks);
    manta::ObjectID id = manta::ObjectID::FromRandom();
    grpc::Status s = fetch(id);
    EXPECT_FALSE(s.ok()) << what;
    auto contains = (*store)->Contains(id);
    EXPECT_TRUE(contains.ok() && !*contains) << what;
    ASSERT_EQ(kill(raylet_pid, 0), 0) << "the raylet died of " << what;
  }
  // The same path with chunks that make sense: the object arrives.
  fake.Send({Chunk(5, 0, 0, "he"), Chunk(5, 0, 2, "llo")});
  manta::ObjectID id = manta::ObjectID::FromRandom();
  ASSERT_TRUE(fetch(id).ok());
  auto got = (*store)->Get({id}, 5000);
  ASSERT_TRUE(got.ok() && (*got)[0].has_value()) << got.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*got)[0]->data), (*got)[0]->data_size), "hello");
  (void)(*store)->Release(id);
  server.Shutdown(0);
  ExpectClusterServes();
}

TEST_F(AttackTest, HalfSentFramesAreBoundedAndTheReceiversLiveOn) {
  WorkerEndpoint worker = *ray::Task(AttackWhereAmI).Remote().Get();
  pid_t raylet = OnlyPid("raylet");
  int64_t worker_before = ResidentKb(worker.pid);
  int64_t raylet_before = ResidentKb(raylet);

  // Task channel: before the handshake no frame may be longer than 128 bytes, so a
  // header announcing 128 MiB (a push, or a handshake frame) ends the connection.
  for (uint8_t kind : {1, 3, 4}) {
    int fd = ConnectTcp(worker.task_address);
    ASSERT_GE(fd, 0) << worker.task_address;
    SendAll(fd, Le32(128u << 20) + std::string(1, static_cast<char>(kind)) + std::string(64 << 10, 'p'));
    EXPECT_TRUE(ClosedByPeer(fd, 10000)) << "frame kind " << int{kind};
    close(fd);
  }

  // Store socket: frames over 16 MiB end the connection at once; frames under it
  // cost only the bytes that have arrived.
  std::string store_socket = harness_->HeadSessionDir() + "/store.sock";
  int huge = ConnectUnix(store_socket);
  ASSERT_GE(huge, 0) << store_socket;
  SendAll(huge, Le32(0xffffffffu) + std::string(1024, 'h'));
  EXPECT_TRUE(ClosedByPeer(huge, 10000));
  close(huge);
  std::vector<int> partial;
  for (int i = 0; i < 8; ++i) {
    int fd = ConnectUnix(store_socket);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, Le32((16u << 20) - 1) + std::string(64 << 10, 'q')));
    partial.push_back(fd);
  }
  EXPECT_EQ(*ray::Task(AttackEcho).Remote(11).Get(), 11);  // a round trip: the raylet has read them
  EXPECT_LT(ResidentKb(raylet) - raylet_before, 16 << 10) << "8 half-sent 16 MiB frames grew the raylet";
  for (int fd : partial) close(fd);

  EXPECT_EQ(kill(worker.pid, 0), 0) << "the worker died";
  EXPECT_LT(ResidentKb(worker.pid) - worker_before, 16 << 10);
  ExpectClusterServes();
}


TEST_F(AttackTest, TheGcsResumesAcceptingAfterRunningOutOfDescriptors) {
  ExhaustDescriptors(OnlyPid("gcs"), harness_->gcs_address(), [] { return harness_->Status().contains("nodes"); });
  ExpectClusterServes();
}

TEST_F(AttackTest, TheRayletResumesAcceptingAfterRunningOutOfDescriptors) {
  std::string raylet = RayletAddress();
  ExhaustDescriptors(OnlyPid("raylet"), raylet, [&raylet] {
    auto stub = manta::rpc::NodeManagerService::NewStub(manta::rpc::MakeChannel(raylet, 64 << 20));
    auto context = AuthenticContext();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    manta::rpc::GetNodeStatsReply reply;
    return stub->GetNodeStats(context.get(), {}, &reply).ok();
  });
  ExpectClusterServes();
}

TEST_F(AttackTest, ConnectionsThatNeverPresentTheTokenAreClosed) {
  // Silent connections, and ones that speak HTTP/2 but make no call, to the GCS and
  // the raylet: each is closed about 10 s after it was accepted.
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const std::string empty_settings("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  std::vector<int> connections;
  for (const std::string& address : {harness_->gcs_address(), RayletAddress()}) {
    for (int i = 0; i < 4; ++i) {
      int fd = ConnectTcp(address);
      ASSERT_GE(fd, 0) << address;
      if (i % 2 == 1) {
        ASSERT_TRUE(SendAll(fd, preface + empty_settings));
      }
      connections.push_back(fd);
    }
  }
  ExpectClusterServes();  // meanwhile, members connect and work as usual
  for (int fd : connections) {
    EXPECT_TRUE(ClosedByPeer(fd, 20000)) << "a connection without the token stayed open";
    close(fd);
  }
  ExpectClusterServes();
}

TEST_F(AttackTest, TheSessionIsPrivate) {
  auto mode_of = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  };
  std::string session = harness_->HeadSessionDir();
  EXPECT_EQ(mode_of(harness_->temp_root()), 0700u);
  EXPECT_EQ(mode_of(session), 0700u);
  EXPECT_EQ(mode_of(session + "/logs"), 0700u);
  for (const char* secret : {"cluster_token", "redis.conf", "redis_password", "store.sock"}) {
    EXPECT_EQ(mode_of(session + "/" + secret), 0600u) << secret;
  }
  for (const auto& log : fs::directory_iterator(session + "/logs")) {
    if (log.is_symlink()) continue;
    EXPECT_EQ(mode_of(log.path().string()), 0600u) << log.path();
  }
}

TEST_F(AttackTest, NoSecretOnAnyCommandLine) {
  std::string password(
      absl::StripAsciiWhitespace(*manta::ReadFile(harness_->HeadSessionDir() + "/redis_password")));
  ASSERT_FALSE(password.empty());
  std::vector<pid_t> pids = harness_->LivePids();
  ASSERT_EQ(pids.size(), 4u);  // Redis, GCS, dashboard, raylet
  pids.push_back(ray::Task(AttackWhereAmI).Remote().Get()->pid);
  for (pid_t pid : pids) {
    std::string cmdline = ProcFile(pid, "cmdline");
    ASSERT_FALSE(cmdline.empty()) << pid;
    EXPECT_EQ(cmdline.find(harness_->token()), std::string::npos) << "token on the command line of " << pid;
    EXPECT_EQ(cmdline.find(password), std::string::npos) << "Redis password on the command line of " << pid;
  }
  // The daemons read the token from the session, not from their environment.
  for (pid_t pid : harness_->LivePids()) {
    EXPECT_EQ(ProcFile(pid, "environ").find(harness_->token()), std::string::npos) << pid;
  }
}

}  // namespace
}  // namespace attack_test
