// Tests of GrpcServer + ServeOnLoop and GrpcClient (src/common/rpc/) against a real
// in-process server on 127.0.0.1. Labelled `integration` because it opens sockets.
//
// The server's loop runs on a helper thread; the client's loop is driven by the test
// thread (RunUntilIdle inside WaitFor), so client callbacks run on the test thread.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "protos/node_manager.grpc.pb.h"
#include "src/common/event_loop.h"
#include "src/common/rpc/grpc_client.h"
#include "src/common/rpc/grpc_server.h"
#include "src/common/security.h"
#include "src/common/util.h"
#include "test_util/test_util.h"

namespace manta::rpc {
namespace {

using ::manta::testing::WaitFor;
using Client = GrpcClient<NodeManagerService>;
using Stub = NodeManagerService::Stub;

constexpr int64_t kMaxMessageBytes = 4 * 1024 * 1024;

// Runs `loop` on its own thread for the lifetime of the object.
class LoopThread {
 public:
  explicit LoopThread(EventLoop& loop) : loop_(loop), thread_([this] { loop_.Run(); }) {}
  ~LoopThread() {
    loop_.Stop();
    thread_.join();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  EventLoop& loop_;
  std::thread thread_;
};

// HealthCheck answers with a fixed node id (or with `health_check_status`);
// GetNodeStats keeps its SendReply so the test can answer later, like a long poll.
class TestService final : public NodeManagerService::CallbackService {
 public:
  explicit TestService(EventLoop& loop) : loop_(loop) {}

  grpc::ServerUnaryReactor* HealthCheck(grpc::CallbackServerContext* context, const HealthCheckRequest* request,
                                        HealthCheckReply* reply) override {
    return ServeOnLoop(loop_, "Test.HealthCheck", context, request, reply,
                       [this](const HealthCheckRequest&, HealthCheckReply* r, SendReply send_reply) {
                         handler_thread = std::this_thread::get_id();
                         ++health_checks;
                         r->set_node_id("node-x");
                         std::move(send_reply)(health_check_status);
                       });
  }

  grpc::ServerUnaryReactor* GetNodeStats(grpc::CallbackServerContext* context, const GetNodeStatsRequest* request,
                                         GetNodeStatsReply* reply) override {
    return ServeOnLoop(loop_, "Test.GetNodeStats", context, request, reply,
                       [this](const GetNodeStatsRequest&, GetNodeStatsReply* r, SendReply send_reply) {
                         pending_reply = r;
                         pending_send = std::move(send_reply);
                         has_pending = true;
                       });
  }

  // Written on the server loop thread, read by the test after synchronising.
  std::atomic<int> health_checks{0};
  std::atomic<std::thread::id> handler_thread;
  absl::Status health_check_status;  // set before the server starts
  std::atomic<bool> has_pending{false};
  GetNodeStatsReply* pending_reply = nullptr;
  SendReply pending_send;

 private:
  EventLoop& loop_;
};

ClientOptions RetryOptions(int64_t max_attempts, int64_t initial_backoff_ms, int64_t max_backoff_ms = 2000) {
  ClientOptions options;
  options.max_attempts = max_attempts;
  options.initial_backoff_ms = initial_backoff_ms;
  options.max_backoff_ms = max_backoff_ms;
  return options;
}

struct Result {
  bool done = false;
  absl::Status status;
  std::string node_id;
  std::thread::id thread;
  int64_t elapsed_ms = 0;
};

class GrpcTest : public ::testing::Test {
 protected:
  // Client and server share this process's credentials: a fresh cluster token.
  GrpcTest() { SetProcessCredentials(TokenCredentials(token_)); }

  // Starts the server on `port` (0 = any); fails the test if it cannot.
  void StartServer(int port = 0) {
    server_ = std::make_unique<GrpcServer>("test", "127.0.0.1", port, kMaxMessageBytes);
    server_->RegisterService(&service_);
    absl::Status s = server_->Start();
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_GT(server_->port(), 0);
  }

  std::unique_ptr<Client> MakeClient(int port, const std::string& faults = "", ClientOptions options = {}) {
    options.max_message_bytes = kMaxMessageBytes;
    if (!faults.empty()) {
      absl::StatusOr<FaultInjector> injector = FaultInjector::Parse(faults);
      EXPECT_TRUE(injector.ok()) << injector.status();
      options.faults = std::make_shared<FaultInjector>(*injector);
    }
    return std::make_unique<Client>(client_loop_, "127.0.0.1:" + std::to_string(port), options);
  }

  // Sends one HealthCheck; `result` is filled by the callback on the client loop.
  void HealthCheck(Client& client, Result* result, CallOptions call_options = {}) {
    int64_t start = MonotonicMs();
    client.Call<HealthCheckRequest, HealthCheckReply>(
        &Stub::async::HealthCheck, "HealthCheck", HealthCheckRequest(),
        [result, start](const absl::Status& s, HealthCheckReply&& reply) {
          result->done = true;
          result->status = s;
          result->node_id = reply.node_id();
          result->thread = std::this_thread::get_id();
          result->elapsed_ms = MonotonicMs() - start;
        },
        call_options);
  }

  // Drives the client loop until `result` is done or `timeout_ms` passes.
  bool Await(const Result& result, int64_t timeout_ms = 5000) {
    return WaitFor(
        [&] {
          client_loop_.RunUntilIdle();
          return result.done;
        },
        timeout_ms);
  }

  const std::string token_ = NewClusterToken();
  EventLoop server_loop_;
  TestService service_{server_loop_};
  LoopThread server_thread_{server_loop_};
  // Declared after the loop thread: shut down while the server loop still runs.
  std::unique_ptr<GrpcServer> server_;
  EventLoop client_loop_;
};

TEST_F(GrpcTest, CallRoundTripRunsHandlerAndCallbackOnTheirLoops) {
  StartServer();
  auto client = MakeClient(server_->port());
  Result result;
  HealthCheck(*client, &result);
  EXPECT_FALSE(result.done);  // never inline: the client loop has not run yet
  ASSERT_TRUE(Await(result));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.node_id, "node-x");
  EXPECT_EQ(result.thread, std::this_thread::get_id());
  EXPECT_EQ(service_.health_checks.load(), 1);
  EXPECT_EQ(service_.handler_thread.load(), server_thread_.id());
  // The handler is counted once it returns, which may be just after the reply left.
  EXPECT_TRUE(WaitFor([&] { return server_loop_.Stats()["Test.HealthCheck"] == 1; }, 5000));
}

// One HealthCheck through a plain stub whose metadata holds `token` (none when
// nullopt), as a stranger to the cluster would send it.
grpc::Status RawHealthCheck(int port, std::optional<std::string> token) {
  auto stub = NodeManagerService::NewStub(MakeChannel("127.0.0.1:" + std::to_string(port), kMaxMessageBytes));
  grpc::ClientContext ctx;
  if (token) ctx.AddMetadata(kClusterTokenMetadataKey, *token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckReply reply;
  return stub->HealthCheck(&ctx, HealthCheckRequest(), &reply);
}

TEST_F(GrpcTest, CallWithoutTheClusterTokenIsRefusedBeforeItsHandler) {
  StartServer();
  grpc::Status s = RawHealthCheck(server_->port(), std::nullopt);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_NE(s.error_message().find("no cluster token"), std::string::npos) << s.error_message();
  EXPECT_EQ(service_.health_checks.load(), 0);

  // The server keeps serving members.
  EXPECT_TRUE(RawHealthCheck(server_->port(), token_).ok());
  auto member = MakeClient(server_->port());
  Result ok;
  HealthCheck(*member, &ok);
  ASSERT_TRUE(Await(ok));
  EXPECT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(service_.health_checks.load(), 2);
}

TEST_F(GrpcTest, CallWithAnotherClustersTokenOrAPrefixOfOursIsRefused) {
  StartServer();
  for (const std::string& wrong : {NewClusterToken(), token_.substr(0, 32), token_ + "0", std::string()}) {
    grpc::Status s = RawHealthCheck(server_->port(), wrong);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_NE(s.error_message().find("wrong cluster token"), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(service_.health_checks.load(), 0);
}

TEST_F(GrpcTest, ServerWithNoTokenRefusesEveryCall) {
  StartServer();
  SetProcessCredentials(Credentials{});
  grpc::Status s = RawHealthCheck(server_->port(), token_);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  s = RawHealthCheck(server_->port(), std::string());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_EQ(service_.health_checks.load(), 0);
}

TEST_F(GrpcTest, HandlerErrorReachesTheClientWithItsCode) {
  service_.health_check_status = absl::PermissionDeniedError("go away");
  StartServer();
  auto client = MakeClient(server_->port());
  Result result;
  HealthCheck(*client, &result);
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(result.status.message().find("go away"), std::string::npos) << result.status;
  EXPECT_NE(result.status.message().find("HealthCheck"), std::string::npos) << result.status;
}

TEST_F(GrpcTest, HandlerMayReplyLater) {
  StartServer();
  auto client = MakeClient(server_->port());
  bool done = false;
  absl::Status status;
  int32_t nodes = 0;
  client->Call<GetNodeStatsRequest, GetNodeStatsReply>(
      &Stub::async::GetNodeStats, "GetNodeStats", GetNodeStatsRequest(),
      [&](const absl::Status& s, GetNodeStatsReply&& reply) {
        done = true;
        status = s;
        nodes = reply.num_alive_nodes_in_view();
      });
  ASSERT_TRUE(WaitFor([&] { return service_.has_pending.load(); }, 5000));
  client_loop_.RunUntilIdle();
  EXPECT_FALSE(done);
  // Answer from the test thread: SendReply may be called from any thread.
  service_.pending_reply->set_num_alive_nodes_in_view(3);
  std::move(service_.pending_send)(absl::OkStatus());
  ASSERT_TRUE(WaitFor(
      [&] {
        client_loop_.RunUntilIdle();
        return done;
      },
      5000));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(nodes, 3);
}

TEST_F(GrpcTest, SecondServerOnTheSamePortFailsToStart) {
  StartServer();
  TestService other(server_loop_);
  GrpcServer second("second", "127.0.0.1", server_->port(), kMaxMessageBytes);
  second.RegisterService(&other);
  absl::Status s = second.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(std::to_string(server_->port())), std::string::npos) << s;
  // The first server still serves.
  auto client = MakeClient(server_->port());
  Result result;
  HealthCheck(*client, &result);
  ASSERT_TRUE(Await(result));
  EXPECT_TRUE(result.status.ok()) << result.status;
}

TEST_F(GrpcTest, DropRequestFailsAtTheDeadlineWithoutReachingTheServer) {
  StartServer();
  auto client = MakeClient(server_->port(), "HealthCheck=drop_request");
  Result result;
  HealthCheck(*client, &result, CallOptions{.deadline_ms = 150});
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
  EXPECT_GE(result.elapsed_ms, 150);
  EXPECT_LT(result.elapsed_ms, 150 + 2000);
  EXPECT_EQ(service_.health_checks.load(), 0);
}

TEST_F(GrpcTest, DropReplyFailsAlthoughTheHandlerRan) {
  StartServer();
  auto client = MakeClient(server_->port(), "HealthCheck=drop_reply");
  Result result;
  HealthCheck(*client, &result, CallOptions{.deadline_ms = 2000});
  ASSERT_TRUE(Await(result));
  EXPECT_FALSE(result.status.ok());
  EXPECT_EQ(result.node_id, "");  // the reply is not handed out
  EXPECT_EQ(service_.health_checks.load(), 1);
}

TEST_F(GrpcTest, DelayHoldsTheRequestBack) {
  StartServer();
  auto client = MakeClient(server_->port(), "HealthCheck=delay:120");
  Result result;
  HealthCheck(*client, &result);
  ASSERT_TRUE(Await(result));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_GE(result.elapsed_ms, 120);
  EXPECT_EQ(service_.health_checks.load(), 1);
}

TEST_F(GrpcTest, FaultsApplyOnlyToTheNamedMethod) {
  StartServer();
  auto client = MakeClient(server_->port(), "GetNodeStats=drop_request");
  Result result;
  HealthCheck(*client, &result);
  ASSERT_TRUE(Await(result));
  EXPECT_TRUE(result.status.ok()) << result.status;
}

TEST_F(GrpcTest, IdempotentCallIsRetriedUpToMaxAttempts) {
  service_.health_check_status = absl::UnavailableError("busy");
  StartServer();
  auto client = MakeClient(server_->port(), "", RetryOptions(3, 5));
  Result result;
  HealthCheck(*client, &result, CallOptions{.idempotent = true});
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_EQ(service_.health_checks.load(), 3);
}

TEST_F(GrpcTest, NonIdempotentCallIsNotRetried) {
  service_.health_check_status = absl::UnavailableError("busy");
  StartServer();
  auto client = MakeClient(server_->port(), "", RetryOptions(3, 5));
  Result result;
  HealthCheck(*client, &result);
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_EQ(service_.health_checks.load(), 1);
}

TEST_F(GrpcTest, NonRetryableErrorIsNotRetriedEvenWhenIdempotent) {
  service_.health_check_status = absl::InvalidArgumentError("bad");
  StartServer();
  auto client = MakeClient(server_->port(), "", RetryOptions(3, 5));
  Result result;
  HealthCheck(*client, &result, CallOptions{.idempotent = true});
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kInvalidArgument) << result.status;
  EXPECT_EQ(service_.health_checks.load(), 1);
}

TEST_F(GrpcTest, IdempotentCallToNoServerFailsUnavailableAfterBackoffs) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  // Three attempts separated by backoffs of 150 and 300 ms.
  auto client = MakeClient(*port, "", RetryOptions(3, 150));
  Result result;
  HealthCheck(*client, &result, CallOptions{.deadline_ms = 2000, .idempotent = true});
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_NE(result.status.message().find("127.0.0.1:" + std::to_string(*port)), std::string::npos)
      << result.status;
  EXPECT_GE(result.elapsed_ms, 150 + 300);
  // Each attempt ends with one "HealthCheck" handler on the client loop, each retry
  // waits in another.
  EXPECT_EQ(client_loop_.Stats()["HealthCheck"], 3 + 2);
}

TEST_F(GrpcTest, NonIdempotentCallToNoServerFailsAfterOneAttempt) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = MakeClient(*port, "", RetryOptions(3, 150));
  Result result;
  HealthCheck(*client, &result, CallOptions{.deadline_ms = 2000});
  ASSERT_TRUE(Await(result));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_EQ(client_loop_.Stats()["HealthCheck"], 1);
  EXPECT_LT(result.elapsed_ms, 150);  // no backoff was waited
}

TEST_F(GrpcTest, IdempotentCallReachesAServerThatStartsLate) {
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = MakeClient(*port, "",
                           RetryOptions(20, 20, 100));
  Result result;
  HealthCheck(*client, &result, CallOptions{.deadline_ms = 1000, .idempotent = true});
  // Wait until the first attempt has failed (its completion ran on the client loop).
  ASSERT_TRUE(WaitFor(
      [&] {
        client_loop_.RunUntilIdle();
        return client_loop_.Stats()["HealthCheck"] >= 1;
      },
      5000));
  ASSERT_FALSE(result.done);
  StartServer(*port);
  ASSERT_TRUE(Await(result));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.node_id, "node-x");
  EXPECT_EQ(service_.health_checks.load(), 1);
}

}  // namespace
}  // namespace manta::rpc
